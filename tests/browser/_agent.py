"""The demo agent the browser tests drive: a real apcore registry served by our factory."""

from __future__ import annotations

import asyncio
import base64
import struct
import zlib
from typing import Any, Literal

from apcore import Executor, ModuleAnnotations, ModuleExample, Registry
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from apcore_a2a import A2AServerFactory
from apcore_a2a.approval import A2AApprovalHandler


class AddIn(BaseModel):
    a: int = Field(description="first addend")
    b: int = Field(description="second addend")


class AddOut(BaseModel):
    sum: int


class AddModule:
    input_schema = AddIn
    output_schema = AddOut
    description = "Add two integers"
    tags = ["math"]
    annotations = ModuleAnnotations(readonly=True, idempotent=True)
    examples = [ModuleExample(title="two plus three", inputs={"a": 2, "b": 3}, output={"sum": 5})]

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"sum": inputs["a"] + inputs["b"]}


class Address(BaseModel):
    city: str
    zip: str | None = None


class KitchenIn(BaseModel):
    title: str = Field(description="a plain string")
    ratio: float
    count: int
    flag: bool = False
    color: Literal["red", "green", "blue"]
    address: Address
    tags: list[str] = Field(default_factory=list)
    blob: bytes = Field(description="any file")


class EchoOut(BaseModel):
    model_config = {"extra": "allow"}


class KitchenModule:
    """Echoes what the form produced, so tests can compare it with what was typed."""

    input_schema = KitchenIn
    output_schema = EchoOut
    description = "Echo every supported form field type"
    tags = ["forms"]

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        out = {k: v for k, v in inputs.items() if k != "blob"}
        # apcore hands modules the raw JSON input: binary fields arrive base64-encoded.
        out["blob_text"] = base64.b64decode(inputs["blob"]).decode()
        return out


class Gate:
    """Lets a test hold a module at a known point and release it."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()


class TicksIn(BaseModel):
    n: int = Field(default=3, description="how many ticks")


class TicksOut(BaseModel):
    tick: int | None = None
    done: bool | None = None


def ticks_module(gate: Gate) -> Any:
    class TicksModule:
        input_schema = TicksIn
        output_schema = TicksOut
        description = "Stream numbered ticks, then wait for the test to release the last one"
        tags = ["stream"]
        annotations = ModuleAnnotations(streaming=True, readonly=True)

        def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
            return {"tick": inputs["n"], "done": True}

        async def stream(self, inputs: dict[str, Any], context: Any) -> Any:
            for i in range(inputs["n"]):
                yield {"tick": i}
            gate.reached.set()
            await gate.release.wait()
            yield {"done": True}

    return TicksModule()


class SlowIn(BaseModel):
    seconds: float = Field(default=60.0, description="how long to work")


class SlowOut(BaseModel):
    slept: float


def slow_module(gate: Gate) -> Any:
    class SlowModule:
        input_schema = SlowIn
        output_schema = SlowOut
        description = "Work for a long time (until canceled)"
        tags = ["slow"]

        async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
            gate.reached.set()
            try:
                await asyncio.sleep(inputs["seconds"])
            except asyncio.CancelledError:
                gate.cancelled.set()
                raise
            return {"slept": inputs["seconds"]}

    return SlowModule()


class WipeIn(BaseModel):
    target: str = Field(description="what to wipe")


class WipeOut(BaseModel):
    wiped: str


class WipeModule:
    input_schema = WipeIn
    output_schema = WipeOut
    description = "Wipe a target (a person must approve)"
    tags = ["admin"]
    annotations = ModuleAnnotations(destructive=True, requires_approval=True)

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"wiped": inputs["target"]}


class GreetIn(BaseModel):
    name: str = Field(description="who to greet")


class GreetOut(BaseModel):
    greeting: str


class GreetModule:
    input_schema = GreetIn
    output_schema = GreetOut
    description = "Greet someone with a plain message (no task)"
    tags = ["text"]
    metadata = {"a2a": {"reply": "message"}}

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"greeting": f"Hello, {inputs['name']}!"}


def tiny_png() -> bytes:
    """A valid 1x1 PNG, built here so the tests ship no binary files."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x2f\x5b\xd3")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


class BadgeIn(BaseModel):
    caption: str = Field(default="ok", description="text to return next to the image")


class BadgeModule:
    input_schema = BadgeIn
    output_schema = EchoOut
    description = "Return a caption and a PNG file"
    tags = ["files"]

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"caption": inputs["caption"], "badge.png": tiny_png()}


def demo_executor(gate: Gate | None = None) -> Executor:
    gate = gate or Gate()
    registry = Registry()
    registry.register("demo.add", AddModule())
    registry.register("demo.kitchen", KitchenModule())
    registry.register("demo.ticks", ticks_module(gate))
    registry.register("demo.slow", slow_module(gate))
    registry.register("demo.wipe", WipeModule())
    registry.register("demo.greet", GreetModule())
    registry.register("demo.badge", BadgeModule())
    return Executor(registry, approval_handler=A2AApprovalHandler())


def demo_app(gate: Gate | None = None, **settings: Any) -> Starlette:
    settings.setdefault("name", "Explorer demo")
    settings.setdefault("version", "1.2.3")
    settings.setdefault("explorer", True)
    app, _card = A2AServerFactory(demo_executor(gate), **settings).create()
    return app
