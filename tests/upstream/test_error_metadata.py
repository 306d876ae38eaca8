"""Watch: a2a-sdk puts an error's ``data`` into ``google.rpc.ErrorInfo.metadata`` unaltered.

``ErrorInfo.metadata`` is a ``map<string, string>``, so a number or a list there makes the
whole detail unparseable for a peer that reads it with protobuf;
``apcore_a2a.upstream.error_metadata.string_metadata`` turns each such value into text.
The first test fails the day the SDK writes strings itself: delete the correction. The
second holds the correction to ProtoJSON, on both shapes the SDK renders (JSON-RPC 1.0
``data``, REST ``details``).
"""

from __future__ import annotations

from typing import Any

from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils.error_handlers import build_error_details, build_rest_error_payload
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format
from google.rpc import error_details_pb2

from apcore_a2a.upstream.error_metadata import string_metadata

ERROR = InvalidParamsError(
    message="Validation failed",
    data={"errors": [{"field": "a", "message": "é"}], "count": 2, "kind": "x"},
)


def test_the_sdk_still_copies_numbers_and_lists_into_error_info_metadata() -> None:
    info = build_error_details(ERROR)[0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["metadata"] == {"errors": [{"field": "a", "message": "é"}], "count": 2, "kind": "x"}


def _error_info(details: list[Any]) -> error_details_pb2.ErrorInfo:
    info = {k: v for k, v in details[0].items() if k != "@type"}
    return json_format.ParseDict(info, error_details_pb2.ErrorInfo())


def test_every_metadata_value_becomes_text_on_json_rpc_and_rest() -> None:
    rpc = string_metadata(build_error_response(1, ERROR)["error"])
    rest = string_metadata(build_rest_error_payload(ERROR)["error"])
    for details in (rpc["data"], rest["details"]):
        assert dict(_error_info(details).metadata) == {
            "errors": '[{"field":"a","message":"é"}]',
            "count": "2",
            "kind": "x",
        }
        # the SDK's BadRequest (field violations) is left as it is
        assert details[1]["fieldViolations"] == [{"field": "a", "description": "é"}]
