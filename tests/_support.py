"""Shared helpers for tests: real uvicorn servers on 127.0.0.1 and free ports."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
import uvicorn

from tests import _zygote

#: One TLS context for the tests' HTTP clients: each ``httpx.AsyncClient()`` made without
#: one loads the CA bundle anew (21 ms of CPU, against 0.06 ms), about once per test.
TLS = httpx.create_ssl_context()

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


#: Seconds a server the tests start gets to answer: a hang guard, not a speed check (on a
#: saturated 2-core machine one start took 85 s).
START_TIMEOUT = 180.0

_PORT_BLOCK = 250
_PORT_BLOCKS = 48  # 20000-31999: below the kernel's ephemeral range (32768+)
_next_port = itertools.count(random.randrange(_PORT_BLOCK))
_port_base: int | None = None


def try_lock(path: Path) -> int | None:
    """An open descriptor of *path* (created if missing) holding an exclusive ``flock``,
    or ``None`` when another process holds it. The lock lasts until the descriptor is
    closed, or its process exits however it ends."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _port_block() -> int:
    """The first port of this process's block, held under a lock file until it exits.

    Every pytest process on the machine (each xdist worker of each run, in any checkout)
    holds its own block, so two runs at once never hand out the same port. An ``flock``
    dies with its process: a killed run frees its block. ``APCORE_A2A_TEST_PORT_SLOT``
    only says where the search starts.
    """
    global _port_base
    if _port_base is None:
        folder = Path(tempfile.gettempdir()) / "apcore-a2a-test-ports"
        folder.mkdir(mode=0o777, exist_ok=True)
        start = int(os.environ.get("APCORE_A2A_TEST_PORT_SLOT", "0") or 0) * 3
        for step in range(_PORT_BLOCKS):
            block = (start + step) % _PORT_BLOCKS
            if try_lock(folder / f"{block}.lock") is None:
                continue
            _port_base = 20_000 + block * _PORT_BLOCK  # fd stays open: the lock is held
            break
        else:
            raise RuntimeError(f"all {_PORT_BLOCKS} test port blocks are taken ({folder})")
    return _port_base


def cannot_run_here(reason: str) -> NoReturn:
    """This machine lacks what the test needs (*reason*): a failure in CI, whose ``.ci/run``
    provides it, a skip on a developer's machine. The one wording of that rule."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run this test (.ci/run provides it)", pytrace=False)
    pytest.skip(f"{reason} (skipped only outside CI)")


def not_installed(what: str) -> NoReturn:
    """*what* is not installed on this machine (see :func:`cannot_run_here`)."""
    cannot_run_here(f"{what} is not installed")


def free_port() -> int:
    """A free port on 127.0.0.1 that no other test process on this machine hands out.

    ``bind(0)`` lets two processes draw the same port between asking and binding; here each
    takes ports from its own block (:func:`_port_block`), checking each is free when handed
    out (a server of another program may hold it).
    """
    base = _port_block()
    for _ in range(_PORT_BLOCK):
        port = base + next(_next_port) % _PORT_BLOCK
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {base}-{base + _PORT_BLOCK - 1}")


@contextlib.asynccontextmanager
async def running_server(app: Any, *, port: int | None = None, **config: Any) -> AsyncIterator[str]:
    """Run *app* under a real uvicorn server on 127.0.0.1 inside the current event loop.

    Yields the base URL (``http://127.0.0.1:PORT``). The server is shut down gracefully on
    exit, which also runs the app's lifespan shutdown.
    """
    port = port or free_port()
    cfg = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **config
    )
    server = uvicorn.Server(cfg)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn exited before it started")
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start in time")
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=30)


def wait_http(
    url: str, *, timeout: float = START_TIMEOUT, proc: subprocess.Popen[Any] | None = None
) -> None:
    """Poll *url* until it answers (any status) or raise after *timeout* seconds.

    One client for all the polls: ``httpx.get`` builds a client, TLS context included,
    per call (20 ms of CPU each, taken from the server starting beside it).
    """
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0, verify=TLS) as http:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"process exited with {proc.returncode}: {_output_of(proc)}")
            try:
                http.get(url)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


class ServerProcess(subprocess.Popen[str]):
    """A server started by a test, its stdout and stderr captured in a log file.

    A file rather than a pipe: a chatty server never blocks on a full pipe nobody reads,
    and the whole output is still there for the failure message when it misbehaves.
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
        session: bool = False,
        scripts: bool = False,
    ) -> None:
        """*session*: in a session (and process group) of its own, as a terminal starts a
        command, so that the test can signal the group. *scripts*: a ``python -c``,
        ``python FILE`` or ``python -m`` of the tests' own is forked too, not only an
        agent (``tests/_zygote.py``: for a script whose subject is not a fresh
        interpreter)."""
        fd, name = tempfile.mkstemp(prefix="apcore-a2a-test-server-", suffix=".log")
        self.log = Path(name)
        weakref.finalize(self, self.log.unlink, missing_ok=True)
        #: set by :meth:`kill9`: the test crashes this process on purpose
        self.killed_on_purpose = False
        #: set by :func:`stop_process` once it has judged the exit (reported only once)
        self.judged = False
        #: an agent forked by ``tests/_zygote.py``: (module, arguments), then its exit status
        self._forkable = _zygote.forkable(list(args), env, scripts=scripts)
        self._forked: _zygote.ExitStatus | None = None
        with os.fdopen(fd, "wb") as sink:
            super().__init__(
                list(args),
                cwd=None if cwd is None else str(cwd),
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=session,
            )

    def _execute_child(self, args: Any, executable: Any, *rest: Any) -> None:
        if self._forkable is not None:
            # Popen's order: preexec_fn, close_fds, pass_fds, cwd, env, ..., c2pwrite (11),
            # errread, errwrite (13), ..., start_new_session, process_group
            cwd, env, out, err, session = rest[3], rest[4], rest[11], rest[13], rest[-2]
            forked = _zygote.fork(
                *self._forkable,
                cwd=os.getcwd() if cwd is None else os.fsdecode(cwd),
                env=dict(os.environ) if env is None else dict(env),
                out=out,
                err=err,
                session=session,
            )
            if forked is not None:
                self.pid, self._forked = forked
                self._child_created = True
                return
        super()._execute_child(args, executable, *rest)  # type: ignore[misc]

    def _internal_poll(self, _deadstate: Any = None, **kwargs: Any) -> int | None:
        if self._forked is None:
            return super()._internal_poll(_deadstate, **kwargs)  # type: ignore[misc,no-any-return]
        if self.returncode is None:
            self._forked_status(0)
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if self._forked is None:
            return super()._wait(timeout)  # type: ignore[misc,no-any-return]
        if self.returncode is None:
            self._forked_status(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def _forked_status(self, timeout: float | None) -> None:
        assert self._forked is not None
        try:
            line = self._forked.line(timeout)
        except EOFError:  # the forking process died first: the status is lost
            deadline = None if timeout is None else time.monotonic() + timeout
            while _alive(self.pid) and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.05)
            line = None if _alive(self.pid) else "255"
        if line is not None:
            self.returncode = int(line)
            self._forked.close()

    def output(self) -> str:
        """Everything the process printed so far."""
        return self.log.read_text(errors="replace")

    def kill9(self) -> None:
        """SIGKILL the process on purpose (a crash test): :func:`stop_process` accepts it."""
        self.killed_on_purpose = True
        self.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _output_of(proc: subprocess.Popen[Any]) -> str:
    if isinstance(proc, ServerProcess):
        return proc.output()[-6000:]
    return "(output not captured)"


