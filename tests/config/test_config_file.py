"""Loading and validating the agent YAML: values, paths, and errors naming key and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apcore_a2a.config import SECTIONS, ConfigFileError, load_config
from apcore_a2a.settings import Settings, SettingsError

from ._helpers import BINDINGS, EXTENSIONS, write

FULL = f"""
agent:
  name: calc
  description: A calculator
  version: "2.0"
  url: https://agent.example.com
  default_skill: math.add
modules:
  extensions_dirs: [{EXTENSIONS}]
  bindings_dirs: [{BINDINGS}]
http:
  host: 0.0.0.0
  port: 9100
  rpc_path: /rpc
  cors_origins: [https://app.example.com]
logging: {{level: debug, format: json}}
grpc: {{port: 50051, reflection: true}}
auth:
  type: bearer
  jwt_key: s3cret-s3cret-s3cret-s3cret-s3cret
  issuer: https://issuer
  audience: agents
  algorithms: [HS256]
  api_keys: [k-0123456789abcdef=ops]
  require: false
storage:
  task_store: postgresql://app@db/agent
  cluster: true
  cluster_poll_interval: 0.2
  task_max_capacity: 50
  task_ttl_seconds: 60
  task_retention_seconds: 86400
push:
  enabled: true
  allow_insecure_urls: true
  timeout: 3
  retry_delays: [0.5, 1]
  signing_key: sign-me
explorer: {{enabled: true, prefix: /ui}}
metrics: {{enabled: true}}
telemetry: {{enabled: true}}
limits:
  execution_timeout: 12.5
  shutdown_timeout: 4
  max_body_bytes: 2048
  max_streams: 7
  sync_workers: 3
  cancel_on_disconnect: true
"""


def test_every_section_lands_in_settings(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    s = config.base()
    assert (s.name, s.description, s.version, s.url) == (
        "calc",
        "A calculator",
        "2.0",
        "https://agent.example.com",
    )
    assert (s.host, s.port, s.rpc_path, s.cors_origins) == (
        "0.0.0.0",
        9100,
        "/rpc",
        ("https://app.example.com",),
    )
    assert (s.log_level, s.log_format, s.grpc_port, s.grpc_reflection) == (
        "debug",
        "json",
        50051,
        True,
    )
    assert (s.auth_type, s.auth_issuer, s.auth_audience, s.auth_algorithms) == (
        "bearer",
        "https://issuer",
        "agents",
        ("HS256",),
    )
    assert s.api_keys == ("k-0123456789abcdef=ops",) and s.require_auth is False
    assert (s.task_store, s.cluster, s.cluster_poll_interval) == (
        "postgresql://app@db/agent",
        True,
        0.2,
    )
    assert (s.task_max_capacity, s.task_ttl_seconds, s.task_retention_seconds) == (
        50,
        60.0,
        86400.0,
    )
    assert (s.push_notifications, s.push_allow_insecure_urls, s.push_timeout) == (True, True, 3.0)
    assert s.push_retry_delays == (0.5, 1.0) and s.push_signing_key == "sign-me"
    assert (s.explorer, s.explorer_prefix, s.metrics, s.telemetry) == (True, "/ui", True, True)
    assert (s.execution_timeout, s.shutdown_timeout, s.max_body_bytes) == (12.5, 4.0, 2048)
    assert (s.max_streams, s.sync_workers, s.cancel_on_disconnect) == (7, 3, True)
    assert isinstance(s.task_ttl_seconds, float) and isinstance(s.shutdown_timeout, float)
    assert config.modules.extensions_dirs == (str(EXTENSIONS),)
    assert config.modules.bindings_dirs == (str(BINDINGS),)
    assert config.lines["port"] == 12 and config.lines["bindings_dirs"] == 9


def test_every_setting_has_a_key_in_the_file() -> None:
    """A new Settings field gets a place in the file from its own declaration."""
    mapped = [name for keys in SECTIONS.values() for name in keys.values()]
    assert sorted(mapped) == sorted(Settings.model_fields)


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "# nothing yet\n"))
    assert config.base() == Settings.defaults() and config.modules.extensions_dirs == ()


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    (folder / "ext").mkdir(parents=True)
    (folder / "acl.yaml").write_text("rules: []\n")
    path = write(
        folder,
        """
        modules:
          extensions_dirs: [ext]
          acl: acl.yaml
        storage:
          task_store: sqlite:///data/tasks.db
        grpc:
          tls_cert: certs/server.pem
        """,
    )
    config = load_config(path)
    assert config.modules.extensions_dirs == (str(folder / "ext"),)
    assert config.modules.acl == str(folder / "acl.yaml")
    assert config.values["task_store"] == f"sqlite:///{folder / 'data' / 'tasks.db'}"
    assert config.values["grpc_tls_cert"] == str(folder / "certs" / "server.pem")


@pytest.mark.parametrize(
    "url",
    ["sqlite:////abs/tasks.db", "sqlite:///:memory:", "memory://", "postgresql://u@h/db"],
)
def test_absolute_and_non_file_urls_are_kept(tmp_path: Path, url: str) -> None:
    config = load_config(write(tmp_path, f"storage:\n  task_store: '{url}'\n"))
    assert config.values["task_store"] == url


BAD = [
    # (file text, line, words the message must contain)
    ("agnet:\n  name: x\n", 1, ["unknown key 'agnet'", "did you mean 'agent'"]),
    (
        "agent:\n  name: x\nstorage:\n  taskstore: memory://\n",
        4,
        ["unknown key 'storage.taskstore'", "did you mean 'storage.task_store'"],
    ),
    ("http:\n  port: '8000'\n", 2, ["http.port", "expected an integer", "string '8000'"]),
    ("http:\n  port: 8000.5\n", 2, ["http.port", "expected an integer"]),
    ("http:\n  port: 70000\n", 2, ["http.port", "between 1 and 65535"]),
    ("agent:\n  version: 1.0\n", 2, ["agent.version", "expected a string", "quote it"]),
    ("explorer:\n  enabled: 'yes please'\n", 2, ["explorer.enabled", "true or false"]),
    ("storage:\n  cluster: 1\n", 2, ["storage.cluster", "true or false"]),
    ("limits:\n  max_streams: true\n", 2, ["limits.max_streams", "expected an integer"]),
    ("limits:\n  execution_timeout: -1\n", 2, ["limits.execution_timeout", "negative"]),
    ("limits:\n  execution_timeout: soon\n", 2, ["limits.execution_timeout", "a number"]),
    ("http:\n  port:\n", 2, ["http.port", "got nothing"]),
    ("auth:\n  type: oauth\n", 2, ["auth.type", "one of bearer, apikey"]),
    ("logging:\n  format: xml\n", 2, ["logging.format", "one of text, json"]),
    ("auth:\n  api_keys: k1\n", 2, ["auth.api_keys", "a list of strings"]),
    ("auth:\n  api_keys: [k1, 2]\n", 2, ["auth.api_keys", "a list of strings"]),
    ("push:\n  retry_delays: [1, soon]\n", 2, ["push.retry_delays", "a list of numbers"]),
    ("http: 8000\n", 1, ["section 'http' must be a mapping"]),
    ("- agent\n", 1, ["the top level must be a mapping"]),
    ("agent:\n  name: a\nagent:\n  name: b\n", 3, ["duplicate key 'agent'"]),
    ("agent:\n  name: [unclosed\n", 3, ["invalid YAML"]),
    ("agent:\n  name: a\n   bad: indent\n", 3, ["invalid YAML"]),
    (
        "modules:\n  extensions_dirs: [does-not-exist]\n",
        2,
        ["modules.extensions_dirs", "directory not found: does-not-exist"],
    ),
    (
        "modules:\n  bindings_dir: [x]\n",
        2,
        ["unknown key 'modules.bindings_dir'", "did you mean 'modules.bindings_dirs'"],
    ),
    ("modules:\n  acl: nope.yaml\n", 2, ["modules.acl", "file not found: nope.yaml"]),
    ("modules:\n  apcore_config: nope.yaml\n", 2, ["modules.apcore_config", "file not found"]),
    ("modules:\n  extensions_dirs: /tmp\n", 2, ["modules.extensions_dirs", "a list of strings"]),
    ("1: x\n", 1, ["keys in the top level must be plain names"]),
]


@pytest.mark.parametrize(("text", "line", "words"), BAD)
def test_bad_files_fail_with_file_line_and_key(
    tmp_path: Path, text: str, line: int, words: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert "\n" not in message
    for word in words:
        assert word in message, message
    assert isinstance(info.value, SettingsError) and isinstance(info.value, ValueError)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"missing\.yaml: cannot read config file"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"agent:\n  name: \xff\xfe\n")
    with pytest.raises(ConfigFileError, match="cannot read config file"):
        load_config(tmp_path / "bin.yaml")


_VALID = {
    "http.port": st.integers(1, 65535),
    "limits.max_streams": st.integers(0, 10**6),
    "limits.execution_timeout": st.floats(1e-3, 1e6, allow_nan=False),
    "agent.name": st.text(
        st.characters(whitelist_categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=20
    ),
    "explorer.enabled": st.booleans(),
}


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_valid_scalars_round_trip(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    import json

    key = data.draw(st.sampled_from(sorted(_VALID)))
    value = data.draw(_VALID[key])
    section, name = key.split(".")
    path = write(
        tmp_path_factory.mktemp("rt"),
        f"{section}:\n  {name}: {json.dumps(value, ensure_ascii=False)}\n",
    )
    settings_ = load_config(path).base()
    assert getattr(settings_, SECTIONS[section][name]) == value


_WRONG = st.one_of(
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), min_size=1, max_size=2),
)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_structured_value_for_a_scalar_setting_is_rejected(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    import json

    key = data.draw(st.sampled_from(sorted(_VALID)))
    value = data.draw(_WRONG)
    section, name = key.split(".")
    path = write(tmp_path_factory.mktemp("bad"), f"{section}:\n  {name}: {json.dumps(value)}\n")
    with pytest.raises(ConfigFileError, match=rf":2: {key}: expected "):
        load_config(path)


def test_the_precedence_table_in_the_docs_is_the_generated_one() -> None:
    from apcore_a2a.cli.config import settings_table
    from tests._support import ROOT

    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert settings_table() in doc


def test_exponent_numbers_are_numbers_but_quoted_ones_are_not(tmp_path: Path) -> None:
    path = write(
        tmp_path, "limits:\n  execution_timeout: 1e-3\npush:\n  retry_delays: [5e-1, 2E+0]\n"
    )
    s = load_config(path).base()
    assert s.execution_timeout == 0.001 and s.push_retry_delays == (0.5, 2.0)
    path = write(tmp_path, "limits:\n  execution_timeout: '1e-3'\n")
    with pytest.raises(ConfigFileError, match="expected a number, got string '1e-3'"):
        load_config(path)
    path = write(tmp_path, "agent:\n  name: 1e3\n")  # a string setting keeps its text
    assert load_config(path).base().name == "1e3"


def test_an_optional_checked_setting_is_read_from_the_file(tmp_path: Path) -> None:
    """``http.header_timeout`` (an optional number with a bound): its type check met the
    annotated type and ended the start with a TypeError traceback."""
    path = write(tmp_path, "http:\n  header_timeout: 5\ngrpc:\n  port: 50051\n")
    s = load_config(path).base()
    assert (s.header_timeout, s.grpc_port) == (5.0, 50051)
    path = write(tmp_path, "http:\n  header_timeout: '5'\n")
    with pytest.raises(ConfigFileError, match=r"http\.header_timeout: expected a number"):
        load_config(path)
