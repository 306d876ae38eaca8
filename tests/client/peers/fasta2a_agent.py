"""A pydantic fasta2a agent, run in its own virtualenv (``fasta2a-requirements.txt``).

``python fasta2a_agent.py PORT`` serves on 127.0.0.1:PORT until stopped. Its worker
echoes the text parts of a message (``echo: <text>``) as an artifact and completes; the
text ``slow`` leaves the task ``working`` until it is canceled; ``boom`` fails the task.
Nothing here imports apcore-a2a: it is the genuine peer.
"""

from __future__ import annotations

import sys
import uuid
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fasta2a import FastA2A, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.storage import InMemoryStorage


class EchoWorker(Worker[Any]):
    """Echo, wait or fail, by the message's first text part (see the module docstring)."""

    async def run_task(self, params: Any) -> None:
        task = await self.storage.load_task(params["id"])
        assert task is not None
        text = next((p["text"] for p in params["message"]["parts"] if "text" in p), "")
        await self.storage.update_task(task["id"], state="working")
        if text == "boom":
            raise RuntimeError("the worker failed")
        if text == "slow":  # stays working; the worker takes the next operation (a cancel)
            return
        artifact = {
            "artifact_id": uuid.uuid4().hex,
            "name": "echo",
            "parts": [{"kind": "text", "text": f"echo: {text}"}],
        }
        await self.storage.update_task(task["id"], state="completed", new_artifacts=[artifact])

    async def cancel_task(self, params: Any) -> None:
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history: list[Any]) -> list[Any]:
        return history

    def build_artifacts(self, result: Any) -> list[Any]:
        return []


def build(port: int) -> FastA2A:
    storage: InMemoryStorage[Any] = InMemoryStorage()
    broker = InMemoryBroker()
    worker = EchoWorker(broker=broker, storage=storage)

    @asynccontextmanager
    async def lifespan(app: FastA2A):  # type: ignore[no-untyped-def]
        async with app.task_manager, worker.run():
            yield

    return FastA2A(
        storage=storage,
        broker=broker,
        name="fasta2a echo",
        url=f"http://127.0.0.1:{port}",
        lifespan=lifespan,
    )


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(build(port), host="127.0.0.1", port=port, log_level="warning")
