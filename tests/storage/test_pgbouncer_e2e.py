"""Cluster replicas behind a real PgBouncer in transaction mode (``docs/storage.md``).

PgBouncer (Debian's package, ``.ci/run``) runs in front of the test server with its
defaults: it refuses startup parameters it does not know, and each transaction may run on
another server connection, so named prepared statements, session locks and ``LISTEN`` do
not carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState
from sqlalchemy.engine import make_url

from tests._sdk import request

from .._postgres import PG_HOST, PG_PORT, PG_USER, pg_database_url
from .._support import cli_server, free_port, not_installed
from ._a2a import EXTENSIONS, client, send
from .test_one_owner import SINGLE_HELD, _serve_once
from .test_paused_replica_e2e import _rpc, _start_work, _until, paused_mid_write
from .test_replicas_e2e import PROBES

#: replicas judge each other quickly; PgBouncer ends a transaction idle for as long
TIMING = ["--cluster-heartbeat-interval", "0.5", "--cluster-replica-timeout", "4"]


@contextlib.contextmanager
def pgbouncer(*settings: str) -> Iterator[int]:
    """A PgBouncer in transaction mode in front of the test server; yields its port."""
    binary = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if binary is None:
        not_installed("pgbouncer")
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    folder.chmod(0o755)  # read again after it drops root for nobody
    (folder / "users.txt").write_text(f'"{PG_USER}" ""\n')
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={PG_HOST} port={PG_PORT}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {folder / 'users.txt'}",
                "pool_mode = transaction",
                # Two server connections for all clients: each meets what others left.
                "default_pool_size = 2",
                *settings,
                "",
            ]
        )
    )
    for file in folder.iterdir():
        file.chmod(0o644)
    # It will not run as root; -u switches to the user after reading its files.
    user = ["-u", "nobody"] if os.geteuid() == 0 else []
    proc = subprocess.Popen(
        [binary, *user, str(ini)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"pgbouncer did not start: {proc.communicate()[0]}")
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def through_pgbouncer(query: str, *settings: str) -> Iterator[tuple[str, str]]:
    """A fresh database: (its direct URL, its URL through a new PgBouncer with *query*)."""
    with pg_database_url(agents=2) as direct, pgbouncer(*settings) as port:
        pooled = make_url(direct).set(port=port).render_as_string(hide_password=False)
        yield direct, f"{pooled}&{query}" if query else pooled


def _refusal(store: str, *extra: str) -> str:
    """The one ``Error:`` line of a serve on *store* that must be refused at start."""
    result = _serve_once(store, *extra)
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


async def test_cluster_replicas_serve_tasks_and_streams_through_pgbouncer() -> None:
    with contextlib.ExitStack() as stack:
        direct, url = stack.enter_context(through_pgbouncer("pgbouncer=true"))
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster", *TIMING]
        with cli_server(args) as (a, proc_a), cli_server(args) as (b, proc_b):
            ca, cb = await client(a), await client(b)
            # Many transactions at once, each on the server connection others used last.
            tasks = await asyncio.gather(
                *(
                    send(ca if n % 2 else cb, request("math.add", {"a": n, "b": 40}))
                    for n in range(20)
                )
            )
            for n, task in enumerate(tasks):
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                fetched = await (cb if n % 2 else ca).get_task(GetTaskRequest(id=task.id))
                assert fetched.artifacts == task.artifacts
            started = await send(
                ca, request("text.countdown", {"start": 3, "delay": 0.3}, return_immediately=True)
            )
            sb = await client(b, streaming=True)
            final = None
            async for response in sb.subscribe(SubscribeToTaskRequest(id=started.id)):
                if response.WhichOneof("payload") == "status_update":
                    final = response.status_update.status.state
            assert final == TaskState.TASK_STATE_COMPLETED
        for proc in (proc_a, proc_b):
            assert "DBAPIError" not in proc.output(), proc.output()[-3000:]
        # The replicas left no lock behind on PgBouncer's pooled server connections: one
        # process alone may serve the database directly now, and then keeps them off.
        with cli_server(["--extensions-dir", EXTENSIONS, "--task-store", direct]):
            assert SINGLE_HELD in _refusal(url, "--cluster")


async def test_postgresqls_connection_limits_do_not_bound_pgbouncers_clients() -> None:
    """Behind PgBouncer the agent's pool is PgBouncer's clients; PostgreSQL sees only
    PgBouncer's server pool (two connections here), so its ``max_connections`` (100 on
    the test server, or less) does not bound a pool of 150, and the start is not refused
    for it (docs/deployment.md, *Database connections*)."""
    with through_pgbouncer("pgbouncer=true") as (_direct, url):
        url = make_url(url).update_query_dict({"pool_size": "150"}).render_as_string(False)
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster", *TIMING]
        with cli_server(args) as (base, _proc):
            task = await send(await client(base), request("math.add", {"a": 1, "b": 2}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_without_the_option_the_refusal_names_it() -> None:
    with through_pgbouncer("") as (_direct, url):
        line = _refusal(url, "--cluster")
    assert "unsupported startup parameter" in line
    assert "add ?pgbouncer=true" in line


async def test_one_process_without_cluster_is_refused_behind_pgbouncer() -> None:
    with through_pgbouncer("pgbouncer=true") as (_direct, url):
        line = _refusal(url)
    assert "?pgbouncer=true needs --cluster" in line


async def test_pgbouncers_idle_transaction_timeout_frees_a_paused_replicas_rows(
    tmp_path: Path,
) -> None:
    """What docs/storage.md asks of PgBouncer in place of the startup parameter it refuses:
    replica A paused mid-write (its transaction holding the task's rows) no longer keeps
    B from failing its task (``test_paused_replica_e2e.py``, connected directly)."""
    journal = tmp_path / "journal.txt"
    timeout = "idle_transaction_timeout = 4"  # the replica timeout of TIMING
    with contextlib.ExitStack() as stack:
        direct, url = stack.enter_context(through_pgbouncer("pgbouncer=true", timeout))
        args = ["--extensions-dir", PROBES, "--task-store", url, "--cluster", *TIMING]
        env = {"A2A_CLUSTER_POLL_INTERVAL": "0.1"}
        a, proc_a = stack.enter_context(cli_server(args, env=env))
        b, _ = stack.enter_context(cli_server(args, env=env))
        task_id = await _start_work(a, journal)

        async def state_on(replica: str) -> str:
            return str((await _rpc(replica, "GetTask", {"id": task_id}))["status"]["state"])  # type: ignore[index]

        async def working_on_a() -> bool:
            return await state_on(a) == "TASK_STATE_WORKING"

        async def failed_on_b() -> bool:
            return await state_on(b) == "TASK_STATE_FAILED"

        await _until(working_on_a, "the task never ran on A")
        conn = await asyncpg.connect(direct.split("?")[0])
        try:
            answer = await paused_mid_write(conn, a, proc_a.pid, task_id, failed_on_b)
        finally:
            await conn.close()
        assert answer.get("error", {}).get("code") != -32603, answer
        assert await failed_on_b()
