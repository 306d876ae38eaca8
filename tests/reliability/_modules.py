"""The apcore modules every reliability test serves, registered programmatically.

One registry covers every input shape the hostile-input properties aim at (integers,
bounded strings, enums, nested objects, lists, binary, a recursive ``$ref`` schema), the
modules the load test mixes (a gate that holds tasks open, a streaming gate, an approval),
and the fault modules (one that hangs its worker thread, one whose error text carries a
secret and a file path that must never reach a client).
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from apcore import Config, Executor, ModuleAnnotations, Registry
from apcore.errors import InvalidInputError
from pydantic import BaseModel, Field

from apcore_a2a import A2AApprovalHandler
from tests import _modules

#: text that must never appear in any response body
SECRET = "hunter2-5f3a9c"
LEAKY_PATH = "/srv/reliability/secret_config.py"


@dataclass
class Controls:
    """Knobs shared between the server's modules and the test that drives them."""

    gate: asyncio.Event | None = None
    hang: threading.Event = field(default_factory=threading.Event)
    hung: int = 0
    quick_runs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Add(_modules.Add):
    """The shared adder, counting its runs in ``controls.quick_runs``."""

    def __init__(self, controls: Controls) -> None:
        self.controls = controls

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.controls.lock:
            self.controls.quick_runs += 1
        return super().execute(inputs, context)


class TextIn(BaseModel):
    text: str = Field(max_length=4096)


class TextOut(BaseModel):
    text: str


class Echo:
    input_schema = TextIn
    output_schema = TextOut
    description = "Echo the text back"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": inputs["text"]}


class Address(BaseModel):
    street: str
    zip: str = Field(pattern=r"^[0-9]{5}$")


class ProfileIn(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    age: int = Field(ge=0, le=150)
    score: float | None = None
    kind: Literal["person", "robot"] = "person"
    tags: list[str] = Field(default_factory=list, max_length=8)
    address: Address | None = None
    active: bool = True


class ProfileOut(BaseModel):
    summary: str


class Profile:
    """A schema with every common constraint: bounds, enum, nested ``$ref``, list."""

    input_schema = ProfileIn
    output_schema = ProfileOut
    description = "Summarize a profile"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"summary": f"{inputs['name']} ({inputs['age']})"}


class Node(BaseModel):
    value: int
    children: list[Node] = Field(default_factory=list)


class TreeIn(BaseModel):
    root: Node


class TreeOut(BaseModel):
    nodes: int


def _count(node: dict[str, Any]) -> int:
    return 1 + sum(_count(c) for c in node.get("children", []))


class Tree:
    """Input schema with a ``$ref`` cycle (``Node.children: list[Node]``), shown on the card."""

    input_schema = TreeIn
    output_schema = TreeOut
    description = "Count the nodes of a tree"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"nodes": _count(inputs["root"])}


class BlobIn(BaseModel):
    data: bytes
    name: str = "blob"


class BlobOut(BaseModel):
    size: int


class Blob:
    input_schema = BlobIn
    output_schema = BlobOut
    description = "Measure a file"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        # Binary fields arrive base64-encoded (docs: parts); Pydantic made them bytes.
        data = inputs["data"]
        try:
            raw = base64.b64decode(data, validate=True)
        except (ValueError, TypeError):
            raise InvalidInputError("data is not base64") from None
        return {"size": len(raw)}


class LeakIn(BaseModel):
    mode: Literal["runtime", "value", "key"] = "runtime"


class LeakOut(BaseModel):
    ok: bool


class Leak:
    """Fails with an error text full of things a client must not see."""

    input_schema = LeakIn
    output_schema = LeakOut
    description = "Fail with a secret in the error"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        text = f"password={SECRET} in {LEAKY_PATH} line 7"
        if inputs.get("mode") == "value":
            raise ValueError(text)
        if inputs.get("mode") == "key":
            raise KeyError(text)
        raise RuntimeError(text)


class QuickOut(BaseModel):
    upper: str


