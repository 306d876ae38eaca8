"""No test asserts how long something took: timings belong in ``benchmarks/``.

A suite that passes on a quiet machine and fails on a busy one tests the machine. This
file reads every test module under ``tests/`` and fails on an assertion (``assert``, or
``if ...: raise``/``pytest.fail``) that bounds a duration measured with the clock:

* a duration (the difference of two clock readings, and whatever is computed from it:
  lists of them, their maximum, a percentile) bounded from above;
* a clock reading compared with another clock reading (``time.monotonic() < deadline``)
  outside a loop: after the fact that is a duration bounded from above.

What stays allowed, because a busy machine cannot make it fail:

* the deadline of a loop that waits for a condition (``while ...: assert
  time.monotonic() < deadline``): a hang guard, there so that a test that would wait
  forever fails instead; its bound is generous, not a speed target;
* a duration bounded from below (a retry came at least 1 s after the try it repeats: the
  machine can only make waits longer);
* a clock reading compared with something that is not one (a token's ``iat`` against
  ``time.time()``): a timestamp, not a duration.

Clock readings are calls of ``time.monotonic``/``perf_counter``/``time`` (and their
``_ns`` forms) and an event loop's ``time()``; the check follows them through names,
containers, attributes and the return values of a module's own functions.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

_CLOCKS = {"monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns", "time", "time_ns"}
_LOOP_GETTERS = {"get_running_loop", "get_event_loop"}
#: a module that names no clock cannot read one
_CLOCK_WORDS = re.compile(r"\b(?:monotonic|perf_counter|time)\b")

#: taint levels: a clock reading (a point in time), a duration (readings subtracted)
NONE, READING, DURATION = 0, 1, 2
_UPPER = (ast.Lt, ast.LtE)
#: functions whose result says how many, not how long
_COUNTS = {"len", "isinstance", "type", "bool"}
_LOWER = (ast.Gt, ast.GtE)


def _called_name(node: ast.AST) -> str:
    """``f`` of ``f()`` and of ``x.f()``; empty for anything else."""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _is_clock_call(node: ast.AST) -> bool:
    name = _called_name(node)
    if not name:
        return False
    assert isinstance(node, ast.Call)
    func = node.func
    if isinstance(func, ast.Name):  # from time import monotonic
        return name in _CLOCKS - {"time"}
    owner = getattr(func, "value", None)
    if isinstance(owner, ast.Name) and owner.id == "time":
        return name in _CLOCKS
    # an event loop's clock: loop.time(), asyncio.get_running_loop().time()
    if name != "time":
        return False
    return (isinstance(owner, ast.Name) and owner.id.endswith("loop")) or (
        _called_name(owner) in _LOOP_GETTERS if owner is not None else False
    )


@dataclass
class _Scope:
    names: dict[str, int] = field(default_factory=dict)


@dataclass
class _Module:
    """Taint of one module: per function scope, plus attributes and function results."""

    tree: ast.Module
    scopes: dict[ast.AST, _Scope] = field(default_factory=dict)
    attrs: dict[str, int] = field(default_factory=dict)
    returns: dict[str, int] = field(default_factory=dict)
    #: class name -> its annotated fields in order (dataclasses, named tuples)
    fields: dict[str, list[str]] = field(default_factory=dict)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)


def _top_functions(tree: ast.Module) -> Iterator[ast.AST]:
    """Every top-level function and method: a scope (nested functions share it)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from (
                item
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            )


def _level(module: _Module, scope: _Scope, node: ast.AST | None) -> int:
    """How clock-derived the value of expression *node* is."""
    if node is None:
        return NONE
    if _is_clock_call(node):
        return READING
    if isinstance(node, ast.Name):
        return scope.names.get(node.id, module.scopes[module.tree].names.get(node.id, NONE))
    if isinstance(node, ast.Attribute) and node.attr in module.attrs:
        return max(module.attrs[node.attr], _level(module, scope, node.value))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        left, right = _level(module, scope, node.left), _level(module, scope, node.right)
        if left == READING and right == READING:
            return DURATION
        return max(left, right)
    if isinstance(node, ast.Call):
        func = node.func
        name = _called_name(node)
        if name in _COUNTS:
            return NONE
        own = module.returns.get(name, NONE)
        args = [*node.args, *(k.value for k in node.keywords)]
        # a method of a clock-derived value (x.copy()) is as derived as the value
        receiver = _level(module, scope, func.value) if isinstance(func, ast.Attribute) else 0
        return max([own, receiver, *(_level(module, scope, a) for a in args)])
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return _level(module, scope, node.elt)
    if isinstance(node, ast.DictComp):
        return max(_level(module, scope, node.key), _level(module, scope, node.value))
    return max((_level(module, scope, child) for child in ast.iter_child_nodes(node)), default=NONE)


