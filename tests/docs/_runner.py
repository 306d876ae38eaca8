"""Run the code blocks of README.md and docs/*.md as a reader would (with Sybil).

Collected by the repository's root ``conftest.py``; ``tests/docs/test_docs.py`` runs them in
a child pytest (``python -m pytest README.md docs``), so what the snippets change in their
process (a global tracer provider, logging, the environment) stays there.

What each fenced block does:

* ``python``: executed in one namespace per page, in page order, like a reader pasting the
  blocks into one session; top-level ``await`` runs on the page's event loop. ``registry``
  (the examples' modules) and ``executor`` are predefined, as the pages assume. ``serve()``
  and ``apcore-a2a serve`` build the agent they describe (settings, modules, stores, card)
  and return instead of blocking: serving itself is tested by tests/lifecycle and
  tests/config.
* ``bash``: run in one ``bash`` per page (variables and background jobs carry over to
  the next block), with ``set -eu``; a command that fails, or output carrying a
  JSON-RPC ``"error"``, fails the block. ``apcore-a2a serve ...`` lines are checked as
  above (built in-process from the recorded arguments, environment and folder); ``pip``
  (and ``python -m pip``) only says what it would install (the test environment has every
  extra); every other command runs for real.
* ``console``: a terminal transcript. Each ``$ `` line (with its ``\\`` continuations) runs
  in the page's bash as above, and what it prints must match the lines below it, where
  ``...`` stands for any text.
* ``json`` / ``yaml``: must parse.

Every page runs in a scratch folder holding ``extensions``, ``bindings`` and ``examples``
(links to the repository's examples) and a copy of ``examples/agent.yaml`` as
``agent.yaml``. The address ``127.0.0.1:8000`` is replaced by a running examples agent
(push on, insecure webhook URLs allowed for the walkthrough, gRPC on), gRPC's ``50051`` by
its gRPC port, and the walkthrough receiver's port ``9000`` by a free port. On
docs/auth.md the agent requires bearer JWTs signed with the page's demo secret.

A block that cannot run here is marked just above it with an HTML comment, which renders
as nothing: ``<!-- skip: next "why it cannot run" -->``. A reason is required
(tests/docs/test_docs.py checks it).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from tests._support import EXAMPLES, ROOT, cli_server, free_port

#: The demo secret docs/auth.md signs its test JWTs with.
AUTH_DEMO_SECRET = "dev-only-secret-of-at-least-32-bytes!"
#: Pages whose ``127.0.0.1:8000`` is the bearer-auth agent rather than the examples agent.
AUTH_PAGES = {"auth.md"}
BLOCK_TIMEOUT = 90.0
_DONE = "__DOCS_BLOCK_DONE__"
_JSONRPC_ERROR = re.compile(r'"error"\s*:\s*\{')

_PRELUDE = r"""
set -eu
apcore-a2a() {
  if [ "${1:-}" = serve ]; then
    local f="$DOCS_RECORD/$(date +%s%N)-$RANDOM"
    # `.args` last and whole (a rename): a serve run with `&` may still be writing
    # while the runner looks, and a record without its `.args` is not read yet.
    env -0 > "$f.env"; pwd > "$f.cwd"; printf '%s\0' "$@" > "$f.tmp"; mv "$f.tmp" "$f.args"
    return 0
  fi
  command apcore-a2a "$@"
}
pip() { echo "docs test: not running 'pip $*' (the test environment has every extra)"; }
python() {
  if [ "${1:-}" = -m ] && [ "${2:-}" = pip ]; then shift; pip "${@:2}"; return 0; fi
  command python "$@"
}
"""


class DocsEnv:
    """What the pages run against: a scratch folder and agents started on first use."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self.workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="docs-")))
        for name, target in {
            "examples": EXAMPLES,
            "extensions": EXAMPLES / "extensions",
            "bindings": EXAMPLES / "bindings",
        }.items():
            (self.workdir / name).symlink_to(target)
        shutil.copy(EXAMPLES / "agent.yaml", self.workdir / "agent.yaml")
        self.receiver_port = free_port()
        self.grpc_port = free_port()
        self._agents: dict[str, str] = {}

    def agent(self, kind: str) -> str:
        """``host:port`` of the examples agent (``kind="examples"``) or the bearer one."""
        if kind not in self._agents:
            args = ["--extensions-dir", "examples/extensions", "--bindings", "examples/bindings"]
            env: dict[str, str] = {}
            if kind == "examples":
                args += [
                    "--push-notifications",
                    "--push-allow-insecure-urls",
                    "--grpc-port",
                    str(self.grpc_port),
                    "--shutdown-timeout",
                    "5",
                ]
            else:
                args += ["--auth-type", "bearer", "--shutdown-timeout", "5"]
                env["JWT_KEY"] = AUTH_DEMO_SECRET
            base, _proc = self._stack.enter_context(cli_server(args, env=env, stop_timeout=30))
            self._agents[kind] = base.removeprefix("http://")
        return self._agents[kind]

    def substitute(self, source: str, page: str) -> str:
        """The block as it runs here: documented addresses replaced by the test agents'."""
        kind = "bearer" if page in AUTH_PAGES else "examples"
        if "127.0.0.1:8000" in source:
            source = source.replace("127.0.0.1:8000", self.agent(kind))
        if "50051" in source:
            self.agent("examples")
            source = source.replace("50051", str(self.grpc_port))
        source = source.replace("127.0.0.1:9000", f"127.0.0.1:{self.receiver_port}")
        return source.replace("--port 9000", f"--port {self.receiver_port}")