class Quick:
    """Answers with a single Message; ``boom`` makes it fail with a leaky error."""

    input_schema = TextIn
    output_schema = QuickOut
    description = "Upper-case the text, answering with a message"
    metadata = {"a2a": {"reply": "message"}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if inputs["text"] == "boom":
            raise ValueError(f"kaboom {SECRET} at {LEAKY_PATH}")
        return {"upper": inputs["text"].upper()}


class KeyIn(BaseModel):
    key: int = 0


class KeyOut(BaseModel):
    key: int


class Gate:
    """Waits until the test opens ``controls.gate``: holds tasks in flight on purpose."""

    input_schema = KeyIn
    output_schema = KeyOut
    description = "Wait for the gate, then return the key"

    def __init__(self, controls: Controls) -> None:
        self.controls = controls

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if self.controls.gate is not None:
            await self.controls.gate.wait()
        return {"key": inputs.get("key", 0)}


class StreamOut(BaseModel):
    key: int = 0
    step: int = 0


class StreamGate:
    """Streams one chunk, waits for the gate, streams a second chunk."""

    input_schema = KeyIn
    output_schema = StreamOut
    description = "Stream a chunk, wait for the gate, stream another"
    annotations = ModuleAnnotations(streaming=True)

    def __init__(self, controls: Controls) -> None:
        self.controls = controls

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"key": inputs.get("key", 0), "step": 2}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"key": inputs.get("key", 0), "step": 1}
        if self.controls.gate is not None:
            await self.controls.gate.wait()
        yield {"step": 2}


class SleepIn(BaseModel):
    seconds: float = Field(default=0.01, ge=0, le=30)


class SleepOut(BaseModel):
    slept: float


class Nap:
    input_schema = SleepIn
    output_schema = SleepOut
    description = "Sleep on the event loop"

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        await asyncio.sleep(inputs.get("seconds", 0.01))
        return {"slept": inputs.get("seconds", 0.01)}


class EmptyIn(BaseModel):
    pass


class Hang:
    """A sync module that blocks its worker thread until the test releases it."""

    input_schema = EmptyIn
    output_schema = SleepOut
    description = "Block the worker thread, ignoring the cancel token"

    def __init__(self, controls: Controls) -> None:
        self.controls = controls

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.controls.lock:
            self.controls.hung += 1
        started = time.monotonic()
        # Bounded so a forgotten release can never wedge the test process.
        self.controls.hang.wait(timeout=60)
        return {"slept": time.monotonic() - started}


class TransferIn(BaseModel):
    to: str = Field(max_length=64)
    amount: int = Field(gt=0)


class TransferOut(BaseModel):
    status: str
    to: str
    amount: int


class Transfer:
    input_schema = TransferIn
    output_schema = TransferOut
    description = "Transfer money after approval"
    annotations = ModuleAnnotations(requires_approval=True)

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"status": "sent", "to": inputs["to"], "amount": inputs["amount"]}


#: skill id -> module id of everything a hostile caller may aim at
HOSTILE_SKILLS = (
    "rel.add",
    "rel.echo",
    "rel.profile",
    "rel.tree",
    "rel.blob",
    "rel.leak",
    "rel.quick",
    "rel.nap",
    "rel.transfer",
)


def build_executor(controls: Controls | None = None, *, timeout_ms: int = 120_000) -> Executor:
    """Every reliability module behind one apcore Executor with A2A approvals.

    apcore's own per-call and global deadlines are raised to *timeout_ms*, so held tasks
    are ended only by the agent's ``execution_timeout`` or by the test.
    """
    controls = controls or Controls()
    registry = Registry()
    registry.register("rel.add", Add(controls))
    registry.register("rel.echo", Echo())
    registry.register("rel.profile", Profile())
    registry.register("rel.tree", Tree())
    registry.register("rel.blob", Blob())
    registry.register("rel.leak", Leak())
    registry.register("rel.quick", Quick())
    registry.register("rel.nap", Nap())
    registry.register("rel.transfer", Transfer())
    registry.register("rel.gate", Gate(controls))
    registry.register("rel.stream_gate", StreamGate(controls))
    registry.register("rel.hang", Hang(controls))
    config = Config(
        data={"executor": {"default_timeout": timeout_ms, "global_timeout": timeout_ms * 2}}
    )
    return Executor(registry, config=config, approval_handler=A2AApprovalHandler())
