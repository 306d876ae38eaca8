"""Run the code blocks of README.md and docs/*.md exactly as a reader would (with Sybil).

Collected by the repository's root ``conftest.py``; ``tests/docs/test_docs.py`` runs them in
a child pytest (``python -m pytest README.md docs``), so what the snippets change in their
process (a global tracer provider, logging, the environment) stays there.

The reader stands at the root of a fresh clone: every page runs in a scratch copy of the
repository (its tracked and new files), and nothing is defined for it that the page does
not show. Invisible code blocks (``<!-- invisible-code-block: ... -->``) are refused.

What each fenced block does:

* ``python``: executed in one namespace per page, in page order, like a reader pasting the
  blocks into one ``python`` session (so no top-level ``await``). ``serve()`` builds the
  agent it describes (settings, modules, stores, card) and returns instead of blocking:
  serving itself is tested by tests/lifecycle and tests/config.
* ``bash``: run in one ``bash`` per page (variables and background jobs carry over to
  the next block), with ``set -eu``; a command that fails, or output carrying a
  JSON-RPC ``"error"``, fails the block. ``apcore-a2a serve ...`` really serves, as the
  reader's other terminal would: it starts with the page's arguments, environment and
  folder (only its port is the page's own, see below), and the line returns once the
  agent answers (or fails with the agent's output if it exits first). The next ``serve``
  of the page replaces it. ``pip`` (and ``python -m pip``) only says what it would
  install (the test environment has every extra); every other command runs for real.
* ``console``: a terminal transcript. Each ``$ `` line (with its ``\\`` continuations) runs
  in the page's bash as above, and what it prints must match the lines below it, where
  ``...`` stands for any text.
* ``json`` / ``yaml``: must parse.

Addresses: ``127.0.0.1:80NN`` is the agent the page last served (a free port stands in;
each page that serves names a port of its own, the quick start 8000). A page that calls
the agent before serving one talks to the README's quick-start agent, which the reader
keeps running in another terminal (the first ``apcore-a2a serve`` line of README.md). gRPC's ``50051`` and the push walkthrough receiver's port ``9000`` get
free ports too.

A block that cannot run here is marked just above it with an HTML comment, which renders
as nothing: ``<!-- skip: next "why it cannot run" -->``. A reason is required
(tests/docs/test_docs.py checks it).
"""

from __future__ import annotations

import contextlib
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

from tests import _zygote
from tests._support import ROOT, free_port

BLOCK_TIMEOUT = 90.0
_DONE = "__DOCS_BLOCK_DONE__"
_JSONRPC_ERROR = re.compile(r'"error"\s*:\s*\{')
_SERVES = re.compile(r"^[^#\n]*\bapcore-a2a serve\b", re.MULTILINE)
#: the agent a page talks to: the quick start's (8000) or the page's own (80NN)
_AGENT_ADDRESS = re.compile(r"127\.0\.0\.1:80\d\d\b")


def quick_start_serve() -> str:
    """The README's quick-start ``apcore-a2a serve ...`` command line."""
    found = re.search(r"\bapcore-a2a serve [^\n&|;]*", (ROOT / "README.md").read_text())
    assert found is not None, "README.md has no 'apcore-a2a serve' command"
    return found.group(0).strip()


