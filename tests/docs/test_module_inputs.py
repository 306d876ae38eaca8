"""The documented modules read their optional inputs the way apcore passes them.

apcore hands ``execute`` the caller's input as sent (validated, defaults not filled in):
a field the caller leaves out is absent. Every module class a page of the docs defines
is run here through apcore's own ``Executor`` with its required fields only; none may
fail for a field it has a default for (``KeyError``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest
from apcore import Executor, Registry

from tests._support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_SAMPLES = {"string": "x", "integer": 2, "number": 2.0, "boolean": True}


def _module_blocks() -> list[tuple[str, str, str]]:
    """``(page, class name, block)`` of every block defining a class with ``execute`` and
    an ``input_schema``."""
    found = []
    for page in PAGES:
        for block in _BLOCK.findall(page.read_text()):
            try:
                body = ast.parse(block).body
            except SyntaxError:  # a signature shown, not code (marked skip on its page)
                continue
            for node in body:
                if isinstance(node, ast.ClassDef):
                    names = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                    source = ast.get_source_segment(block, node) or ""
                    if "execute" in names and "input_schema" in source:
                        found.append((page.name, node.name, block))
    return found


def _required_only(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    return {
        name: _SAMPLES.get(properties[name].get("type"), "x")
        for name in schema.get("required") or []
    }


def _definitions(block: str) -> str:
    """The block's imports and classes only (what it serves or runs is not the subject)."""
    tree = ast.parse(block)
    kept = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom | ast.ClassDef)]
    return "\n".join(ast.get_source_segment(block, n) or "" for n in kept)


MODULES = _module_blocks()


def test_the_pages_define_modules_with_defaults() -> None:
    # Guard against a vacuous run: the modules of lifecycle.md's "Message or task" are here.
    assert {"Lookup", "Digest"} <= {name for _, name, _ in MODULES}


@pytest.mark.parametrize(
    ("page", "name", "block"), MODULES, ids=[f"{p}:{n}" for p, n, _ in MODULES]
)
async def test_a_module_runs_with_its_required_inputs_only(
    page: str, name: str, block: str
) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(_definitions(block), page, "exec"), namespace)  # the documented code
    module = namespace[name]()
    registry = Registry()
    registry.register("docs.module", module)
    inputs = _required_only(module.input_schema.model_json_schema())
    failure: BaseException | None = None
    try:
        await Executor(registry).call_async("docs.module", inputs)
    except Exception as exc:  # asking for input or a credential is a module's right
        failure = exc
    chain = [failure, failure and failure.__cause__, failure and failure.__context__]
    assert not any(isinstance(e, KeyError) for e in chain), f"{page}: {name}: {failure!r}"
    assert "KeyError" not in repr(failure), f"{page}: {name}: {failure!r}"