@pytest.fixture(scope="session")
def docs_env() -> Iterator[DocsEnv]:
    from apcore_a2a import _runner, _serve

    built: list[Any] = []

    def build_only(app: Any, settings: Any, sockets: Any = None) -> None:
        """``serve()`` / ``apcore-a2a serve`` without blocking: the app is built, kept."""
        built.append((app, settings))

    # serve() calls _serve.run_app; the CLI imports _runner.run_app when it runs.
    original = _runner.run_app
    _serve.run_app = _runner.run_app = build_only
    try:
        with contextlib.ExitStack() as stack:
            yield DocsEnv(stack)
    finally:
        _serve.run_app = _runner.run_app = original


# -- per page ------------------------------------------------------------------------------


def _setup(namespace: dict[str, Any]) -> None:
    from apcore import Executor, Registry

    registry = Registry(extensions_dir=str(EXAMPLES / "extensions"))
    registry.discover()
    namespace.update(registry=registry, executor=Executor(registry))
    namespace["__docs_cwd__"] = os.getcwd()


def _teardown(namespace: dict[str, Any]) -> None:
    loop: asyncio.AbstractEventLoop | None = namespace.pop("__docs_loop__", None)
    if loop is not None:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    shell: _Shell | None = namespace.pop("__docs_shell__", None)
    if shell is not None:
        shell.close()
    os.chdir(namespace.pop("__docs_cwd__", ROOT))


def _env_of(example: Example) -> DocsEnv:
    env = example.namespace.get("docs_env")
    if env is None:  # Sybil's setup runs before fixtures are filled in
        raise RuntimeError("docs_env fixture missing")
    if Path.cwd() != env.workdir:
        os.chdir(env.workdir)
    return env


def _page(example: Example) -> str:
    return Path(example.path).name


# -- python --------------------------------------------------------------------------------


def evaluate_python(example: Example) -> None:
    env = _env_of(example)
    source = env.substitute(str(example.parsed), _page(example))
    # Line numbers in tracebacks point into the page.
    padded = "\n" * (example.line) + source
    code = compile(
        padded, str(example.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    result = eval(code, example.namespace)  # the documented code is the test
    if inspect.iscoroutine(result):
        loop = example.namespace.get("__docs_loop__")
        if loop is None:
            loop = example.namespace["__docs_loop__"] = asyncio.new_event_loop()
        loop.run_until_complete(asyncio.wait_for(result, BLOCK_TIMEOUT))


# -- bash ----------------------------------------------------------------------------------


class _Shell:
    """One bash for a page: what a reader types into one terminal."""

    def __init__(self, cwd: Path) -> None:
        self.record = Path(tempfile.mkdtemp(prefix="docs-serve-"))
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "DOCS_RECORD": str(self.record),
        }
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-s"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            text=True,
            start_new_session=True,
        )
        self._send(_PRELUDE)

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def run(self, source: str) -> tuple[int, str]:
        """Run *source*; (exit status, everything it printed)."""
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as script:
            script.write(source)
        out = Path(script.name + ".out")
        self._send(f"source {script.name} > {out} 2>&1 </dev/null; echo {_DONE} $?")
        assert self.proc.stdout is not None
        deadline = time.monotonic() + BLOCK_TIMEOUT
        status: int | None = None
        while status is None:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                status = -1
                break
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if not ready:
                continue
            line = self.proc.stdout.readline()
            if not line:  # `set -e` ended the shell: a command failed
                status = self.proc.wait()
            elif line.startswith(_DONE):
                status = int(line.split()[1])
        text = out.read_text(errors="replace") if out.exists() else ""
        os.unlink(script.name)
        out.unlink(missing_ok=True)
        return status, text

    def recorded_serves(self) -> list[tuple[list[str], dict[str, str], str]]:
        """The ``apcore-a2a serve`` calls since the last look: (argv, environment, folder)."""
        calls = []
        for args_file in sorted(self.record.glob("*.args")):
            stem = args_file.with_suffix("")
            argv = args_file.read_text().split("\0")[:-1]
            env_items = Path(f"{stem}.env").read_text().split("\0")
            env = dict(item.split("=", 1) for item in env_items if "=" in item)
            cwd = Path(f"{stem}.cwd").read_text().strip()
            calls.append((argv, env, cwd))
            for suffix in (".args", ".env", ".cwd"):
                Path(f"{stem}{suffix}").unlink()
        return calls

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.alive:
            with contextlib.suppress(OSError):
                self._send("kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; exit 0")
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        # A page's background job that outlived its shell (a server slow to stop on SIGTERM)
        # must not outlive the test: the whole session's process group goes.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)
        shutil.rmtree(self.record, ignore_errors=True)


