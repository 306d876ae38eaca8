"""The PostgreSQL connections the test processes on one machine share (``tests/_postgres.py``,
``docs/testing.md``): a test whose connections other test processes hold waits for them,
instead of its agents meeting a full server.

Before the tokens, each test only checked the server's free connections as it began: four
processes each found the 29 they needed free, and their agents then opened more together
than the server takes (``-n 4``: up to 116 of 97).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests._postgres import CONNECTION_WAIT_S, token_budget, tokens

pytestmark = pytest.mark.postgres

#: another test process: holds *need* tokens until its standard input closes
_HOLDER = """
import sys, time
from tests._postgres import tokens
with tokens(int(sys.argv[1]), time.monotonic() + 120):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def holder_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Tokens of these tests' own (a folder of *tmp_path*), apart from those the other
    test processes on the machine hold meanwhile; the environment of a holder sharing them."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return {**os.environ, "TMPDIR": str(tmp_path)}


def test_a_test_waits_for_the_connections_another_test_process_holds(
    holder_env: dict[str, str],
) -> None:
    budget = token_budget()
    need = 8
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(budget - need + 1)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=holder_env,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        granted: list[bool] = []
        released = threading.Event()

        def take() -> None:
            with tokens(need, time.monotonic() + CONNECTION_WAIT_S):
                granted.append(released.is_set())

        waiter = threading.Thread(target=take)
        waiter.start()
        time.sleep(1.0)  # the waiter tries meanwhile (no bound on it: only the order counts)
        assert not granted, "granted while another test process held the connections"
        assert holder.stdin is not None
        released.set()
        holder.stdin.close()  # the holder lets go
        waiter.join()
        assert granted == [True], granted  # granted once the holder let go
    finally:
        holder.kill()
        holder.wait()


async def test_a_coroutine_waits_for_its_connections_with_its_loop_running(
    holder_env: dict[str, str],
) -> None:
    """``async with`` (a coroutine's form) waits in a thread: the test's loop, with the
    in-process agents a test runs on it, goes on while the connections are held by another
    test process. ``time.sleep`` on the loop stopped them (an agent's heartbeats, leases)."""
    need = 8
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(token_budget() - need + 1)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=holder_env,
    )
    try:
        assert holder.stdout is not None
        assert await asyncio.to_thread(holder.stdout.readline) == "held\n"
        granted: list[int] = []
        beats = 0

        async def take() -> None:
            async with tokens(need, time.monotonic() + CONNECTION_WAIT_S):
                granted.append(beats)

        waiter = asyncio.ensure_future(take())
        while beats < 10:  # the loop's heartbeat goes on while the waiter waits
            await asyncio.sleep(0.05)
            beats += 1
        assert not waiter.done() and not granted, "granted while the holder held them"
        assert holder.stdin is not None
        holder.stdin.close()  # the holder lets go
        await asyncio.wait_for(waiter, CONNECTION_WAIT_S)  # a hang guard
        assert granted == [10], granted
    finally:
        holder.kill()
        holder.wait()
