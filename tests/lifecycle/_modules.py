"""apcore modules for the lifecycle tests, registered programmatically.

Each module reports what happened to it through a shared :class:`Probe`, so tests can
assert on the module's side of a cancel or timeout (did the thread finish, was the
token seen) as well as on the A2A side.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from apcore import ApprovalResult, Executor, ModuleAnnotations, Registry
from pydantic import BaseModel, Field

from apcore_a2a import A2AApprovalHandler


class MaybeText(BaseModel):
    """The input of the small skills several lifecycle tests define: an optional text."""

    text: str = ""


class SaidOut(BaseModel):
    """Their output: what they said."""

    said: str


@dataclass
class Probe:
    """What the modules saw; shared between the server's threads and the test."""

    finished: dict[str, threading.Event] = field(default_factory=dict)
    token_seen_cancelled: dict[str, bool] = field(default_factory=dict)
    contexts: list[dict[str, Any]] = field(default_factory=list)
    running: int = 0
    peak: int = 0
    gate: asyncio.Event | None = None
    #: opened by the test to let every ``life.hold`` call finish
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self, key: str) -> threading.Event:
        with self.lock:
            return self.finished.setdefault(key, threading.Event())


class TextIn(BaseModel):
    text: str = Field(description="Some text")


class TextOut(BaseModel):
    text: str


class Echo:
    """Async, quick, not streaming."""

    input_schema = TextIn
    output_schema = TextOut
    description = "Echo the text back"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": inputs["text"]}


class CountIn(BaseModel):
    count: int = Field(default=3, ge=0, le=50)
    delay: float = Field(default=0.0, ge=0, le=10)
    fail_after: int | None = None


class CountOut(BaseModel):
    n: int = 0
    done: bool = False


class Count:
    """Async streaming module: one chunk per step, optionally failing midway."""

    input_schema = CountIn
    output_schema = CountOut
    description = "Count up, streaming one chunk per number"
    annotations = ModuleAnnotations(streaming=True)

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"n": inputs.get("count", 3), "done": True}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        key = str(context.data.get("a2a.task_id"))
        try:
            for n in range(1, inputs.get("count", 3) + 1):
                if inputs.get("fail_after") is not None and n > inputs["fail_after"]:
                    raise RuntimeError(
                        "database password=hunter2 leaked from /srv/app/secret/config.py line 3"
                    )
                yield {"n": n}
                await asyncio.sleep(inputs.get("delay", 0.0))
            yield {"done": True}
        finally:
            self.probe.token_seen_cancelled[key] = bool(context.cancel_token.is_cancelled)
            self.probe.done(key).set()


class SleepIn(BaseModel):
    seconds: float = Field(default=1.0, ge=0, le=30)


class SleepOut(BaseModel):
    slept: float


class DeafSleep:
    """Sync module that ignores its cancel token and sleeps in its worker thread."""

    input_schema = SleepIn
    output_schema = SleepOut
    description = "Sleep without ever looking at the cancel token"

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        key = str(context.data.get("a2a.task_id"))
        with self.probe.lock:
            self.probe.running += 1
            self.probe.peak = max(self.probe.peak, self.probe.running)
        try:
            time.sleep(inputs.get("seconds", 1.0))
        finally:
            with self.probe.lock:
                self.probe.running -= 1
            self.probe.token_seen_cancelled[key] = bool(context.cancel_token.is_cancelled)
            self.probe.done(key).set()
        return {"slept": inputs.get("seconds", 1.0)}


class Nap:
    """Async module that sleeps cooperatively (asyncio.sleep is cancellable)."""

    input_schema = SleepIn
    output_schema = SleepOut
    description = "Sleep on the event loop"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await asyncio.sleep(inputs.get("seconds", 1.0))
        return {"slept": inputs.get("seconds", 1.0)}


