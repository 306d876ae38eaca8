"""The examples do what the README says: run.py's approval policy and the approval flow."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from apcore import BindingLoader, Executor, Registry

from tests._support import EXAMPLES, ROOT, TLS, ServerProcess, free_port, stop_process, wait_http
from tests.foundation.conftest import serve_in_thread

V1 = {"A2A-Version": "1.0"}


def _handler_class() -> Any:
    spec = importlib.util.spec_from_file_location("example_approvals", EXAMPLES / "approvals.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SmallTransfersApproved


@pytest.fixture(scope="module")
def examples_url() -> Iterator[str]:
    registry = Registry(extensions_dir=str(EXAMPLES / "extensions"))
    registry.discover()
    sys.path.insert(0, str(EXAMPLES / "bindings"))
    BindingLoader().load_binding_dir(str(EXAMPLES / "bindings"), registry)
    executor = Executor(registry, approval_handler=_handler_class()(limit=100))
    with serve_in_thread(executor) as url:
        yield url


def transfer(url: str, amount: int, **ids: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": f"t-{amount}-{len(ids)}",
        "role": "ROLE_USER",
        "parts": [{"data": {"to": "acct-9", "amount": amount}}],
        "metadata": {"skillId": "bank.transfer"},
        **ids,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return httpx.post(url + "/", json=body, headers=V1, timeout=10, verify=TLS).json()["result"][
        "task"
    ]


def test_small_transfer_is_approved_by_policy(examples_url: str) -> None:
    task = transfer(examples_url, 50)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["data"] == {
        "status": "sent",
        "to": "acct-9",
        "amount": 50,
    }


def test_large_transfer_waits_for_a_person_then_completes(examples_url: str) -> None:
    task = transfer(examples_url, 5000)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    data = task["status"]["message"]["parts"][1]["data"]
    assert data["moduleId"] == "bank.transfer"
    assert "need a person" in data["reason"]
    answer = {
        "messageId": "yes",
        "role": "ROLE_USER",
        "taskId": task["id"],
        "parts": [{"data": {"approved": True}}],
    }
    body = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": answer}}
    done = httpx.post(examples_url + "/", json=body, headers=V1, timeout=10, verify=TLS).json()[
        "result"
    ]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["data"]["amount"] == 5000


def test_run_py_serves_on_the_port_a2a_port_names() -> None:
    port = free_port()
    env = {**os.environ, "A2A_PORT": str(port), "A2A_SHUTDOWN_TIMEOUT": "5"}
    proc = ServerProcess(
        [sys.executable, str(EXAMPLES / "run.py")], cwd=ROOT, env=env, scripts=True
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/.well-known/agent-card.json", proc=proc)
        card = httpx.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json", verify=TLS).json()
        assert card["name"] == "apcore-examples"
        assert card["supportedInterfaces"][0]["url"].startswith(f"http://127.0.0.1:{port}")
    finally:
        stop_process(proc, timeout=30)
