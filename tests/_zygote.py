"""Agents the tests start, forked from a process that has already imported them.

Each ``python -m apcore_a2a serve`` the suite starts spends about 2 s of CPU importing
a2a-sdk (FastAPI, SQLAlchemy, protobuf), apcore and uvicorn before it serves anything; the
suite starts several hundred, on a 2-core machine. This module's process (one per test
process, started on first use) imports them once and forks a child per agent. The child is
a real process of its own (own pid, port, signals, exit status), running the same module
``python -m`` runs, with the arguments, environment, working directory and output file the
test gave; only the imports are already done. An agent whose environment differs from this
process's in a variable something may read while importing (``PYTHONPATH``, ``OTEL_*``,
...) is started the ordinary way, as is any other command (``tests/_support.ServerProcess``).

A test may also hand it one of its own scripts (``python -c CODE``, ``python FILE`` or
``python -m`` any module: a scenario that serves an agent, an example, a benchmark server),
when the script is the subject and the interpreter is not: it then starts with the
modules of :data:`PRELOAD` already imported, and ends as :func:`_child` ends it (threads
joined, ``atexit`` run, no teardown of modules). A test of what a fresh interpreter
imports, or of how it exits, starts it the ordinary way (``scripts=False``).

The test process is not the child's parent, so the exit status comes from this process:
one connection per child, which gets the child's pid, then its status once it has exited.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import importlib
import json
import os
import runpy
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

#: the modules whose agents are forked (``python -m NAME ...``)
MODULES = ("apcore_a2a", "tests.reliability._serve")
#: what a child runs: ``("module", NAME)``, ``("code", TEXT)`` or ``("path", FILE)``
Target = tuple[str, str]
#: imported before the first fork: what every agent's start imports
PRELOAD = (
    "apcore_a2a.cli",
    "apcore_a2a.server.factory",
    "apcore_a2a.server.lifecycle",
    "tests.reliability._serve",
    "uvicorn.main",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.dialects.postgresql.asyncpg",
    "sqlalchemy.dialects.sqlite.aiosqlite",
)
#: variables read only at run time, never while importing: an agent whose environment
#: differs from this process's in others is started the ordinary way
RUNTIME_ONLY = (
    "APCORE_A2A_",
    "A2A_",
    "JWT_",
    "PYTEST_",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
)

_HEADER = struct.Struct("!I")


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


# ---- the forking process ----------------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int], keep: list[socket.socket]) -> NoReturn:
    """Become the agent: never returns."""
    code = 1
    try:
        for sock in keep:
            sock.close()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if request["session"]:
            os.setsid()
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        if request.get("stdin"):
            os.dup2(fds[2], 0)
        if request.get("lifeline"):
            # The console shim's end of a pipe: closed when the shim ends, even SIGKILLed
            # (a page's process group killed), and the agent must end with it.
            lifeline = os.dup(fds[-1])
            threading.Thread(target=_end_with, args=(lifeline,), daemon=True).start()
        for fd in set(fds):
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        kind, target = request.get("target", ("module", request.get("module")))
        sys.path[0] = request.get("path0", request["cwd"])
        code = 0
        try:
            _run_target(kind, target, request["args"])
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            traceback.print_exc()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)  # as Python's exit on an uncaught Ctrl-C
        except BaseException:
            traceback.print_exc()
            code = 1
        # Python's exit, in its order: threads waited for, atexit handlers, output flushed.
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    finally:
        os._exit(code)


def _run_target(kind: str, target: str, args: list[str]) -> None:
    """Run *target* as ``python`` would, with its ``sys.argv`` and ``sys.path[0]``."""
    if kind == "module":
        sys.argv = [target, *args]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif kind == "code":
        sys.argv = ["-c", *args]
        sys.path[0] = ""
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), main.__dict__)
    else:
        sys.argv = [target, *args]
        sys.path[0] = os.path.dirname(os.path.realpath(target))
        runpy.run_path(target, run_name="__main__")


def _end_with(lifeline: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(lifeline, 1):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def _same_imports(
    env: Mapping[str, str], also: list[str], here: Mapping[str, str] = os.environ
) -> bool:
    """Whether an agent with *env* imports as a process with *here* did: it differs in no
    variable but :data:`RUNTIME_ONLY`'s and *also*'s (what a shell sets: ``PATH``...)."""
    changed = {k for k in env.keys() | here.keys() if env.get(k) != here.get(k)}
    return all(key.startswith(RUNTIME_ONLY) or key in also for key in changed)


def serve(path: str) -> None:
    """Import :data:`PRELOAD`, then fork an agent for each request on the Unix socket at
    *path*, until the test process that started this one ends."""
    for name in PRELOAD:
        importlib.import_module(name)
    # The CA bundle every agent's push sender trusts, loaded once here, not in each child
    # (about 30 ms of CPU each; the environment is this process's, as checked).
    importlib.import_module("apcore_a2a._proxies").trusted_context()
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = socket.socketpair()
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is wake_r:
                with contextlib.suppress(BlockingIOError):
                    wake_r.recv(4096)
                continue
            conn, _ = listener.accept()
            try:
                head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 4)
                if len(head) < _HEADER.size:
                    head += _read_exactly(conn, _HEADER.size - len(head))
                request = json.loads(_read_exactly(conn, _HEADER.unpack(head)[0]))
            except (OSError, EOFError, ValueError):
                conn.close()
                continue
            if "shell_vars" in request and not _same_imports(request["env"], request["shell_vars"]):
                with contextlib.suppress(OSError):
                    conn.sendall(b"no\n")
                for fd in set(fds):
                    os.close(fd)
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                _child(request, fds, [listener, wake_r, wake_w, *children.values(), conn])
            for fd in set(fds):
                os.close(fd)
            conn.sendall(f"{pid}\n".encode())
            children[pid] = conn
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()


# ---- the test process's side ------------------------------------------------------------

#: this test process's environment before any test ran: the forking process's, whenever
#: it starts (a test that starts the first agent may have set a variable of its own)
_BASE_ENV = dict(os.environ)
_server: tuple[subprocess.Popen[bytes], str] | None = None
_lock = threading.Lock()


def _socket_path() -> str | None:
    """The socket of this test process's forking process, started on first use; ``None``
    if it could not start (agents are then started the ordinary way)."""
    global _server
    with _lock:
        if _server is not None:
            return _server[1] if _server[0].poll() is None else None
        root = Path(__file__).resolve().parent.parent
        path = os.path.join(tempfile.mkdtemp(prefix="apcore-a2a-zygote-"), "sock")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests._zygote", path],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=_BASE_ENV,
        )
        atexit.register(proc.kill)
        _server = (proc, path)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            proc.kill()
            return None
        return path


def forkable(
    args: list[str], env: Mapping[str, str] | None, *, scripts: bool = False
) -> tuple[Target, list[str]] | None:
    """``(target, arguments)`` when *args* start an agent this process can fork with
    *env*, else ``None``; with *scripts*, any ``python -c``, ``python FILE`` or
    ``python -m`` too (the test's own code, whose subject is not a fresh interpreter)."""
    if len(args) < 2 or args[0] != sys.executable:
        return None
    target: Target
    if args[1] in ("-m", "-c") and len(args) > 2:
        if args[1] == "-m" and (scripts or args[2] in MODULES):
            target = ("module", args[2])
        elif args[1] == "-c" and scripts:
            target = ("code", args[2])
        else:
            return None
        rest = args[3:]
    elif scripts and args[1].endswith(".py"):
        target, rest = ("path", args[1]), args[2:]
    else:
        return None
    if os.environ.get("APCORE_A2A_TEST_NO_FORK"):
        return None
    if not _same_imports(os.environ if env is None else env, [], _BASE_ENV):
        return None
    return target, rest


def fork(
    target: Target,
    args: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    out: int,
    err: int,
    session: bool,
) -> tuple[int, ExitStatus] | None:
    """Fork *target* (:func:`forkable`) with *args*, its output to *out* and *err*: its
    pid and its :class:`ExitStatus`, or ``None`` if the forking process is not there."""
    path = _socket_path()
    if path is None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        body = json.dumps(
            {"target": target, "args": args, "cwd": cwd, "env": env, "session": session}
        ).encode()
        socket.send_fds(conn, [_HEADER.pack(len(body))], [out, err])
        conn.sendall(body)
        status = ExitStatus(conn)
        line = status.line(None)
    except (OSError, EOFError):
        conn.close()
        return None
    if line is None:
        conn.close()
        return None
    return int(line), status


def run(
    target: Target, args: list[str], *, cwd: str, env: dict[str, str], timeout: float
) -> tuple[int, str, str] | None:
    """Fork *target* with *args* and wait for it: (exit code, stdout, stderr), or
    ``None`` if the forking process is not there. ``TimeoutError`` (the child killed)
    if it has not ended within *timeout* seconds."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        forked = fork(target, args, cwd=cwd, env=env, out=out_w, err=err_w, session=False)
    finally:
        os.close(out_w)
        os.close(err_w)
    if forked is None:
        os.close(out_r)
        os.close(err_r)
        return None
    pid, status = forked
    deadline = time.monotonic() + timeout
    output = {out_r: b"", err_r: b""}
    with selectors.DefaultSelector() as selector:
        for fd in output:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            ready = selector.select(timeout=max(left, 0)) if left > 0 else []
            if not ready:
                os.kill(pid, signal.SIGKILL)
                for fd in output:
                    os.close(fd)
                status.close()
                raise TimeoutError(f"{target[1][:80]!r} {args} did not end in {timeout}s")
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    output[key.fd] += chunk
                else:
                    selector.unregister(key.fd)
                    os.close(key.fd)
    try:
        line = status.line(max(deadline - time.monotonic(), 0.1))
    except EOFError:
        line = "255"
    if line is None:
        os.kill(pid, signal.SIGKILL)
        status.close()
        raise TimeoutError(f"{target[1][:80]!r} {args} did not end in {timeout}s")
    status.close()
    return int(line), output[out_r].decode(), output[err_r].decode()


#: the console script as a shell finds it: forks ``python -m apcore_a2a`` through this
#: test process's forking process, passing its own output, input and signals on, and
#: ends as the agent ends; runs the real script when it cannot fork (:func:`console_shim`)
_SHIM = """\
import json, os, signal, socket, struct, sys
REAL, SOCKET, PATH0 = {real!r}, {socket!r}, {path0!r}
#: what a shell sets, and the docs runner's own (tests/docs/_runner.py)
#: (bash drops PS1 and PS2 outside a terminal; a virtualenv's activate exports PS1)
SHELL_VARS = ["PATH", "PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "DOCS_AGENT", "DOCS_AGENT_PORT"]
def real():
    os.execv(REAL, [REAL, *sys.argv[1:]])
request = {{"module": "apcore_a2a", "args": sys.argv[1:], "cwd": os.getcwd(),
           "env": dict(os.environ), "session": False, "stdin": True, "lifeline": True,
           "path0": PATH0, "shell_vars": SHELL_VARS}}
lifeline, held = os.pipe()  # the agent reads; this process holds the other end
try:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(SOCKET)
    body = json.dumps(request).encode()
    socket.send_fds(conn, [struct.pack("!I", len(body))], [1, 2, 0, lifeline])
    conn.sendall(body)
    answers = conn.makefile("rb")
    first = answers.readline()
except OSError:
    real()
os.close(lifeline)
if not first.strip().isdigit():
    real()
pid = int(first)
def forward(signum, _frame):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, forward)
line = answers.readline().strip()
code = int(line) if line.lstrip(b"-").isdigit() else 255
if code < 0:  # ended by a signal: so does this process
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def console_shim() -> Path | None:
    """A folder holding an ``apcore-a2a`` that forks the agent (:data:`_SHIM`), to put
    first on a shell's ``PATH``; ``None`` when agents are not forked here."""
    real = Path(sys.executable).with_name("apcore-a2a")
    if os.environ.get("APCORE_A2A_TEST_NO_FORK") or not real.exists():
        return None
    path = _socket_path()
    if path is None:
        return None
    shim = Path(path).with_name("bin") / "apcore-a2a"
    if not shim.exists():
        shim.parent.mkdir(exist_ok=True)
        text = _SHIM.format(real=str(real), socket=path, path0=str(real.parent))
        shim.write_text(f"#!{sys.executable} -I\n{text}")
        shim.chmod(0o755)
    return shim.parent


class ExitStatus:
    """The connection a forked child's exit status arrives on (after its pid)."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._data = b""

    def line(self, timeout: float | None) -> str | None:
        """The next line, waiting up to *timeout* seconds (``None``: until it comes);
        ``None`` if it has not come by then. ``EOFError`` if it never will."""
        while b"\n" not in self._data:
            if self._conn.fileno() < 0:
                raise EOFError
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                return None
            chunk = self._conn.recv(64)
            if not chunk:
                self._conn.close()
                raise EOFError
            self._data += chunk
        line, self._data = self._data.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self._conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
