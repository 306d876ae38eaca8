"""The workers scaling table runs end to end and accounts for the server's CPU.

No timing is asserted: the run only proves that 1 and 2 worker processes serve, that
every request answered correctly (the module raises otherwise) and that the server's
processes' CPU is read (all workers, not only the supervisor).
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests._support import ROOT
from tests.test_bench_smoke import needs_wrk


@needs_wrk
def test_workers_table_reports_throughput_and_server_cores() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.workers", "--store", "sqlite", "--max-workers", "2",
         "--seconds", "2", "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        int(m["n"]): (float(m["rps"]), float(m["cores"]), float(m["cpu"]))
        for m in re.finditer(
            r"^\| (?P<n>\d) \| (?P<rps>[\d.]+) \| [\d.]+x \| [\d.]+ \| (?P<cores>[\d.]+) "
            r"\| (?P<cpu>\d+) \| [\d.]+ \|$",
            done.stdout,
            re.MULTILINE,
        )
    }
    assert set(rows) == {1, 2}, done.stdout
    for rps, cores, cpu_us in rows.values():
        assert rps > 0 and cores > 0 and cpu_us > 0, done.stdout
    # Two workers: CPU of both processes is counted, so the server used more than one
    # worker's share would show if only the supervisor were read (it idles).
    assert rows[2][1] > 0.2, done.stdout
