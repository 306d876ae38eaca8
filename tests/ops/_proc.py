"""Run the ops agent with ``serve()`` in a child process (real signals, real exit code)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from .._support import ROOT, free_port, stop_process, wait_http

_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
from tests.ops._agent import build_registry
from apcore_a2a import serve
serve(build_registry(), **json.loads(sys.argv[1]))
"""


@contextlib.contextmanager
def serve_process(**settings: Any) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``serve(build_registry(), port=..., **settings)`` in a child; yields (url, process).

    On exit the child gets SIGTERM (if still running) and is reaped.
    """
    port = free_port()
    args = json.dumps({"host": "127.0.0.1", "port": port, **settings})
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT.format(root=str(ROOT)), args],
        cwd=str(ROOT),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", proc=proc)
        yield url, proc
    finally:
        stop_process(proc, timeout=30)
        if proc.stdout:
            proc.stdout.close()
