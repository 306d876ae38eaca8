"""An unusable ``push_encryption_key`` stops the start with one line naming the setting,
whatever the task store (with ``memory://`` it was silently ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import SettingsError
from tests._postgres import PG_HOST, PG_PORT
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, InProcessCLI, clean_env, error_line, run_cli, write

#: not 32 bytes once decoded, and not base64 at all
BAD_KEYS = ["not-a-fernet-key-secret", "c2hvcnQtc2VjcmV0", "!!!!" * 11]
GOOD_KEY = "0vnJxhxrd4Y0wHxp1ugJfCC4W_cg-632ASDH3kR-k6c="


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCLI:
    return InProcessCLI(monkeypatch, capsys)


@pytest.mark.parametrize("store", ["memory", "sqlite", "postgresql"])
@pytest.mark.parametrize("key", BAD_KEYS, ids=["words", "short", "not-base64"])
def test_a_bad_key_is_refused_with_every_store(tmp_path: Path, store: str, key: str) -> None:
    url = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp_path / 'tasks.db'}",
        # refused before any connection: the database need not be reachable
        "postgresql": f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test",
    }[store]
    environ = {"A2A_PUSH_ENCRYPTION_KEY": key, "A2A_TASK_STORE": url}
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ=environ).create()
    message = str(caught.value)
    assert message.startswith("A2A_PUSH_ENCRYPTION_KEY: "), message
    assert "Fernet key" in message and key not in message
    assert not (tmp_path / "tasks.db").exists()  # refused before the store is opened


def test_a_good_key_is_taken_with_the_memory_store() -> None:
    factory = A2AServerFactory(build_registry(), environ={}, push_encryption_key=GOOD_KEY)
    _app, _card = factory.create()
    assert factory.settings.push_encryption_key == GOOD_KEY


@pytest.mark.parametrize("source", ["file", "env-file"])
def test_check_names_where_the_bad_key_came_from(
    cli: InProcessCLI, tmp_path: Path, source: str
) -> None:
    secret = tmp_path / "key"
    secret.write_text("not-a-fernet-key-secret\n")
    push = "push:\n  encryption_key: not-a-fernet-key-secret\n" if source == "file" else ""
    path = write(tmp_path, f"modules:\n  extensions_dirs: [{EXTENSIONS}]\n{push}")
    env = {"A2A_PUSH_ENCRYPTION_KEY_FILE": str(secret)} if source == "env-file" else {}
    result = cli("config", "check", str(path), env=env)
    assert result.returncode == 1
    line = error_line(result)
    where = "push.encryption_key" if source == "file" else "A2A_PUSH_ENCRYPTION_KEY_FILE"
    assert line.startswith(f"Error: {where}: ") or f": {where}: " in line, line
    assert "not-a-fernet" not in line


def test_serve_refuses_a_bad_key_flag_in_one_line(taken_port: str) -> None:
    """A real `apcore-a2a serve` with the default memory store: exit 1, no traceback (had
    it taken the key, the taken port would stop it with exit 3, not serve on)."""
    result = run_cli(
        "serve",
        "--extensions-dir",
        str(EXTENSIONS),
        "--port",
        taken_port,
        "--push-encryption-key",
        "not-a-fernet-key-secret",
        env=clean_env(),
    )
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith("Error: --push-encryption-key: ") and "Fernet key" in line, line
    assert "Traceback" not in result.stderr and "not-a-fernet" not in result.stderr
