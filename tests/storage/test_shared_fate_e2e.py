"""One caller's bad values cost only that caller (issue 40, "No shared fate").

A ``SendMessage`` whose ``contextId`` the store cannot hold (longer than the SDK's
``tasks.context_id`` column, or with a NUL) is refused before any task exists, on every
binding; meanwhile another caller's concurrent calls are all answered and stored, on
SQLite and PostgreSQL, one process and cluster mode. Before: on PostgreSQL the bad row
failed the whole group-commit batch it joined (29 of 40 of the other caller's calls lost),
in cluster mode retried every second forever; SQLite stored it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.models import TaskModel
from a2a.utils.errors import InvalidParamsError

from tests._sdk import make_client, request

from .._postgres import pg_schema_url
from .._support import TLS, cli_server, free_port
from ._a2a import EXTENSIONS
from .test_write_path_e2e import _sql

GOOD = {"X-API-Key": "key-good", "A2A-Version": "1.0"}
BAD = {"X-API-Key": "key-bad", "A2A-Version": "1.0"}
COLUMN = TaskModel.__table__.c.context_id.type.length  # what the store can hold
CALLS = 40
OWNER = "apikey::good"  # the good caller's key, as the stores scope by it


@contextlib.contextmanager
def _agent(backend: str, mode: str, tmp: Path) -> Iterator[tuple[str, str]]:
    """(base URL, store URL) of an agent with two API keys."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:///{tmp / 'tasks.db'}"
        else:
            url = stack.enter_context(pg_schema_url())
        grpc_port = free_port()
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--log-level", "warning",
                "--api-key", "key-good=good", "--api-key", "key-bad=bad", "--no-require-auth",
                "--grpc-port", str(grpc_port)]  # fmt: skip
        if mode == "cluster":
            args.append("--cluster")
        base, _ = stack.enter_context(cli_server(args))
        yield base, url


def _message(context_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 1, "b": 2}}],
        "metadata": {"skillId": "math.add"},
    }
    if context_id is not None:
        message["contextId"] = context_id
    return message


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


BAD_CONTEXTS = ["c" * (COLUMN + 1), "ctx\x00nul", "x" * 300]


async def _bad_calls(http: httpx.AsyncClient, base: str) -> list[tuple[str, Any]]:
    """Refusals of the bad caller's sends over JSON-RPC (blocking and streamed) and REST."""
    answers: list[tuple[str, Any]] = []
    for context_id in BAD_CONTEXTS:
        rpc = await http.post(base + "/", json=_rpc("SendMessage", message=_message(context_id)))
        answers.append(("jsonrpc", rpc.json()))
        streamed = _rpc("SendStreamingMessage", message=_message(context_id))
        sse = await http.post(base + "/", json=streamed)
        answers.append(("jsonrpc-stream", sse.text))
        rest = await http.post(base + "/message:send", json={"message": _message(context_id)})
        answers.append((f"rest {rest.status_code}", rest.json()))
    return answers


@pytest.mark.parametrize("mode", ["single", "cluster"])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_bad_context_id_costs_only_its_caller(
    backend: str, mode: str, tmp_path: Path
) -> None:
    with _agent(backend, mode, tmp_path) as (base, url):
        async with (
            httpx.AsyncClient(headers=GOOD, timeout=60, verify=TLS) as good,
            httpx.AsyncClient(headers=BAD, timeout=60, verify=TLS) as bad,
        ):

            async def good_call(i: int) -> Any:
                body = _rpc("SendMessage", message=_message(f"ctx-{i}"))
                return (await good.post(base + "/", json=body)).json()

            async def bad_rounds() -> list[tuple[str, Any]]:
                answers: list[tuple[str, Any]] = []
                for _ in range(3):
                    answers += await _bad_calls(bad, base)
                return answers

            results = await asyncio.gather(*(good_call(i) for i in range(CALLS)), bad_rounds())
            refusals = results[-1]
            answers = results[:-1]

            # The good caller: every call answered and stored, as answered.
            lost = [a for a in answers if "result" not in a]
            assert not lost, f"{len(lost)} of {CALLS} good calls failed: {lost[:2]}"
            tasks = [a["result"]["task"] for a in answers]
            assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
            stored = await _sql(url, "SELECT id, owner FROM tasks")
            assert sorted(str(i) for i, o in stored if o == OWNER) == sorted(t["id"] for t in tasks)
            assert all(o == OWNER for _, o in stored), stored

            # The bad caller: refused up front, the field named, no task made.
            for where, answer in refusals:
                if where == "jsonrpc":
                    assert answer["error"]["code"] == -32602, answer
                    assert "contextId" in answer["error"]["message"], answer
                elif where == "jsonrpc-stream":
                    assert '"code":-32602' in answer.replace(" ", ""), answer
                    assert "contextId" in answer
                else:
                    assert where == "rest 400", (where, answer)
                    assert "contextId" in str(answer)
            listed = await bad.post(base + "/", json=_rpc("ListTasks"))
            assert listed.json()["result"].get("tasks", []) == []

            # And afterwards (cluster mode retried the bad write forever): still all good.
            again = await asyncio.gather(*(good_call(i) for i in range(CALLS)))
            assert {a["result"]["task"]["status"]["state"] for a in again} == {
                "TASK_STATE_COMPLETED"
            }
            rows = await _sql(url, f"SELECT count(*) FROM tasks WHERE owner = '{OWNER}'")
            assert rows[0][0] == 2 * CALLS

        # gRPC (anonymous): INVALID_ARGUMENT, naming the field.
        client = await make_client(base, "GRPC", "1.0")
        try:
            # The SDK client reads INVALID_ARGUMENT as InvalidParamsError.
            with pytest.raises(InvalidParamsError, match="contextId"):
                async for _ in client.send_message(
                    request("math.add", {"a": 1, "b": 2}, context_id="c" * (COLUMN + 1))
                ):
                    pass
        finally:
            await client.close()
