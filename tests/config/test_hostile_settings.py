"""Bad values an attacker or a careless operator may give: each is refused at start with
one line naming the setting's source (exit status 1 from the CLI), never a traceback, a
hang, or a value kept that can never work."""

from __future__ import annotations

from pathlib import Path

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.config import ConfigFileError, load_config
from apcore_a2a.settings import Settings, SettingsError
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, clean_env, error_line, run_cli, write

# (environment variable, value, words of the message after "VAR: ")
BAD_ENV = [
    ("A2A_RPC_PATH", "rpc", "must be a URL path starting with '/'"),
    ("A2A_RPC_PATH", "/a b", "must be a URL path starting with '/'"),
    ("A2A_URL", "javascript:alert(1)", "must be an http:// or https:// URL with a host"),
    ("A2A_URL", "ftp://agent.example.com", "must be an http:// or https:// URL with a host"),
    ("A2A_URL", "https://", "must be an http:// or https:// URL with a host"),
    ("A2A_ALLOWED_HOSTS", "a*b.example.com", "'a*b.example.com' is not a host name"),
    ("A2A_ALLOWED_HOSTS", "agent.example.com:8080", "without the port"),
    ("A2A_ALLOWED_HOSTS", "https://agent.example.com", "'https://agent.example.com' is not"),
    ("A2A_CORS_ORIGINS", "app.example.com", "'app.example.com' is not an origin"),
    ("A2A_CORS_ORIGINS", "https://app.example.com/ui", "'https://app.example.com/ui' is not"),
    ("A2A_PUSH_RETRY_DELAYS", "1,-2", "must not be negative"),
    # c-ares takes addresses only: a name here would refuse every webhook lookup
    ("A2A_PUSH_DNS_SERVERS", "dns.example.com", "'dns.example.com' is not a name server"),
    ("A2A_PUSH_DNS_SERVERS", "192.0.2.53:0", "'192.0.2.53:0' is not a name server"),
    ("A2A_PUSH_DNS_SERVERS", "192.0.2.53:dns", "'192.0.2.53:dns' is not a name server"),
    ("A2A_HOST", "http://0.0.0.0", "'http://0.0.0.0' is not a host name"),
    ("A2A_HOST", "0.0.0.0:8000", "give the host name without the port"),
    ("A2A_HOST", "*.example.com", "'*.example.com' is not a host name"),
    # also the gRPC handshake and idle bound, which grpcio takes in milliseconds as a C int
    ("A2A_HEADER_TIMEOUT", "1e300", "less than or equal to"),
    ("A2A_GRPC_KEEPALIVE_TIME", "1e300", "less than or equal to"),
    ("A2A_GRPC_KEEPALIVE_TIMEOUT", "1e300", "less than or equal to"),
    # one process each: a typo of a few digits forked that many (docs/configuration.md)
    ("A2A_WORKERS", "100000", "less than or equal to 64"),
    ("A2A_IPV6_CALLER_PREFIX", "32", "greater than or equal to 48"),
    ("A2A_IPV6_CALLER_PREFIX", "129", "less than or equal to 128"),
    ("A2A_EXPLORER_PREFIX", "explorer", "must be a non-root URL path like '/explorer'"),
    ("A2A_EXPLORER_PREFIX", "/", "must be a non-root URL path like '/explorer'"),
]


