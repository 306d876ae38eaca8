"""The package's import graph: no cycles, and each room imports only the rooms below it.

Every ``import`` statement counts, including those inside functions and under
``TYPE_CHECKING``: a lazy import still ties two modules together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "apcore_a2a"
#: An alarm for a module that has grown a second concept, not a size to split at: a
#: concept (the settings object, one field per setting) is as long as it is.
MAX_LINES = 450

#: top-level modules that import no room, so every room may import them: _text (a message
#: of several lines made one, a caller's value quoted back short, a URL without its
#: credentials), _json (how the JSON bindings read a body, and refuse what they cannot),
#: _history (the message of a task's history a messageId names), _addresses (what an IP
#: address finally delivers to: push's SSRF policy and the JWKS fetch), _egress (which
#: transport a request to a checked address goes by: push deliveries, the JWKS fetch, the
#: client), _proxies (which proxy the environment names for a URL, by httpx's rule)
LEAVES = {"_text", "_json", "_history", "_addresses", "_egress", "_proxies", "_lazy"}
#: room -> rooms (and top-level modules) it may import; a room may always import itself.
ALLOWED: dict[str, set[str]] = {
    "adapters": set(),
    "execution": {
        *("adapters", "settings", "errors", "approval", "classify", "_logging", "upstream"),
        "edge",
    },
    "storage": {"settings", "errors", "upstream", "edge"},
    "auth": {"adapters", "execution", "settings", "errors", "classify", "upstream", "edge"},
    "push": {"adapters", "settings", "errors", "storage", "classify", "upstream", "edge"},
    "ops": {
        *("execution", "storage", "streams", "settings", "errors", "classify", "edge"),
        *("_version", "_logging", "upstream"),
    },
    "explorer": {"_version"},
    # the client may import the seam's corrections of the SDK's client side, and only those
    # (CLIENT_SEAM): the rest of the seam is the server's
    "client": {"_version", "upstream"},
    # _config_values: how the file's YAML nodes become values (config.py's helper)
    # _settings_sources: the one rule for empty values, the file's as the flags' (empty_problem)
    # adapters: a message of several lines made one (adapters/errors.py: message_line)
    "config": {
        *("settings", "execution", "approval", "adapters", "_config_values"),
        "_settings_sources",
    },
    # the agent's own keys (card signing); the key class is push's SigningKey for now
    "keys": {"adapters", "settings", "push"},
    # the seam: corrections of a2a-sdk, Starlette, uvicorn, sse-starlette (one per file)
    "upstream": {"errors", "classify", "shape"},
    # the answer side: scrubbing, SSE event ids and replay, cancel-on-drop
    "streams": {"adapters", "errors", "classify", "upstream", "edge"},
    # the call record (edge/call.py): built by the edge, read by every layer after it;
    # a refusal's answer on HTTP (edge/refusal.py)
    "edge": {"errors", "classify", "upstream"},
    "server": {
        "upstream",
        "streams",
        *("adapters", "execution", "storage", "auth", "push", "ops", "explorer", "config"),
        *("keys", "edge"),
        *("settings", "errors", "classify", "shape", "approval", "_version", "_logging"),
        "_settings_refusals",
    },
}


#: the seam's corrections of a2a-sdk's client transports: the only seam modules the client
#: imports, and they import nothing of ours (tests/client/test_imports.py: no server stack)
CLIENT_SEAM = {
    "apcore_a2a.upstream.utc_timestamps",
    "apcore_a2a.upstream.proxy_targets",
    "apcore_a2a.upstream.grpc_proxies",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target in known:
                yield target


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set(_imports(name, path, known))
        # Importing a.b.c runs a/__init__ and a/b/__init__ first, except the packages
        # that contain the importing module: those are already being imported.
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for target in list(edges):
            parts = target.split(".")
            edges.update(".".join(parts[:i]) for i in range(2, len(parts)))
        graph[name] = edges - own - {name, "apcore_a2a"}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_rooms_import_only_what_they_may() -> None:
    wrong = []
    for module, targets in sorted(_graph().items()):
        room = _room(module)
        if room not in ALLOWED:
            continue
        for target in sorted(targets):
            other = _room(target)
            if other != room and other not in ALLOWED[room] | LEAVES:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_the_client_imports_only_the_client_side_of_the_seam() -> None:
    graph = _graph()
    seam = {"apcore_a2a.upstream", *CLIENT_SEAM}
    wrong = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if _room(module) == "client"
        for target in sorted(targets)
        if _room(target) == "upstream" and target not in seam
    ]
    assert wrong == []
    of_ours = {module: sorted(graph[module] - seam) for module in CLIENT_SEAM}
    assert of_ours == {module: [] for module in CLIENT_SEAM}


def test_no_module_is_too_long() -> None:
    long = {
        _module_name(p): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_checker_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


# -- the call travels in its record, not under string keys (issue 42) ---------------------

#: the record's own module and the edge's request record (``classify``) keep their keys
RECORD_MODULES = {"apcore_a2a/edge/call.py", "apcore_a2a/classify.py"}
#: keys a2a-sdk, Starlette and ASGI define (their own state, not ours)
FOREIGN_KEYS = {"headers", "auth", "user", "method", "request_id", "type", "path", "client",
                "server", "root_path", "scheme", "extensions", "path_params", "query_string",
                "http_version", "app", "router", "endpoint", "route", "state"}  # fmt: skip


def _holder(node: ast.expr) -> bool:
    """``<x>.state`` / ``state`` (the SDK's call state) or ``scope`` / ``<x>.scope`` (ASGI)."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("state", "scope")
    return isinstance(node, ast.Name) and node.id in ("state", "scope")


def _key_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return node.id if isinstance(node, ast.Name) else None


def _state_dicts(tree: ast.AST) -> Iterator[ast.Dict]:
    """Dicts that become call state: ``{**x.state, ...}`` and ``state={...}``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(
            k is None and _holder(v) for k, v in zip(node.keys, node.values, strict=True)
        ):
            yield node
        elif (
            isinstance(node, ast.keyword)
            and node.arg == "state"
            and isinstance(node.value, ast.Dict)
        ):
            yield node.value


def call_state_keys(tree: ast.AST) -> Iterator[str]:
    """Keys a module reads or writes the call state with, and the key constants of call
    state it defines (``*_STATE_KEY``, ``*_SCOPE_KEY``)."""
    for node in ast.walk(tree):
        key: str | None = None
        if isinstance(node, ast.Subscript) and _holder(node.value):
            key = _key_name(node.slice)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and _holder(node.func.value)
            and node.args
        ):
            key = _key_name(node.args[0])
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            key = name if name.endswith(("_STATE_KEY", "_SCOPE_KEY")) else None
        if key is not None and key not in FOREIGN_KEYS:
            yield key
    for found in _state_dicts(tree):
        yield from (k for k in map(_key_name, filter(None, found.keys)) if k)


def test_call_state_travels_in_the_record() -> None:
    """No module outside the record's reads or writes the call state (``ServerCallContext
    .state``, the ASGI scope) through a string key of its own."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(PACKAGE.parent))
        if relative in RECORD_MODULES:
            continue
        for key in call_state_keys(ast.parse(path.read_text(encoding="utf-8"))):
            found.add((relative, key))
    assert found == set()


