"""Print the reliability summary table: ``python -m tests.reliability.summary REPORT JUNIT``.

REPORT holds the JSON lines the suite's tallies wrote (``A2A_RELIABILITY_REPORT``);
JUNIT is pytest's ``--junitxml`` file. Exits 1 when any test failed, so the nox session
fails after printing the table.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _kib(value: int | None) -> str:
    return "-" if value is None else f"{value / 1024:.0f} MiB"


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| section | cases | failures | 5xx | leaked tasks / fds | lost tasks | RSS start / end |",
        "|---|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        leaked = (
            "-"
            if r["leaked_tasks"] is None and r["leaked_fds"] is None
            else f"{_opt(r['leaked_tasks'])} / {_opt(r['leaked_fds'])}"
        )
        rss = (
            "-"
            if r["rss_start_kib"] is None
            else f"{_kib(r['rss_start_kib'])} / {_kib(r['rss_end_kib'])}"
        )
        lines.append(
            f"| {r['section']} | {r['cases']:,} | {r['violations']} | {r['five_xx']} | {leaked} | {_opt(r['lost_tasks'])} | {rss} |"
        )
    return "\n".join(lines)


def junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    return counts


def main(argv: list[str]) -> int:
    report, junit = Path(argv[0]), Path(argv[1])
    rows = (
        [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
        if report.exists()
        else []
    )
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        merged.setdefault(row["section"], row)
    ordered = sorted(merged.values(), key=lambda r: r["section"])
    counts = junit_counts(junit)
    hostile = sum(r["cases"] for r in ordered if r["section"].startswith("hostile"))
    print(f"\nReliability run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(table(ordered))
    print(
        f"\npytest: {counts['tests']} tests, {counts['failures']} failed, {counts['errors']} errors, "
        f"{counts['skipped']} skipped (incl. xfail); hostile cases in total: {hostile:,}"
    )
    for r in ordered:
        for note in r["notes"]:
            print(f"- {r['section']}: {note}")
    return 1 if counts["failures"] or counts["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
