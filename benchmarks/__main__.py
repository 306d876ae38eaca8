"""``python -m benchmarks [--quick | --smoke] [--stores] ...``: run S/O/R side by side and report.

Prints the Markdown table and, unless ``--no-append``, appends it to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks import harness, report
from benchmarks._wrk import wrk_path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def _speed_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("uvloop", "httptools"))


def build_plan(args: argparse.Namespace) -> tuple[harness.Plan, list[str]]:
    notes: list[str] = []
    if args.smoke:
        plan = harness.Plan(
            # A warm-up, short as it is, pays a fresh server's first calls (pool, tables)
            # outside the window, so a loaded machine still completes requests in it.
            rounds=1, duration=1.0, warmup=0.5, workloads=harness.SMOKE_WORKLOADS, r_calls=200,
            memory_counts=(200,), memory_variants=(harness.OURS,), store_requests=48,
        )  # fmt: skip
    elif args.quick:
        plan = harness.Plan(rounds=2, duration=2.0, memory_counts=(1_000, 5_000))
    else:
        plan = harness.Plan()
    if args.rounds is not None:
        plan = replace(plan, rounds=args.rounds)
    if args.duration is not None:
        plan = replace(plan, duration=args.duration)
    if args.memory is not None:
        counts = tuple(int(x) for x in args.memory.split(",") if x.strip())
        plan = replace(plan, memory_counts=counts)
    if args.memory_systems is not None:
        chosen = {x.strip() for x in args.memory_systems.split(",")}
        by_label = {v.label: v for v in (harness.PLAIN, harness.OURS)}
        plan = replace(plan, memory_variants=tuple(v for k, v in by_label.items() if k in chosen))
    if args.r_calls is not None:
        plan = replace(plan, r_calls=args.r_calls)
    variants = list(plan.variants)
    if args.speed and not args.smoke and not args.stores:
        if _speed_available():
            variants += [harness.PLAIN_SPEED, harness.OURS_SPEED]
        else:
            notes.append("speed variants skipped: uvloop/httptools not installed")
    if not args.store_table:
        plan = replace(plan, stores=())
    if args.stores:
        # Only the store table: no main workloads, no R, no RSS run.
        plan = replace(plan, workloads=(), r_calls=0, memory_counts=())
        variants = []
    if args.only:
        variants = [v for v in variants if v.kind == args.only]
        plan = replace(plan, memory_variants=tuple(
            v for v in plan.memory_variants if v.kind == args.only))  # fmt: skip
    return replace(plan, variants=tuple(variants)), notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="2 short rounds, small memory run")
    mode.add_argument("--smoke", action="store_true", help="seconds-long check that all works")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--duration", type=float, help="seconds per workload")
    parser.add_argument("--memory", help="comma-separated task counts for RSS ('' = skip)")
    parser.add_argument("--memory-systems", default=None,
                        help="systems for the RSS run: 'O' (default) or 'S,O'")  # fmt: skip
    parser.add_argument("--r-calls", type=int, help="in-process calls per round for R")
    parser.add_argument("--no-speed", dest="speed", action="store_false",
                        help="skip the uvloop+httptools variants")  # fmt: skip
    parser.add_argument("--only", choices=["plain", "ours"], help="run one system only")
    stores = parser.add_mutually_exclusive_group()
    stores.add_argument("--stores", action="store_true",
                        help="only the store table (memory/SQLite/PostgreSQL)")  # fmt: skip
    stores.add_argument("--no-stores", dest="store_table", action="store_false",
                        help="skip the store table")  # fmt: skip
    parser.add_argument("--title", help="heading for the RESULTS.md section")
    parser.add_argument("--output", type=Path, default=RESULTS, help="Markdown file to append to")
    parser.add_argument("--no-append", action="store_true", help="print only")
    parser.add_argument("--json", type=Path, help="also write raw samples as JSON")
    args = parser.parse_args(argv)

    wrk_path()  # fail early with an install hint
    plan, notes = build_plan(args)
    results = harness.run(plan, log=lambda line: print(line, file=sys.stderr, flush=True))
    results.notes.extend(notes)
    text = report.render(results, args.title)
    print(text)
    if not args.no_append:
        report.append(args.output, text)
    if args.json:
        raw = {
            "plan": asdict(plan),
            "samples": {f"{w} | {v}": s for (w, v), s in results.samples.items()},
            "r": results.r_samples,
            "memory": results.memory,
            "stores": results.stores,
        }
        args.json.write_text(json.dumps(raw, indent=2))
    every = [*results.samples.values(), *results.stores.values()]
    failures = sum(m.get("errors", 0) for s in every for m in s)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
