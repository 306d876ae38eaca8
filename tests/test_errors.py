"""apcore-a2a's own A2A errors as our HTTP layer answers them; the SDK's pass unchanged.

The SDK renders errors it has no table entry for as internal errors; the answering layer
turns them into ours (:func:`apcore_a2a.upstream.error_answers.correct_error`). The
answers on the wire are checked in tests/test_process_wide.py and the binding suites.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError, TaskNotCancelableError, TaskNotFoundError

from apcore_a2a.errors import WIRE_KEY, QuotaExceededError, StoreUnavailableError, TaskBusyError
from apcore_a2a.upstream.error_answers import correct_error

CASES = [
    (TaskBusyError(), -32090, 409, "FAILED_PRECONDITION", "TASK_BUSY"),
    (QuotaExceededError(retry_after=3), -32091, 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
    (StoreUnavailableError(), -32092, 503, "UNAVAILABLE", "TASK_STORE_UNAVAILABLE"),
]


@pytest.mark.parametrize(("error", "code", "http", "status", "reason"), CASES)
def test_own_errors_on_json_rpc_and_rest(
    error: A2AError, code: int, http: int, status: str, reason: str
) -> None:
    rpc = correct_error(build_error_response(7, error)["error"])
    assert rpc["code"] == code
    assert rpc["data"][0]["reason"] == reason
    assert WIRE_KEY not in rpc["data"][0]["metadata"]
    rest = correct_error(build_rest_error_payload(error)["error"])
    assert (rest["code"], rest["status"], rest["details"][0]["reason"]) == (http, status, reason)
    assert WIRE_KEY not in rest["details"][0]["metadata"]
    # The SDK's 0.3 adapter sends an error it has no code for as -32603 with its data.
    legacy = correct_error({"code": -32603, "message": error.message, "data": error.data})
    assert legacy["code"] == code
    assert WIRE_KEY not in legacy.get("data", {})


def test_retry_after_travels_in_the_data_as_text() -> None:
    # Built as google.rpc.ErrorInfo.metadata holds it (a map<string, string>): the SDK's
    # rendering needs no correction (upstream/error_metadata.py is for the SDK's own).
    rest = correct_error(build_rest_error_payload(QuotaExceededError(retry_after=2.6))["error"])
    assert rest["details"][0]["metadata"] == {"retryAfter": "3"}
    data = StoreUnavailableError(data={"store": "x"}).data
    assert data is not None and data["store"] == "x" and data["retryAfter"] == "2"


@pytest.mark.parametrize("error", [TaskNotCancelableError(), TaskNotFoundError()])
def test_the_sdks_own_answers_pass_unchanged(error: A2AError) -> None:
    """A2A 1.0.1 §5.4 is the SDK's table: its answers are ours (REST 400, not 409)."""
    rest = build_rest_error_payload(error)["error"]
    assert correct_error(rest) == rest
    rpc: dict[str, Any] = build_error_response(1, error)["error"]
    assert correct_error(rpc) == rpc
