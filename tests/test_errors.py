"""apcore-a2a's own A2A errors are known to the SDK's tables on every binding."""

from __future__ import annotations

import grpc
from a2a.server.request_handlers import grpc_handler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils.error_handlers import build_rest_error_payload

from apcore_a2a.errors import QuotaExceededError, StoreUnavailableError, TaskBusyError, register


def test_codes_statuses_and_reasons_after_register() -> None:
    register()
    register()  # idempotent
    cases = [
        (TaskBusyError(), -32090, 409, "FAILED_PRECONDITION", "TASK_BUSY"),
        (QuotaExceededError(retry_after=3), -32091, 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
        (StoreUnavailableError(), -32092, 503, "UNAVAILABLE", "TASK_STORE_UNAVAILABLE"),
    ]
    for error, code, http, status, reason in cases:
        rpc = build_error_response(7, error)
        assert rpc["error"]["code"] == code
        rest = build_rest_error_payload(error)["error"]
        assert (rest["code"], rest["status"]) == (http, status)
        assert rest["details"][0]["reason"] == reason
        assert grpc_handler._ERROR_CODE_MAP[type(error)] == getattr(grpc.StatusCode, status)


def test_retry_after_travels_in_the_data() -> None:
    assert QuotaExceededError(retry_after=2.6).data == {"retryAfter": 3}
    assert StoreUnavailableError(data={"store": "x"}).data == {"store": "x", "retryAfter": 2}


def test_a_0_3_json_rpc_caller_gets_the_same_code() -> None:
    from a2a.compat.v0_3.jsonrpc_adapter import _to_v03_jsonrpc_error

    register()
    assert _to_v03_jsonrpc_error(QuotaExceededError()).code == -32091