def _bind(scope: _Scope, target: ast.AST, level: int) -> bool:
    """Give every name in *target* at least *level*; True if anything rose."""
    rose = False
    for node in ast.walk(target):
        if isinstance(node, ast.Name) and level > scope.names.get(node.id, NONE):
            scope.names[node.id] = level
            rose = True
    return rose


def _propagate(module: _Module, nodes: list[ast.AST], scope: _Scope) -> bool:
    rose = False
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            level = _level(module, scope, node.value)
            if isinstance(node, ast.AugAssign):
                level = max(level, _level(module, scope, node.target))
            for target in targets:
                if isinstance(target, ast.Attribute):
                    if level > module.attrs.get(target.attr, NONE):
                        module.attrs[target.attr] = level
                        rose = True
                else:
                    rose |= _bind(scope, target, level)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            rose |= _bind(scope, node.target, _level(module, scope, node.iter))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    level = _level(module, scope, item.context_expr)
                    rose |= _bind(scope, item.optional_vars, level)
        elif isinstance(node, ast.Call):
            func = node.func
            # xs.append(reading) / xs.extend(...) / xs.add(...): the container holds it
            if isinstance(func, ast.Attribute) and func.attr in {"append", "extend", "add"}:
                level = max((_level(module, scope, a) for a in node.args), default=NONE)
                rose |= _bind(scope, func.value, level)
            # Cls(reading) / Cls(at=reading): the field holds it
            name = func.id if isinstance(func, ast.Name) else ""
            for position, arg in enumerate(node.args):
                names = module.fields.get(name, [])
                level = _level(module, scope, arg)
                if position < len(names) and level > module.attrs.get(names[position], NONE):
                    module.attrs[names[position]] = level
                    rose = True
            for keyword in node.keywords:
                level = _level(module, scope, keyword.value)
                if keyword.arg and level > module.attrs.get(keyword.arg, NONE):
                    module.attrs[keyword.arg] = level
                    rose = True
        elif isinstance(node, ast.Return):
            owner = _owner_name(module, node)
            level = _level(module, scope, node.value)
            if owner and level > module.returns.get(owner, NONE):
                module.returns[owner] = level
                rose = True
    return rose


def _owner_name(module: _Module, node: ast.AST) -> str:
    parents = module.parents
    current: ast.AST | None = node
    while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
        current = parents.get(current)
    return current.name if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)) else ""


