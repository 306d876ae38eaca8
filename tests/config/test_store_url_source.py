"""A task store URL no store takes is refused naming where it was given (the flag, its
``-file`` form, ``A2A_TASK_STORE``, ``A2A_TASK_STORE_FILE`` or the config file's key),
in ``serve``, ``config check`` and the factory, as ``db upgrade`` does; a password in the
URL is never printed. ``serve`` said ``Error: unsupported task store URL scheme 'ftp'``,
naming no source, and ``memory://admin:PASSWORD@x`` was echoed whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import SettingsError
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, InProcessCLI, clean_env, error_line, run_cli, write

SCHEME = "unsupported task store URL scheme 'ftp'"
#: URLs each refused by a different rule, all with the password hunter2
LEAKY = [
    "memory://admin:hunter2@x",
    "db.example/tasks?password=hunter2",
    "ftp://admin:hunter2@db.example/tasks",
    "sqlite+pysqlite://admin:hunter2@x/db",
    "postgresql://admin:hunter2@db.example:99999/tasks",
    # no "//": not a URL a masking rule recognises, so the message must not quote it
    "memory:admin:hunter2@x",
    "memory:/admin:hunter2@x",
    "admin:hunter2@db.example/tasks",
    "hunter2",
    "postgresql://admin:hunter2@db.example/tasks?password=hunter2",
    "sqlite://admin:hunter2@/tasks.db",
]


def _refusal(**kwargs: object) -> str:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), **kwargs).create()  # type: ignore[arg-type]
    return str(caught.value)


def test_the_factory_names_the_keyword_argument() -> None:
    said = _refusal(environ={}, task_store="ftp://h/db")
    # whole: the forms it names hold "://" and "@", which no password mask may take
    assert said == (
        f"task_store: {SCHEME}; expected memory://, sqlite:///path/tasks.db or "
        "postgresql://user@host/db"
    ), said


def test_the_factory_names_the_variable_and_its_file(tmp_path: Path) -> None:
    said = _refusal(environ={"A2A_TASK_STORE": "ftp://h/db"})
    assert said.startswith(f"A2A_TASK_STORE: {SCHEME}"), said
    path = write(tmp_path, "ftp://h/db\n", name="db-url")
    said = _refusal(environ={"A2A_TASK_STORE_FILE": str(path)})
    assert said.startswith(f"A2A_TASK_STORE_FILE: {SCHEME}"), said


def test_the_factory_names_the_config_key(tmp_path: Path) -> None:
    path = write(tmp_path, "storage:\n  task_store: ftp://h/db\n")
    said = _refusal(environ={}, config=str(path))
    assert said.startswith(f"storage.task_store: {SCHEME}"), said


def test_a_task_store_object_is_not_a_url() -> None:
    from apcore_a2a.storage import BoundedMemoryTaskStore

    store = BoundedMemoryTaskStore(max_capacity=10, ttl_seconds=60)
    A2AServerFactory(build_registry(), environ={}, task_store=store).create()


@pytest.mark.parametrize("url", LEAKY)
def test_the_factory_never_shows_the_password(url: str) -> None:
    said = _refusal(environ={"A2A_TASK_STORE": url})
    assert said.startswith("A2A_TASK_STORE: "), said
    assert "hunter2" not in said, said


SERVE_CASES = [
    ({"A2A_TASK_STORE": "ftp://h/db"}, [], f"A2A_TASK_STORE: {SCHEME}"),
    ({"A2A_TASK_STORE_FILE": "URL"}, [], f"A2A_TASK_STORE_FILE: {SCHEME}"),
    ({}, ["--task-store", "ftp://h/db"], f"--task-store: {SCHEME}"),
    ({}, ["--task-store-file", "URL"], f"--task-store-file: {SCHEME}"),
    (
        {},
        ["--task-store", "memory://admin:hunter2@x"],
        "--task-store: memory task store URL takes no path or options; write memory://",
    ),
]


@pytest.mark.parametrize(("env", "args", "line"), SERVE_CASES)
def test_serve_names_the_source_of_a_refused_store(
    tmp_path: Path, taken_port: str, env: dict[str, str], args: list[str], line: str
) -> None:
    url = str(write(tmp_path, "ftp://h/db\n", name="db-url"))
    env = {k: url if v == "URL" else v for k, v in env.items()}
    args = [url if a == "URL" else a for a in args]
    command = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port, *args]
    result = run_cli(*command, env=clean_env(**env))
    assert result.returncode == 1, result.stderr
    said = error_line(result)
    assert said.startswith(f"Error: {line}"), said
    assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


def test_config_check_names_the_key_or_the_variable(tmp_path: Path) -> None:
    text = f"modules:\n  extensions_dirs: [{EXTENSIONS}]\nstorage:\n  task_store: ftp://h/db\n"
    path = write(tmp_path, text)
    result = run_cli("config", "check", str(path), env=clean_env())
    assert result.returncode == 1, result.stderr
    assert error_line(result).startswith(f"Error: storage.task_store: {SCHEME}")
    leaky = clean_env(A2A_TASK_STORE="memory://admin:hunter2@x")
    result = run_cli("config", "check", str(path), env=leaky)
    assert result.returncode == 1, result.stderr
    assert error_line(result).startswith("Error: A2A_TASK_STORE: memory task store URL")
    assert "hunter2" not in result.stderr


def test_db_upgrade_never_shows_the_password() -> None:
    result = run_cli("db", "upgrade", "--task-store", "memory://admin:hunter2@x")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: --task-store: memory task store URL"), result.stderr
    assert "hunter2" not in result.stderr


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCLI:
    return InProcessCLI(monkeypatch, capsys)


@pytest.mark.parametrize("url", [url for url in LEAKY if url != "hunter2"])
def test_config_show_masks_the_password_of_any_shape(cli: InProcessCLI, url: str) -> None:
    # config show prints the value without parsing it: a URL without "//" is masked too
    result = cli("config", "show", env={"A2A_TASK_STORE": url})
    assert result.returncode == 0, result.stderr
    shown = next(ln for ln in result.stdout.splitlines() if ln.lstrip().startswith("task_store"))
    assert "hunter2" not in shown and "***" in shown, shown
