"""The CA bundle a client trusts is loaded once per file, not once per client (about 30 ms
of CPU each), and a bundle replaced on disk is read again by the clients made after."""

from __future__ import annotations

import os
import shutil
import ssl
from pathlib import Path
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, A2AConnectionError
from tests._support import free_port, running_server
from tests.bindings._grpc import self_signed_cert

from ._stub_agent import CARD_V10, StubAgent, json_reply

TASK = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every CA bundle loaded into a TLS context from now on (ssl: an edge we do not own)."""
    loads: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return loads


async def test_twenty_clients_load_the_bundle_at_most_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, _key = self_signed_cert(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # a file no other test has used
    loads = _loads(monkeypatch)
    for _ in range(20):
        async with A2AClient("https://agent.example.com"):
            pass
    assert loads == [(str(cert), None, None)]


async def test_a_bundle_replaced_on_disk_is_trusted_by_the_next_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "served").mkdir()
    (tmp_path / "other").mkdir()
    served, key = self_signed_cert(tmp_path / "served")
    other, _ = self_signed_cert(tmp_path / "other")
    bundle = tmp_path / "bundle.pem"
    shutil.copy(other, bundle)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    port = free_port()
    card = dict(CARD_V10)
    url = f"https://localhost:{port}"
    card["supportedInterfaces"] = [
        {"url": f"{url}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    agent = StubAgent(rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK}))
    agent.card = card
    tls = {"ssl_certfile": str(served), "ssl_keyfile": str(key)}
    async with running_server(agent, port=port, **tls):
        async with A2AClient(url) as client:
            with pytest.raises(A2AConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get_task("t-1")
        shutil.copy(served, bundle)
        stamp = bundle.stat().st_mtime_ns + 1_000_000_000  # a copy within the clock's tick
        os.utime(bundle, ns=(stamp, stamp))
        async with A2AClient(url) as client:
            assert (await client.get_task("t-1"))["status"]["state"] == "completed"
