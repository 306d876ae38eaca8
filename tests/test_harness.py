"""The test harness reports what its servers do at shutdown, and gives each test process
ports of its own (``tests/_support.py``).

A server a test started must exit 0 on SIGTERM within its stop timeout. One that has to
be SIGKILLed, or exits with another code, fails the test that started it, with the
server's output in the message; only a process the test crashed on purpose is forgiven.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests._support import _PORT_BLOCK, ROOT, ServerProcess, free_port, stop_process, wait_http

# Each child prints "ready" once its SIGTERM handling is in place.
CLEAN = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
STUBBORN = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
CRASHING = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
FOREVER = "print('ready', flush=True)\nwhile True: time.sleep(1)\n"


def _start(setup: str) -> ServerProcess:
    proc = ServerProcess([sys.executable, "-c", setup + FOREVER])
    deadline = time.monotonic() + 60
    while "ready" not in proc.output():
        assert proc.poll() is None, proc.output()
        assert time.monotonic() < deadline, "the child never got ready"
        time.sleep(0.02)
    return proc


def test_a_clean_exit_passes() -> None:
    proc = _start(CLEAN)
    stop_process(proc, timeout=30)
    assert proc.returncode == 0


def test_a_server_that_must_be_sigkilled_fails_the_test_with_its_output() -> None:
    proc = _start(STUBBORN)
    with pytest.raises(pytest.fail.Exception, match="SIGKILLed") as failed:
        stop_process(proc, timeout=0.5)
    assert proc.returncode == -signal.SIGKILL
    assert "ready" in str(failed.value)  # what the server printed


def test_a_non_zero_exit_fails_the_test() -> None:
    proc = _start(CRASHING)
    with pytest.raises(pytest.fail.Exception, match="exited with 3"):
        stop_process(proc, timeout=30)


def test_a_process_killed_on_purpose_is_only_reaped() -> None:
    proc = _start(STUBBORN)
    proc.kill9()
    stop_process(proc, timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_an_exit_is_judged_once() -> None:
    proc = _start(CRASHING)
    with pytest.raises(pytest.fail.Exception):
        stop_process(proc, timeout=30)
    stop_process(proc, timeout=30)  # the context manager's second look stays quiet


def test_two_runs_on_one_port_slot_hand_out_different_ports() -> None:
    """Another run's worker on the same slot and xdist worker name (a developer's run
    beside CI) takes a block of ports of its own."""
    mine = {free_port() for _ in range(_PORT_BLOCK)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tests._support import free_port\n"
            f"print(*(free_port() for _ in range({_PORT_BLOCK})))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = {int(p) for p in other.stdout.split()}
    assert len(theirs) > 1
    assert not mine & theirs


def test_the_longest_files_are_handed_out_first(request: pytest.FixtureRequest) -> None:
    # pytest-xdist hands out files in collection order (tests/conftest.py's FIRST): a name
    # that no longer matches a file would send that file back to its place, maybe last.
    from tests.conftest import FIRST

    assert [path for path in FIRST if not (ROOT / path).is_file()] == []
    collected = list(dict.fromkeys(i.nodeid.split("::")[0] for i in request.session.items))
    if set(FIRST) <= set(collected):  # the whole suite collected: they lead, in order
        assert collected[: len(FIRST)] == list(FIRST)


def _forks_here() -> None:
    """Skip: this run does not fork (``APCORE_A2A_TEST_NO_FORK``, a developer's switch,
    tests/README.md), so there is no forking to check."""
    if os.environ.get("APCORE_A2A_TEST_NO_FORK"):
        pytest.skip("agents are not forked here (APCORE_A2A_TEST_NO_FORK)")


def _shim_shell(script: str) -> subprocess.Popen[str]:
    """*script* in a bash of its own session whose ``apcore-a2a`` is the forking shim."""
    from tests import _zygote

    _forks_here()
    shim = _zygote.console_shim()
    assert shim is not None, "the forking process did not start"
    path = os.pathsep.join([str(shim), str(Path(sys.executable).parent), os.environ["PATH"]])
    return subprocess.Popen(
        ["bash", "-c", script],
        env={**os.environ, "PATH": path},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_the_console_shim_runs_the_command_with_its_output_and_exit_code() -> None:
    shell = _shim_shell("apcore-a2a --version; echo rc=$?; apcore-a2a nosuch; echo rc=$?")
    output, _ = shell.communicate(timeout=60)
    assert "apcore-a2a 0." in output and "rc=0" in output
    assert "invalid choice: 'nosuch'" in output and "rc=2" in output


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/.well-known/agent-card.json"):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("ending", ["TERM to the shim", "the shell's group SIGKILLed"])
def test_an_agent_started_through_the_console_shim_ends_with_it(ending: str) -> None:
    """The agent is the forking process's child, not the shell's: a TERM the shim gets is
    passed on (the agent's exit status is the shim's), and a shim SIGKILLed with its page's
    process group takes the agent with it."""
    port = free_port()
    shell = _shim_shell(
        f"apcore-a2a serve --extensions-dir examples/extensions --port {port} & "
        "echo $!; wait $!; echo rc=$?"
    )
    assert shell.stdout is not None
    shim = int(shell.stdout.readline())
    wait_http(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=60, proc=shell)
    if ending == "TERM to the shim":
        os.kill(shim, signal.SIGTERM)
        output, _ = shell.communicate(timeout=60)
        assert "rc=0" in output
    else:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(timeout=60)
    deadline = time.monotonic() + 60  # a hang guard
    while _answers(port):
        assert time.monotonic() < deadline, "the agent outlived its shim"
        time.sleep(0.05)


def test_the_console_shim_forks_after_a_test_set_a_variable_for_the_first_agent() -> None:
    """The forking process starts with this process's environment from before any test: a
    test's own variable (a monkeypatch) present when it started the first agent made every
    later shell's ``apcore-a2a`` differ from it, and run the real script (2 s each); so did
    the ``PS1`` a virtualenv's activate exports, which the docs runner's bash drops."""
    _forks_here()
    port = free_port()
    script = f"""
