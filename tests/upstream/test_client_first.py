"""The SDK behaviour ``apcore_a2a/upstream/client_first.py`` answers: in a2a-sdk 1.3,
importing ``a2a.server.routes`` (or one of the 0.3 modules it imports) before
``a2a.client`` is a circular import that ``a2a.client.client_factory`` swallows: its
``ClientFactory`` is left without the 0.3 gRPC transport for the rest of the process and
sends a 0.3 gRPC interface's calls to the 1.0 service. A failure of the first test means
the SDK imports cleanly in any order: delete that file and the imports of it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests._support import ROOT, free_port

SCRIPT = Path(__file__).with_name("_sdk_grpc03_client.py")
V03 = ["/a2a.v1.A2AService/SendMessage"]
V10 = ["/lf.a2a.v1.A2AService/SendMessage"]

#: a2a-sdk modules that, imported before ``a2a.client``, leave it so (found by importing
#: each a2a module apcore_a2a imports first in a fresh interpreter)
TRIGGERS = (
    "a2a.server.routes",
    "a2a.compat.v0_3.context_builders",
    "a2a.compat.v0_3.extension_headers",
    "a2a.compat.v0_3.grpc_handler",
    "a2a.compat.v0_3.grpc_transport",
    "a2a.compat.v0_3.jsonrpc_adapter",
    "a2a.compat.v0_3.rest_adapter",
    "a2a.compat.v0_3.rest_handler",
)
FIRST = "apcore_a2a.upstream.client_first"


def _called(statement: str) -> list[str]:
    """The gRPC methods a2a-sdk's client called for a 0.3 interface, in a fresh
    interpreter (the subject is what a process imported: it is not forked)."""
    run = [sys.executable, str(SCRIPT), str(free_port()), statement]
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-800:]
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_sdk_server_routes_first_send_the_sdk_clients_0_3_grpc_calls_to_1_0() -> None:
    assert _called("pass") == V03
    assert _called("import a2a.server.routes") == V10


def test_our_server_imported_first_leaves_the_sdk_client_its_0_3_grpc_transport() -> None:
    # The public server entry, and the 0.3 gRPC servicer's module on its own.
    assert _called("from apcore_a2a import A2AServerFactory") == V03
    assert _called("import apcore_a2a.upstream.grpc03_names") == V03


def _runtime_imports(body: list[ast.stmt]) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in *body*, in source order, nested ones too
    (those under ``if TYPE_CHECKING:`` left out: they never run)."""
    for node in body:
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            yield from _runtime_imports(node.orelse)
        else:
            for field in ("body", "handlers", "orelse", "finalbody"):
                for child in getattr(node, field, None) or ():
                    if isinstance(child, ast.ExceptHandler):
                        yield from _runtime_imports(child.body)
                    elif isinstance(child, ast.stmt):
                        yield from _runtime_imports([child])


def test_every_module_importing_a_trigger_imports_the_correction_first() -> None:
    """Statically, so that a module added later is held to it too: the correction (or
    a2a-sdk's client itself) comes before any trigger a module imports."""
    late = []
    for path in sorted((ROOT / "apcore_a2a").rglob("*.py")):
        first_seen = False
        for line, name in _runtime_imports(ast.parse(path.read_text()).body):
            if name == FIRST or name == "a2a.client" or name.startswith("a2a.client."):
                first_seen = True
            elif name.startswith(TRIGGERS) and not first_seen:
                late.append(f"{path.relative_to(ROOT)}:{line} {name}")
    assert late == []
