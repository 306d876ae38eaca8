"""Run each peer once per (binding, version) against the session's agent and keep its report.

All runs of a session start together on first use (at most :data:`PARALLEL` at a time: the
machine is small and shared), then every test cell reads the cached report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tests.interop import _envs

#: Every (peer, binding, version) the suite runs: all that each peer offers.
COMBOS: list[tuple[str, str, str]] = [
    *(
        (peer, b, v)
        for peer in ("sdk13", "js")
        for v in ("1.0", "0.3")
        for b in ("JSONRPC", "HTTP+JSON", "GRPC")
    ),
    *(("sdk03", b, "0.3") for b in ("JSONRPC", "HTTP+JSON", "GRPC")),
]
PARALLEL = 3
PEER_TIMEOUT = 240.0


@dataclass(frozen=True)
class Target:
    url: str
    grpc: str
    webhook: str


@dataclass(frozen=True)
class Run:
    """One peer process's outcome: its report (``None`` if it printed none) and output."""

    combo: tuple[str, str, str]
    run_id: str
    report: dict[str, Any] | None
    stderr: str
    unavailable: str | None = None

    def op(self, name: str) -> dict[str, Any]:
        if self.unavailable is not None:
            _envs.unavailable(self.unavailable)
        if self.report is None:
            raise AssertionError(f"{self.combo} printed no report; stderr:\n{self.stderr[-3000:]}")
        ops: dict[str, Any] = self.report["ops"]
        if name not in ops:
            raise AssertionError(
                f"{self.combo}: operation {name!r} did not run (an earlier step failed): "
                f"{json.dumps(ops, sort_keys=True)[:3000]}"
            )
        result: dict[str, Any] = ops[name]
        return result


def _command(peer: str) -> list[str]:
    if peer == "sdk13":
        return [sys.executable, str(_envs.PEERS / "sdk13.py")]
    if peer == "sdk03":
        return [str(_envs.sdk03_python()), str(_envs.PEERS / "sdk03.py")]
    node, script = _envs.js_peer()
    return [node, str(script)]


def run_peer(combo: tuple[str, str, str], target: Target) -> Run:
    peer, binding, version = combo
    run_id = f"{peer}-{binding.replace('+', '')}-{version}-{uuid.uuid4().hex[:8]}"
    try:
        command = _command(peer)
    except _envs.PeerUnavailable as exc:
        return Run(combo, run_id, None, "", unavailable=str(exc))
    cmd = [
        *command,
        "--url",
        target.url,
        "--grpc",
        target.grpc,
        "--binding",
        binding,
        "--version",
        version,
        "--webhook",
        target.webhook,
        "--run",
        run_id,
    ]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=PEER_TIMEOUT,
        check=False,
        cwd=str(_envs.PEERS),
        env=_envs.own_env(),
    )
    report = None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            report = json.loads(line)
            break
    return Run(combo, run_id, report, done.stderr + done.stdout[-2000:])


class Runs:
    """Lazily started, cached peer runs for one agent."""

    def __init__(self, target: Target, runner: Callable[..., Run] = run_peer) -> None:
        self._target = target
        self._runner = runner
        self._lock = threading.Lock()
        self._futures: dict[tuple[str, str, str], Future[Run]] = {}
        self._pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="interop")

    def _start_all(self) -> None:
        if self._futures:
            return
        for combo in COMBOS:
            self._futures[combo] = self._pool.submit(self._runner, combo, self._target)

    def get(self, combo: tuple[str, str, str]) -> Run:
        with self._lock:
            self._start_all()
            future = self._futures[combo]
        return future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
