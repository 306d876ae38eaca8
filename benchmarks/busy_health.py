"""How fast a cheap GET answers while large request bodies arrive: plain a2a-sdk vs ours.

``python -m benchmarks.busy_health [--shapes ...] [--systems S,O] [--rounds 3]
[--parallel 8] [--append benchmarks/RESULTS.md]``

A body of one costly shape (many keys, many parts, long text, a file's bytes; beyond a
shape limit or just within all of them, each grown to the body cap) is sent ``--parallel``
times at once, ``--rounds`` times over, by a separate process (a sender in the prober's
process would share its GIL and time itself into the probes). Meanwhile one client asks
a cheap GET back to back, 5 ms apart, and times each answer: ``/health`` on ours (O), the
agent card on the plain a2a-sdk server (S, which has no ``/health``). The ``idle`` row is
the same probe with no bodies. O serves the examples (``apcore-a2a serve``, default
limits, gRPC on); S is ``benchmarks.apps.plain_app``, which parses any body whole (it has
no gRPC, so the gRPC shape is O's only).

The report gives, per shape and system, the probes in flight during the bodies, their p50,
p99 and slowest time, and what the bodies were answered with (O refuses the shapes beyond
a limit with that limit's error, and serves the others). Target: O's ``/health`` p99 under
100 ms for every shape (issue 31). ``tests/reliability/test_body_shape.py`` runs
:func:`probe_during` on the same bodies and checks what is answered, not how fast.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import datetime as dt
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._proc import CARD_PATH, ROOT, Variant, free_port, run_server, serving

#: the shapes, each grown to the body cap beyond a limit (refused) or within them (served)
SHAPES = (
    "keys beyond",
    "parts beyond",
    "values",
    "parts",
    "text",
    "file bytes",
    "gRPC values beyond",
)
#: the limit each refused shape breaks (its error names it)
REFUSED_BY = {
    "keys beyond": "max_json_values",
    "parts beyond": "max_parts_per_message",
    "gRPC values beyond": "max_json_values",
}
TARGET_P99_MS = 100.0


def _limits() -> dict[str, int]:
    from apcore_a2a.settings import Settings

    names = ("max_body_bytes", "max_json_values", "max_string_bytes")
    return {name: int(Settings.model_fields[name].default) for name in names}


def _rpc(parts: list[Any]) -> bytes:
    message = {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"skillId": "text.stats"},
    }
    body = {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": message}}
    return json.dumps(body).encode()


def body(shape: str) -> bytes:
    """A ``SendMessage`` body of *shape* (one of :data:`SHAPES`) at our default limits.

    The shapes beyond a limit are as large as the body cap lets them be (the issue's
    7.4 MB with 400k keys, 3 MB with 200k parts); the served ones sit at a limit within
    all of them, where each byte costs the most.
    """
    limits = _limits()
    cap, values = limits["max_body_bytes"], limits["max_json_values"]
    strings = limits["max_string_bytes"]
    if shape == "keys beyond":
        return _rpc([{"data": {f"key-{i:09d}": i for i in range(cap // 25)}}])
    if shape == "parts beyond":
        return _rpc([{"text": "x"}] * (cap // 16))
    if shape == "gRPC values beyond":  # no JSON to scan: 60k values, 0.8 MB of protobuf
        return _rpc([{"data": {"rows": [[1]] * 60_000}}])
    if shape == "values":  # one list and one separator per value: the dearest JSON
        return _rpc([{"data": {"rows": [[1]] * (values // 2 - 20)}}])
    if shape == "parts":
        per_part = {str(i): i for i in range(values // 100 - 3)}
        return _rpc([{"text": "x", "metadata": per_part}] * 99)
    if shape == "text":  # protobuf checks each character for surrogates
        return _rpc([{"text": "x" * (strings - 1024)}])
    if shape == "file bytes":
        raw = base64.b64encode(b"\x00" * (cap * 3 // 4 - 1024)).decode()
        return _rpc([{"raw": raw, "mediaType": "application/octet-stream"}])
    raise ValueError(f"unknown shape {shape!r}; one of {SHAPES}")


# -- the sender: its own process ---------------------------------------------------


def _answer_of(reply: Any) -> str:
    """One line for what a JSON-RPC body got: its error code and message, or the state."""
    if reply.status_code != 200:
        return f"HTTP {reply.status_code}"
    payload = reply.json()
    if "error" in payload:
        return f"{payload['error']['code']} {payload['error']['message']}"
    return str(payload["result"]["task"]["status"]["state"])


async def _send_http(base: str, data: bytes, rounds: int, parallel: int) -> None:
    import httpx

    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    limits = httpx.Limits(max_connections=parallel)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as http:
        print("sending", time.monotonic(), flush=True)
        for _ in range(rounds):
            posts = (http.post("/", content=data, headers=headers) for _ in range(parallel))
            for reply in await asyncio.gather(*posts):
                print(json.dumps(_answer_of(reply)), flush=True)
    print("done", time.monotonic(), flush=True)


async def _send_grpc(target: str, data: bytes, rounds: int, parallel: int) -> None:
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc
    from google.protobuf.json_format import ParseDict

    request = ParseDict(json.loads(data)["params"], a2a_pb2.SendMessageRequest())
    metadata = (("a2a-version", "1.0"),)
    async with grpc.aio.insecure_channel(target) as channel:
        send = a2a_pb2_grpc.A2AServiceStub(channel).SendMessage
        print("sending", time.monotonic(), flush=True)
        for _ in range(rounds):
            calls = (send(request, metadata=metadata) for _ in range(parallel))
            for answer in await asyncio.gather(*calls, return_exceptions=True):
                if isinstance(answer, grpc.aio.AioRpcError):
                    line = f"{answer.code().name} {answer.details()}"
                else:
                    line = str(a2a_pb2.TaskState.Name(answer.task.status.state))
                print(json.dumps(line), flush=True)
    print("done", time.monotonic(), flush=True)


def _sender_main(target: str, path: str, rounds: int, parallel: int) -> None:
    data = Path(path).read_bytes()
    if target.startswith("grpc:"):
        asyncio.run(_send_grpc(target.removeprefix("grpc:"), data, rounds, parallel))
    else:
        asyncio.run(_send_http(target, data, rounds, parallel))


# -- the prober ---------------------------------------------------------------------


@dataclass
class Flood:
    """What one flood of bodies looked like from the prober's side."""

    #: (HTTP status, seconds to the answer, answered while the bodies were being sent)
    probes: list[tuple[int, float, bool]] = field(default_factory=list)
    #: one line per body: its JSON-RPC error code and message, or its task's state
    answers: list[str] = field(default_factory=list)
    sender_exit: int | None = None
    #: probes answered between the first body going out and the last answer (``during``
    #: also counts the ones a flood held up from before it to after it)
    answered_inside: int = 0

    @property
    def during(self) -> list[tuple[int, float, bool]]:
        """The probes in flight at some time between the first body going out and the last
        answer (a probe held up by the whole flood counts: it is the one that waited)."""
        return [p for p in self.probes if p[2]]


