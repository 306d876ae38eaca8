"""A refusal that quotes the user's value quotes it as given: its spaces kept, not squashed.

Start-up (``serve``) and ``db upgrade`` print one line; pydantic's, YAML's and the
database's messages run to several lines and are joined, but a run of spaces inside a
quoted value (a database named ``no  such``) is part of the value: squashed to one space it
names something the user never wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._postgres import PG_HOST, PG_PORT, PG_USER, require_postgres
from tests._support import free_port

from ._helpers import EXTENSIONS, clean_env, error_line, run_cli, write

#: a database name of two words two spaces apart, which no test database has
DATABASE = "no  such  db"


def test_a_binding_target_of_spaces_is_quoted_with_them(tmp_path: Path, taken_port: str) -> None:
    folder = tmp_path / "bindings"
    folder.mkdir()
    write(
        folder,
        """
        spec_version: "1.0"
        bindings:
          - module_id: tools.x
            target: "os:no  such"
            description: X
        """,
        name="tools.binding.yaml",
    )
    result = run_cli("serve", "--bindings", str(folder), "--port", taken_port, env=clean_env())
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith("Error: bindings: ") and "'no  such'" in line, line


def test_a_yaml_tag_of_spaces_is_quoted_with_them(tmp_path: Path, taken_port: str) -> None:
    # %20 is a space in a tag (YAML's URI escapes): the tag is "!a  b"
    path = write(tmp_path, "agent:\n  name: !a%20%20b x\n")
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--config", str(path)]
    result = run_cli(*args, "--port", taken_port, env=clean_env())
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith("Error: ") and "agent.name: " in line, line
    assert "'!a  b'" in line, line


@pytest.fixture
def store() -> str:
    require_postgres()
    return f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{DATABASE}"


def test_serve_quotes_a_database_name_of_spaces_with_them(store: str) -> None:
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", str(free_port())]
    result = run_cli(*args, "--task-store", store, env=clean_env())
    assert result.returncode == 3, result.stderr
    line = error_line(result)
    assert f'database "{DATABASE}" does not exist' in line, line
    assert f"/{DATABASE} is unreachable" in line, line  # the URL it names, as given


def test_db_upgrade_quotes_a_database_name_of_spaces_with_them(store: str) -> None:
    result = run_cli("db", "upgrade", "--task-store", store, env=clean_env())
    assert result.returncode == 1, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: upgrade failed: "), lines[0]
    assert f'database "{DATABASE}" does not exist' in lines[0], lines[0]
