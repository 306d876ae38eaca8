"""Precedence: flag (or serve() keyword) > environment variable > config file > default."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import Settings
from tests._support import TLS, cli_server, free_port
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, clean_env, write

# setting, section.key in the file, file / env / flag values (the file value as YAML text)
CASES: list[tuple[str, str, str, str, str, Any, Any]] = [
    ("port", "http.port", "9001", "A2A_PORT", "9002", 9003, 9001),
    ("name", "agent.name", "file-name", "A2A_NAME", "env-name", "flag-name", "file-name"),
    (
        "task_store",
        "storage.task_store",
        "postgresql://f@h/db",
        "A2A_TASK_STORE",
        "postgresql://e@h/db",
        "postgresql://k@h/db",
        "postgresql://f@h/db",
    ),
    ("max_streams", "limits.max_streams", "11", "A2A_MAX_STREAMS", "12", 13, 11),
    (
        "execution_timeout",
        "limits.execution_timeout",
        "1.5",
        "A2A_EXECUTION_TIMEOUT",
        "2.5",
        3.5,
        1.5,
    ),
    (
        "explorer_prefix",
        "explorer.prefix",
        "/file",
        "A2A_EXPLORER_PREFIX",
        "/env",
        "/flag",
        "/file",
    ),
    ("log_level", "logging.level", "warning", "A2A_LOG_LEVEL", "error", "debug", "warning"),
    (
        "cors_origins",
        "http.cors_origins",
        "[https://f]",
        "A2A_CORS_ORIGINS",
        "https://e1,https://e2",
        ("https://k",),
        ("https://f",),
    ),
]
ENV_PARSED = {
    "port": 9002,
    "max_streams": 12,
    "execution_timeout": 2.5,
    "cors_origins": ("https://e1", "https://e2"),
}


@pytest.mark.parametrize("layers", ["default", "file", "file+env", "file+env+flag", "env+flag"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_precedence_table(tmp_path: Path, case: tuple[Any, ...], layers: str) -> None:
    setting, key, file_value, env_var, env_value, flag_value, file_parsed = case
    section, name = key.split(".")
    path = write(tmp_path, f"{section}:\n  {name}: {file_value}\n")
    environ = {env_var: env_value} if "env" in layers else {}
    flags = {setting: flag_value} if "flag" in layers else {}
    config = path if "file" in layers else None
    factory = A2AServerFactory(build_registry(), config=config, environ=environ, **flags)
    expected = {
        "default": getattr(Settings(), setting),
        "file": file_parsed,
        "file+env": ENV_PARSED.get(setting, env_value),
    }.get(layers, flag_value)
    assert getattr(factory.settings, setting) == expected


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_cli_flag_env_file_default_on_a_running_server(tmp_path: Path) -> None:
    """One real `serve --config` process, each setting observed through HTTP."""
    file_port, env_port = free_port(), free_port()
    path = write(
        tmp_path,
        f"""
        agent:
          name: file-name
          description: file-description
          version: "3.1.4"
        modules:
          extensions_dirs: [{EXTENSIONS}]
        http:
          port: {file_port}
        explorer:
          enabled: true
          prefix: /file-ui
        limits:
          max_body_bytes: 100000
        """,
    )
    env = clean_env(
        A2A_NAME="env-name",
        A2A_DESCRIPTION="env-description",
        A2A_PORT=str(env_port),
        A2A_EXPLORER_PREFIX="/env-ui",
        A2A_MAX_BODY_BYTES="2000",
    )
    # cli_server passes --host 127.0.0.1 --port <free port> as flags.
    with cli_server(["--config", str(path), "--name", "flag-name"], env=env) as (base, _proc):
        card = httpx.get(base + "/.well-known/agent-card.json", verify=TLS).json()
        assert card["name"] == "flag-name"  # flag > env > file
        assert card["description"] == "env-description"  # env > file
        assert card["version"] == "3.1.4"  # file > default
        assert card["supportedInterfaces"][0]["url"].startswith(base)  # url: default
        assert _refused(file_port) and _refused(env_port)  # --port flag > env > file
        assert httpx.get(base + "/env-ui/", verify=TLS).status_code == 200
        assert httpx.get(base + "/file-ui/", verify=TLS).status_code == 404
        big = httpx.post(
            base + "/",
            content=b"x" * 5000,
            headers={"Content-Type": "application/json"},
            verify=TLS,
        )
        assert big.status_code == 413  # env's 2000-byte limit, not the file's 100000


def test_module_sources_flag_env_file(tmp_path: Path) -> None:
    for name in ("file-ext", "env-ext", "flag-ext", "file-bind", "env-bind"):
        (tmp_path / name).mkdir()
    (tmp_path / "acl.yaml").write_text("rules: []\n")
    path = write(
        tmp_path,
        "modules:\n  extensions_dirs: [file-ext]\n  bindings_dirs: [file-bind]\n  acl: acl.yaml\n",
    )
    from apcore_a2a.config import load_config

    config = load_config(path)
    file_only = config.settings(environ={})
    assert file_only.extensions_dirs == (str(tmp_path / "file-ext"),)
    assert file_only.acl == str(tmp_path / "acl.yaml")
    env = {"APCORE_EXTENSIONS_DIR": "env-ext", "APCORE_BINDINGS_DIR": "env-bind"}
    with_env = config.settings(environ=env)
    assert (with_env.extensions_dirs, with_env.bindings_dirs) == (("env-ext",), ("env-bind",))
    with_flag = config.settings({"extensions_dirs": ["flag-ext"], "acl": "other.yaml"}, environ=env)
    assert with_flag.extensions_dirs == ("flag-ext",) and with_flag.bindings_dirs == ("env-bind",)
    assert with_flag.acl == "other.yaml"


def test_serve_config_extensions_flag_beats_the_file(tmp_path: Path) -> None:
    """`serve --config` with --extensions-dir: the flag's modules are served, not the file's."""
    (tmp_path / "empty").mkdir()
    path = write(tmp_path, "modules:\n  extensions_dirs: [empty]\n")
    with cli_server(
        ["--config", str(path), "--extensions-dir", str(EXTENSIONS)], env=clean_env()
    ) as (
        base,
        _proc,
    ):
        skills = {
            s["id"]
            for s in httpx.get(base + "/.well-known/agent-card.json", verify=TLS).json()["skills"]
        }
        assert "math.add" in skills