import os, signal, subprocess, sys
sys.path.insert(0, {str(ROOT)!r})
os.environ["PS1"] = "(.venv) $ "  # exported by a virtualenv's activate, as in CI
from tests import _zygote
os.environ["APCORE_TEST_ONLY_VARIABLE"] = "1"  # a test's, as the first agent starts
assert _zygote._socket_path() is not None
del os.environ["APCORE_TEST_ONLY_VARIABLE"]
path = os.pathsep.join([str(_zygote.console_shim()), os.environ["PATH"]])
# the docs runner's shell (tests/docs/_runner.py), which drops PS1
agent = subprocess.Popen(["bash", "--noprofile", "--norc", "-s"], stdin=subprocess.PIPE,
                         env={{**os.environ, "PATH": path}}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
agent.stdin.write(b"exec apcore-a2a serve --extensions-dir examples/extensions --port {port}\\n")
agent.stdin.flush()
from tests._support import wait_http
wait_http("http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=60, proc=agent)
with open(f"/proc/{{agent.pid}}/cmdline", "rb") as cmdline:
    print(cmdline.read().replace(b"\\0", b" ").decode())
agent.send_signal(signal.SIGTERM)
agent.wait(30)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    assert "apcore-a2a-zygote-" in done.stdout  # the shim, not the real script it execs


#: Scripts the tests run as processes of their own (one client each), not test modules.
_OWN_PROCESSES = {
    "tests/interop/peers/sdk03.py",
    "tests/interop/peers/sdk13.py",
    "tests/lifecycle/_grpc_stream_client.py",
    "tests/governance/_agent.py",
    "tests/ops/_agent.py",
    "tests/push/_agent.py",
    "tests/reliability/_serve.py",
    "tests/storage/bench_throughput.py",
}


def test_the_tests_http_clients_share_one_tls_context() -> None:
    """Each httpx client made without a TLS context loads the CA bundle (30 ms of CPU):
    a quarter of the test processes' CPU went to it. The tests' clients take
    ``tests._support.TLS``, or a transport of their own."""
    makers = {"AsyncClient", "Client", "get", "post", "put", "delete", "stream", "request"}
    lacking = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        if name in _OWN_PROCESSES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            func = node.func
            if not (isinstance(func.value, ast.Name) and func.value.id == "httpx"):
                continue
            given = {k.arg for k in node.keywords}
            if func.attr in makers and not given & {"verify", "transport", None}:
                lacking.append(f"{name}:{node.lineno}")
    assert lacking == []


#: prints what a forked script sees; ``apcore_a2a.server.factory`` already imported tells
#: a child of the forking process (``tests/_zygote.py``) from a fresh interpreter
_SEES = (
    "import json, os, sys\n"
    "print(json.dumps({'argv': sys.argv, 'path0': sys.path[0], 'name': __name__,"
    " 'cwd': os.getcwd(), 'env': os.environ.get('APCORE_A2A_TEST_EXTRA'),"
    " 'preloaded': 'apcore_a2a.server.factory' in sys.modules}))\n"
    "print('to stderr', file=sys.stderr)\n"
    "sys.exit(int(sys.argv[-1]))\n"
)


def test_a_python_c_script_of_the_tests_runs_forked_as_python_would_run_it(
    tmp_path: Path,
) -> None:
    """``run_python`` forks a test's own ``python -c`` (2 s of CPU to start, 0.3 forked),
    with its arguments, working directory, environment, output and exit code."""
    import json

    from tests._support import run_python

    _forks_here()
    env = {**os.environ, "APCORE_A2A_TEST_EXTRA": "set"}  # read at run time only
    done = run_python([sys.executable, "-c", _SEES, "one", "3"], cwd=tmp_path, env=env)
    assert (done.returncode, done.stderr) == (3, "to stderr\n")
    seen = json.loads(done.stdout)
    assert seen == {
        "argv": ["-c", "one", "3"],
        "path0": "",
        "name": "__main__",
        "cwd": str(tmp_path),
        "env": "set",
        "preloaded": True,
    }


def test_a_script_file_and_a_module_of_the_tests_run_forked_as_python_would_run_them(
    tmp_path: Path,
) -> None:
    import json

    from tests._support import run_python

    _forks_here()
    script = tmp_path / "sees.py"
    script.write_text(_SEES)
    done = run_python([sys.executable, str(script), "0"])
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["argv"], seen["path0"], seen["name"]) == (
        [str(script), "0"],
        str(tmp_path),
        "__main__",
    )
    assert (seen["cwd"], seen["preloaded"]) == (str(ROOT), True)
    (tmp_path / "sees_module.py").write_text(_SEES)
    env = {**os.environ, "APCORE_A2A_TEST_EXTRA": "x"}  # a run-time variable: still forked
    done = run_python([sys.executable, "-m", "sees_module", "0"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["argv"][1:], seen["path0"], seen["preloaded"]) == (["0"], str(tmp_path), True)


def test_a_script_whose_environment_changes_what_imports_see_starts_fresh() -> None:
    """A ``PYTHONPATH`` (or any variable not known to be read only at run time) may change
    what the preloaded imports would have been: the script starts the ordinary way."""
    import json

    from tests._support import run_python

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = run_python([sys.executable, "-c", _SEES, "0"], env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["preloaded"] is False


def test_a_server_script_runs_forked_with_its_signals() -> None:
    """``ServerProcess(..., scripts=True)``: a test's ``python -c`` server, forked; its
    SIGTERM handler and exit status are its own, as :func:`stop_process` judges them."""
    _forks_here()
    proc = ServerProcess(
        [
            sys.executable,
            "-c",
            CRASHING + "print('apcore_a2a.server.factory' in sys.modules)\n" + FOREVER,
        ],
        scripts=True,
    )
    deadline = time.monotonic() + 60
    while "ready" not in proc.output():
        assert proc.poll() is None, proc.output()
        assert time.monotonic() < deadline, "the child never got ready"
        time.sleep(0.02)
    assert proc.output().startswith("True\n")  # forked
    with pytest.raises(pytest.fail.Exception, match="exited with 3"):
        stop_process(proc, timeout=30)


#: tests that leave a failed task and a failed future in reference cycles (only the cyclic
#: collector frees them), then one that checks its own log for errors, as many tests do
_LEAKS = """
import asyncio, gc, logging

def test_leaks():
    gc.disable()  # no collection before the harness's own: the report's timing is its

    async def main():
        async def fail():
            raise RuntimeError("raised in test_leaks")

        task = asyncio.ensure_future(fail())
        await asyncio.sleep(0.01)
        cycle = [task]
        cycle.append(cycle)

    asyncio.run(main())

def test_leaks_a_future():
    loop = asyncio.new_event_loop()
    future = loop.create_future()
    future.set_exception(RuntimeError("set in test_leaks_a_future"))
    cycle = [future]
    cycle.append(cycle)
    loop.close()

def test_next(caplog):
    gc.collect()  # what any allocation in this test could have started
    gc.enable()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
"""


def test_a_leaked_failed_task_fails_the_test_that_leaked_it(tmp_path: Path) -> None:
    """asyncio reports a failed task nobody awaited when the task is freed: one kept by a
    reference cycle, at the next collection, which could be in any later test (its ERROR
    failed ``tests/auth/test_odd_owner_stores.py``, leaked by a push test). The harness
    (``tests/conftest.py``) collects at each test's teardown and fails the leaking test."""
    (tmp_path / "test_leak.py").write_text(_LEAKS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = ["-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-v"]
    done = subprocess.run(
        [sys.executable, *command, "test_leak.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "test_leak.py::test_next PASSED" in done.stdout, done.stdout
    blamed = done.stdout.split("= ERRORS =", 1)[-1].split("_ ERROR at teardown of ")[1:]
    assert [report.split(" _", 1)[0] for report in blamed] == ["test_leaks", "test_leaks_a_future"]
    assert "Task exception was never retrieved" in blamed[0]
    assert "RuntimeError: raised in test_leaks" in blamed[0]
    assert "Future exception was never retrieved" in blamed[1]
    assert "RuntimeError: set in test_leaks_a_future" in blamed[1]
    assert done.returncode == 1
