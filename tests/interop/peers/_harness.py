"""What every Python peer script shares: its arguments, the payloads, and the JSON report.

A peer runs each operation, records what it observed (or the error it got) and prints one
JSON object ``{"peer", "binding", "version", "ops": {name: observation}}`` on stdout. The
pytest suite asserts on that report; the peer itself judges nothing. Standard library only:
the script runs inside each peer's own environment.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
import traceback
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

#: A binary file (every byte value, so not UTF-8) and a text file that is itself valid
#: base64: a server that decodes twice corrupts both.
FILES: dict[str, bytes] = {
    "binary": bytes(range(256)) + b"interop\n",
    "base64text": b"aGVsbG8gaW50ZXJvcAo=",
}


def file_facts(data: bytes) -> dict[str, Any]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="agent base URL")
    parser.add_argument("--grpc", required=True, help="agent gRPC host:port")
    parser.add_argument("--binding", required=True, choices=["JSONRPC", "HTTP+JSON", "GRPC"])
    parser.add_argument("--version", required=True, choices=["1.0", "0.3"])
    parser.add_argument("--webhook", required=True, help="webhook base URL")
    parser.add_argument("--run", required=True, help="unique id of this run")
    return parser.parse_args()


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 2000 else text[:2000] + "..."


def received(webhook: str, run: str) -> list[dict[str, Any]]:
    """The deliveries the test's webhook has received for *run* (parsed bodies)."""
    with urllib.request.urlopen(f"{webhook}/received/{run}", timeout=5) as response:
        return json.loads(response.read())


async def wait_for_delivery(
    webhook: str, run: str, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 30
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        got = await asyncio.to_thread(received, webhook, run)
        if done(got) or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.05)


class Report:
    """Collects one observation per operation; an exception becomes ``{"error": ...}``."""

    def __init__(self, peer: str, args: argparse.Namespace) -> None:
        self.data: dict[str, Any] = {
            "peer": peer,
            "binding": args.binding,
            "version": args.version,
            "ops": {},
        }

    async def op(self, name: str, body: Callable[[], Awaitable[Any]]) -> Any:
        try:
            result = await body()
        except NotImplementedError as exc:  # the client library has no such call
            self.skip(name, f"the client does not offer it: {exc}")
            return None
        except Exception as exc:  # the report carries the failure; the test judges it
            self.data["ops"][name] = {
                "error": error_text(exc),
                "where": traceback.format_exc(limit=-3)[-1500:],
            }
            return None
        self.data["ops"][name] = result if isinstance(result, dict) else {"value": result}
        return result

    def skip(self, name: str, reason: str) -> None:
        self.data["ops"][name] = {"offered": False, "reason": reason}

    def emit(self) -> None:
        sys.stdout.write(json.dumps(self.data, sort_keys=True) + "\n")
