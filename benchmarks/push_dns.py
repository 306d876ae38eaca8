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

``python -m benchmarks.push_dns --agent [--callers 5000]``: a real agent in a process of
its own, its webhook names looked up on such a name server, and *callers* distinct API
keys each sending one ``CreateTaskPushNotificationConfig`` of a name of their own on a
connection of their own, all at once. The agent's RSS, threads and file descriptors are
read from ``/proc`` with the connections open and idle, then with every lookup pending
(the name server has heard from *callers* sockets), then after the callers hang up. This
process raises its own soft ``RLIMIT_NOFILE`` to its hard limit (the agent inherits it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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


def _pid_usage(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status)
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    udp = set()
    for table in ("udp", "udp6"):
        rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        udp |= {f"socket:[{row.split()[9]}]" for row in rows}
    return {
        "rss_kib": int(fields["VmRSS"].split()[0]),
        "threads": int(fields["Threads"]),
        "fds": len(links),
        "udp": sum(link in udp for link in links),
    }


def _key(n: int) -> str:
    return f"caller-{n:05}-0123456789abcdef"


def _serve_agent(port: int, dns: str, callers: int) -> None:
    """The agent process: push on, names looked up on *dns*, an API key per caller."""
    import uvicorn

    from benchmarks.apps import ours_app

    app = ours_app(
        push_notifications=True,
        push_dns_servers=[dns],
        push_timeout=300.0,
        api_keys=tuple(f"{_key(n)}=c{n}" for n in range(callers)),
    )
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", backlog=4096)
    uvicorn.Server(config).run()


class _Silent(asyncio.DatagramProtocol):
    """A name server that reads every query and answers none: the sockets it heard from."""

    def __init__(self) -> None:
        self.sources: set[tuple[str, int]] = set()

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.sources.add(addr)


async def _until(done: Any, seconds: float) -> None:
    for _ in range(int(seconds * 10)):
        if done():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"not reached within {seconds} s")


async def _agent(callers: int) -> dict[str, Any]:
    import resource

    from benchmarks._proc import free_port

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.get_running_loop()
    transport, silent = await loop.create_datagram_endpoint(_Silent, local_addr=("127.0.0.1", 0))
    dns = f"127.0.0.1:{transport.get_extra_info('sockname')[1]}"
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.push_dns", "--way", "agent-server"]
    command += [f"--port={port}", f"--dns={dns}", f"--callers={callers}"]
    agent = subprocess.Popen(command)
    try:
        for _ in range(300):
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        before = _pid_usage(agent.pid)
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(callers)]
        await asyncio.sleep(1.0)
        idle = _pid_usage(agent.pid)
        for n, (_reader, writer) in enumerate(streams):
            body = json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig",
                "params": {"taskId": f"t{n}", "url": f"https://n{n}.blackhole.test/"},
            }).encode()  # fmt: skip
            head = (
                f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"A2A-Version: 1.0\r\nX-API-Key: {_key(n)}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            writer.write(head.encode() + body)
        # Every lookup has its socket (and the name server has heard from them).
        await _until(lambda: _pid_usage(agent.pid)["udp"] >= callers, 120)
        await asyncio.sleep(2.0)
        pending = _pid_usage(agent.pid)
        for _reader, writer in streams:
            writer.close()
        await asyncio.sleep(5.0)
        after = _pid_usage(agent.pid)
    finally:
        agent.terminate()
        agent.wait(timeout=60)
        transport.close()
    return {
        "before": before,
        "idle": idle,
        "pending": pending,
        "after": after,
        "sockets": len(silent.sources),
    }


def _agent_table(callers: int) -> None:
    got = asyncio.run(_agent(callers))
    print(f"agent process, {callers} callers, name server heard from {got['sockets']} sockets")
    print("| stage | RSS MiB | threads | fds | of which UDP |")
    print("|---|---|---|---|---|")
    for stage in ("before", "idle", "pending", "after"):
        use = got[stage]
        print(
            f"| {stage} | {use['rss_kib'] / 1024:.1f} | {use['threads']} | {use['fds']} "
            f"| {use['udp']} |"
        )
    lookups = {k: got["pending"][k] - got["idle"][k] for k in got["idle"]}
    print(
        f"requests with lookups pending, over idle connections: "
        f"{lookups['rss_kib'] / callers:.1f} KiB and {lookups['fds'] / callers:.2f} fds each"
    )


def _run(way: str, lookups: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.push_dns", "--way", way, f"--lookups={lookups}"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=1000)
    parser.add_argument("--agent", action="store_true", help="against a real agent")
    parser.add_argument("--callers", type=int, default=5000)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dns", help=argparse.SUPPRESS)
    parser.add_argument(
        "--way", choices=["c-ares", "threads", "agent-server"], help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.way == "agent-server":
        _serve_agent(args.port, args.dns, args.callers)
        return
    if args.agent:
        _agent_table(args.callers)
        return
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
