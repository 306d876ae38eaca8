"""The uvicorn behaviour ``apcore_a2a/upstream/host_stops.py`` reads: a ``uvicorn.Server``
serves from a task of its loop whose coroutine chain holds its ``serve()`` (``self``, the
server); it lists its listening sockets in ``servers``; a serving server takes SIGTERM with
its bound ``handle_exit``; a stop sets its public ``should_exit``. A failure here means
uvicorn lays out its serving otherwise (or tells the app of a stop itself): find the
serving server another way, or delete that file."""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

import httpx
import uvicorn

from apcore_a2a.upstream.host_stops import HostServer, host_stopping, serving_server

from .._support import TLS, free_port


class _Recorder:
    """An ASGI app noting, per port, the server that :func:`serving_server` finds."""

    def __init__(self) -> None:
        self.found: dict[object, uvicorn.Server | None] = {}
        self.host = HostServer()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                self.found["lifespan"] = serving_server(scope)
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.found[scope["server"][1]] = serving_server(scope)
        self.found["host"] = self.host.find(scope)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _server(app: _Recorder, port: int) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))


def _wait_started(*servers: uvicorn.Server) -> None:
    for _ in range(600):
        if all(server.started for server in servers):
            return
        threading.Event().wait(0.05)
    raise AssertionError("the servers did not start")


def test_a_uvicorn_server_run_in_a_thread_is_found_from_its_app() -> None:
    app = _Recorder()
    server = _server(app, free_port())
    thread = threading.Thread(target=server.run)  # no signal handlers of its own
    thread.start()
    try:
        _wait_started(server)
        assert app.found["lifespan"] is server
        assert not host_stopping(server)
    finally:
        server.should_exit = True  # what handle_exit sets, or an embedder
        thread.join(30)
    assert host_stopping(server)
    assert not host_stopping(None)


def test_two_servers_in_one_loop_each_found_by_the_port_of_the_request() -> None:
    app = _Recorder()
    ports = free_port(), free_port()
    first, second = _server(app, ports[0]), _server(app, ports[1])

    async def both() -> None:
        await asyncio.gather(first.serve(), second.serve())

    thread = threading.Thread(target=asyncio.run, args=(both(),))
    thread.start()
    try:
        _wait_started(first, second)
        for port in ports:
            assert httpx.get(f"http://127.0.0.1:{port}/", verify=TLS).status_code == 204
    finally:
        first.should_exit = second.should_exit = True
        thread.join(30)
    assert app.found[ports[0]] is first
    assert app.found[ports[1]] is second


def test_without_a_server_in_the_loop_the_one_that_took_sigterm() -> None:
    server = uvicorn.Server(uvicorn.Config(app=None))

    async def look() -> uvicorn.Server | None:
        return serving_server({"type": "http"})

    assert asyncio.run(look()) is None
    with server.capture_signals():
        assert getattr(signal.getsignal(signal.SIGTERM), "__self__", None) is server
        assert asyncio.run(look()) is server
    assert asyncio.run(look()) is None  # its handlers gone with it


def test_a_server_after_another_on_the_same_loop_and_port_is_found_anew() -> None:
    # HostServer's look-up, kept per loop and port: the first server, ended, keeps its
    # should_exit; the one serving now is found.
    app = _Recorder()
    port = free_port()
    servers = _server(app, port), _server(app, port)
    seen: list[uvicorn.Server | None] = []

    async def one_then_the_other() -> None:
        for server in servers:
            serving = asyncio.ensure_future(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
            async with httpx.AsyncClient(verify=TLS) as http:
                assert (await http.get(f"http://127.0.0.1:{port}/")).status_code == 204
            seen.append(app.found["host"])
            server.should_exit = True
            await serving

    thread = threading.Thread(target=asyncio.run, args=(one_then_the_other(),))
    thread.start()
    thread.join(60)
    assert seen == list(servers)
