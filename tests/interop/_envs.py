"""The peers' own environments, built by the suite once and cached under ``.cache/interop``.

* ``sdk03``: a virtualenv with the genuine a2a-sdk 0.3 client (``peers/sdk03-requirements.txt``,
  every package pinned);
* ``js``: ``npm ci`` of ``peers/package.json`` + ``package-lock.json`` (@a2a-js/sdk and its
  gRPC peer dependency, pinned), run with Node 20 or later.

Each environment is rebuilt when its pin file changes (the marker stores the file's hash)
and is built under a file lock, so parallel test sessions never build it twice at once. On a
clean CI machine the first session creates both from the package registries.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from tests._support import ROOT, cannot_run_here

PEERS = Path(__file__).resolve().parent / "peers"
CACHE = ROOT / ".cache" / "interop"
SDK03_REQUIREMENTS = PEERS / "sdk03-requirements.txt"
JS_FILES = ("package.json", "package-lock.json")
NODE_MAJOR_MIN = 20


class PeerUnavailable(RuntimeError):
    """A peer's toolchain (Node, npm) or packages cannot be had on this machine."""


def unavailable(reason: str) -> NoReturn:
    cannot_run_here(f"interop peer unavailable: {reason}")


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _digest(*files: Path) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


def own_env() -> dict[str, str]:
    """A copy of the environment for a child started from a worker thread.

    Without ``env=`` the child execs with the process's shared ``environ`` array; a test
    setting a variable on another thread at that moment can free it under the exec, which
    then fails with EFAULT ("Bad address", seen once in CI). A copy is the child's own.
    """
    return dict(os.environ)


def _run(cmd: list[str], *, cwd: Path | None = None, timeout: float = 600) -> None:
    done = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=own_env()
    )
    if done.returncode != 0:
        raise PeerUnavailable(
            f"{' '.join(cmd[:3])} ... exited {done.returncode}: {(done.stderr or done.stdout)[-2000:]}"
        )


def venv_python(name: str, requirements: Path) -> Path:
    """The interpreter of ``.cache/interop/<name>``, a virtualenv of *requirements* (every
    package pinned), built if missing or outdated."""
    home = CACHE / name
    python = home / "bin" / "python"
    marker = home / ".ready"
    want = _digest(requirements)
    with _locked(name):
        if marker.exists() and marker.read_text() == want and python.exists():
            return python
        shutil.rmtree(home, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(home)])
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, "-r", str(requirements)])
        marker.write_text(want)
    return python


def sdk03_python() -> Path:
    """The interpreter of the a2a-sdk 0.3 virtualenv, built if missing or outdated."""
    return venv_python("sdk03", SDK03_REQUIREMENTS)


def _node_major(node: str) -> int:
    out = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False, env=own_env()
    )
    try:
        return int(out.stdout.strip().lstrip("v").split(".")[0])
    except ValueError:
        return 0


def js_peer() -> tuple[str, Path]:
    """``(node, script)``: Node and the JS peer script inside its installed folder."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise PeerUnavailable("node and npm are not installed")
    if _node_major(node) < NODE_MAJOR_MIN:
        raise PeerUnavailable(f"the JS SDK needs Node {NODE_MAJOR_MIN} or later")
    home = CACHE / "js"
    marker = home / ".ready"
    want = _digest(*(PEERS / f for f in JS_FILES))
    with _locked("js"):
        if not (marker.exists() and marker.read_text() == want):
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            for name in JS_FILES:
                shutil.copyfile(PEERS / name, home / name)
            # --ignore-scripts: nothing of the peer needs an install script to run.
            _run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=home)
            marker.write_text(want)
        # Node resolves packages next to the script, so the script runs from this folder.
        # Copied only when it changed: another session may be running the current copy.
        script = home / "peer.mjs"
        source = (PEERS / "js.mjs").read_bytes()
        if not script.exists() or script.read_bytes() != source:
            tmp = home / f".peer.{os.getpid()}.mjs"
            tmp.write_bytes(source)
            tmp.replace(script)
    return node, script