async def probe_during(
    base_url: str,
    probe_path: str,
    shape: str,
    *,
    target: str | None = None,
    rounds: int = 3,
    parallel: int = 8,
) -> Flood:
    """Probe ``GET base_url + probe_path`` while *rounds* x *parallel* bodies of *shape* go
    to *target* (``base_url``, or ``grpc:HOST:PORT``) from another process."""
    import httpx

    flood = Flood()
    # When the sender began and ended, by the machine's monotonic clock (the same in every
    # process): a flag set as its lines are read would lag them on a loaded machine, and a
    # short flood could then hold no probe. A probe counts when its span meets the window,
    # not only when it ends inside: a server that parses the bodies on its loop answers the
    # probe it holds after the last body, and that probe is the flood's slowest.
    window = [float("inf"), float("-inf")]
    spans: list[tuple[float, float]] = []
    stop = asyncio.Event()

    async def probe(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            started = time.monotonic()
            status = (await http.get(probe_path)).status_code
            spans.append((started, time.monotonic()))
            flood.probes.append((status, spans[-1][1] - started, False))
            await asyncio.sleep(0.005)

    with tempfile.NamedTemporaryFile(suffix=".json") as file:
        file.write(body(shape))
        file.flush()
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
            prober = asyncio.create_task(probe(http))
            try:
                sender = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "benchmarks.busy_health", "--send",
                    target or base_url, file.name, "--rounds", str(rounds),
                    "--parallel", str(parallel),
                    cwd=str(ROOT), stdout=asyncio.subprocess.PIPE,
                )  # fmt: skip
                assert sender.stdout is not None
                async for raw in sender.stdout:
                    line = raw.decode().strip()
                    word, _, at = line.partition(" ")
                    if word in ("sending", "done"):
                        window[word == "done"] = float(at)
                    elif line:
                        flood.answers.append(json.loads(line))
                flood.sender_exit = await sender.wait()
            finally:
                stop.set()
                await prober
    flood.probes = [
        (status, seconds, start <= window[1] and end >= window[0])
        for (status, seconds, _), (start, end) in zip(flood.probes, spans, strict=True)
    ]
    flood.answered_inside = sum(window[0] <= end <= window[1] for _, end in spans)
    return flood


