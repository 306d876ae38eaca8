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


#: What only calling an agent needs: ``serve`` must not pay for it.
CLIENT_STACK = ("apcore_a2a.client", "httpx_sse", "asgi_lifespan")


def _loaded_of(stack: tuple[str, ...], statement: str) -> list[str]:
    code = (
        f"import json, sys\n{statement}\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        f"if any(m == s or m.startswith(s + '.') for s in {stack!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return list(json.loads(out))


def test_the_commands_parser_loads_neither_stack() -> None:
    # `apcore-a2a --help`, and every command before it runs: each loads what it needs then.
    parsed = "from apcore_a2a.cli import build_parser\nbuild_parser()"
    assert _loaded_of(SERVER_STACK + CLIENT_STACK + ("apcore_a2a.config",), parsed) == []


def test_a_client_command_loads_no_server_stack() -> None:
    parsed = (
        "from apcore_a2a.cli import build_parser\n"
        "from apcore_a2a.cli.client import _client\n"
        "_client(build_parser().parse_args(['card', 'http://agent.local']), 5.0)"
    )
    assert _loaded_of(SERVER_STACK, parsed) == []


def test_serve_loads_no_client_stack() -> None:
    served = (
        "from apcore_a2a.cli import build_parser\n"
        "from apcore_a2a.server.factory import A2AServerFactory\n"
        "build_parser().parse_args(['serve'])\n"
        "A2AServerFactory(None, standalone=True, extensions_dirs=['examples/extensions'])"
        ".create()"
    )
    assert _loaded_of(CLIENT_STACK, served) == []
