"""NaN and Infinity, which JSON has no numbers for (RFC 8259 §6), never reach a stored task.

Python's and protobuf's JSON parsers take the bare words, and protobuf ``Value`` holds
such numbers; a task holding one could then be read over no JSON binding, so one caller's
bad body made its owner's ``ListTasks`` fail (JSON-RPC -32603 naming the serializer, REST
500). A request carrying one is a parse error on every binding (gRPC:
``tests/bindings/test_grpc_server.py``); a module's output carrying one is written as
``null``, as pydantic's JSON mode writes it.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from apcore import Registry
from pydantic import BaseModel

from tests._support import TLS, find_key
from tests.foundation.conftest import serve_in_thread
from tests.foundation.modules import Add

V1 = {"A2A-Version": "1.0", "content-type": "application/json"}


class RatioIn(BaseModel):
    a: float
    b: float


class RatioOut(BaseModel):
    ratio: float
    rest: list[float]


class Ratio:
    input_schema = RatioIn
    output_schema = RatioOut
    description = "Divide a by b (IEEE 754: 0/0 is NaN)"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        a, b = inputs["a"], inputs["b"]
        ratio = a / b if b else (float("nan") if a == 0 else float("inf") * a)
        return {"ratio": ratio, "rest": [ratio, 1.5, -float("inf")]}


class PowerIn(BaseModel):
    digits: int


class PowerOut(BaseModel):
    power: int
    small: int


class Power:
    input_schema = PowerIn
    output_schema = PowerOut
    description = "10 to the given number of digits: an integer no double holds"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"power": 10 ** inputs["digits"], "small": 7}


def _registry() -> Registry:
    registry = Registry()
    registry.register("math.add", Add())
    registry.register("math.ratio", Ratio())
    registry.register("math.power", Power())
    return registry


def _message(data: str, skill: str = "math.add", metadata: str = "") -> str:
    """A 1.0 message as raw JSON text (so that it can hold what JSON cannot)."""
    return (
        f'{{"messageId": "{uuid.uuid4().hex}", "role": "ROLE_USER", '
        f'"parts": [{{"data": {data}}}], "metadata": {{"skillId": "{skill}"{metadata}}}}}'
    )


def _rest(message: str) -> str:
    return f'{{"message": {message}}}'


def _rpc(message: str) -> str:
    return f'{{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {_rest(message)}}}'


def _listed(http: httpx.Client) -> list[dict[str, Any]]:
    """The caller's tasks over JSON-RPC and REST, which must agree and answer 200."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 100}}
    rpc = http.post("/", json=body)
    rest = http.get("/tasks", params={"pageSize": 100})
    assert rpc.status_code == 200 and "result" in rpc.json(), rpc.text
    assert rest.status_code == 200, rest.text
    assert len(rpc.json()["result"]["tasks"]) == len(rest.json()["tasks"])
    tasks: list[dict[str, Any]] = rest.json()["tasks"]
    return tasks


def test_a_body_with_nan_or_infinity_is_a_parse_error_and_stores_nothing() -> None:
    with (
        serve_in_thread(_registry()) as url,
        httpx.Client(base_url=url, headers=V1, verify=TLS) as http,
    ):
        good = http.post("/message:send", content=_rest(_message('{"a": 1, "b": 2}')))
        assert good.status_code == 200, good.text
        bodies = {
            "jsonrpc": [
                _rpc(_message('{"a": 1, "b": NaN}')),
                _rpc(_message('{"a": 1, "b": 2}', metadata=', "x": -Infinity')),
            ],
            "rest": [
                _rest(_message('{"a": 1, "b": 2, "c": Infinity}')),
                _rest(_message('{"a": 1, "b": 2}', metadata=', "x": NaN')),
            ],
        }
        for body in bodies["jsonrpc"]:
            answer = http.post("/", content=body)
            assert answer.status_code == 200
            assert answer.json()["error"]["code"] == -32700, answer.text
            assert "RFC 8259" in answer.json()["error"]["message"]
        for body in bodies["rest"]:
            answer = http.post("/message:send", content=body)
            assert answer.status_code == 400, answer.text
            assert "RFC 8259" in answer.json()["error"]["message"]
        # The words inside a string are text, not numbers.
        text = _rest(_message('{"a": 1, "b": 2, "note": "NaN or Infinity"}'))
        assert http.post("/message:send", content=text).status_code == 200
        assert len(_listed(http)) == 2


