"""The PostgreSQL connections the test processes on one machine share (``tests/_postgres.py``,
``docs/testing.md``): a test whose connections other test processes hold waits for them,
instead of its agents meeting a full server.

Before the tokens, each test only checked the server's free connections as it began: four
processes each found the 29 they needed free, and their agents then opened more together
than the server takes (``-n 4``: up to 116 of 97).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

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


def test_a_test_waits_for_the_connections_another_test_process_holds() -> None:
    budget = token_budget()
    need = 8
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(budget - need + 1)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
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