def test_the_call_state_rule_sees_a_string_key() -> None:
    code = (
        'context.state["mine"] = 1\nscope.get(MY_SCOPE_KEY)\nX_STATE_KEY = "x"\n'
        "f(state={Y: 1})\nz = {**context.state, W: 2}\n"
    )
    keys = sorted(call_state_keys(ast.parse(code)))
    assert keys == ["MY_SCOPE_KEY", "W", "X_STATE_KEY", "Y", "mine"]


#: the modules that still declare a ``ContextVar`` (issue 42: call state travels in the
#: record, ``edge/call.py``; a module joining this list adds a channel beside it). Each is
#: read where neither a call record nor a scope is at hand (docs/architecture.md):
CONTEXT_VAR_MODULES = {
    # the fields of the task being executed, for our log formatters (a LogRecord is all
    # they get, from any logger: apcore's, the SDK's, a module's own)
    "apcore_a2a/_logging.py",
    # the request record for a log filter telling our requests from another a2a-sdk app's,
    # and for the card document and push issuer callables the SDK calls without arguments
    "apcore_a2a/classify.py",
    # the public ``apcore_a2a.auth.current_identity()``, which takes no argument
    "apcore_a2a/auth/middleware.py",
    # the client's call whose answers httpx's response hook reads (the client package)
    "apcore_a2a/client/_wire.py",
    # the run whose module apcore's execute step is handed (apcore's pipeline calls it)
    "apcore_a2a/execution/runs.py",
    # the agent's root path before its own mounts extend it, for the 404/405 handlers:
    # Starlette hands them the scope its mounts rewrote, and an unrouted request has no record
    "apcore_a2a/server/unrouted.py",
    # the bytes read for a request on a kept connection, counted by the network backend
    # httpcore's connections read through (no call record reaches a socket read)
    "apcore_a2a/upstream/received_bytes.py",
}


def test_context_vars_are_only_the_known_ones() -> None:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ContextVar":
                found.add(str(path.relative_to(PACKAGE.parent)))
    assert found == CONTEXT_VAR_MODULES
