"""apcore modules several suites register (each under its own module id).

* :class:`Add`  ``{"a", "b"}`` in, ``{"sum"}`` out (integers, so bad input is easy)
* :class:`Echo` ``{"text"}`` in, ``{"text": "echo: ..."}`` out
* :class:`Talk` ``{"text"}`` in, asks again (``input-required``) until told ``bye``
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from apcore_a2a import InputRequired


class AddIn(BaseModel):
    a: int
    b: int


class AddOut(BaseModel):
    sum: int


class Add:
    input_schema = AddIn
    output_schema = AddOut
    description = "Add two integers"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"sum": inputs["a"] + inputs["b"]}


class EchoIn(BaseModel):
    text: str


class EchoOut(BaseModel):
    text: str


class Echo:
    input_schema = EchoIn
    output_schema = EchoOut
    description = "Echo the text back"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": "echo: " + inputs["text"]}


class Talk:
    """Asks again until told ``bye``: the history grows by each answer."""

    input_schema = EchoIn
    output_schema = EchoOut
    description = "Ask again until told bye"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if inputs["text"] != "bye":
            raise InputRequired("And then?", field="text")
        return {"text": "bye"}
