"""`apcore-a2a config show|check` and `serve --config` with bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from apcore_a2a.config import load_config

from ._helpers import EXTENSIONS, InProcessCLI, clean_env, error_line, run_cli, write


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCLI:
    return InProcessCLI(monkeypatch, capsys)


BAD_FILES = [
    # (file text, key named in the message, line)
    ("agent:\n  name: x\nstorage:\n  taskstore: memory://\n", "'storage.taskstore'", 4),
    ("http:\n  host: 127.0.0.1\n  port: eighty\n", "http.port", 3),
    ("modules:\n  extensions_dirs: [./nowhere]\n", "modules.extensions_dirs", 2),
]


@pytest.mark.parametrize(("text", "key", "line"), BAD_FILES, ids=["unknown", "type", "missing-dir"])
@pytest.mark.parametrize("command", ["check", "serve"])
def test_bad_file_exits_1_with_one_line_naming_key(
    tmp_path: Path, text: str, key: str, line: int, command: str
) -> None:
    """A real `apcore-a2a` process: exit status 1 and one line on stderr."""
    path = write(tmp_path, text)
    args = (
        ["config", "check", str(path)] if command == "check" else ["serve", "--config", str(path)]
    )
    result = run_cli(*args)
    assert result.returncode == 1, result
    message = error_line(result)
    assert message.startswith(f"Error: {path}:{line}: ") and key in message
    assert result.stdout == ""


def test_check_accepts_the_example_and_names_what_it_would_serve(cli: InProcessCLI) -> None:
    result = cli("config", "check", "examples/agent.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("examples/agent.yaml: OK - 6 skills (")
    assert "math.add" in result.stdout and "sqlite:///" in result.stdout


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            f"modules:\n  extensions_dirs: [{EXTENSIONS}]\nauth:\n  type: bearer\n",
            "requires --auth-key",
        ),
        (
            f"modules:\n  extensions_dirs: [{EXTENSIONS}]\nagent:\n  default_skill: no.such\n",
            "no.such",
        ),
        (
            f"modules:\n  extensions_dirs: [{EXTENSIONS}]\nstorage:\n  cluster: true\n",
            "cluster mode",
        ),
        (
            f"modules:\n  extensions_dirs: [{EXTENSIONS}]\nstorage:\n  task_store: redis://x\n",
            "redis",
        ),
        ("modules:\n  extensions_dirs: [empty]\n", "no apcore modules found"),
        ("agent:\n  name: no-modules\n", "no modules to serve"),
    ],
    ids=[
        "bearer-without-key",
        "unknown-default-skill",
        "cluster-on-memory",
        "bad-store",
        "empty-dir",
        "no-modules",
    ],
)
def test_check_fails_for_a_file_the_server_could_not_start_with(
    cli: InProcessCLI, tmp_path: Path, text: str, words: str
) -> None:
    (tmp_path / "empty").mkdir()
    result = cli("config", "check", str(write(tmp_path, text)))
    assert result.returncode == 1
    assert words in error_line(result)


def test_check_sees_the_environment_like_serve_does(cli: InProcessCLI, tmp_path: Path) -> None:
    path = write(tmp_path, f"modules:\n  extensions_dirs: [{EXTENSIONS}]\n")
    assert cli("config", "check", str(path)).returncode == 0
    result = cli("config", "check", str(path), env={"A2A_AUTH_TYPE": "apikey"})
    assert result.returncode == 1 and "requires at least one --api-key" in error_line(result)


ENCRYPTION_KEY = "0vnJxhxrd4Y0wHxp1ugJfCC4W_cg-632ASDH3kR-k6c="
SECRET_FILE = f"""
modules:
  extensions_dirs: [{EXTENSIONS}]
agent:
  name: shown
auth:
  jwt_key: file-jwt-secret-value
  api_keys: [file-api-key-0123456789=ops]
storage:
  task_store: postgresql://app:db-password-value@db:5432/agent
push:
  signing_key: push-signing-secret
