"""Agents the client tests talk to: a plain a2a-sdk agent and our own server.

Each scenario runs against four peers per protocol version: the SDK agent and our
server, each over a real socket (uvicorn on 127.0.0.1) and in direct mode (``app=``,
with every socket connect attempt recorded and refused).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from apcore_a2a.client import (
    A2AClient,
    A2ARemoteError,
    ExtendedAgentCardNotConfiguredError,
    UnsupportedOperationError,
)
from tests._support import free_port, running_server
from tests.client._apcore_agent import build_our_app
from tests.client._sdk_agent import build_sdk_app

DIRECT_URL = "http://agent.local"


@dataclass(frozen=True)
class Profile:
    """What to send to one kind of agent and what comes back."""

    name: str
    text: tuple[Any, str | None]
    text_part: dict[str, Any]
    data: tuple[Any, str | None]
    data_part: dict[str, Any]
    slow: tuple[Any, str | None]
    extended_card_error: type[A2ARemoteError]
    build: Callable[[str, int | None], Any] = field(repr=False)


SDK = Profile(
    name="sdk",
    text=("hello", None),
    text_part={"type": "text", "text": "echo: hello"},
    data=({"a": 1, "b": 2}, None),
    data_part={"type": "data", "data": {"echo": {"a": 1, "b": 2}}},
    slow=("slow", None),
    extended_card_error=ExtendedAgentCardNotConfiguredError,
    build=lambda url, _port: build_sdk_app(url),
)

OURS = Profile(
    name="ours",
    text=("hello", "demo.echo"),
    text_part={"type": "data", "data": {"text": "echo: hello"}},
    data=({"a": 1, "b": 2}, "demo.add"),
    data_part={"type": "data", "data": {"sum": 3}},
    slow=({"seconds": 30}, "demo.slow"),
    # Our card does not declare an extended card, so the SDK answers -32004.
    extended_card_error=UnsupportedOperationError,
    build=lambda _url, port: build_our_app(port),
)

PROFILES = {"sdk": SDK, "ours": OURS}


@dataclass
class Agent:
    """One peer under test; :meth:`client` builds a client for it."""

    profile: Profile
    protocol: str
    url: str
    direct: bool
    connects: list[Any]

    def client(self, **kwargs: Any) -> A2AClient:
        kwargs.setdefault("protocol", self.protocol)
        if self.direct:
            return A2AClient(self.url, app=self.profile.build(self.url, None), **kwargs)
        return A2AClient(self.url, **kwargs)


@contextlib.contextmanager
def refuse_sockets() -> Iterator[list[Any]]:
    """Record and refuse every outgoing socket connection while active."""
    attempts: list[Any] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise ConnectionRefusedError("sockets are forbidden in direct mode")

    def connect_ex(self: socket.socket, address: Any) -> int:
        attempts.append(address)
        return 111

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    try:
        yield attempts
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live_servers() -> AsyncIterator[dict[str, str]]:
    """The SDK agent and our server on real sockets, shared by a test module."""
    urls: dict[str, str] = {}
    async with contextlib.AsyncExitStack() as stack:
        for name, profile in PROFILES.items():
            port = free_port()
            app = profile.build(f"http://127.0.0.1:{port}", port)
            urls[name] = await stack.enter_async_context(running_server(app, port=port))
        yield urls


AGENT_IDS = [
    f"{mode}-{name}-{version}"
    for mode in ("socket", "direct")
    for name in PROFILES
    for version in ("1.0", "0.3")
]

# Socket peers are shared by a module, so their tests run in the module's loop. Direct
# peers get a fresh app per test; it runs (and is shut down) in the test's own loop.
AGENT_PARAMS = [
    pytest.param(
        i,
        marks=pytest.mark.asyncio(loop_scope="module" if i.startswith("socket") else "function"),
        id=i,
    )
    for i in AGENT_IDS
]


@pytest.fixture(params=AGENT_PARAMS)
def agent(request: pytest.FixtureRequest) -> Iterator[Agent]:
    mode, name, version = str(request.param).split("-")
    profile = PROFILES[name]
    if mode == "socket":
        urls = request.getfixturevalue("live_servers")
        yield Agent(profile, version, urls[name], direct=False, connects=[])
        return
    with refuse_sockets() as attempts:
        yield Agent(profile, version, DIRECT_URL, direct=True, connects=attempts)
    # The in-process agent's own push deliveries to the tests' dead hook (port 9) are the
    # server's sockets, not the client's.
    client_attempts = [a for a in attempts if tuple(a)[1:2] != (9,)]
    assert client_attempts == [], f"direct mode opened sockets: {client_attempts}"


@pytest.fixture(params=["untraced", "traced"])
def tracing(request: pytest.FixtureRequest) -> None:
    """Whether this process records the client's spans (OpenTelemetry's provider is set
    once per process: once set by a test, it stays for the ones after)."""
    if request.param == "traced":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            trace.set_tracer_provider(TracerProvider())