def stop_process(proc: subprocess.Popen[Any], *, timeout: float) -> None:
    """SIGTERM *proc* if it still runs and reap it; fail the test unless it exits cleanly.

    A server the test started must stop by itself within *timeout* seconds of SIGTERM and
    exit 0. One that has to be SIGKILLed, or exits with another code, fails the test with
    its output, so a hang or a crash at shutdown cannot pass unseen. A process the test
    killed on purpose (:meth:`ServerProcess.kill9`) is only reaped.
    """
    if isinstance(proc, ServerProcess):
        if proc.judged:
            return
        proc.judged = True
    failure = None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            failure = f"still running {timeout}s after SIGTERM; it was SIGKILLed"
    killed = isinstance(proc, ServerProcess) and proc.killed_on_purpose
    if failure is None and proc.returncode != 0 and not killed:
        failure = f"exited with {proc.returncode}"
    if failure is not None:
        pytest.fail(
            f"server process {proc.args!r} {failure}; its output:\n{_output_of(proc)}",
            pytrace=False,
        )


#: Seconds a ``cli_server`` gets to exit after SIGTERM: the default ``shutdown_timeout``
#: (30 s, the drain of running tasks) plus room for a busy machine.
CLI_STOP_TIMEOUT = 45.0


@contextlib.contextmanager
def cli_server(
    args: Sequence[str],
    *,
    port: int | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    ready_path: str = "/.well-known/agent-card.json",
    stop_timeout: float = CLI_STOP_TIMEOUT,
) -> Iterator[tuple[str, ServerProcess]]:
    """Start ``apcore-a2a serve ...`` (via ``python -m apcore_a2a``) as a subprocess.

    On exit the server gets SIGTERM and must exit 0 within *stop_timeout* seconds, else
    the test fails (see :func:`stop_process`).
    """
    port = port or free_port()
    full_env = {**os.environ, **(env or {})}
    cmd = [
        sys.executable,
        "-m",
        "apcore_a2a",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *args,
    ]
    proc = ServerProcess(cmd, cwd=cwd or ROOT, env=full_env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + ready_path, proc=proc)
        yield base, proc
    finally:
        stop_process(proc, timeout=stop_timeout)


@contextlib.contextmanager
def threaded_server(app: Any, *, port: int | None = None, **config: Any) -> Iterator[str]:
    """Run *app* under real uvicorn on 127.0.0.1 in a background thread (own event loop).

    Usable from sync fixtures of any scope; tests talk to it over the network.
    """
    import threading

    port = port or free_port()
    cfg = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **config
    )
    server = uvicorn.Server(cfg)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn exited before it started")
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start in time")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        if thread.is_alive():
            pytest.fail(f"uvicorn on port {port} did not stop within 30s", pytrace=False)


