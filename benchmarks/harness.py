"""Interleaved benchmark rounds: S O S O ... with wrk, the SSE client and the in-process floor R.

Each round starts every variant in a fresh subprocess, warms it up, runs every workload against
it and reads the server's CPU time around each workload. Per request CPU is the server process's
utime+stime delta divided by the requests completed, so it does not depend on how much of the
shared machine the load generator happens to get.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks import stores
from benchmarks._proc import CARD_PATH, ROOT, Server, Variant, run_server
from benchmarks._stream import run_streams
from benchmarks._wrk import run_wrk, run_wrk_count

Metrics = dict[str, float]

PLAIN = Variant("S", "plain")
OURS = Variant("O", "ours")
PLAIN_SPEED = Variant("S+speed", "plain", loop="uvloop", http="httptools")
OURS_SPEED = Variant("O+speed", "ours", loop="uvloop", http="httptools")


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # "card" | "send" | "data" (1,900 values in the metadata) | "stream"
    connections: int


FULL_WORKLOADS = (
    Workload("card GET", "card", 16),
    Workload("SendMessage", "send", 1),
    Workload("SendMessage", "send", 16),
    Workload("SendMessage", "send", 64),
    Workload("SendMessage, 1.9k values", "data", 16),
    Workload("SendStreamingMessage", "stream", 16),
)
SMOKE_WORKLOADS = (
    Workload("card GET", "card", 4),
    Workload("SendMessage", "send", 4),
    Workload("SendMessage, 1.9k values", "data", 4),
    Workload("SendStreamingMessage", "stream", 4),
)


@dataclass
class Plan:
    rounds: int = 5
    duration: float = 5.0
    warmup: float = 1.0
    variants: tuple[Variant, ...] = (PLAIN, OURS)
    workloads: tuple[Workload, ...] = FULL_WORKLOADS
    r_calls: int = 2000
    memory_counts: tuple[int, ...] = (10_000, 50_000, 200_000)
    # The RSS target is about our bounded store; S keeps every task (add it with
    # --memory-systems S,O to see the contrast).
    memory_variants: tuple[Variant, ...] = (OURS,)
    # The store table (benchmarks.stores): same rounds, duration and warm-up.
    stores: tuple[stores.StoreSystem, ...] = stores.SYSTEMS
    # > 0: each store round sends this many requests instead of running for *duration*
    # (the smoke run: the plain SDK's PostgreSQL store may answer none in a one-second
    # window on a loaded machine, and the smoke run checks that every store answers).
    store_requests: int = 0


@dataclass
class Results:
    plan: Plan
    # samples[(workload label, variant label)] -> one Metrics per round
    samples: dict[tuple[str, str], list[Metrics]] = field(default_factory=dict)
    r_samples: list[Metrics] = field(default_factory=list)
    # memory[variant label] -> [(tasks sent, RSS MiB)]
    memory: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    # stores[store system label] -> one Metrics per round
    stores: dict[str, list[Metrics]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, workload: Workload, variant: Variant, metrics: Metrics) -> None:
        self.samples.setdefault((label(workload), variant.label), []).append(metrics)


def label(workload: Workload) -> str:
    return f"{workload.name} c={workload.connections}"


def _run_workload(server: Server, workload: Workload, duration: float) -> Metrics:
    cpu0 = server.cpu()
    if workload.kind == "stream":
        res = asyncio.run(
            run_streams(server.base_url + "/", connections=workload.connections, duration=duration)
        )
        cpu = server.cpu() - cpu0
        return {
            "rps": res.rps,
            "cpu_us": cpu / res.requests * 1e6 if res.requests else float("nan"),
            "ttfe_p50_ms": res.ttfe_ms(0.5),
            "ttfe_p99_ms": res.ttfe_ms(0.99),
            "events_per_s": res.events_per_s,
            "errors": float(res.bad),
        }
    url = server.base_url + (CARD_PATH if workload.kind == "card" else "/")
    wrk = run_wrk(url, workload.kind, connections=workload.connections, duration=duration)
    cpu = server.cpu() - cpu0
    return wrk.metrics(cpu)


def _warm_up(server: Server, plan: Plan) -> None:
    if plan.warmup <= 0:
        return
    kinds = {w.kind for w in plan.workloads}
    if "card" in kinds:
        run_wrk(server.base_url + CARD_PATH, "card", connections=4, duration=plan.warmup)
    if kinds & {"send", "data", "stream"}:
        run_wrk(server.base_url + "/", "send", connections=4, duration=plan.warmup)


def measure_r(calls: int) -> Metrics:
    """R in its own process: ``Executor.call_async()`` CPU µs per call (see benchmarks.inproc)."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.inproc", "--calls", str(calls)],
        cwd=str(ROOT), capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    return {k: float(raw[k]) for k in ("cpu_us", "wall_us", "apcore_cpu_us", "apcore_wall_us")}


def measure_memory(variant: Variant, counts: tuple[int, ...]) -> list[tuple[int, float]]:
    """RSS (MiB) of one fresh server after cumulative blocking SendMessage counts."""
    points: list[tuple[int, float]] = []
    with run_server(variant) as server:
        sent = 0
        for target in sorted(counts):
            res = run_wrk_count(server.base_url + "/", total=target - sent, connections=32)
            sent += res.requests
            if res.failed:
                raise RuntimeError(f"{variant.label}: {res.failed} failed requests while loading")
            points.append((sent, server.rss() / 2**20))
    return points


def run(plan: Plan, log: Callable[[str], None] = print) -> Results:
    """Run the whole plan and return the raw samples."""
    results = Results(plan)
    for rnd in range(1, plan.rounds + 1):
        for variant in plan.variants:
            with run_server(variant) as server:
                _warm_up(server, plan)
                for workload in plan.workloads:
                    metrics = _run_workload(server, workload, plan.duration)
                    results.add(workload, variant, metrics)
                    log(
                        f"round {rnd} {variant.label:8} {label(workload):28} "
                        f"{metrics['rps']:8.1f} req/s {metrics['cpu_us']:8.0f} CPU us/req"
                        f" errors={metrics['errors']:.0f}"
                    )
        if plan.r_calls:
            r = measure_r(plan.r_calls)
            results.r_samples.append(r)
            log(f"round {rnd} R        Executor.call_async {r['cpu_us']:8.0f} CPU us/call")
    if plan.stores:
        results.stores = stores.run(
            plan.rounds, plan.duration, plan.warmup, systems=plan.stores, log=log,
            notes=results.notes, requests=plan.store_requests,
        )  # fmt: skip
    for variant in plan.memory_variants if plan.memory_counts else ():
        points = measure_memory(variant, plan.memory_counts)
        results.memory[variant.label] = points
        log(f"memory {variant.label}: " + ", ".join(f"{n} tasks {m:.0f} MiB" for n, m in points))
    return results
