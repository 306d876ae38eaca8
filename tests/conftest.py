"""Suite-wide test configuration, and a port already taken."""

from __future__ import annotations

import gc
import logging
import os
import socket
from collections.abc import Generator, Iterator

import pytest
from hypothesis import HealthCheck, settings

# Property tests explore new inputs on a developer's machine but are repeatable in CI:
# a CI run must pass or fail for the code, not for the draw.
settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

#: The suite's longest files, longest first (``--durations`` of a CI run: their tests' sum).
#: pytest-xdist hands out whole files in collection order; one of these reached last would
#: run on alone while the other processes had nothing left to do.
FIRST = (
    "tests/docs/test_docs.py",  # one test; its child pytest runs every block in one process
    "tests/client/test_cli.py",
    "tests/storage/test_long_streams_e2e.py",
    "tests/test_bench_smoke.py",
    "tests/storage/test_one_owner.py",
    "tests/config/test_image.py",
    "tests/storage/test_paused_replica_e2e.py",
    "tests/storage/test_unrelated_rows_e2e.py",
    "tests/storage/test_replicas_e2e.py",
    "tests/ops/test_shutdown_bound.py",
    "tests/storage/test_write_path_e2e.py",
    "tests/storage/test_cluster_write_path_e2e.py",
    "tests/storage/test_wakeup_costs_e2e.py",
    "tests/push/test_push_cancels.py",
    "tests/storage/test_pgbouncer_e2e.py",
    "tests/push/test_push_cli.py",
    "tests/reliability/test_slow_reader.py",
    "tests/reliability/test_hostile_jsonrpc.py",
    "tests/bindings/test_grpc_slow_clients.py",
    "tests/reliability/test_load.py",
    "tests/storage/test_sse_ids_e2e.py",
    "tests/storage/test_connections.py",
    "tests/reliability/test_hostile_quotas.py",
    "tests/storage/test_hostile_ids_e2e.py",
    "tests/reliability/test_hostile_rest.py",
    "tests/reliability/test_kill9.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the longest files first (the sort is stable: every file keeps its tests'
    order, the others their collection order)."""
    rank = {path: i for i, path in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(FIRST)))


def pytest_collection_finish() -> None:
    """What exists once the tests are collected (imported modules, collected items:
    310,000 objects for the whole suite) is left out of the first file's collections
    (``pytest_runtest_teardown`` below)."""
    gc.collect()
    gc.freeze()


#: Reports of futures a dependency leaks, not our code: asyncpg 0.30's connect makes a
#: future for the server's answer to its TLS request (``TLSUpgradeProto.on_data``); a
#: connect cancelled there (a store's timeout during an outage, as the stale-lease tests
#: make) leaves it, failed by the connection's loss, with nobody to retrieve it.
_NOT_OURS = ("ConnectionError('unexpected connection_lost() call')",)


class _NeverRetrieved(logging.Handler):
    """Keeps asyncio's reports of a task or future whose exception nobody retrieved."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.setFormatter(logging.Formatter("%(message)s"))
        self.reports: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "exception was never retrieved" in message and not any(
            known in message for known in _NOT_OURS
        ):
            self.reports.append(self.format(record))


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    """Fail the test that leaked a failed task or future, not a later one.

    asyncio reports an exception nobody retrieved only when the future is freed, and a
    future in a reference cycle (its traceback holds the frame that holds it) is freed by
    whichever collection comes next: the ERROR landed in a later test's log and failed
    that test if it checked for errors. So the garbage is collected once the test's
    fixtures (its event loop) are gone. Innermost wrapper: the report is still in the
    test's captured log (and ``caplog``'s teardown records).

    A full collection here would cost 139 ms of CPU a test (``tests/bindings``): what
    exists when a test ends is frozen (``gc.freeze``), so the next test's collection reads
    only what that test made (0.8 ms); at a file's end all is thawed, collected (160 ms)
    and frozen again, so nothing is left out for long (what a module's fixtures held is
    freed with them, and blamed on the file's last test).
    """
    handler = _NeverRetrieved()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    try:
        yield
    finally:
        try:
            if nextitem is None or nextitem.path != item.path:
                gc.unfreeze()
            gc.collect()
            gc.freeze()
        finally:
            logger.removeHandler(handler)
    if handler.reports:
        pytest.fail(
            "this test left a failed task or future nobody awaited:\n" + "\n".join(handler.reports),
            pytrace=False,
        )


@pytest.fixture
def taken_port() -> Iterator[str]:
    """A port another socket listens on: were a refused setting accepted, ``serve`` would
    stop there (exit 3) rather than serve until the test times out."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield str(listener.getsockname()[1])