_PRELUDE = r"""
set -eu
__docs_agent_stop() {
  if [ -s "$DOCS_AGENT/pid" ]; then
    local pid; pid=$(cat "$DOCS_AGENT/pid"); rm -f "$DOCS_AGENT/pid"
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
}
apcore-a2a() {
  if [ "${1:-}" = serve ]; then
    # The reader's other terminal: the agent runs on, this line returns once it answers.
    # Each serve ends with a line in `serves`: the runner holds the next block until the
    # block's serves are done (a line ending with `&` returns before).
    __docs_agent_stop
    command apcore-a2a "$@" --port "$DOCS_AGENT_PORT" > "$DOCS_AGENT/log" 2>&1 &
    local pid=$! status=0
    echo "$pid" > "$DOCS_AGENT/pid"
    local deadline=$(( SECONDS + 120 ))
    # curl only once the port accepts (bash's own /dev/tcp probe starts no process): a
    # curl every 0.1 s while the agent starts cost 10 ms of CPU each, 30 to 60 per serve.
    until : 2>/dev/null <>"/dev/tcp/127.0.0.1/$DOCS_AGENT_PORT" \
      && curl -s -o /dev/null "http://127.0.0.1:$DOCS_AGENT_PORT/.well-known/agent-card.json"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        rm -f "$DOCS_AGENT/pid"; cat "$DOCS_AGENT/log"
        wait "$pid" || status=$?; break
      fi
      if [ "$SECONDS" -gt "$deadline" ]; then cat "$DOCS_AGENT/log"; status=1; break; fi
      sleep 0.1
    done
    echo "$status" >> "$DOCS_AGENT/serves"
    return "$status"
  fi
  command apcore-a2a "$@"
}
pip() { echo "docs test: not running 'pip $*' (the test environment has every extra)"; }
python() {
  if [ "${1:-}" = -m ] && [ "${2:-}" = pip ]; then shift; pip "${@:2}"; return 0; fi
  command python "$@"
}
"""


def _fresh_copy(target: Path) -> None:
    """The repository as a fresh clone has it (plus new files not committed yet)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: copy the tree
        skip = shutil.ignore_patterns(".git", ".venv", ".nox", "__pycache__", "*.db")
        shutil.copytree(ROOT, target, ignore=skip, dirs_exist_ok=True)
        return
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


class DocsEnv:
    """What the pages run in: a scratch copy of the repository."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="docs-")))
        _fresh_copy(self.workdir)


@pytest.fixture(scope="session")
def docs_env() -> Iterator[DocsEnv]:
    from apcore_a2a import _runner

    def build_only(app: Any, settings: Any, **_: Any) -> None:
        """``serve()`` without blocking: the app is built, and that is all."""

    # serve() calls _runner.run_app.
    original = _runner.run_app
    _runner.run_app = build_only
    try:
        with contextlib.ExitStack() as stack:
            yield DocsEnv(stack)
    finally:
        _runner.run_app = original


# -- per page ------------------------------------------------------------------------------


def _setup(namespace: dict[str, Any]) -> None:
    namespace["__docs_cwd__"] = os.getcwd()


def _teardown(namespace: dict[str, Any]) -> None:
    shell: _Shell | None = namespace.pop("__docs_shell__", None)
    if shell is not None:
        shell.close()
    os.chdir(namespace.pop("__docs_cwd__", ROOT))


def _env_of(example: Example) -> DocsEnv:
    env = example.namespace.get("docs_env")
    if env is None:  # Sybil's setup runs before fixtures are filled in
        raise RuntimeError("docs_env fixture missing")
    if example.document.text[example.start : example.start + 4] == "<!--":
        raise AssertionError("an invisible code block: the reader cannot see it; show it")
    if Path.cwd() != env.workdir:
        os.chdir(env.workdir)
    return env


def _shell(example: Example, env: DocsEnv) -> _Shell:
    shell: _Shell | None = example.namespace.get("__docs_shell__")
    if shell is None or not shell.alive:
        shell = example.namespace["__docs_shell__"] = _Shell(env.workdir)
    return shell


def _prepare(example: Example) -> tuple[_Shell, str]:
    """The page's shell and the block as it runs here (documented ports made free ones).

    A block that talks to the agent on a page that has served none first starts the
    README's quick-start agent, as the reader who followed the quick start has it.
    """
    env = _env_of(example)
    shell = _shell(example, env)
    source = str(example.parsed)
    if "127.0.0.1:8000" in source and not shell.serving and not _SERVES.search(source):
        status, output = shell.run(quick_start_serve())
        if status != 0:
            raise AssertionError(f"the quick-start agent did not start:\n{output}")
    return shell, shell.substitute(source)


