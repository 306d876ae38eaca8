"""A follow-up whose run ended without saving past the wait it claimed, its request gone
(PostgreSQL, two real agent processes; A reaches the database through a TCP proxy that
can cut every connection and refuse new ones for a moment).

A's streamed follow-up claims the wait and its run starts; its first save waits for the
task's row (the test's session holds it) when the client leaves; then the database is
unreachable from A for a moment, so neither that save nor the run's failed status is
written. Before: A kept the claim as held by a run for as long as it lived, though no run
held it; every later follow-up, on B as on A, was refused busy (-32090) until A restarted.
Now a save that fails ends the hold (a2a-sdk's run ends there): A frees the claim once the
database answers, and the next follow-up continues the task.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import TLS, cli_server
from .test_killed_turn_claim_e2e import ENV, V1, _approve, _send
from .test_turn_lost_answer_e2e import _LosingProxy
from .test_turn_takeover_e2e import _args, _transfer, _waiting_on, approved_when_free

asyncpg = pytest.importorskip("asyncpg")

#: seconds every statement through the proxy fails after the cut
_DOWN = 2.0
#: A stays live through the outage (its heartbeats fail for _DOWN seconds): only A can
#: free its claim, no take-over of a dead replica's does it
_LIVE = {**ENV, "A2A_CLUSTER_REPLICA_TIMEOUT": "60"}


class _Outages(_LosingProxy):
    """Forwards to PostgreSQL; :meth:`outage` cuts every connection and refuses every new
    one for :data:`_DOWN` seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.down_until = 0.0
        self._open: set[asyncio.StreamWriter] = set()

    def outage(self) -> None:
        self._loop.call_soon_threadsafe(self._cut)

    def _cut(self) -> None:
        self.down_until = self._loop.time() + _DOWN
        for writer in self._open:
            writer.transport.abort()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._loop.time() < self.down_until:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection(PG_HOST, PG_PORT)
        self._open |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()

        pipes = [
            asyncio.ensure_future(pipe(reader, up_writer)),
            asyncio.ensure_future(pipe(up_reader, writer)),
        ]
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._open -= {writer, up_writer}
            writer.transport.abort()
            up_writer.transport.abort()
            for task in pipes:
                task.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)


async def test_a_claim_whose_run_ended_unsaved_does_not_hold_the_task_while_its_replica_lives() -> (
    None
):
    """A streamed follow-up on A whose client left once its run had started (its first
    save waits for the task's row, which the test's session holds); then the database is
    unreachable from A for a moment, so neither that save nor the run's failed status is
    written."""
    proxy = _Outages()
    with pg_schema_url(agents=2) as url, proxy.running():
        schema = url.rsplit("schema=", 1)[1]
        proxied = url.replace(f"@{PG_HOST}:{PG_PORT}/", f"@127.0.0.1:{proxy.port}/")
        with (
            cli_server(_args(proxied), env=_LIVE) as (a, _pa),
            cli_server(_args(url), env=_LIVE) as (b, _pb),
        ):
            async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
                parked = (await _send(http, b, _transfer()))["result"]["task"]
                assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
                db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
                try:
                    await db.execute("BEGIN")
                    await db.execute(
                        f"SELECT 1 FROM {schema}.tasks WHERE id = $1 FOR UPDATE", parked["id"]
                    )
                    body = {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "SendStreamingMessage",
                        "params": {"message": _approve(parked["id"])},
                    }
                    streamed = asyncio.ensure_future(http.post(a + "/", json=body, headers=V1))
                    await _waiting_on(db, db)  # A's run saves, and waits for the row
                    streamed.cancel()  # the client leaves; then A's saves fail
                    with contextlib.suppress(asyncio.CancelledError):
                        await streamed
                    proxy.outage()
                    await asyncio.sleep(0.5)
                    await db.execute("ROLLBACK")
                finally:
                    await db.close()
                # A is live: nothing changes by waiting
                answer = await approved_when_free(http, b, parked["id"], 15)
                assert "result" in answer, answer  # was: busy (-32090) while A ran
                state = answer["result"]["task"]["status"]["state"]
                assert state == "TASK_STATE_COMPLETED", answer
