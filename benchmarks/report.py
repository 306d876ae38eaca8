"""Turn harness samples into the Markdown report: medians (min-max), ratios, overhead, targets."""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import shutil
import statistics
import subprocess
from importlib import metadata
from pathlib import Path

from benchmarks import stores
from benchmarks._proc import ROOT
from benchmarks.harness import Metrics, Results

# The targets (see docs/benchmarks.md).
TARGET_OVERHEAD_US = 150.0
TARGET_CARD_RATIO = 1.5
TARGET_TTFE_MS = 20.0
TARGET_RSS_SPREAD = 0.10


def _values(samples: list[Metrics], key: str) -> list[float]:
    return [s[key] for s in samples if key in s and not math.isnan(s[key])]


def median(samples: list[Metrics], key: str) -> float:
    vals = _values(samples, key)
    return statistics.median(vals) if vals else float("nan")


def ratio(num: list[Metrics], den: list[Metrics], key: str = "rps") -> float:
    """Ratio of the medians; NaN when the denominator measured nothing (a starved run)."""
    below = median(den, key)
    return median(num, key) / below if below else float("nan")


def cell(samples: list[Metrics], key: str, fmt: str = "{:.0f}") -> str:
    vals = _values(samples, key)
    if not vals:
        return "-"
    med = fmt.format(statistics.median(vals))
    if len(vals) == 1:
        return med
    return f"{med} ({fmt.format(min(vals))}-{fmt.format(max(vals))})"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("apcore-a2a", "a2a-sdk", "apcore", "uvicorn", "starlette", "protobuf"):
        out[dist] = _dist_version(dist)
    for dist in ("uvloop", "httptools"):
        out[dist] = _dist_version(dist)
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    out["git"] = rev.stdout.strip() or "unknown"
    wrk = shutil.which("wrk")
    if wrk:
        ver = subprocess.run([wrk, "-v"], capture_output=True, text=True, check=False)
        out["wrk"] = (ver.stdout or ver.stderr).split(" [")[0].replace("wrk ", "").strip()
    return out


def _dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _machine() -> str:
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, {model}, Linux {platform.release()}, loadavg at end {load}"


