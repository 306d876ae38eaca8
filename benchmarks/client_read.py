"""What the client holds while it reads an agent's answer: tracemalloc's peak over the size
of the answer, for ``apcore_a2a.client._bounded.read_at_most`` (every answer, card, key set
and error body the client reads) on an in-memory body handed over in 64 KiB chunks, as a
socket hands it over.

``python -m benchmarks.client_read [--mib 8,32]`` prints, for each size, the peak in MiB
and as a multiple of the answer: 1x is the answer itself, held once.
"""

from __future__ import annotations

import argparse
import asyncio
import tracemalloc
from collections.abc import AsyncIterator

import httpx

from apcore_a2a.client._bounded import MAX_ANSWER_BYTES, read_at_most

CHUNK = b"x" * 65536


async def peak(size: int) -> int:
    """tracemalloc's peak, in bytes, while an answer of *size* bytes is read whole."""

    async def body() -> AsyncIterator[bytes]:
        for _ in range(size // len(CHUNK)):
            yield CHUNK

    response = httpx.Response(200, content=body())
    tracemalloc.start()
    try:
        content, whole = await read_at_most(response, MAX_ANSWER_BYTES)
        most = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert whole
    assert len(content) == size
    return most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", default="8,32,64", help="answer sizes in MiB, comma-separated")
    args = parser.parse_args()
    print("| answer | peak | peak / answer |\n|---:|---:|---:|")
    for mib in (int(m) for m in args.mib.split(",")):
        most = asyncio.run(peak(mib * 1024 * 1024))
        print(f"| {mib} MiB | {most / 2**20:.1f} MiB | {most / (mib * 2**20):.2f}x |")


if __name__ == "__main__":
    main()
