"""What the client's SSE tap costs per event: a2a-sdk's JSON-RPC transport reading a stream
alone, and the same with the client's tap (``apcore_a2a.client._wire.on_response``: the
events read with httpx-sse, each handed to the SDK on its own so the SSE id it yields is
known for a resume).

``python -m benchmarks.client_sse [--events N] [--rounds R]`` prints µs per event for both
and the difference, best of R rounds, on an in-memory body handed over in 4 KiB chunks (no network:
the cost is all parsing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator

import httpx
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import a2a_pb2 as pb

from apcore_a2a.client._wire import Call, current, on_response


def _body(events: int) -> bytes:
    update = {
        "taskId": "t-1",
        "contextId": "c-1",
        "status": {
            "state": "TASK_STATE_WORKING",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x" * 200}]},
        },
    }
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": update}})
    return b"".join(f"id: {i}\ndata: {frame}\n\n".encode() for i in range(events))


async def _read(body: bytes, tapped: bool) -> float:
    async def chunks() -> AsyncIterator[bytes]:  # as a socket hands it over
        for start in range(0, len(body), 4096):
            yield body[start : start + 4096]

    def answer(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks())

    hooks = {"response": [on_response]} if tapped else {}
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer), event_hooks=hooks) as http:
        transport = JsonRpcTransport(http, pb.AgentCard(), "http://agent.local/")
        call = Call()
        started = time.perf_counter()
        with current(call):
            count = 0
            async for _event in transport.send_message_streaming(pb.SendMessageRequest()):
                count += 1
        elapsed = time.perf_counter() - started
    assert count == body.count(b"data: "), count
    return elapsed


async def main(events: int, rounds: int) -> None:
    body = _body(events)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):  # alternated: a busy neighbour slows both alike
        for tapped_round in (False, True):
            times[tapped_round].append(await _read(body, tapped_round))
    plain, tapped = min(times[False]), min(times[True])
    per = 1e6 / events
    print(f"{events} events of {len(body) // events} bytes, best of {rounds}")
    print(f"  a2a-sdk transport alone: {plain * per:7.1f} µs/event")
    print(f"  with the client's tap:   {tapped * per:7.1f} µs/event")
    print(f"  the tap:                 {(tapped - plain) * per:7.1f} µs/event")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.rounds))