def _workload_table(res: Results) -> list[str]:
    lines = [
        "| workload | system | req/s | server CPU µs/req | p50 ms | p99 ms | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for (work, var), samples in res.samples.items():
        if "ttfe_p50_ms" in samples[0]:
            p50 = cell(samples, "ttfe_p50_ms", "{:.1f}")
            p99 = cell(samples, "ttfe_p99_ms", "{:.1f}")
            extra = f" (first event; {cell(samples, 'events_per_s')} events/s)"
            lines.append(
                f"| {work} | {var} | {cell(samples, 'rps')}{extra} | {cell(samples, 'cpu_us')} "
                f"| {p50} | {p99} | {sum(_values(samples, 'errors')):.0f} |"
            )
        else:
            lines.append(
                f"| {work} | {var} | {cell(samples, 'rps')} | {cell(samples, 'cpu_us')} "
                f"| {cell(samples, 'p50_ms', '{:.1f}')} | {cell(samples, 'p99_ms', '{:.1f}')} "
                f"| {sum(_values(samples, 'errors')):.0f} |"
            )
    if res.r_samples:
        lines.append(
            f"| Executor.call_async (in-process, as O runs it) | R | - "
            f"| {cell(res.r_samples, 'cpu_us')} "
            f"| {cell(res.r_samples, 'wall_us', '{:.0f}')} µs wall | - | - |"
        )
        if "apcore_cpu_us" in res.r_samples[0]:
            lines.append(
                f"| Executor.call_async (in-process, apcore as shipped) | R0 | - "
                f"| {cell(res.r_samples, 'apcore_cpu_us')} "
                f"| {cell(res.r_samples, 'apcore_wall_us', '{:.0f}')} µs wall | - | - |"
            )
    return lines


def _pairs(res: Results) -> list[tuple[str, str]]:
    labels = {var for _, var in res.samples}
    pairs = [("O", "S"), ("O+speed", "S+speed"), ("O+speed", "O"), ("S+speed", "S")]
    return [(a, b) for a, b in pairs if a in labels and b in labels]


def _ratio_table(res: Results) -> list[str]:
    r_cpu = median(res.r_samples, "cpu_us") if res.r_samples else float("nan")
    lines = [
        "| workload | pair | req/s ratio | CPU µs/req ratio | CPU µs/req difference | "
        "O - S - R (CPU µs/req) |",
        "|---|---|---|---|---|---|",
    ]
    works = list(dict.fromkeys(work for work, _ in res.samples))
    for a, b in _pairs(res):
        for work in works:
            sa, sb = res.samples.get((work, a)), res.samples.get((work, b))
            if not sa or not sb:
                continue
            rps = ratio(sa, sb)
            cpu_a, cpu_b = median(sa, "cpu_us"), median(sb, "cpu_us")
            overhead = "-"
            if a.startswith("O") and b.startswith("S") and not work.startswith("card"):
                overhead = f"{cpu_a - cpu_b - r_cpu:.0f}"
            lines.append(
                f"| {work} | {a} / {b} | {rps:.2f}x | {cpu_a / cpu_b:.2f}x | "
                f"{cpu_a - cpu_b:+.0f} | {overhead} |"
            )
    return lines


def _memory_lines(res: Results) -> list[str]:
    if not res.memory:
        return ["Memory: not measured in this run."]
    lines = [
        "| system | " + " | ".join(f"RSS after {n} tasks" for n in res.plan.memory_counts) + " |",
        "|---|" + "---|" * len(res.plan.memory_counts),
    ]
    for var, points in res.memory.items():
        lines.append(f"| {var} | " + " | ".join(f"{mib:.0f} MiB" for _, mib in points) + " |")
    return lines


def _ratio_cell(num: list[Metrics], den: list[Metrics]) -> tuple[float, str]:
    """Ratio of the req/s medians, with the (min-max) of the per-round ratios."""
    value = ratio(num, den)
    rounds = [a["rps"] / b["rps"] for a, b in zip(num, den, strict=False) if b["rps"]]
    spread = f" ({min(rounds):.2f}-{max(rounds):.2f})" if len(rounds) > 1 else ""
    return value, f"{value:.2f}x{spread}"


def store_lines(res: Results) -> list[str]:
    """The store table, its ratios and the durable-store targets (empty if not run)."""
    if not res.stores:
        return []
    lines = [
        f"Stores: blocking SendMessage c={stores.CONNECTIONS}, a fresh store per server start"
        " (SQLite file; PostgreSQL schema on 127.0.0.1, dropped after); O = ours, S = plain"
        " a2a-sdk with the SDK's DatabaseTaskStore (memory: ours' default bounded store).",
        "",
        "| store | system | req/s | server CPU µs/req | p50 ms | p99 ms | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, samples in res.stores.items():
        system, _, store = name.partition(" ")
        lines.append(
            f"| {store} | {system} | {cell(samples, 'rps')} | {cell(samples, 'cpu_us')} "
            f"| {cell(samples, 'p50_ms', '{:.1f}')} | {cell(samples, 'p99_ms', '{:.1f}')} "
            f"| {sum(_values(samples, 'errors')):.0f} |"
        )
    lines += [
        "",
        "| database | O-SQL / O memory req/s | O-SQL / S-SQL req/s | "
        f"target >= {stores.TARGET_VS_MEMORY}x memory | target >= {stores.TARGET_VS_SDK}x S |",
        "|---|---|---|---|---|",
    ]
    memory = res.stores.get("O memory")
    for name, ours in res.stores.items():
        system, _, db = name.partition(" ")
        if system != "O" or db == "memory":
            continue
        sdk = res.stores.get(f"S {db}")
        vs_mem = vs_sdk = (float("nan"), "-")
        if memory:
            vs_mem = _ratio_cell(ours, memory)
        if sdk:
            vs_sdk = _ratio_cell(ours, sdk)
        lines.append(
            f"| {db} | {vs_mem[1]} | {vs_sdk[1]} | "
            f"{_mark(vs_mem[0], stores.TARGET_VS_MEMORY)} | "
            f"{_mark(vs_sdk[0], stores.TARGET_VS_SDK)} |"
        )
    return [*lines, ""]


def _mark(value: float, target: float) -> str:
    if math.isnan(value):
        return "not measured"
    return "**met**" if value >= target else "**not met**"


def targets(res: Results) -> list[str]:
    out: list[str] = []

    def mark(ok: bool | None) -> str:
        return "not measured" if ok is None else ("**met**" if ok else "**not met**")

    send16 = "SendMessage c=16"
    so, ss = res.samples.get((send16, "O")), res.samples.get((send16, "S"))
    if so and ss and res.r_samples:
        ov = median(so, "cpu_us") - median(ss, "cpu_us") - median(res.r_samples, "cpu_us")
        ok = ov <= TARGET_OVERHEAD_US
        out.append(
            f"- Adapter overhead O - S - R <= {TARGET_OVERHEAD_US:.0f} µs CPU per SendMessage"
            f" at c=16: {ov:.0f} µs: {mark(ok)}"
        )
    else:
        out.append(f"- Adapter overhead at c=16: {mark(None)}")
    co, cs = res.samples.get(("card GET c=16", "O")), res.samples.get(("card GET c=16", "S"))
    if co and cs:
        value = ratio(co, cs)
        out.append(
            f"- Card GET >= {TARGET_CARD_RATIO}x S: {value:.2f}x: "
            f"{mark(value >= TARGET_CARD_RATIO)}"
        )
    else:
        out.append(f"- Card GET >= {TARGET_CARD_RATIO}x S: {mark(None)}")
    st = res.samples.get(("SendStreamingMessage c=16", "O"))
    if st:
        ttfe = median(st, "ttfe_p50_ms")
        out.append(
            f"- Time to first SSE event p50 <= {TARGET_TTFE_MS:.0f} ms at c=16 (O): "
            f"{ttfe:.1f} ms: {mark(ttfe <= TARGET_TTFE_MS)}"
        )
    else:
        out.append(f"- Time to first SSE event p50 at c=16: {mark(None)}")
    out += _stream_targets(res)
    out += _speed_targets(res)
    mem = dict(res.memory.get("O", []))
    hi = max(res.plan.memory_counts, default=0)
    if mem and 50_000 in mem and hi >= 200_000 and hi in mem:
        spread = mem[hi] / mem[50_000] - 1
        out.append(
            f"- RSS within ±10% between 50k and 200k tasks (O): {spread:+.1%}: "
            f"{mark(abs(spread) <= TARGET_RSS_SPREAD)}"
        )
    else:
        out.append(
            f"- RSS within ±10% between 50k and 200k tasks: {mark(None)} "
            "(needs a run with --memory including 50000 and 200000)"
        )
    return out


def _speed_targets(res: Results) -> list[str]:
    """Issue 20's throughput ratios against plain S at c=16 (rows only for systems run)."""
    work = "SendMessage c=16"
    ss = res.samples.get((work, "S"))
    if not ss:
        return []
    out = []
    for system, target, label in (
        ("O+speed", 0.95, "with the speed extra, O+speed"),
        ("O", 1.0, "stretch (full apcore pipeline at bare-SDK speed), O"),
    ):
        so = res.samples.get((work, system))
        if so:
            value = ratio(so, ss)
            out.append(
                f"- SendMessage c=16 {label} >= {target:.2f}x S: {value:.2f}x: "
                f"{_mark(value - target, 0)}"
            )
    return out


def _stream_targets(res: Results) -> list[str]:
    """Issue 20's stream targets: CPU per stream <= S + R + 150 µs, TTFE p50 <= S's."""
    work = "SendStreamingMessage c=16"
    so, ss = res.samples.get((work, "O")), res.samples.get((work, "S"))
    if not (so and ss and res.r_samples):
        return [f"- Stream CPU and time to first event against S at c=16: {_mark(math.nan, 0)}"]
    over = median(so, "cpu_us") - median(ss, "cpu_us") - median(res.r_samples, "cpu_us")
    value = ratio(so, ss, "ttfe_p50_ms")
    return [
        f"- Server CPU per stream O <= S + R + {TARGET_OVERHEAD_US:.0f} µs at c=16: O - S - R ="
        f" {over:.0f} µs: {_mark(TARGET_OVERHEAD_US - over, 0)}",
        f"- Time to first SSE event p50 at c=16 O <= S: {value:.2f}x S: {_mark(1 - value, 0)}",
    ]


def render(res: Results, title: str | None = None) -> str:
    """The Markdown section for one run."""
    plan = res.plan
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    vers = ", ".join(f"{k} {v}" for k, v in versions().items())
    systems = [v.label for v in plan.variants] + [s.label.replace(" ", "-") for s in plan.stores]
    parts = [
        f"## {title or 'Run'} — {now}",
        "",
        f"- Versions: {vers}",
        f"- Machine: {_machine()}",
        f"- Plan: {plan.rounds} interleaved rounds ({' '.join(systems)}),"
        f" {plan.duration:g} s per workload after {plan.warmup:g} s warm-up, one uvicorn worker;"
        " medians with (min-max) over rounds; CPU = server process utime+stime per request.",
        *(f"- Note: {n}" for n in res.notes),
        "",
    ]
    if (plan.variants and plan.workloads) or res.samples or res.r_samples or res.memory:
        parts += [
            *_workload_table(res),
            "",
            *_ratio_table(res),
            "",
            *_memory_lines(res),
            "",
            "Targets:",
            *targets(res),
            "",
        ]
    parts += store_lines(res)
    return "\n".join(parts)


def append(path: Path, text: str) -> None:
    if not path.exists():
        path.write_text("# Benchmark results\n\nNewest run last. See docs/benchmarks.md.\n\n")
    with path.open("a") as fh:
        fh.write("\n" + text)