"""


def test_show_masks_secrets_and_names_each_source(cli: InProcessCLI, tmp_path: Path) -> None:
    path = write(tmp_path, SECRET_FILE)
    # a Fernet key (anything else is refused), its text in none of the output
    env = {"A2A_PORT": "9123", "A2A_PUSH_ENCRYPTION_KEY": ENCRYPTION_KEY}
    result = cli("config", "show", "--config", str(path), env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for secret in (
        "file-jwt-secret",
        "file-api-key",
        "db-password",
        "push-signing",
        ENCRYPTION_KEY,
    ):
        assert secret not in out
    assert 'jwt_key: "***"  # file line 6' in out
    assert 'task_store: "postgresql://app:***@db:5432/agent"  # file line 9' in out
    assert 'encryption_key: "***"  # env A2A_PUSH_ENCRYPTION_KEY' in out
    assert "port: 9123  # env A2A_PORT" in out
    assert 'host: "127.0.0.1"  # default' in out
    assert 'name: "shown"  # file line 4' in out
    assert f'extensions_dirs: ["{EXTENSIONS}"]  # file line 2' in out


def test_show_output_is_a_config_file_with_the_same_settings(
    cli: InProcessCLI, tmp_path: Path
) -> None:
    path = write(tmp_path, SECRET_FILE)
    shown = cli("config", "show", "--config", str(path), env={"A2A_MAX_STREAMS": "9"})
    assert shown.returncode == 0
    assert isinstance(yaml.safe_load(shown.stdout), dict)
    again = write(tmp_path, shown.stdout, name="shown.yaml")
    original = load_config(path).settings(environ={"A2A_MAX_STREAMS": "9"})
    reloaded = load_config(again).base()
    assert reloaded.max_streams == 9 and reloaded.name == "shown"
    masked = {"auth_key", "api_keys", "push_signing_key", "task_store"}
    for field in original.masked():
        if field not in masked:
            assert getattr(reloaded, field) == getattr(original, field), field
    assert load_config(again).modules == load_config(path).modules


def test_show_without_a_file_prints_defaults_and_environment(cli: InProcessCLI) -> None:
    result = cli("config", "show", env={"A2A_CLUSTER": "true"})
    assert result.returncode == 0
    assert "# file: (none)" in result.stdout
    assert "cluster: true  # env A2A_CLUSTER" in result.stdout
    assert 'task_store: "memory://"  # default' in result.stdout


def test_show_reports_bad_files_and_bad_environment(cli: InProcessCLI, tmp_path: Path) -> None:
    missing = cli("config", "show", "--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "cannot read config file" in error_line(missing)
    bad_env = cli("config", "show", env={"A2A_PORT": "eighty"})
    assert bad_env.returncode == 1 and "A2A_PORT" in error_line(bad_env)


def test_config_needs_a_subcommand(cli: InProcessCLI) -> None:
    result = cli("config")
    assert result.returncode == 2 and "COMMAND" in result.stderr


def test_no_command_prints_the_commands_and_exits_2() -> None:
    result = run_cli()  # a real process: main() decides this, the parser does not
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: apcore-a2a") and "serve" in result.stderr


SECRET_TYPE_ERRORS = [
    # (file text, key named in the message); each value is a secret of the wrong type
    ("auth:\n  api_keys: key-sekrit-4242\n", "auth.api_keys"),
    ("auth:\n  jwt_key: 4242424242\n", "auth.jwt_key"),
    ("push:\n  encryption_key: [enc-sekrit-4242]\n", "push.encryption_key"),
    ("push:\n  signing_key: {pem: sign-sekrit-4242}\n", "push.signing_key"),
]


@pytest.mark.parametrize(("text", "key"), SECRET_TYPE_ERRORS, ids=lambda v: str(v)[:14])
def test_a_secret_of_the_wrong_type_is_named_but_never_shown(
    tmp_path: Path, text: str, key: str
) -> None:
    """A real `apcore-a2a config check`: the line names the file, line and key; the value
    (a secret, pasted where a list or string belongs) stays out of the output."""
    path = write(tmp_path, text)
    result = run_cli("config", "check", str(path))
    assert result.returncode == 1, result
    message = error_line(result)
    assert message.startswith(f"Error: {path}:2: {key}: expected "), message
    assert "4242" not in result.stderr + result.stdout, message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:pa/ss-4242@db:5432/agent",  # '/' in the password
        "postgresql://app:pa@ss-4242@db:5432/agent",  # an unencoded '@'
        "postgresql://app:pa:ss-4242@db:5432/agent",  # ':' in the password
        "postgresql://app@db:5432/agent?password=ss-4242",  # libpq's query form
        # an unencoded '@' in the user name (Azure's user@server): parsers split at the
        # last '@', so ss-4242 is the password; it was shown as given
        "postgresql://app@server:ss-4242@db:5432/agent",
        "//app:ss-4242@db:5432/agent",  # its scheme left out (a variable unset): shown as is
        "//ss-4242@db:5432/agent",  # the same, a user name alone
        # '?' and '#' in the password: SQLAlchemy's URL reads them as the password's
        # (up to its '@'); both were shown as given
        "postgresql://app:pa?ss-4242@db:5432/agent",
        "postgresql://app:pa#ss-4242@db:5432/agent",
    ],
    ids=[
        "slash",
        "at",
        "colon",
        "query",
        "at-in-user",
        "no-scheme",
        "no-scheme-user",
        "question-mark",
        "hash",
    ],
)
def test_show_masks_database_passwords_in_any_spelling(url: str) -> None:
    """A real `apcore-a2a config show`: the password never appears, whatever it holds."""
    result = run_cli("config", "show", env=clean_env(A2A_TASK_STORE=url))
    assert result.returncode == 0, result.stderr
    (line,) = [ln for ln in result.stdout.splitlines() if "task_store:" in ln]
    assert "4242" not in result.stdout, line
    assert "***" in line and "# env A2A_TASK_STORE" in line, line


@pytest.mark.parametrize(
    "name",
    # an API key; Azure Functions' function key; a shared access signature; S3's presigned
    ["api_key", "code", "sig", "X-Amz-Signature", "X-Amz-Credential"],
)
def test_show_masks_a_key_in_the_jwks_urls_query(name: str) -> None:
    """Some IdPs take an API key in the key set URL's query: `config show` prints none."""
    url = f"https://idp.example/jwks.json?tenant=t1&{name}=k3y-4242"
    result = run_cli("config", "show", env=clean_env(JWT_JWKS_URL=url))
    assert result.returncode == 0, result.stderr
    (line,) = [ln for ln in result.stdout.splitlines() if "jwks_url:" in ln]
    assert "4242" not in result.stdout, line
    assert f"tenant=t1&{name}=***" in line, line