class ShortNap(Nap):
    """A Nap with apcore's own per-module timeout (``resources.timeout``, 200 ms): apcore
    abandons the call before the server's ``execution_timeout`` does."""

    resources = {"timeout": 200}


class Drip:
    """Streams one chunk, then stalls: for stream timeouts."""

    input_schema = SleepIn
    output_schema = CountOut
    description = "Stream one chunk, then stall"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"n": 1}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"n": 1}
        await asyncio.sleep(inputs.get("seconds", 1.0))
        yield {"done": True}


class EmptyIn(BaseModel):
    pass


class Stall:
    """Streams two chunks, then waits for ``probe.gate``: a stream with a known middle."""

    input_schema = EmptyIn
    output_schema = CountOut
    description = "Stream two chunks, then wait for the gate"

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"done": True}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        key = str(context.data.get("a2a.task_id"))
        try:
            yield {"n": 1}
            yield {"n": 2}
            assert self.probe.gate is not None
            await self.probe.gate.wait()
            yield {"done": True}
        finally:
            self.probe.token_seen_cancelled[key] = bool(context.cancel_token.is_cancelled)
            self.probe.done(key).set()


class Late(Stall):
    """Waits for ``probe.gate``, then streams two chunks: a stream whose every chunk comes
    when the test says."""

    description = "Wait for the gate, then stream two chunks"

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        assert self.probe.gate is not None
        await self.probe.gate.wait()
        yield {"n": 1}
        yield {"n": 2}


class FloodIn(BaseModel):
    chunks: int = Field(default=4, ge=1, le=16)
    size: int = Field(default=1024, ge=1, le=1 << 20)


class FloodOut(BaseModel):
    pad: str = ""


class Flood:
    """Streams *chunks* chunks of *size* characters at once, then waits for ``probe.gate``:
    more than a client that stops reading takes in, so the agent waits to send them."""

    input_schema = FloodIn
    output_schema = FloodOut
    description = "Stream large chunks at once, then wait for the gate"

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"pad": ""}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        key = str(context.data.get("a2a.task_id"))
        try:
            for _ in range(inputs.get("chunks", 4)):
                yield {"pad": "x" * inputs.get("size", 1024)}
            self.probe.done(f"{key}:flooded").set()
            assert self.probe.gate is not None
            await self.probe.gate.wait()
        finally:
            self.probe.token_seen_cancelled[key] = bool(context.cancel_token.is_cancelled)
            self.probe.done(key).set()


class GateOut(BaseModel):
    opened: bool


class Gate:
    """Waits until the test opens ``probe.gate``: holds streams open on purpose."""

    input_schema = EmptyIn
    output_schema = GateOut
    description = "Wait until the test opens the gate"

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        assert self.probe.gate is not None
        await self.probe.gate.wait()
        return {"opened": True}


class Hold:
    """Sync module that blocks its worker thread until the test sets ``probe.release``."""

    input_schema = EmptyIn
    output_schema = GateOut
    description = "Hold a worker thread until the test releases it"

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.probe.lock:
            self.probe.running += 1
            self.probe.peak = max(self.probe.peak, self.probe.running)
        try:
            opened = self.probe.release.wait(timeout=60)
        finally:
            with self.probe.lock:
                self.probe.running -= 1
        return {"opened": opened}


class PeekOut(BaseModel):
    task_id: str | None = None
    context_id: str | None = None


class Peek:
    """Reports the A2A ids it sees in ``Context.data``."""

    input_schema = TextIn
    output_schema = PeekOut
    description = "Show the A2A task and context ids the module sees"

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        self.probe.contexts.append(dict(context.data))
        return {
            "task_id": context.data.get("a2a.task_id"),
            "context_id": context.data.get("a2a.context_id"),
        }


class TransferIn(BaseModel):
    to: str
    amount: int = Field(gt=0)


class TransferOut(BaseModel):
    status: str
    to: str
    amount: int