def _analyse(tree: ast.Module) -> _Module:
    module = _Module(tree)
    module.parents = {
        child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            module.fields[node.name] = [
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
    module.scopes[tree] = _Scope()
    work: list[tuple[list[ast.AST], _Scope]] = []
    for function in _top_functions(tree):
        module.scopes[function] = _Scope()
        work.append((list(ast.walk(function)), module.scopes[function]))
    top = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    statements = [s for s in tree.body if not isinstance(s, top)]
    work.append(([n for s in statements for n in ast.walk(s)], module.scopes[tree]))
    # to a fixed point: a name can be tainted by a statement further down (loops)
    for _ in range(20):
        rose = False
        for nodes, scope in work:
            rose |= _propagate(module, nodes, scope)
        if not rose:
            break
    return module


def _scope_of(module: _Module, node: ast.AST) -> tuple[_Scope, bool]:
    """The scope *node* is in, and whether a loop of that scope encloses it."""
    parents = module.parents
    in_loop = False
    current = parents.get(node)
    while current is not None:
        if isinstance(current, (ast.While, ast.For, ast.AsyncFor)):
            in_loop = True
        if current in module.scopes:
            return module.scopes[current], in_loop
        current = parents.get(current)
    return module.scopes[module.tree], in_loop


def _raises(body: list[ast.stmt]) -> bool:
    for statement in body:
        if isinstance(statement, ast.Raise):
            return True
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = statement.value.func
            if isinstance(func, ast.Attribute) and func.attr == "fail":
                return True
    return False


def _checks(tree: ast.Module) -> Iterator[tuple[ast.expr, bool]]:
    """(condition, True if it must hold) of every assertion in *tree*."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            yield node.test, True
        elif isinstance(node, ast.If) and _raises(node.body):
            yield node.test, False


def violations(source: str) -> list[tuple[int, str]]:
    """(line, text) of every elapsed-time assertion in the module *source*."""
    if not _CLOCK_WORDS.search(source):
        return []
    tree = ast.parse(source)
    module = _analyse(tree)
    found: list[tuple[int, str]] = []
    for condition, must_hold in _checks(tree):
        scope, in_loop = _scope_of(module, condition)
        for compare in (n for n in ast.walk(condition) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            for op, left, right in zip(compare.ops, operands, operands[1:], strict=False):
                if not isinstance(op, _UPPER + _LOWER):
                    continue
                # orient: small <= big, as the assertion demands it
                small, big = (left, right) if isinstance(op, _UPPER) == must_hold else (right, left)
                lo, hi = _level(module, scope, small), _level(module, scope, big)
                duration_capped = lo == DURATION
                readings_compared = lo >= READING and hi >= READING and not in_loop
                if duration_capped or readings_compared:
                    found.append((compare.lineno, ast.unparse(compare)))
    return sorted(set(found))


def _test_modules() -> Iterator[Path]:
    for path in sorted(TESTS.rglob("*.py")):
        if ".venv" not in path.parts and "node_modules" not in path.parts:
            yield path


def test_no_test_asserts_elapsed_time() -> None:
    found = [
        f"{path.relative_to(TESTS.parent)}:{line}: {text}"
        for path in _test_modules()
        for line, text in violations(path.read_text(encoding="utf-8"))
    ]
    assert not found, "elapsed-time assertions (move the figure to benchmarks/):\n" + "\n".join(
        found
    )


# The check itself: what it must find, and what it must leave alone.
CAUGHT = {
    "elapsed": """
        started = time.monotonic()
        do()
        assert time.monotonic() - started < 30
    """,
    "named": """
        t0 = time.perf_counter()
        do()
        elapsed = time.perf_counter() - t0
        assert elapsed <= 0.5, elapsed
    """,
    "percentile": """
        async def probe():
            latencies = []
            for _ in range(100):
                started = time.perf_counter()
                await get()
                latencies.append(time.perf_counter() - started)
            latencies.sort()
            return latencies[int(len(latencies) * 0.99) - 1]

        async def test_it():
            tries = [await probe() for _ in range(3)]
            assert min(tries) < 0.1
    """,
    "gaps": """
        def follow():
            arrivals = []
            for part in stream():
                arrivals.append((part, asyncio.get_running_loop().time()))
            return arrivals

        def test_it():
            arrivals = follow()
            gaps = [b - a for (_, a), (_, b) in itertools.pairwise(arrivals)]
            assert max(gaps) < 2.5
    """,
    "attribute": """
        @dataclass
        class Hit:
            path: str
            at: float

        def test_it(log):
            log.append(Hit("/x", time.monotonic()))
            assert log[1].at - log[0].at < 1.0
    """,
    "raise": """
        started = time.monotonic()
        do()
        if time.monotonic() - started > 2:
            pytest.fail("too slow")
    """,
    "deadline after the fact": """
        deadline = time.monotonic() + 5
        do()
        assert time.monotonic() < deadline
    """,
}

ALLOWED = {
    "hang guard": """
        deadline = time.monotonic() + 30
        while not ready():
            assert time.monotonic() < deadline, "never got ready"
            time.sleep(0.05)
    """,
    "time left": """
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("condition not met")
    """,
    "lower bound": """
        gap = hits[1].at - hits[0].at
        started = time.monotonic()
        assert gap >= 0.9
        assert time.monotonic() - started >= DELAY
    """,
    "timestamp": """
        before = int(time.time())
        claims = sign()
        assert before <= claims["iat"] <= int(time.time())
        assert parsed.timestamp() <= time.time()
    """,
    "counts and bytes": """
        assert len(events) < 10 and written <= 3 * size
        await asyncio.wait_for(done.wait(), 30)
    """,
}


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_the_check_finds(name: str) -> None:
    assert violations(textwrap.dedent(CAUGHT[name])), name


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_the_check_allows(name: str) -> None:
    assert violations(textwrap.dedent(ALLOWED[name])) == [], name