def check_serve(argv: list[str], env: dict[str, str], cwd: str) -> None:
    """Build what ``apcore-a2a ARGV`` would serve, in this process; fail as the CLI would."""
    from apcore_a2a import cli

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    err = io.StringIO()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(err):
            try:
                cli.main(argv)
                code: Any = 0
            except SystemExit as exc:
                code = exc.code
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
    if code not in (0, None):
        raise AssertionError(f"apcore-a2a {' '.join(argv)} exited {code}:\n{err.getvalue()}")


def evaluate_bash(example: Example) -> None:
    env = _env_of(example)
    source = env.substitute(str(example.parsed), _page(example))
    shell: _Shell | None = example.namespace.get("__docs_shell__")
    if shell is None or not shell.alive:
        shell = example.namespace["__docs_shell__"] = _Shell(env.workdir)
    status, output = shell.run(source)
    serves = shell.recorded_serves()
    if status != 0:
        raise AssertionError(f"the block exited {status}; its output:\n{output}")
    if _JSONRPC_ERROR.search(output):
        raise AssertionError(f"the block's output carries a JSON-RPC error:\n{output}")
    for argv, serve_env, cwd in serves:
        check_serve(argv, serve_env, cwd)


def _transcript(source: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    continued = False
    for line in source.splitlines():
        if continued:
            pairs[-1] = (pairs[-1][0] + "\n" + line, pairs[-1][1])
        elif line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
        else:
            raise ValueError(f"a console block starts with a '$ ' command line, not {line!r}")
        continued = line.endswith("\\")
    return [(command, "\n".join(lines).strip()) for command, lines in pairs]


def _matches(expected: str, output: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, output.strip(), flags=re.DOTALL) is not None


def evaluate_console(example: Example) -> None:
    env = _env_of(example)
    shell: _Shell | None = example.namespace.get("__docs_shell__")
    if shell is None or not shell.alive:
        shell = example.namespace["__docs_shell__"] = _Shell(env.workdir)
    for command, expected in _transcript(str(example.parsed)):
        status, output = shell.run(env.substitute(command, _page(example)))
        if status != 0:
            raise AssertionError(f"$ {command}\nexited {status}; its output:\n{output}")
        if not _matches(expected, output):
            raise AssertionError(f"$ {command}\nprinted:\n{output}\nnot as documented:\n{expected}")


# -- data ----------------------------------------------------------------------------------


def evaluate_json(example: Example) -> None:
    json.loads(str(example.parsed))


def evaluate_yaml(example: Example) -> None:
    yaml.safe_load(str(example.parsed))


def docs_sybil() -> Sybil:
    return Sybil(
        parsers=[
            CodeBlockParser(language="python", evaluator=evaluate_python),
            CodeBlockParser(language="bash", evaluator=evaluate_bash),
            CodeBlockParser(language="console", evaluator=evaluate_console),
            CodeBlockParser(language="json", evaluator=evaluate_json),
            CodeBlockParser(language="yaml", evaluator=evaluate_yaml),
            SkipParser(),
        ],
        path=str(ROOT),
        patterns=["README.md", "docs/*.md"],
        fixtures=["docs_env"],
        setup=_setup,
        teardown=_teardown,
    )