class Transfer:
    """Requires approval; counts how often it really ran."""

    input_schema = TransferIn
    output_schema = TransferOut
    description = "Transfer money after approval"
    annotations = ModuleAnnotations(requires_approval=True)

    def __init__(self, probe: Probe, *, module_id: str = "life.transfer") -> None:
        self.probe = probe
        self.module_id = module_id

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        self.probe.contexts.append({"ran": self.module_id, **inputs})
        return {"status": "sent", "to": inputs["to"], "amount": inputs["amount"]}


class TransferStream(Transfer):
    """Requires approval and streams its receipt in two chunks."""

    description = "Transfer money after approval, streaming a receipt"
    annotations = ModuleAnnotations(requires_approval=True, streaming=True)

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        self.probe.contexts.append({"ran": self.module_id, **inputs})
        yield {"status": "sending", "to": inputs["to"], "amount": inputs["amount"]}
        yield {"status": "sent"}


class QuickOut(BaseModel):
    upper: str


class Quick:
    """Answers with a single A2A Message (opted in via metadata)."""

    input_schema = TextIn
    output_schema = QuickOut
    description = "Upper-case the text, answering with a message"
    metadata = {"a2a": {"reply": "message"}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if inputs["text"] == "boom":
            raise ValueError("kaboom at /opt/secret/module.py")
        return {"upper": inputs["text"].upper()}


class Ponder:
    """Answers with a message (``reply: "auto"`` when it chooses one, else a task) after
    waiting for ``probe.gate``: a stream that sends nothing while its module runs."""

    input_schema = EmptyIn
    output_schema = GateOut
    description = "Wait for the gate, then answer with a message"
    metadata = {"a2a": {"reply": "auto"}}

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        key = str(context.data.get("a2a.task_id"))
        self.probe.contexts.append({"ran": "life.ponder", "task_id": key})
        try:
            assert self.probe.gate is not None
            await self.probe.gate.wait()
            return {"opened": True}
        finally:
            self.probe.token_seen_cancelled[key] = bool(context.cancel_token.is_cancelled)
            self.probe.done(key).set()


class PolicyHandler(A2AApprovalHandler):
    """The A2A handler, except that ``life.forbidden`` is always denied by policy."""

    async def request_approval(self, request: Any) -> ApprovalResult:
        if request.module_id == "life.forbidden":
            return ApprovalResult(status="rejected", reason="Transfers to that account are blocked")
        return await super().request_approval(request)


def build_executor(probe: Probe) -> Executor:
    """Every lifecycle test module behind one apcore Executor with A2A approvals."""
    registry = Registry()
    registry.register("life.echo", Echo())
    registry.register("life.count", Count(probe))
    registry.register("life.deaf", DeafSleep(probe))
    registry.register("life.hold", Hold(probe))
    registry.register("life.nap", Nap())
    registry.register("life.short_nap", ShortNap())
    registry.register("life.drip", Drip())
    registry.register("life.gate", Gate(probe))
    registry.register("life.stall", Stall(probe))
    registry.register("life.late", Late(probe))
    registry.register("life.flood", Flood(probe))
    registry.register("life.peek", Peek(probe))
    registry.register("life.transfer", Transfer(probe))
    registry.register(
        "life.transfer_stream", TransferStream(probe, module_id="life.transfer_stream")
    )
    registry.register("life.forbidden", Transfer(probe, module_id="life.forbidden"))
    registry.register("life.quick", Quick())
    registry.register("life.ponder", Ponder(probe))
    return Executor(registry, approval_handler=PolicyHandler())


class Amount(BaseModel):
    amount: int


class Pay:
    """Requires approval, then pays: the parked task of the follow-up and race tests."""

    input_schema = Amount
    description = "Pay after approval"
    annotations = ModuleAnnotations(requires_approval=True)

    def execute(self, inputs: dict[str, Any], context: object) -> dict[str, Any]:
        return {"paid": inputs["amount"]}
