"""The SDK behaviour ``apcore_a2a/upstream/v03_invalid_params.py`` answers: a plain a2a-sdk
agent answers a JSON-RPC 0.3 call whose envelope is valid but whose params are not (a
fractional ``historyLength``, a ``role`` 0.3 does not define) ``-32600 Invalid Request``,
where JSON-RPC 2.0 §5.1 (and the genuine a2a-sdk 0.3 server) answer ``-32602``. A failure
here means the SDK answers ``-32602`` itself: delete that file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app


def test_sdk_answers_bad_03_params_as_an_invalid_request() -> None:
    message = {"messageId": "m-1", "role": "robot", "kind": "message",
               "parts": [{"kind": "text", "text": "hi"}]}  # fmt: skip
    calls = {
        "tasks/get": {"id": "x", "historyLength": 1.5},
        "message/send": {"message": message},
    }
    codes = {}
    with threaded_server(build_sdk_app("http://127.0.0.1")) as url:
        for method, params in calls.items():
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            codes[method] = httpx.post(url + "/", json=body, timeout=10, verify=TLS).json()[
                "error"
            ]["code"]
    assert codes == {"tasks/get": -32600, "message/send": -32600}


def test_the_correction_imports_on_its_own() -> None:
    """a2a-sdk 1.3's ``a2a.compat.v0_3.jsonrpc_adapter`` fails when it is the first of its
    modules imported (a circular import through ``a2a.server.routes``): the correction, and
    the answer side that imports it, must import first in a fresh process."""
    root = Path(__file__).resolve().parents[2]
    for module in ("apcore_a2a.upstream.v03_invalid_params", "apcore_a2a.streams.scrub"):
        run = [sys.executable, "-c", f"import {module}"]
        done = subprocess.run(run, cwd=root, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-500:]