def run_python(
    args: Sequence[str],
    *,
    cwd: Path | str = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True)`` for a ``python -c``,
    ``python FILE`` or ``python -m`` of the tests' own, forked from the process that has
    imported the agents when it can be (``tests/_zygote.py``; about 0.3 s of CPU, not
    2 s). Not for a test whose subject is a fresh interpreter: what it imports, or how
    it exits."""
    full_env = dict(os.environ) if env is None else dict(env)
    forkable = _zygote.forkable(list(args), full_env, scripts=True)
    if forkable is not None:
        try:
            ran = _zygote.run(*forkable, cwd=str(cwd), env=full_env, timeout=timeout)
        except TimeoutError as exc:
            raise subprocess.TimeoutExpired(list(args), timeout) from exc
        if ran is not None:
            return subprocess.CompletedProcess(list(args), *ran)
    return subprocess.run(
        list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python -m apcore_a2a ARGS`` at the repo root: (exit code, stdout, stderr).

    *env* is added to this process's environment for the child. Forked when it can be
    (``tests/_zygote.py``), in a thread: the test's own servers go on serving meanwhile.
    """
    full_env = {**os.environ, **env} if env else dict(os.environ)
    forkable = _zygote.forkable([sys.executable, "-m", "apcore_a2a", *args], full_env)
    if forkable is not None:
        target, rest = forkable
        ran = await asyncio.to_thread(
            _zygote.run, target, rest, cwd=str(ROOT), env=full_env, timeout=60
        )
        if ran is not None:
            return ran
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "apcore_a2a",
        *args,
        cwd=ROOT,
        env={**os.environ, **env} if env else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def sse_frames(response: httpx.Response) -> AsyncIterator[tuple[str | None, Any]]:
    """The SSE events of *response* as ``(id or None, JSON payload)``, in order.

    Use under ``contextlib.aclosing`` when the caller may stop early (a cut stream).
    """
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield event_id, json.loads("\n".join(data))
            event_id, data = None, []


@contextlib.asynccontextmanager
async def rpc_stream(
    url: str, method: str, params: dict[str, Any], *, timeout: float = 60.0
) -> AsyncIterator[AsyncIterator[tuple[str | None, Any]]]:
    """An open SSE answer of JSON-RPC 1.0 *method* at *url*: yields an iterator of its
    ``(SSE id or None, result)`` frames, closed with the answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with (
        httpx.AsyncClient(timeout=timeout, verify=TLS) as http,
        http.stream("POST", url + "/", json=body, headers={"A2A-Version": "1.0"}) as answer,
    ):
        assert answer.headers["content-type"].startswith("text/event-stream"), answer

        async def results() -> AsyncIterator[tuple[str | None, Any]]:
            async for sse_id, payload in sse_frames(answer):
                yield sse_id, payload["result"]

        async with contextlib.aclosing(results()) as frames:
            yield frames


def chunks_of(results: list[dict[str, Any]]) -> tuple[list[int], str]:
    """The numbers of the chunks (``"000012:xxx"``) a stream's JSON-RPC results carried,
    in the order they came, and the last task state among them."""
    numbers: list[int] = []
    state = ""
    for result in results:
        if "artifactUpdate" in result:
            parts = result["artifactUpdate"]["artifact"]["parts"]
            numbers += [int(p["text"].split(":", 1)[0]) for p in parts]
        for key in ("task", "statusUpdate"):
            if key in result:
                state = result[key]["status"]["state"]
    return numbers, state


def send_message(skill: str, data: dict[str, Any], *, message_id: str = "m-1") -> dict[str, Any]:
    """A JSON-RPC 1.0 ``SendMessage`` request calling *skill* with one data part."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": message_id,
                "role": "ROLE_USER",
                "parts": [{"data": data}],
                "metadata": {"skillId": skill},
            }
        },
    }


def find_key(value: Any, key: str) -> list[Any]:
    """Every value under *key* anywhere in a JSON document, depth first."""
    if isinstance(value, dict):
        found = [value[key]] if key in value else []
        return found + [x for v in value.values() for x in find_key(v, key)]
    if isinstance(value, list):
        return [x for v in value for x in find_key(v, key)]
    return []


def json_lines(out: str) -> list[dict[str, Any]]:
    """One JSON object per line of *out*."""
    return [json.loads(line) for line in out.splitlines()]


_HIDE_MODULES = """\
import os, sys

_HIDDEN = tuple(n for n in os.environ.get("APCORE_A2A_TEST_HIDE", "").split(",") if n)


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if any(name == h or name.startswith(h + ".") for h in _HIDDEN):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def without_packages(folder: Path, *names: str) -> dict[str, str]:
    """Environment for a child Python in which *names* import as if not installed.

    A ``sitecustomize`` in *folder*, first on ``PYTHONPATH``, refuses those imports in the
    child only: how a missing extra looks to the code that needs it.
    """
    (folder / "sitecustomize.py").write_text(_HIDE_MODULES)
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "APCORE_A2A_TEST_HIDE": ",".join(names)}
