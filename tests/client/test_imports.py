"""``import apcore_a2a.client`` loads no server stack: the wire is a2a-sdk's *client*."""

from __future__ import annotations

import json
import subprocess
import sys

from tests._support import ROOT

# What serving needs; a client process must not pay for it. (a2a-sdk's client modules
# import ``starlette.datastructures`` themselves; no app, routing or server is loaded.)
SERVER_STACK = (
    "uvicorn",
    "apcore",
    "a2a.server",
    "sse_starlette",
    "starlette.applications",
    "starlette.routing",
    "apcore_a2a.server",
)


def _loaded_after(statement: str) -> list[str]:
    code = (
        f"import json, sys\n{statement}\n"
        f"stack = {SERVER_STACK!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if any(m == s or m.startswith(s + '.') for s in stack))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return list(json.loads(out))


def test_client_package_loads_no_server_stack() -> None:
    assert _loaded_after("import apcore_a2a.client") == []


def test_public_names_load_no_server_stack() -> None:
    statement = (
        "from apcore_a2a.client import A2AClient, AgentCardFetcher, TaskNotFoundError\n"
        "A2AClient('http://agent.local')\n"
        "A2AClient('http://agent.local', verify_card=True, allow_other_origins=True)"
    )
    assert _loaded_after(statement) == []


def test_client_cli_module_loads_no_server_stack() -> None:
    assert _loaded_after("import apcore_a2a.cli.client") == []


def test_the_check_itself_sees_the_server_stack() -> None:
    # Guard against a vacuous check: importing the server does show up.
    assert "a2a.server" in _loaded_after("import a2a.server")
