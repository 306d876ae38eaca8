"""The benchmark harness runs end to end, and its report judges targets correctly.

No timing is asserted anywhere here: the smoke run only proves that every part of the
harness (both servers, wrk, the SSE client, R, RSS) works and that every request answered
correctly. Real numbers come from ``nox -s bench``.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from apcore import Registry
from pydantic import BaseModel

from benchmarks import harness, report
from benchmarks._wrk import _parse
from tests._support import TLS, run_python, running_server

needs_wrk = pytest.mark.skipif(
    shutil.which("wrk") is None and not os.environ.get("CI"),
    reason="wrk is not installed (apt-get install -y wrk); CI installs it",
)


@needs_wrk
def test_smoke_run_measures_both_servers_and_the_floor(tmp_path: Path) -> None:
    out_json = tmp_path / "raw.json"
    results_md = tmp_path / "RESULTS.md"
    done = run_python(
        [sys.executable, "-m", "benchmarks", "--smoke", "--output", str(results_md),
         "--json", str(out_json)],
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    raw = json.loads(out_json.read_text())
    samples: dict[str, list[dict[str, float]]] = raw["samples"]
    for workload in ("card GET c=4", "SendMessage c=4", "SendStreamingMessage c=4"):
        for system in ("S", "O"):
            (metrics,) = samples[f"{workload} | {system}"]
            assert metrics["errors"] == 0, (workload, system, metrics)
            assert metrics["rps"] > 0, (workload, system, metrics)
            assert metrics["cpu_us"] > 0, (workload, system, metrics)
    stream = samples["SendStreamingMessage c=4 | O"][0]
    assert stream["events_per_s"] > stream["rps"]  # several events per streamed task
    assert stream["ttfe_p50_ms"] > 0
    (r,) = raw["r"]
    assert r["cpu_us"] > 0
    ((tasks, rss_mib),) = raw["memory"]["O"]
    assert tasks >= 200 and rss_mib > 10
    # The printed and appended report carries the table, the pair ratios and the targets.
    text = results_md.read_text()
    assert text.strip().endswith(done.stdout.strip())
    assert "| SendMessage c=4 | O / S |" in text
    assert "Targets:" in text and "a2a-sdk 1.3" in text
    # The store table: ours on memory/SQLite(/PostgreSQL) and the plain SDK's
    # DatabaseTaskStore, every request answered COMPLETED, and the ratio rows.
    stores: dict[str, list[dict[str, float]]] = raw["stores"]
    expected = {"O memory", "O SQLite", "S SQLite"}
    if os.environ.get("CI"):
        expected |= {"O PostgreSQL", "O PostgreSQL+cluster", "S PostgreSQL"}
    assert expected <= set(stores)
    for system, rounds in stores.items():
        ((metrics,),) = [rounds]
        assert metrics["errors"] == 0 and metrics["rps"] > 0, (system, metrics)
    assert "| SQLite | O | " in text and "| SQLite | S | " in text
    assert "| database | O-SQL / O memory req/s | O-SQL / S-SQL req/s |" in text
    if os.environ.get("CI"):
        assert "| PostgreSQL+cluster | O | " in text  # cluster mode's row in the table
        # ... and its ratio row (vs memory; no plain-SDK counterpart)
        assert re.search(r"\n\| PostgreSQL\+cluster \| \d+\.\d\dx", text), text


def test_wrk_output_without_a_summary_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no summary"):
        _parse("Running 1s test @ http://127.0.0.1:1/\n  0 requests in 1.00s\n")
    parsed = _parse(
        'WRKJSON {"requests":10,"duration_us":2000000,"replies":10,"bad":1,'
        '"socket_errors":2,"p50_us":1500,"p90_us":2000,"p99_us":9000}\n'
    )
    assert parsed.rps == 5.0 and parsed.failed == 3 and parsed.p99_ms == 9.0


def _results(o_cpu: float, card_o: float, ttfe: float, rss: tuple[float, float]) -> Any:
    plan = harness.Plan(memory_counts=(10_000, 50_000, 200_000))
    res = harness.Results(plan)
    send, card = harness.Workload("SendMessage", "send", 16), harness.FULL_WORKLOADS[0]
    stream = harness.Workload("SendStreamingMessage", "stream", 16)
    for cpu_s, cpu_o in ((2000.0, o_cpu), (2100.0, o_cpu + 50)):
        res.add(send, harness.PLAIN, {"rps": 300, "cpu_us": cpu_s, "errors": 0})
        res.add(send, harness.OURS, {"rps": 250, "cpu_us": cpu_o, "errors": 0})
        res.add(card, harness.PLAIN, {"rps": 1000, "cpu_us": 300, "errors": 0})
        res.add(card, harness.OURS, {"rps": card_o, "cpu_us": 100, "errors": 0})
        res.add(stream, harness.OURS, {"rps": 100, "cpu_us": 900, "ttfe_p50_ms": ttfe,
                                        "ttfe_p99_ms": ttfe * 2, "events_per_s": 400,
                                        "errors": 0})  # fmt: skip
    res.r_samples = [{"cpu_us": 600.0, "wall_us": 610.0}]
    res.memory["O"] = [(10_000, 80.0), (50_000, rss[0]), (200_000, rss[1])]
    return res


def test_targets_are_marked_met_and_not_met_from_the_medians() -> None:
    good = "\n".join(report.targets(_results(2700.0, 1600.0, 12.0, (100.0, 105.0))))
    # O - S - R = median(2700, 2750) - median(2000, 2100) - 600 = 75 µs
    assert "75 µs: **met**" in good
    assert "1.60x: **met**" in good
    assert "12.0 ms: **met**" in good
    assert "+5.0%: **met**" in good
    assert "Stream CPU and time to first event against S at c=16: not measured" in good
    bad = "\n".join(report.targets(_results(3000.0, 1400.0, 25.0, (100.0, 120.0))))
    assert "375 µs: **not met**" in bad
    assert "1.40x: **not met**" in bad
    assert "25.0 ms: **not met**" in bad
    assert "+20.0%: **not met**" in bad
    assert "O >= 1.00x S: 0.83x: **not met**" in bad  # 250 vs 300 req/s
    assert "**met**" not in bad


def test_speed_targets_compare_with_plain_s() -> None:
    res = _results(2700.0, 1600.0, 12.0, (100.0, 105.0))
    send = harness.Workload("SendMessage", "send", 16)
    for rps in (280.0, 300.0):
        res.add(send, harness.OURS_SPEED, {"rps": rps, "cpu_us": 2000.0, "errors": 0})
    lines = "\n".join(report.targets(res))
    # O+speed median 290 vs S 300: 0.97x >= 0.95x; O 250 vs 300: 0.83x < 1.0x.
    assert "O+speed >= 0.95x S: 0.97x: **met**" in lines
    assert "O >= 1.00x S: 0.83x: **not met**" in lines


def test_a_plan_without_memory_or_stream_reports_not_measured() -> None:
    res = harness.Results(harness.Plan(memory_counts=()))
    lines = report.targets(res)
    assert len(lines) == 5 and all("not measured" in line for line in lines)
    assert "Memory: not measured" in report.render(res)


class _In(BaseModel):
    text: str


class _Out(BaseModel):
    text: str


class _Echo:
    input_schema = _In
    output_schema = _Out
    description = "Echo."

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": inputs["text"]}


async def test_server_freezes_startup_objects_while_it_runs() -> None:
    from apcore_a2a import A2AServerFactory

    registry = Registry()
    registry.register("demo.echo", _Echo())
    # gc.freeze() is process tuning: on under serve() and the CLI, off for a mounted app.
    app, _card = A2AServerFactory(registry, process_tuning=True).create()
    gc.unfreeze()
    async with running_server(app) as base:
        # Startup objects are out of the collector's way while requests are served.
        assert gc.get_freeze_count() > 1000
        async with httpx.AsyncClient(verify=TLS) as client:
            card = await client.get(base + "/.well-known/agent-card.json")
        assert card.status_code == 200
    # After shutdown the app's own cycles are collectable again.
    assert gc.get_freeze_count() == 0

    # Without process tuning (an app a host mounts) the host's collector is left alone.
    plain, _card = A2AServerFactory(registry).create()
    async with running_server(plain):
        assert gc.get_freeze_count() == 0


def test_stream_targets_compare_with_s_and_r() -> None:
    res = _results(2700.0, 1600.0, 12.0, (100.0, 105.0))
    stream = harness.Workload("SendStreamingMessage", "stream", 16)
    for ttfe in (10.0, 20.0):
        res.add(stream, harness.PLAIN, {"rps": 100, "cpu_us": 250, "ttfe_p50_ms": ttfe,
                                        "errors": 0})  # fmt: skip
    good = "\n".join(report.targets(res))
    # O streams: median(900, 900) - 250 - R 600 = 50 µs; TTFE 12 ms vs S's median 15 ms.
    assert "O - S - R = 50 µs: **met**" in good
    assert "0.80x S: **met**" in good
    res.r_samples = [{"cpu_us": 400.0, "wall_us": 410.0}]
    for sample in res.samples[("SendStreamingMessage c=16", "O")]:
        sample["ttfe_p50_ms"] = 18.0
    bad = "\n".join(report.targets(res))
    assert "O - S - R = 250 µs: **not met**" in bad
    assert "1.20x S: **not met**" in bad


def test_store_ratios_are_medians_with_the_per_round_range() -> None:
    res = harness.Results(harness.Plan())
    rounds = {
        "O memory": (100.0, 120.0),
        "O SQLite": (90.0, 84.0),
        "S SQLite": (50.0, 60.0),
        "O PostgreSQL": (60.0, 60.0),
    }
    for system, values in rounds.items():
        res.stores[system] = [{"rps": v, "cpu_us": 1000.0, "errors": 0.0} for v in values]
    text = "\n".join(report.store_lines(res))
    # SQLite: median 87 / memory median 110 = 0.79 (rounds 0.90, 0.70); / S 55 = 1.58.
    assert "| SQLite | 0.79x (0.70-0.90) | 1.58x (1.40-1.80) | **not met** | **met** |" in text
    # PostgreSQL without its S system: that ratio is not measured.
    assert "| PostgreSQL | 0.55x (0.50-0.60) | - | **not met** | not measured |" in text
    assert report.store_lines(harness.Results(harness.Plan())) == []


def test_busy_health_table_probes_both_servers_while_bodies_arrive(tmp_path: Path) -> None:
    # The figures are the report's to give (docs/benchmarks.md); here only that it runs:
    # both servers probed during the bodies, no probe failed, each body answered.
    results_md = tmp_path / "RESULTS.md"
    done = run_python(
        [sys.executable, "-m", "benchmarks.busy_health", "--shapes", "parts,gRPC values beyond",
         "--systems", "S,O", "--rounds", "1", "--parallel", "2", "--idle", "0.2",
         "--append", str(results_md)],
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert results_md.read_text().strip() == done.stdout.strip()
    rows = {
        (m["shape"], m["system"]): (int(m["probes"]), int(m["failed"]), m["answered"])
        for m in re.finditer(
            r"^\| (?P<shape>[\w ]+) \| (?P<system>[SO]) \| (?P<probes>\d+) \| (?P<failed>\d+) "
            r"\|(?: [\d.]+ \|){3} (?P<answered>.*) \|$",
            done.stdout,
            re.MULTILINE,
        )
    }
    # S has no gRPC: the gRPC shape is O's only.
    expected = {(shape, system) for shape in ("idle", "parts") for system in "SO"}
    assert set(rows) == expected | {("gRPC values beyond", "O")}, done.stdout
    assert all(probes > 0 and failed == 0 for probes, failed, _ in rows.values()), rows
    assert rows[("parts", "O")][2] == "2x TASK_STATE_COMPLETED"
    assert rows[("parts", "S")][2] == "2x TASK_STATE_COMPLETED"
    assert rows[("gRPC values beyond", "O")][2].startswith("2x INVALID_ARGUMENT ")
    assert "gRPC values beyond: O /health p99" in done.stdout


@pytest.mark.parametrize(
    ("backend", "unreadable", "mode"),
    [
        ("memory", 0, "single"),
        ("sqlite", 0, "single"),
        ("sqlite", 1, "single"),
        ("sqlite", 0, "app"),
    ],
)
def test_pages_dimension_walks_every_page_and_counts(
    backend: str, unreadable: int, mode: str, tmp_path: Path
) -> None:
    from benchmarks.pages import measure_pages, render_pages

    row = measure_pages(backend, 120, tmp_path, mode=mode, page_size=50, unreadable=unreadable)
    # 50 + 50 + 20 rows: every readable task seen once (it raises otherwise)
    assert row.pages == 3
    for counts in (row.first, row.second, row.last, row.by_context, row.by_status):
        assert next(iter(counts.values())) > 0
    assert f"| {backend} | {mode} | 120 | {unreadable} % | 50 |" in render_pages([row])


def test_edge_parse_table_measures_each_body_size() -> None:
    # The figures are docs/benchmarks.md's; here only that it runs, one row per size.
    done = run_python(
        [sys.executable, "-m", "benchmarks.edge_parse", "-n", "20", "--parts", "1,3"],
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(r"^\| (\d+) \| \d+ \|(?: [\d.]+ \|){3}$", done.stdout, re.MULTILINE)
    assert rows == ["1", "3"], done.stdout


def test_head_size_table_has_a_row_per_protocol() -> None:
    # The figures are RESULTS.md's; here only that it runs, both protocols answering alike.
    done = run_python(
        [sys.executable, "-m", "benchmarks.head_size", "--cases", "1mb-url"],
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # Refused: the 400, or a reset (the server closed with bytes unread) that lost it.
    refused = r"^\| 1mb-url \| (\w+) \| (?:HTTP/1.1 400 |reset).*\| 200 \|$"
    rows = re.findall(refused, done.stdout, re.M)
    assert rows == ["httptools", "h11"], done.stdout


@pytest.mark.parametrize("kind", ["floor", "floor-cached"])
async def test_the_floor_serves_the_module_through_apcore(kind: str) -> None:
    # F's figures are benchmarks/RESULTS.md's; here only that it answers every request
    # (completed, no error: benchmarks.instructions raises otherwise) through apcore.
    from benchmarks.instructions import measure

    assert await measure(kind, "memory://", False, n=4, c=2, warmup=2) > 0
