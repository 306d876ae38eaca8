"""Watch: a2a-sdk's required-field check walks each ``google.protobuf.Value`` of a Struct.

``apcore_a2a.upstream.required_fields`` checks the same fields with a walk that stops at
google.protobuf's types. The first test fails the day the SDK stops descending into
Structs: the correction can then go. The others hold the correction to the SDK's answers.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest
from a2a.server.request_handlers import DefaultRequestHandler, validate_request_params
from a2a.types import ListTasksRequest, SendMessageRequest
from a2a.utils import proto_utils
from a2a.utils.errors import InvalidParamsError
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.json_format import ParseDict

from apcore_a2a.shape import field_items
from apcore_a2a.upstream.required_fields import check, unchecked


def _request(params: dict[str, Any]) -> SendMessageRequest:
    return ParseDict(params, SendMessageRequest(), ignore_unknown_fields=True)


def _valid(data: dict[str, Any]) -> dict[str, Any]:
    part = {"data": data}
    return {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [part], "metadata": data}}


def test_the_sdk_check_visits_every_value_of_a_struct() -> None:
    visited: list[str] = []
    walker = proto_utils._validate_proto_required_fields_internal.__code__

    def probe(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code is walker:
            visited.append(frame.f_locals["msg"].DESCRIPTOR.full_name)

    request = _request(_valid({f"k{i}": i for i in range(50)}))
    sys.setprofile(probe)
    try:
        proto_utils.validate_proto_required_fields(request)
    finally:
        sys.setprofile(None)
    # 50 values in the data part and 50 more in the metadata, each walked on its own.
    assert visited.count("google.protobuf.Value") >= 100


async def _send(self: Any, params: Any, context: Any) -> None: ...


async def _stream(self: Any, params: Any, context: Any) -> Any:
    yield None


def test_the_sdk_message_methods_are_traced_then_checked() -> None:
    for method, sample in (
        (DefaultRequestHandler.on_message_send, _send),
        (DefaultRequestHandler.on_message_send_stream, _stream),
    ):
        # trace_class's wrapper, then validate_request_params's, then the method.
        checked = method.__wrapped__  # type: ignore[attr-defined]
        assert checked.__code__ is validate_request_params(sample).__code__
        assert checked.__wrapped__.__qualname__ == method.__qualname__
        assert unchecked(method).__wrapped__ is checked.__wrapped__


INVALID = [
    {},
    {"message": {}},
    {"message": {"messageId": "m", "parts": [{"text": "x"}, {}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
    {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
        "configuration": {"taskPushNotificationConfig": {}},
    },
]


def _answer(validate: Any, request: SendMessageRequest) -> Any:
    try:
        validate(request)
    except InvalidParamsError as exc:
        return exc.message, exc.data
    return None


@pytest.mark.parametrize("params", INVALID)
def test_the_correction_answers_as_the_sdk_does(params: dict[str, Any]) -> None:
    request = _request(params)
    expected = _answer(proto_utils.validate_proto_required_fields, request)
    assert expected is not None
    assert _answer(check, request) == expected


def test_a_valid_request_with_structs_passes_both() -> None:
    request = _request(_valid({"a": [1, {"b": None}], "c": "d"}))
    assert _answer(proto_utils.validate_proto_required_fields, request) is None
    assert _answer(check, request) is None


class _OldField:
    """A field descriptor as protobuf before 6.31 has it: ``label``, no ``is_repeated``."""

    message_type = None
    label = FieldDescriptor.LABEL_REPEATED


def test_field_items_reads_repeated_fields_of_protobuf_before_6_31() -> None:
    # a2a-sdk admits protobuf 5.29.5; is_repeated came in 6.31 and label goes in 7.
    assert field_items(_OldField()) == (True, None, False)  # type: ignore[arg-type]
    message = SendMessageRequest.DESCRIPTOR.fields_by_name["message"].message_type
    parts = message.fields_by_name["parts"]
    assert field_items(parts) == (True, parts.message_type, False)


def test_the_sdk_takes_an_enum_number_a2a_does_not_define() -> None:
    """The second half of the correction: the SDK's check passes ``"role": 7`` (and a
    ``ListTasks`` ``status`` of 99, which its database store then fails on); ours refuses
    it, naming the enum. Fails the day the SDK checks enum values itself."""
    request = _request({"message": {"messageId": "m", "role": 7, "parts": [{"text": "x"}]}})
    assert request.message.role == 7
    assert _answer(proto_utils.validate_proto_required_fields, request) is None
    refused = _answer(check, request)
    assert refused is not None
    assert refused[1]["errors"] == [
        {"field": "message.role", "message": "7 is not a value of Role"}
    ]
    listing = ParseDict({"status": 99}, ListTasksRequest())
    assert _answer(proto_utils.validate_proto_required_fields, listing) is None
    assert _answer(check, listing) is not None
    assert _answer(check, ParseDict({"status": "TASK_STATE_WORKING"}, ListTasksRequest())) is None
