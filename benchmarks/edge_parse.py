"""What the edge's own parse of a REST 0.3 message body costs, beside the SDK's parse of it.

``python -m benchmarks.edge_parse [-n 20000] [--parts 1,20]``

A REST 0.3 ``message:send`` / ``message:stream`` body is read at the edge once
(``RequestInfo.payload``: the enum names and the role 0.3's conversion would misread,
``upstream/wire_values.py``; the request span's attributes), then the SDK's REST 0.3
handler parses the bytes again (``Parse(await request.body(), ...)``): it takes no parsed
value, and has no public hook to be handed one. Printed per body size, in µs per call
(CPU time of one process, best of 5 runs): the edge's parse, its whole check (parse,
enum names, ``ParseDict`` for the role), and the SDK's ``Parse`` of the same body.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from google.protobuf.json_format import Parse

from apcore_a2a.classify import RequestInfo
from apcore_a2a.upstream.wire_values import values_error


def _body(parts: int) -> bytes:
    message = {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "content": [{"text": f"hello {i}"} for i in range(parts)],
        "metadata": {"skillId": "demo.echo"},
    }
    return json.dumps({"message": message}).encode()


def _info(body: bytes) -> RequestInfo:
    return RequestInfo("a2a", "POST", "rest", "0.3", "0.3", "SendMessage", body=body)


def _best(run: Callable[[], object], n: int) -> float:
    """µs per call, the best of 5 rounds of *n* calls (CPU time)."""
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            run()
        rounds.append((time.process_time() - start) / n * 1e6)
    return min(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--parts", default="1,20")
    args = parser.parse_args()
    print("| parts | body bytes | edge parse µs | edge check µs | SDK Parse µs |")
    print("|---|---|---|---|---|")
    for parts in (int(p) for p in args.parts.split(",")):
        body = _body(parts)
        assert values_error(_info(body)) is None
        parse = _best(lambda: _info(body).payload, args.n)  # noqa: B023
        check = _best(lambda: values_error(_info(body)), args.n)  # noqa: B023
        sdk = _best(lambda: Parse(body, pb2_v03.SendMessageRequest()), args.n)  # noqa: B023
        print(f"| {parts} | {len(body)} | {parse:.1f} | {check:.1f} | {sdk:.1f} |")


if __name__ == "__main__":
    main()