@pytest.mark.parametrize(
    ("env", "value", "words"), BAD_ENV, ids=[f"{e}={v}" for e, v, _ in BAD_ENV]
)
def test_a_bad_value_is_refused_naming_its_variable(env: str, value: str, words: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.resolve(environ={env: value})
    message = str(caught.value)
    assert message.startswith(f"{env}: ") and words in message, message


@pytest.mark.parametrize(
    "values",
    [
        {"A2A_RPC_PATH": "/rpc"},
        {"A2A_HOST": "::"},
        {"A2A_HOST": "agent-1.internal"},
        {"A2A_URL": "https://agents.example.com/billing/"},
        {"A2A_URL": "http://[::1]:8000"},
        {"A2A_ALLOWED_HOSTS": "agent.example.com,*.example.org,10.0.0.5,::1,[::1],*"},
        {"A2A_CORS_ORIGINS": "https://app.example.com,http://localhost:3000/,*"},
        {"A2A_PUSH_RETRY_DELAYS": "0,0.5,2"},
        {"A2A_PUSH_DNS_SERVERS": "192.0.2.53,192.0.2.54:5353,2001:db8::53,[2001:db8::54]:53"},
    ],
)
def test_usable_values_are_kept(values: dict[str, str]) -> None:
    settings = Settings.resolve(environ=values)
    assert settings.model_fields_set == {env.removeprefix("A2A_").lower() for env in values}


def test_a_bad_allowed_host_is_refused_before_serving() -> None:
    """Starlette checks its host patterns on the first request: every request failed."""
    with pytest.raises(SettingsError, match=r"^allowed_hosts: "):
        A2AServerFactory(build_registry(), environ={}, allowed_hosts=["a*b"]).create()


def test_serve_refuses_a_relative_rpc_path_in_one_line() -> None:
    """A real `apcore-a2a serve`: Starlette's assertion used to end it with a traceback."""
    result = run_cli("serve", "--extensions-dir", str(EXTENSIONS), "--rpc-path", "rpc")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = error_line(result)
    assert line.startswith("Error: --rpc-path: must be a URL path starting with '/'"), line


def test_serve_refuses_a_huge_workers_count_naming_the_flag() -> None:
    """A typo of a few digits: each worker is a process (without --cluster here, so the
    unbounded command was refused by the cluster rule, not the count, and forked nothing)."""
    result = run_cli("serve", "--extensions-dir", str(EXTENSIONS), "--workers", "640")
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line == "Error: --workers: input should be less than or equal to 64, got 640", line


@pytest.mark.parametrize(
    ("source", "env", "line"),
    [
        (("--explorer-prefix", "/v1"), {}, "Error: --explorer-prefix: would hide"),
        ((), {"A2A_EXPLORER_PREFIX": "/v1"}, "Error: A2A_EXPLORER_PREFIX: would hide"),
    ],
    ids=["flag", "variable"],
)
def test_an_explorer_prefix_over_the_agents_routes_names_its_source(
    source: tuple[str, ...], env: dict[str, str], line: str
) -> None:
    result = run_cli(
        "serve", "--extensions-dir", str(EXTENSIONS), "--explorer", *source, env=clean_env(**env)
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    said = error_line(result)
    assert said.startswith(line) and "the agent's own route /v1" in said, said


@pytest.mark.parametrize(
    ("key", "value"),
    [("agent", "name"), ("agent", "version"), ("modules", "acl"), ("push", "signing_key")],
)
def test_an_empty_string_in_the_config_file_is_refused(
    tmp_path: Path, key: str, value: str
) -> None:
    """An explicit key with an empty string used to fall back to the default silently
    (``agent.name: ""`` served an agent named ``apcore-agent``)."""
    path = write(tmp_path, f"{key}:\n  {value}: '  '\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: {key}.{value}: must not be empty"), message


def test_an_empty_host_in_the_config_file_still_means_every_interface(tmp_path: Path) -> None:
    path = write(tmp_path, "http:\n  host: ''\n")
    assert load_config(path).base().host == ""


def test_yaml_aliases_cannot_blow_up_a_value(tmp_path: Path) -> None:
    """Nested aliases (a "billion laughs") under a list setting: refused at once, the
    value never built or printed (it was: `config check` ran for ever)."""
    lines = ["http:", "  cors_origins:", "    - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 9):
        lines.append(f"    - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:3: http.cors_origins: expected a list of strings")
    assert len(message) < 300, message


def test_a_huge_config_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("# padding\n" * 200_000 + "http:\n  port: 8000\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: cannot read config file: larger than 1 MiB"


def test_a_config_file_that_never_ends_is_refused() -> None:
    """`--config /dev/zero` (a careless path): refused, not read until memory runs out."""
    with pytest.raises(ConfigFileError, match="larger than 1 MiB"):
        load_config("/dev/zero")


@pytest.mark.parametrize(
    "value",
    ["!custom x", "!!python/name:os.system", "!!python/object/new:os.system id"],
    ids=["unknown", "python-name", "python-object"],
)
def test_a_yaml_tag_nobody_reads_is_refused_in_one_line(tmp_path: Path, value: str) -> None:
    """SafeLoader knows no constructor for them: its error was a traceback."""
    path = write(tmp_path, f"agent:\n  description: {value}\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: agent.description: "), message
    assert "\n" not in message and "constructor" in message


def test_an_environment_value_that_is_not_utf8_is_refused() -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates, which fail far later
    (writing the card) with a message naming no setting."""
    with pytest.raises(SettingsError) as caught:
        Settings.resolve(environ={"A2A_NAME": "agent-\udcff"})
    assert str(caught.value) == "A2A_NAME: not valid UTF-8"


@pytest.mark.parametrize(
    "text", ["[" * 100_000 + "]" * 100_000, "{a: " * 50_000 + "1" + "}" * 50_000]
)
def test_yaml_nested_past_the_recursion_limit_is_refused_in_one_line(
    tmp_path: Path, text: str
) -> None:
    """PyYAML composes nested nodes recursively: its RecursionError was a traceback."""
    path = write(tmp_path, f"http:\n  cors_origins: {text}\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: invalid YAML: nested too deeply"