def _result(http: httpx.Client, skill: str, data: str) -> Any:
    """The data part a completed task answered for *data*; GetTask reads the same."""
    sent = http.post("/message:send", content=_rest(_message(data, skill=skill)))
    assert sent.status_code == 200, sent.text
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    [part] = task["artifacts"][0]["parts"]
    got = http.get(f"/tasks/{task['id']}")
    assert got.status_code == 200 and got.json()["artifacts"] == task["artifacts"]
    return part["data"]


def test_a_non_finite_number_in_a_module_output_is_written_as_null() -> None:
    with (
        serve_in_thread(_registry()) as url,
        httpx.Client(base_url=url, headers=V1, verify=TLS) as http,
    ):
        for a in (0, 3):
            data = _result(http, "math.ratio", f'{{"a": {a}, "b": 0}}')
            assert data == {"ratio": None, "rest": [None, 1.5, None]}
        assert len(_listed(http)) == 2


def test_an_integer_output_beyond_a_double_is_written_as_its_digits() -> None:
    """A data part's numbers are doubles; an integer beyond their range failed the call
    (-32603 / 500: protobuf's OverflowError) and lost the result."""
    with (
        serve_in_thread(_registry()) as url,
        httpx.Client(base_url=url, headers=V1, verify=TLS) as http,
    ):
        for digits, expected in ((400, "1" + "0" * 400), (5000, None)):
            data = _result(http, "math.power", f'{{"digits": {digits}}}')
            assert data == {"power": expected, "small": 7}
        assert len(_listed(http)) == 2


def _send(http: httpx.Client, binding: str, data: str) -> httpx.Response:
    """A message to math.ratio with *data* (raw JSON text) on *binding* ("rpc1.0", ...)."""
    skill = '"metadata": {"skillId": "math.ratio"}'
    one = f'{{"messageId": "{uuid.uuid4().hex}", "role": "ROLE_USER", {skill}, '
    if binding == "rpc0.3":
        parts = f'"kind": "message", "parts": [{{"kind": "data", "data": {data}}}]}}'
        message = one.replace("ROLE_USER", "user") + parts
    elif binding == "rest0.3":
        message = one + f'"content": [{{"data": {{"data": {data}}}}}]}}'
    else:
        message = one + f'"parts": [{{"data": {data}}}]}}'
    version = {"A2A-Version": binding[-3:], "content-type": "application/json"}
    if binding.startswith("rest"):
        path = "/v1/message:send" if binding == "rest0.3" else "/message:send"
        return http.post(path, content=_rest(message), headers=version)
    method = "message/send" if binding == "rpc0.3" else "SendMessage"
    body = f'{{"jsonrpc": "2.0", "id": 1, "method": "{method}", "params": {_rest(message)}}}'
    return http.post("/", content=body, headers=version)


BINDINGS = ["rpc1.0", "rpc0.3", "rest1.0", "rest0.3"]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_number_no_double_holds_is_a_parse_error_and_stores_nothing(binding: str) -> None:
    """1e999 read as infinity was stored, then failed its owner's ListTasks as NaN did; an
    integer of 400 digits was refused in Python's words (``OverflowError``), one of 5000
    digits only after a guess at which plain ValueError json.loads let out."""
    beyond = "a number is beyond a double's range (RFC 8259 §6)"
    non_finite = "NaN and Infinity are not JSON numbers (RFC 8259)"
    numbers = {"1e999": beyond, "-1E+400": beyond, "1" * 400: beyond, "-" + "9" * 5000: beyond,
               "NaN": non_finite, "-Infinity": non_finite}  # fmt: skip
    with serve_in_thread(_registry()) as url, httpx.Client(base_url=url, verify=TLS) as http:
        for number, words in numbers.items():
            answer = _send(http, binding, f'{{"a": {number}, "b": 2}}')
            if binding.startswith("rest"):
                assert answer.status_code == 400, answer.text
                error = answer.json()["error"]
            else:
                assert answer.status_code == 200, answer.text
                error = answer.json()["error"]
                assert error["code"] == -32700, error
            assert error["message"] == f"Parse error: {words}", error
        # Within a double's range: served, whatever the digits.
        served = {"1." + "3" * 5000: 1.3333333333333333, "1e-999": 0.0, "1" + "0" * 300: 1e300}
        for number, value in served.items():
            answer = _send(http, binding, f'{{"a": {number}, "b": 1}}')
            assert answer.status_code == 200 and "error" not in answer.json(), answer.text
            assert find_key(answer.json(), "ratio") == [value], answer.text
        with httpx.Client(base_url=url, headers=V1, verify=TLS) as v1:
            assert len(_listed(v1)) == len(served)