def test_show_masks_a_user_name_alone_in_the_jwks_url() -> None:
    """https://TOKEN@host passes a token as the user name: `config show` masks it, and
    keeps the rest of the URL as given (it showed ``https:***@idp.example``)."""
    url = "https://t0ken-4242@idp.example/jwks.json"
    result = run_cli("config", "show", env=clean_env(JWT_JWKS_URL=url))
    assert result.returncode == 0, result.stderr
    (line,) = [ln for ln in result.stdout.splitlines() if "jwks_url:" in ln]
    assert "4242" not in result.stdout, line
    assert '"https://***@idp.example/jwks.json"' in line, line


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://idp.example:8443/t@x/jwks.json", "https://idp.example:8443/t@x/jwks.json"),
        (
            "https://idp.example/jwks.json#access_token=t0k-4242",
            "https://idp.example/jwks.json#access_token=***",
        ),
    ],
    ids=["at-in-path", "fragment"],
)
def test_show_reads_an_at_in_the_path_as_the_paths_and_masks_a_fragment_token(
    url: str, shown: str
) -> None:
    """It showed ``https://idp.example:***@x/jwks.json``, and a fragment's token as given."""
    result = run_cli("config", "show", env=clean_env(JWT_JWKS_URL=url))
    assert result.returncode == 0, result.stderr
    (line,) = [ln for ln in result.stdout.splitlines() if "jwks_url:" in ln]
    assert "4242" not in result.stdout, line
    assert f'"{shown}"' in line, line


def test_show_reads_the_file_a2a_config_names_like_serve(tmp_path: Path) -> None:
    """`serve` takes its file from A2A_CONFIG when --config is not given; so does `show`."""
    path = write(tmp_path, "http:\n  port: 18999\n")
    result = run_cli("config", "show", env=clean_env(A2A_CONFIG=str(path)))
    assert result.returncode == 0, result.stderr
    assert f"# file: {path}" in result.stdout
    assert "port: 18999  # file line 2" in result.stdout


def test_show_names_the_file_a_secret_was_read_from(cli: InProcessCLI, tmp_path: Path) -> None:
    """A secret given as ``<ENV>_FILE`` is not a default: its line names the variable and
    the file, and the secret itself is not printed."""
    jwt = tmp_path / "jwt-key"
    jwt.write_text("jwt-secret-from-a-file\n", encoding="utf-8")
    keys = tmp_path / "api-keys"
    keys.write_text("api-key-from-a-file-0123456789=ops\n", encoding="utf-8")
    env = {"JWT_KEY_FILE": str(jwt), "A2A_API_KEYS_FILE": str(keys)}
    result = cli("config", "show", env=env)
    assert result.returncode == 0, result.stderr
    assert "from-a-file" not in result.stdout
    assert f'jwt_key: "***"  # env JWT_KEY_FILE ({jwt})' in result.stdout
    assert f'api_keys: ["***"]  # env A2A_API_KEYS_FILE ({keys})' in result.stdout
