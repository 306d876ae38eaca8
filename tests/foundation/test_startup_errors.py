"""What ``apcore-a2a`` says when it cannot start: one line, no traceback, a documented code.

The README's exit codes: 1 for a configuration the agent cannot be built from (a missing
extra among them), 3 for one it was built from but could not start (the task store's
database unreachable or without the schema the URL names, the port taken). And
``apcore-a2a db upgrade`` prints its report, not the migration tool's log, unless ``-v``.
"""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from tests._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, require_postgres
from tests._support import cli, free_port, without_packages

EXAMPLES = ["--extensions-dir", "examples/extensions", "--port"]


def _one_error_line(stderr: str) -> str:
    """The one line that says what failed; the lines before it are start-up INFO lines."""
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if "Error" in ln or " ERROR " in ln]
    assert len(errors) == 1, stderr
    assert stderr.splitlines()[-1] == errors[0], stderr
    return errors[0]


@pytest.mark.parametrize(
    ("flag", "package", "says"),
    [
        (["--metrics"], "prometheus_client", "pip install 'apcore-a2a[metrics]'"),
        (["--grpc-port", "50999"], "grpc", 'pip install "apcore-a2a[grpc]"'),
        (["--telemetry"], "opentelemetry", "pip install 'apcore-a2a[telemetry]'"),
    ],
    ids=["metrics", "grpc", "telemetry"],
)
async def test_a_feature_without_its_extra_is_one_line_and_exit_1(
    tmp_path: Path, flag: list[str], package: str, says: str
) -> None:
    env = without_packages(tmp_path, package)
    code, out, err = await cli("serve", *EXAMPLES, str(free_port()), *flag, env=env)
    assert code == 1, err
    assert out == ""
    line = _one_error_line(err)
    assert line.startswith("Error: ") and says in line
    assert len(err.splitlines()) == 1, err  # refused before anything starts


async def test_an_unreachable_database_is_one_line_and_exit_3() -> None:
    closed = free_port()  # nothing listens there
    store = f"postgresql://agent:secret@127.0.0.1:{closed}/tasks"
    code, _out, err = await cli("serve", *EXAMPLES, str(free_port()), "--task-store", store)
    assert code == 3, err
    line = _one_error_line(err)
    assert line.startswith("Error: task store postgresql://agent:***@127.0.0.1:"), line
    assert "is unreachable" in line and "--task-store (A2A_TASK_STORE)" in line
    assert "secret" not in err
    assert "serving" not in err.lower(), err  # the banner comes once it serves, never before


async def test_a_port_in_use_is_one_line_and_exit_3() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _out, err = await cli("serve", *EXAMPLES, str(port))
    assert code == 3, err
    line = _one_error_line(err)
    assert "address already in use" in line and "--port (A2A_PORT)" in line
    assert "serving" not in err.lower(), err


async def test_a_missing_schema_says_to_create_it_at_start_and_in_db_upgrade() -> None:
    require_postgres()
    store = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{PG_DB}?schema=no_such_schema_22"
    code, _out, err = await cli("serve", *EXAMPLES, str(free_port()), "--task-store", store)
    assert code == 3, err
    line = _one_error_line(err)
    assert "CREATE SCHEMA no_such_schema_22;" in line, line

    code, out, err = await cli("db", "upgrade", "--task-store", store)
    assert code == 1, err
    assert out == ""
    assert err.startswith("error: upgrade failed: ") and err.count("\n") == 1, err
    assert "CREATE SCHEMA no_such_schema_22;" in err


async def test_tables_of_an_older_version_say_to_run_db_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the tasks table of an SDK before owners
        db.execute(
            "CREATE TABLE tasks (id VARCHAR PRIMARY KEY, context_id VARCHAR, kind VARCHAR,"
            " status JSON, artifacts JSON, history JSON, metadata JSON)"
        )
    store = f"sqlite:///{path}"
    code, _out, err = await cli("serve", *EXAMPLES, str(free_port()), "--task-store", store)
    assert code == 3, err
    line = _one_error_line(err)
    assert "no such column" in line and "run `apcore-a2a db upgrade`" in line, line

    code, out, err = await cli("db", "upgrade", "--task-store", store)
    assert code == 0, err
    assert "a2a-sdk schema migrated: none -> " in out


async def test_db_upgrade_prints_its_report_only_unless_verbose(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    code, out, err = await cli("db", "upgrade", "--task-store", store)
    assert code == 0, err
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("database: sqlite")
    assert "created table tasks" in lines
    assert lines[-1].startswith("a2a-sdk schema migrated: none -> ")

    code, out, err = await cli("db", "upgrade", "-v", "--task-store", f"{store}.2")
    assert code == 0, err
    assert "alembic" in err  # the migration tool's own log, asked for
    assert "created table tasks" in out.splitlines()


@pytest.mark.parametrize(
    ("store", "says"),
    [
        ("postgresql://app:hunter2@127.0.0.1:notaport/tasks", "task store URL: bad port"),
        ("postgresql://app:hunter2@127.0.0.1:99999/tasks", "task store URL: bad port"),
        ("postgresql://app:hunter2@[::1/tasks", "task store URL"),
    ],
    ids=["not-a-number", "out-of-range", "unclosed-bracket"],
)
async def test_a_task_store_url_with_a_bad_port_is_a_config_error(store: str, says: str) -> None:
    """A URL that cannot name a server is exit 1 (not 3: retrying cannot help) with one line
    that names the flag and says it is the task store URL, and never the password."""
    code, out, err = await cli("serve", *EXAMPLES, str(free_port()), "--task-store", store)
    assert code == 1, err
    assert out == ""
    line = _one_error_line(err)
    assert line.startswith(f"Error: --task-store: {says}"), line
    assert "hunter2" not in err


async def test_a_database_of_a_newer_version_is_refused_at_start(tmp_path: Path) -> None:
    """A schema revision this a2a-sdk does not know was written by a newer version: serving
    on it could write what that version cannot read, so serve refuses, as db upgrade does."""
    store = f"sqlite:///{tmp_path / 'newer.db'}"
    code, _out, err = await cli("db", "upgrade", "--task-store", store)
    assert code == 0, err
    with sqlite3.connect(tmp_path / "newer.db") as db:
        db.execute("UPDATE a2a_alembic_version SET version_num = 'ffff0000newer'")
    code, _out, err = await cli("serve", *EXAMPLES, str(free_port()), "--task-store", store)
    assert code == 3, err
    line = _one_error_line(err)
    assert "'ffff0000newer'" in line and "newer version" in line, line
    assert "serving" not in err.lower(), err