async def probe_idle(base_url: str, probe_path: str, seconds: float) -> Flood:
    """The probe alone for *seconds*: the floor the floods are read against."""
    import httpx

    flood = Flood()
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            status = (await http.get(probe_path)).status_code
            flood.probes.append((status, time.perf_counter() - started, True))
            await asyncio.sleep(0.005)
    return flood


# -- the systems and the report -----------------------------------------------------


@contextlib.contextmanager
def _ours() -> Iterator[tuple[str, str | None]]:
    """O: ``apcore-a2a serve`` of the examples, with gRPC when the ``grpc`` extra is
    installed; yields (base URL, gRPC target or ``None``)."""
    port, grpc_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1", "--port",
           str(port), "--extensions-dir", str(ROOT / "examples" / "extensions")]  # fmt: skip
    with_grpc = importlib.util.find_spec("grpc") is not None
    if with_grpc:
        cmd += ["--grpc-port", str(grpc_port)]
    with serving(cmd, port, 120.0):
        yield f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}" if with_grpc else None


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def _row(system: str, shape: str, flood: Flood) -> str:
    seconds = [s for status, s, _ in flood.during if status == 200]
    failed = sum(1 for status, _, _ in flood.during if status != 200)
    kinds = collections.Counter(a.split(" (")[0][:60] for a in flood.answers)
    answered = "; ".join(f"{n}x {k}" for k, n in kinds.most_common()) or "-"
    cells = [f"{_quantile(seconds, q) * 1000:.1f}" for q in (0.5, 0.99, 1.0)]
    return f"| {shape} | {system} | {len(seconds)} | {failed} | {' | '.join(cells)} | {answered} |"


def _note(system: str, shape: str, flood: Flood) -> str | None:
    if system != "O":
        return None
    p99 = _quantile([s for status, s, _ in flood.during if status == 200], 0.99) * 1000
    met = "met" if p99 < TARGET_P99_MS else "**not met**"
    return f"{shape}: O /health p99 {p99:.1f} ms < {TARGET_P99_MS:.0f} ms: {met}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.busy_health", description=__doc__)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument("--systems", default="S,O", help="S (plain a2a-sdk), O (ours)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of bodies per shape")
    parser.add_argument("--parallel", type=int, default=8, help="bodies sent at once")
    parser.add_argument("--idle", type=float, default=2.0, help="seconds of the idle row")
    parser.add_argument("--append", type=Path, help="append the report to this Markdown file")
    parser.add_argument("--send", nargs=2, metavar=("TARGET", "BODY_FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.send:
        _sender_main(*args.send, args.rounds, args.parallel)
        return 0

    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    systems = {s.strip() for s in args.systems.split(",")}
    rows: dict[tuple[str, str], Flood] = {}
    failures = 0
    with contextlib.ExitStack() as stack:
        servers: dict[str, tuple[str, str, str | None]] = {}
        if "S" in systems:
            plain = stack.enter_context(run_server(Variant("S", "plain")))
            servers["S"] = (plain.base_url, CARD_PATH, None)
        if "O" in systems:
            base, grpc_target = stack.enter_context(_ours())
            servers["O"] = (base, "/health", grpc_target)
        for system, (base, path, _grpc) in servers.items():
            asyncio.run(probe_idle(base, path, 0.5))  # warm-up: first connections, caches
            rows[("idle", system)] = asyncio.run(probe_idle(base, path, args.idle))
        for shape in shapes:
            for system, (base, path, grpc_target) in servers.items():
                if shape.startswith("gRPC") and grpc_target is None:
                    continue
                target = f"grpc:{grpc_target}" if shape.startswith("gRPC") else base
                print(f"{system} {shape} ...", file=sys.stderr, flush=True)
                flood = asyncio.run(
                    probe_during(
                        base, path, shape, target=target,
                        rounds=args.rounds, parallel=args.parallel,
                    )
                )  # fmt: skip
                failures += flood.sender_exit != 0
                rows[(shape, system)] = flood

    load = os.getloadavg()
    lines = [
        f"## Busy /health, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"`python -m benchmarks.busy_health` ({args.rounds} rounds x {args.parallel} bodies "
        f"per shape; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}). The probe: "
        "O `/health`, S the agent card; times in ms from the prober's side.",
        "",
        "| shape | system | probes | failed | p50 | p99 | slowest | bodies answered |",
        "|---|---|---:|---:|---:|---:|---:|---|",
        *(_row(system, shape, flood) for (shape, system), flood in rows.items()),
        "",
        *(
            f"* {note}"
            for (shape, system), flood in rows.items()
            if shape != "idle" and (note := _note(system, shape, flood))
        ),
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.append:
        with args.append.open("a", encoding="utf-8") as out:
            out.write("\n" + report)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
