"""What webhook lookups whose DNS never answers cost the agent's process: memory, threads
and file descriptors, for c-ares lookups (``push/dns.py``) and for the ``getaddrinfo``
threads they replaced.

``python -m benchmarks.push_dns [--lookups 1000]``

Each way runs in a process of its own. ``c-ares``: *lookups* ``AresResolver`` lookups of
distinct names against a name server on 127.0.0.1 that never answers (a UDP socket nobody
reads), all pending at once. ``threads``: as many threads each blocked as a
``getaddrinfo`` call on such a name is (waiting, here on an event: the stack and the thread
are the cost). The figures are the growth of the process's RSS, threads and open file
descriptors from before the lookups to while they are all pending, then whether closing
ends them (``AresResolver.close()``; threads cannot be ended from outside).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


def _usage() -> dict[str, int]:
    status = Path("/proc/self/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status)
    return {
        "rss_kib": int(fields["VmRSS"].split()[0]),
        "threads": int(fields["Threads"]),
        "fds": len(os.listdir("/proc/self/fd")),
    }


async def _ares(lookups: int) -> dict[str, Any]:
    from apcore_a2a.push import AresResolver

    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    resolver = AresResolver([f"127.0.0.1:{silent.getsockname()[1]}"], timeout=30, tries=1)
    before = _usage()
    pending = [asyncio.ensure_future(resolver(f"n{n}.blackhole.test", 443)) for n in range(lookups)]
    await asyncio.sleep(1.0)  # every lookup has sent its queries
    during = _usage()
    out = resolver.pending
    resolver.close()
    await asyncio.gather(*pending, return_exceptions=True)
    after = _usage()
    left = f"{resolver.pending} lookups, +{after['fds'] - before['fds']} fds"
    return {"before": before, "during": during, "pending": out, "left": left}


def _threads(lookups: int) -> dict[str, Any]:
    blocked = threading.Event()
    before = _usage()
    threads = [threading.Thread(target=blocked.wait, daemon=True) for _ in range(lookups)]
    for thread in threads:
        thread.start()
    during = _usage()
    blocked.set()  # only so that this process can exit
    # A thread in getaddrinfo cannot be ended from outside: it stays until DNS gives up.
    left = f"{lookups} threads, until the resolver gives up"
    return {"before": before, "during": during, "pending": lookups, "left": left}


def _run(way: str, lookups: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.push_dns", "--way", way, f"--lookups={lookups}"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=1000)
    parser.add_argument("--way", choices=["c-ares", "threads"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.way == "c-ares":
        print(json.dumps(asyncio.run(_ares(args.lookups))))
        return
    if args.way == "threads":
        print(json.dumps(_threads(args.lookups)))
        return
    print("| way | pending lookups | RSS growth | threads | file descriptors | left after close |")
    print("|---|---|---|---|---|---|")
    for way in ("c-ares", "threads"):
        got = _run(way, args.lookups)
        grew = {key: got["during"][key] - got["before"][key] for key in got["before"]}
        print(
            f"| {way} | {got['pending']} | {grew['rss_kib'] / 1024:.1f} MiB "
            f"({grew['rss_kib'] / args.lookups:.1f} KiB each) | +{grew['threads']} "
            f"| +{grew['fds']} | {got['left']} |"
        )


if __name__ == "__main__":
    main()
