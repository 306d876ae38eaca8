"""Outside ``apcore_a2a/upstream/`` no module reads or writes a private name of a2a-sdk,
Starlette, uvicorn, sse-starlette, aiosqlite or apcore (issues 30, 42).

Private names are those the six packages define with one leading underscore (attributes
they assign, functions, classes, module variables). Checked statically on every module:

* ``obj._name``, or ``getattr``/``hasattr``/``setattr``/``delattr(obj, "_name")``, where
  ``_name`` is such a name and not an attribute of ours: on ``self``/``cls`` the enclosing
  class of ours must define it, on any other object some class of ours must (a name both
  define is taken as ours: the check errs on the quiet side);
* ``from pkg.mod import _name``, or a module path with a private segment.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "apcore_a2a"
SEAM = PACKAGE / "upstream"
UPSTREAM = ("a2a", "starlette", "uvicorn", "sse_starlette", "aiosqlite", "apcore")
#: the builtins that name an attribute by a string
_BY_NAME = ("getattr", "hasattr", "setattr", "delattr")
_PRIVATE = re.compile(r"^_[A-Za-z0-9]\w*$")

#: (module path relative to apcore_a2a, name) found outside the seam today.
ALLOWED: set[tuple[str, str]] = set()


def _private(name: str) -> bool:
    return bool(_PRIVATE.match(name)) and not name.endswith("__")


def _defined(tree: ast.AST) -> Iterator[str]:
    """Names a module defines: assigned attributes, functions, classes, variables, slots."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            yield node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value  # __slots__ entries, setattr names


@functools.cache
def _upstream_names() -> frozenset[str]:
    names: set[str] = set()
    for package in UPSTREAM:
        root = Path(str(importlib.import_module(package).__file__)).parent
        for path in root.rglob("*.py"):
            if not path.name.endswith("_pb2.py"):  # generated: no hand-written privates
                names.update(n for n in _defined(ast.parse(path.read_bytes())) if _private(n))
    return frozenset(names)


def _ours() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_bytes()) for p in sorted(PACKAGE.rglob("*.py"))}


def _attributes(tree: ast.AST) -> Iterator[str]:
    """Attribute names our classes define: on ``self``/``cls``, in the body, in slots."""
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield node.name
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        yield target.id
                        if target.id == "__slots__" and node.value is not None:
                            yield from (
                                c.value
                                for c in ast.walk(node.value)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            )
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                yield node.attr


def offenders(trees: dict[Path, ast.Module]) -> list[tuple[str, str]]:
    """``(module, name)`` of every private upstream name used outside the seam."""
    upstream = _upstream_names()
    ours = {n for tree in trees.values() for n in _attributes(tree) if _private(n)}
    found: list[tuple[str, str]] = []
    for path, tree in trees.items():
        if SEAM in path.parents:
            continue
        where = str(path.relative_to(PACKAGE))
        found += [(where, name) for name in _private_uses(tree, upstream, ours)]
    return sorted(set(found))


def _upstream_imports(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Local name -> (module, name) of the classes and such imported from the packages."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UPSTREAM:
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module or "", alias.name)
    return names


@functools.cache
def _privates_of(module: str, name: str) -> frozenset[str]:
    """The private names an upstream class and its upstream bases define."""
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return frozenset()
    found: set[str] = set()
    for base in getattr(cls, "__mro__", ()):
        if base.__module__.split(".")[0] in UPSTREAM:
            try:
                source = textwrap.dedent(inspect.getsource(base))
            except (OSError, TypeError):
                continue
            found.update(n for n in _defined(ast.parse(source)) if _private(n))
    return frozenset(found)


def _named_attribute(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``(receiver, name)`` of ``obj.name`` or ``getattr(obj, "name")`` (and its kin)."""
    if isinstance(node, ast.Attribute):
        return node.value, node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _BY_NAME
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[0], node.args[1].value
    return None


def _private_uses(tree: ast.Module, upstream: frozenset[str], ours: set[str]) -> Iterator[str]:
    imported = _upstream_imports(tree)
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}

    def defined(cls: ast.ClassDef, seen: frozenset[str] = frozenset()) -> set[str]:
        """What *cls* and its bases of this module define (a mixin of ours included)."""
        names = set(_attributes(cls))
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
                names |= defined(classes[base.id], seen | {cls.name})
        return names

    def visit(node: ast.AST, own: set[str] | None) -> Iterator[str]:
        if isinstance(node, ast.ClassDef):
            # A subclass of an upstream class that sets a private name of its base on
            # itself sets (or overrides) the base's: not a name of ours.
            inherited = [
                _privates_of(*imported[base.id])
                for base in node.bases
                if isinstance(base, ast.Name) and base.id in imported
            ]
            own = defined(node).difference(*inherited)
        named = _named_attribute(node)
        if named is not None and named[1] in upstream:
            receiver, attr = named
            on_self = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
            if (on_self and attr not in (own or set())) or (not on_self and attr not in ours):
                yield attr
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UPSTREAM:
            segments = (node.module or "").split(".")
            yield from (s for s in segments if _private(s))
            yield from (a.name for a in node.names if _private(a.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                segments = alias.name.split(".")
                if segments[0] in UPSTREAM:
                    yield from (s for s in segments if _private(s))
        for child in ast.iter_child_nodes(node):
            yield from visit(child, own)

    yield from visit(tree, None)


@functools.cache
def _our_offenders() -> frozenset[tuple[str, str]]:
    """What :func:`offenders` finds in our modules (both tests below read it)."""
    return frozenset(offenders(_ours()))


def test_no_private_upstream_name_outside_the_seam() -> None:
    found = sorted(item for item in _our_offenders() if item not in ALLOWED)
    assert not found, (
        "private names of a2a-sdk/Starlette/uvicorn/sse-starlette/aiosqlite/apcore: " + repr(found)
    )


def test_the_allow_list_is_not_stale() -> None:
    assert set(ALLOWED) <= _our_offenders()


def test_the_checker_sees_a_private_access() -> None:
    source = """
from a2a.server.request_handlers.grpc_handler import _ERROR_CODE_MAP
from a2a.server.request_handlers import DefaultRequestHandler

class Handler(DefaultRequestHandler):
    def __init__(self):
        super().__init__()
        self._mine = 1
        self._versioned_store = None

def f(request, executor):
    request._body = b""
    return getattr(executor, "_approval_handler", None)
"""
    tree = ast.parse(source)
    found = offenders({PACKAGE / "server" / "example.py": tree})
    assert found == [
        ("server/example.py", "_ERROR_CODE_MAP"),
        ("server/example.py", "_approval_handler"),
        ("server/example.py", "_body"),
        ("server/example.py", "_versioned_store"),
    ]  # not _mine: the handler's own


def test_the_seam_readme_lists_every_correction_with_its_tripwire() -> None:
    """``upstream/README.md`` is the one table of corrections (docs/architecture.md points
    to it): a row per file, naming the test that fails the day upstream changes."""
    readme = (SEAM / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line for line in readme.splitlines()
            if line.startswith("| `")}  # fmt: skip
    files = {p.name for p in SEAM.glob("*.py") if p.name != "__init__.py"}
    assert sorted(files - rows.keys()) == [], "corrections without a README row"
    assert sorted(rows.keys() - files) == [], "README rows without a file"
    untested = [name for name in files if "test_" not in rows[name] and "tests/" not in rows[name]]
    assert untested == [], "README rows that name no tripwire test"
