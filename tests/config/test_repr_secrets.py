"""The settings objects print no secret: ``repr()``/``str()`` of :class:`Settings` and of
a loaded config file (:class:`AgentConfig`) mask secret settings and the password of a
URL, as ``apcore-a2a config show`` does. Such objects end up in tracebacks, debuggers'
and error trackers' captured locals, and ``print()`` calls.
"""

from __future__ import annotations

from pathlib import Path

from apcore_a2a.config import load_config
from apcore_a2a.settings import Settings

from ._helpers import write

SECRETS = ("jwt-sekrit-4242", "apikey-sekrit-4242", "db-sekrit-4242", "jwks-sekrit-4242")


def _settings_file(folder: Path) -> Path:
    return write(
        folder,
        """
        auth:
          jwt_key: jwt-sekrit-4242
          api_keys: [apikey-sekrit-4242]
          jwks_url: https://reader:jwks-sekrit-4242@issuer.example/jwks.json
        storage:
          task_store: postgresql://alice:db-sekrit-4242@db.example:5432/tasks
        """,
    )


def test_a_loaded_config_file_prints_no_secret(tmp_path: Path) -> None:
    config = load_config(str(_settings_file(tmp_path)))
    for text in (repr(config), str(config)):
        assert not [s for s in SECRETS if s in text], text
        assert "postgresql://alice:***@db.example:5432/tasks" in text
        assert "auth_key" in text  # still says which settings the file sets


def test_settings_print_no_secret(tmp_path: Path) -> None:
    settings = load_config(str(_settings_file(tmp_path))).settings(environ={})
    for text in (repr(settings), str(settings)):
        assert not [s for s in SECRETS if s in text], text
        assert "postgresql://alice:***@db.example:5432/tasks" in text
        assert "https://reader:***@issuer.example/jwks.json" in text
    # the values themselves are intact
    assert settings.task_store == "postgresql://alice:db-sekrit-4242@db.example:5432/tasks"
    assert Settings.resolve({"port": 9000}, environ={}).port == 9000
