"""gRPC server lifecycle: ports, graceful shutdown, the CLI flag, and the missing extra."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState, a2a_pb2

from tests._support import CLI_STOP_TIMEOUT, ROOT, cli_server, free_port, running_server
from tests.bindings._agent import GATES, build_app
from tests.bindings._grpc import stubs
from tests.bindings._peers import data, fetch_card


def _send_request(skill: str, part: Part) -> a2a_pb2.SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[part])
    msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


def _assert_port_released(port: int) -> None:
    # SO_REUSEADDR: closed connections may linger in TIME_WAIT; only a listener blocks this.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen()


# -- lifecycle -----------------------------------------------------------------------------
async def test_start_fails_clearly_when_the_port_is_taken() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        app = build_app(free_port(), busy)
        server = app.state.a2a.extras["grpc"]
        with pytest.raises(OSError, match=f"cannot listen for gRPC on 127.0.0.1:{busy}"):
            await server.start()
        assert not server.running


async def test_shutdown_finishes_running_calls_and_refuses_new_ones() -> None:
    port, grpc_port = free_port(), free_port()
    address = f"127.0.0.1:{grpc_port}"
    app = build_app(port, grpc_port, shutdown_timeout=10)
    key = uuid.uuid4().hex
    server = running_server(app, port=port)
    await server.__aenter__()
    stopping: asyncio.Task[Any] | None = None
    try:
        async with stubs(address) as (v1, _v03):
            running = asyncio.ensure_future(
                v1.SendMessage(_send_request("demo.gate", data({"key": key})))
            )
            await GATES.wait_started(key)
            stopping = asyncio.ensure_future(server.__aexit__(None, None, None))
            async with stubs(address) as (late, _):
                for _ in range(200):
                    try:
                        await late.GetTask(a2a_pb2.GetTaskRequest(id="probe"), timeout=2)
                    except grpc.aio.AioRpcError as exc:
                        if exc.code() == grpc.StatusCode.UNAVAILABLE:
                            break  # the server stopped taking calls
                    await asyncio.sleep(0.02)
                else:
                    raise AssertionError("the gRPC server never stopped taking new calls")
            assert not running.done()
            GATES.release(key)
            finished = await asyncio.wait_for(running, timeout=10)
        assert finished.task.status.state == TaskState.TASK_STATE_COMPLETED
        await asyncio.wait_for(stopping, timeout=20)
    finally:
        GATES.release(key)
        if stopping is None:
            await server.__aexit__(None, None, None)
    _assert_port_released(grpc_port)


def test_cli_grpc_port_serves_grpc_and_stops_cleanly_on_sigterm() -> None:
    grpc_port = free_port()
    args = [
        "--extensions-dir",
        str(ROOT / "examples" / "extensions"),
        "--grpc-port",
        str(grpc_port),
    ]
    with cli_server(args) as (url, proc):

        async def scenario() -> Any:
            card = await fetch_card(url)
            assert f"127.0.0.1:{grpc_port}" in [
                i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC"
            ]
            async with stubs(f"127.0.0.1:{grpc_port}") as (v1, _v03):
                return await v1.SendMessage(_send_request("math.add", data({"a": 2, "b": 40})))

        response = asyncio.run(scenario())
        assert response.task.artifacts[0].parts[0].data.struct_value["sum"] == 42
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=CLI_STOP_TIMEOUT) == 0, proc.output()
    _assert_port_released(grpc_port)


# -- without the extra -----------------------------------------------------------------------
_WITHOUT_GRPC = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoGrpc(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("grpc", "grpc_reflection", "grpc_tools"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoGrpc())
    from tests.bindings._agent import build_registry
    from apcore_a2a import A2AServerFactory

    try:
        import apcore_a2a.server.grpc
    except ImportError as exc:
        print("IMPORT:", exc)
    try:
        A2AServerFactory(build_registry(), environ={}, grpc_port=7443).create()
    except RuntimeError as exc:
        print("CREATE:", exc)
    _app, card = A2AServerFactory(build_registry(), environ={}).create()
    print("PLAIN:", sorted({i.protocol_binding for i in card.supported_interfaces}))
    """
)


def test_without_the_grpc_extra_the_message_names_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_GRPC],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    hint = 'pip install "apcore-a2a[grpc]"'
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    assert hint in lines["IMPORT"]
    assert hint in lines["CREATE"]
    assert lines["PLAIN"] == "['HTTP+JSON', 'JSONRPC']"