# -- python --------------------------------------------------------------------------------


def evaluate_python(example: Example) -> None:
    _, source = _prepare(example)
    # Line numbers in tracebacks point into the page.
    padded = "\n" * (example.line) + source
    code = compile(padded, str(example.path), "exec", dont_inherit=True)
    before = dict(example.namespace)
    exec(code, example.namespace)  # the documented code is the test
    _check_module_classes(before, example.namespace)


def _check_module_classes(before: dict[str, Any], after: dict[str, Any]) -> None:
    """A module class the block defines must be one apcore would load from a file."""
    from apcore.registry.validation import validate_module

    for name, value in after.items():
        if before.get(name) is value or not isinstance(value, type):
            continue
        if callable(getattr(value, "execute", None)) and hasattr(value, "input_schema"):
            problems = validate_module(value)
            if problems:
                raise AssertionError(f"apcore would not load module class {name}: {problems}")


# -- bash ----------------------------------------------------------------------------------


class _Shell:
    """One bash for a page: what a reader types into one terminal."""

    def __init__(self, cwd: Path) -> None:
        self.agent_dir = Path(tempfile.mkdtemp(prefix="docs-agent-"))
        self.agent_port, self.grpc_port, self.receiver_port = free_port(), free_port(), free_port()
        # The page's `apcore-a2a` forked from a process that has imported it (2 s of CPU
        # each, some 35 a run), as the other agents of the tests are (tests/_zygote.py).
        shim = _zygote.console_shim()
        path = [str(shim)] if shim is not None else []
        path += [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
        env = {
            **os.environ,
            "PATH": os.pathsep.join(path),
            "DOCS_AGENT": str(self.agent_dir),
            "DOCS_AGENT_PORT": str(self.agent_port),
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

    def substitute(self, source: str) -> str:
        """*source* with the documented ports replaced by this page's free ones (8000, or
        the 80NN port of its own a page serves on: tests/docs/test_ports.py)."""
        source = _AGENT_ADDRESS.sub(f"127.0.0.1:{self.agent_port}", source)
        source = source.replace("50051", str(self.grpc_port))
        source = source.replace("127.0.0.1:9000", f"127.0.0.1:{self.receiver_port}")
        return source.replace("--port 9000", f"--port {self.receiver_port}")

    def serves_done(self) -> int:
        """How many ``apcore-a2a serve`` lines of this page have finished starting."""
        done = self.agent_dir / "serves"
        return len(done.read_text().splitlines()) if done.exists() else 0

    @property
    def serving(self) -> bool:
        """Whether this page has served an agent (``apcore-a2a serve``)."""
        return self.serves_done() > 0

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def run(self, source: str) -> tuple[int, str]:
        """Run *source*; (exit status, everything it printed).

        Returns once the serves it started (with ``&`` too) answer or failed.
        """
        expected = self.serves_done() + len(_SERVES.findall(source))
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
        while status == 0 and self.serves_done() < expected and time.monotonic() < deadline:
            time.sleep(0.1)
        text = out.read_text(errors="replace") if out.exists() else ""
        os.unlink(script.name)
        out.unlink(missing_ok=True)
        return status, text

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.alive:
            with contextlib.suppress(OSError):
                self._send(
                    "__docs_agent_stop; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null;"
                    " exit 0"
                )
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        # A page's background job that outlived its shell (a server slow to stop on SIGTERM)
        # must not outlive the test: the whole session's process group goes.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)
        shutil.rmtree(self.agent_dir, ignore_errors=True)


def evaluate_bash(example: Example) -> None:
    shell, source = _prepare(example)
    status, output = shell.run(source)
    if status != 0:
        raise AssertionError(f"the block exited {status}; its output:\n{output}")
    if _JSONRPC_ERROR.search(output):
        raise AssertionError(f"the block's output carries a JSON-RPC error:\n{output}")


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
    shell, _source = _prepare(example)
    for command, expected in _transcript(str(example.parsed)):
        status, output = shell.run(shell.substitute(command))
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
