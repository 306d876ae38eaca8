"""Settings that can hold a secret also come from a file (``<ENV>_FILE``, ``--<flag>-file``:
Docker secrets), with one set of rules: the text without its trailing newline (a list: one
item per line), and one clear line for an unreadable or empty file or for both forms set."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import SPECS, Settings, SettingsError
from tests._support import TLS, free_port, running_server, send_message
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, InProcessCLI, clean_env, error_line, run_cli

#: setting -> a usable value; every setting read from files, secrets and URLs with passwords
FROM_FILES = {
    "auth_key": "jwt-secret-0123456789-0123456789",
    "api_keys": ("key-one-0123456789=one",),
    "push_signing_key": "pem-text",
    "push_encryption_key": "0vnJxhxrd4Y0wHxp1ugJfCC4W_cg-632ASDH3kR-k6c=",
    "task_store": "postgresql://agent:db-pass-4242@db:5432/agent",
    "auth_jwks_url": "https://user:jwks-pass-4242@issuer.example/jwks.json",
}
SEND = send_message("math.add", {"a": 1, "b": 2})


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCLI:
    return InProcessCLI(monkeypatch, capsys)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "secret"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", list(FROM_FILES))
def test_each_secret_setting_reads_its_file_without_the_newline(tmp_path: Path, name: str) -> None:
    value = FROM_FILES[name]
    text = "\n".join(value) if isinstance(value, tuple) else value
    path = _file(tmp_path, text + "\n")
    settings = Settings.resolve(environ={SPECS[name].env + "_FILE": str(path)})
    assert getattr(settings, name) == value


@pytest.mark.parametrize("name", list(FROM_FILES))
def test_both_the_variable_and_its_file_is_refused(tmp_path: Path, name: str) -> None:
    """Two values for one setting at the same level: neither is silently dropped."""
    env = SPECS[name].env
    value = FROM_FILES[name]
    text = ",".join(value) if isinstance(value, tuple) else value
    path = _file(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        Settings.resolve(environ={env: text, env + "_FILE": str(path)})
    message = str(caught.value)
    assert message == f"{env}_FILE: set {env} or {env}_FILE, not both", message


@pytest.mark.parametrize("name", list(FROM_FILES))
@pytest.mark.parametrize("text", ["", "\n", "\r\n"], ids=["empty", "newline", "crlf"])
def test_an_empty_file_is_refused(tmp_path: Path, name: str, text: str) -> None:
    env = SPECS[name].env + "_FILE"
    path = _file(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        Settings.resolve(environ={env: str(path)})
    assert str(caught.value) == f"{env}: {path} is empty"


@pytest.mark.parametrize("name", list(FROM_FILES))
def test_an_unreadable_file_is_refused(tmp_path: Path, name: str) -> None:
    env = SPECS[name].env + "_FILE"
    with pytest.raises(SettingsError) as caught:
        Settings.resolve(environ={env: str(tmp_path / "missing")})
    assert str(caught.value).startswith(f"{env}: cannot read {tmp_path / 'missing'}: ")


async def test_the_task_store_url_from_a_file_is_the_store_used(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    path = _file(tmp_path, f"sqlite:///{db}\n")
    factory = A2AServerFactory(build_registry(), environ={"A2A_TASK_STORE_FILE": str(path)})
    app, _card = factory.create()
    async with running_server(app) as url, httpx.AsyncClient(base_url=url, verify=TLS) as http:
        answer = await http.post("/", json=SEND, headers={"A2A-Version": "1.0"})
        task_id = answer.json()["result"]["task"]["id"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id FROM tasks").fetchall() == [(task_id,)]


async def test_api_keys_from_a_file_one_per_line_are_each_accepted(tmp_path: Path) -> None:
    path = _file(tmp_path, "key-one-0123456789=one\nkey-two-0123456789=two\n")
    environ = {"A2A_AUTH_TYPE": "apikey", "A2A_API_KEYS_FILE": str(path)}
    app, _card = A2AServerFactory(build_registry(), environ=environ).create()
    async with running_server(app) as url, httpx.AsyncClient(base_url=url, verify=TLS) as http:
        for key in ("key-one-0123456789", "key-two-0123456789"):
            headers = {"A2A-Version": "1.0", "X-API-Key": key}
            answer = await http.post("/", json=SEND, headers=headers)
            assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        refused = await http.post("/", json=SEND, headers={"A2A-Version": "1.0"})
        assert refused.status_code == 401


def test_show_names_the_store_file_and_masks_its_password(
    cli: InProcessCLI, tmp_path: Path
) -> None:
    path = _file(tmp_path, FROM_FILES["task_store"] + "\n")
    result = cli("config", "show", env={"A2A_TASK_STORE_FILE": str(path)})
    assert result.returncode == 0, result.stderr
    assert "4242" not in result.stdout
    expected = 'task_store: "postgresql://agent:***@db:5432/agent"  # env A2A_TASK_STORE_FILE'
    assert f"{expected} ({path})" in result.stdout


def test_serve_takes_a_task_store_file_flag_and_refuses_both_forms(tmp_path: Path) -> None:
    path = _file(tmp_path, "ftp://agent:db-pass-4242@db/agent\n")
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--task-store-file", str(path)]
    result = run_cli(*args)
    assert result.returncode == 1, result.stderr
    assert "unsupported task store URL scheme 'ftp'" in error_line(result)
    assert "4242" not in result.stderr
    both = run_cli(*args, "--task-store", "memory://")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr, both.stderr


@pytest.mark.parametrize("name", list(FROM_FILES))
@pytest.mark.parametrize("text", [" ", "\t\n", " \n \n"], ids=["space", "tab", "blank-lines"])
def test_a_file_of_only_whitespace_is_refused(tmp_path: Path, name: str, text: str) -> None:
    # Read as the value, "  " was a name of spaces, a 2-byte JWT secret or, for a list,
    # no item at all: the rule of every other source (docs/configuration.md).
    env = SPECS[name].env + "_FILE"
    path = _file(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        Settings.resolve(environ={env: str(path)})
    assert str(caught.value) == f"{env}: {path} holds only whitespace"


#: 20 bytes: HS256 needs 32 (RFC 7518 3.2)
SHORT_SECRET = "short-secret-0123456"


@pytest.mark.parametrize(
    ("flag", "text", "said"),
    [
        ("--auth-key-file", SHORT_SECRET + "\n", "JWT HMAC secret is 20 bytes; HS256 needs"),
        ("--auth-key-file", "  \n", "{path} holds only whitespace"),
        ("--push-encryption-key-file", "not-a-fernet-key\n", "must be a Fernet key"),
        ("--api-key-file", "\n \n", "{path} holds only whitespace"),
    ],
    ids=["weak-jwt-secret", "blank-jwt-secret", "bad-fernet-key", "blank-api-keys"],
)
def test_serve_names_the_file_flag_a_refused_value_came_from(
    tmp_path: Path, flag: str, text: str, said: str
) -> None:
    # A short secret in --auth-key-file was reported as "--auth-key:", a flag not given.
    path = _file(tmp_path, text)
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", str(free_port())]
    result = run_cli(*args, "--auth-type", "bearer", flag, str(path))
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith(f"Error: {flag}: {said.format(path=path)}"), line
    assert SHORT_SECRET not in result.stderr and "Traceback" not in result.stderr


def test_serve_names_the_variable_a_short_jwt_secret_file_came_from(tmp_path: Path) -> None:
    path = _file(tmp_path, SHORT_SECRET + "\n")
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", str(free_port())]
    result = run_cli(*args, "--auth-type", "bearer", env=clean_env(JWT_KEY_FILE=str(path)))
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith("Error: JWT_KEY_FILE: JWT HMAC secret is 20 bytes"), line


def test_the_factory_names_the_variable_a_short_jwt_secret_file_came_from(
    tmp_path: Path,
) -> None:
    path = _file(tmp_path, SHORT_SECRET)
    environ = {"A2A_AUTH_TYPE": "bearer", "JWT_KEY_FILE": str(path)}
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ=environ).create()
    assert str(caught.value).startswith("JWT_KEY_FILE: JWT HMAC secret is 20 bytes")
