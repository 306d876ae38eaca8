"""Subprocess entry point: run one system under test under uvicorn, one worker.

``python -m benchmarks.serve plain|ours --port N [--loop asyncio|uvloop] [--http h11|httptools]
[--task-store URL] [--cluster]``

The process that runs this module *is* the server, so the harness can read its CPU time and RSS
from ``/proc/<pid>``.
"""

from __future__ import annotations

import argparse
import logging

import uvicorn

from benchmarks.apps import build_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve")
    parser.add_argument("kind", choices=["plain", "ours"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", default="asyncio", choices=["asyncio", "uvloop"])
    parser.add_argument("--http", default="h11", choices=["h11", "httptools"])
    parser.add_argument("--task-store", default="memory://", help="memory://, sqlite:///, ...")
    parser.add_argument("--cluster", action="store_true", help="ours in cluster mode")
    args = parser.parse_args(argv)
    # Request logging would be measured as server CPU; neither system logs per request here.
    logging.basicConfig(level=logging.WARNING)
    # This process is the whole server, as under serve() or the CLI: our app gets the same
    # process tuning they turn on (a sized pool for sync modules, gc.freeze()).
    settings: dict[str, object] = {}
    if args.kind == "ours":
        settings = {"process_tuning": True}
        if args.cluster:
            settings["cluster"] = True
    uvicorn.run(
        build_app(args.kind, args.task_store, **settings),
        host="127.0.0.1",
        port=args.port,
        loop=args.loop,
        http=args.http,
        workers=1,
        log_level="warning",
        access_log=False,
        lifespan="auto",
    )


if __name__ == "__main__":
    main()
