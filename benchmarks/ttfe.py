"""Time to the first SSE event at 16 concurrent streams: plain a2a-sdk server vs ours.

``python -m benchmarks.ttfe [--connections 16] [--duration 5] [--rounds 2]``

Both servers run as subprocesses (``benchmarks.serve``) on 127.0.0.1 in the same run, one
after the other and alternating per round, so machine noise hits both alike. Each of the
*connections* clients keeps one keep-alive connection and sends ``SendStreamingMessage``
back to back (``benchmarks._stream``); the time from writing the request to the first
``data:`` line is recorded. The first event is the submitted Task on both servers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from benchmarks._proc import Variant, run_server
from benchmarks._stream import StreamResult, run_streams

PLAIN = Variant("plain a2a-sdk", "plain")
OURS = Variant("apcore-a2a", "ours")


def _measure(variant: Variant, connections: int, duration: float, warmup: float) -> StreamResult:
    with run_server(variant) as server:
        asyncio.run(run_streams(server.base_url + "/", connections=connections, duration=warmup))
        return asyncio.run(
            run_streams(server.base_url + "/", connections=connections, duration=duration)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ttfe", description=__doc__)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)

    results: dict[str, list[StreamResult]] = {PLAIN.label: [], OURS.label: []}
    for round_no in range(args.rounds):
        order = (PLAIN, OURS) if round_no % 2 == 0 else (OURS, PLAIN)
        for variant in order:
            results[variant.label].append(
                _measure(variant, args.connections, args.duration, args.warmup)
            )

    print(f"time to first SSE event, {args.connections} concurrent streams, "
          f"{args.rounds} x {args.duration:g} s per server")  # fmt: skip
    print("| server | streams | p50 ms | p90 ms | p99 ms | streams/s | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, rounds in results.items():
        merged = StreamResult(
            requests=sum(r.requests for r in rounds),
            bad=sum(r.bad for r in rounds),
            duration_s=sum(r.duration_s for r in rounds),
            first_event_s=[x for r in rounds for x in r.first_event_s],
        )
        print(
            f"| {label} | {merged.requests} | {merged.ttfe_ms(0.5):.2f} | "
            f"{merged.ttfe_ms(0.9):.2f} | {merged.ttfe_ms(0.99):.2f} | "
            f"{statistics.fmean(r.rps for r in rounds):.0f} | {merged.bad} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
