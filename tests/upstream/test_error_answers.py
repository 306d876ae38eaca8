"""The SDK behaviours ``apcore_a2a/upstream/error_answers.py`` answers, read in a fresh
interpreter. A failure here means a2a-sdk changed them: shrink or delete that file."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

_SDK = """
import json
from a2a.server.request_handlers import grpc_handler as g
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils import errors as e
from a2a.utils.error_handlers import build_rest_error_payload
names = ["TaskNotCancelableError", "ContentTypeNotSupportedError", "InvalidAgentResponseError",
         "PushNotificationNotSupportedError", "UnsupportedOperationError",
         "VersionNotSupportedError"]
class AppError(e.A2AError):
    pass
rest = build_rest_error_payload(AppError("x"))["error"]
print(json.dumps({
  "http": {n: e.A2A_ERROR_MAPPING[getattr(e, n)].http_code for n in names},
  "grpc": {n: g._ERROR_CODE_MAP[getattr(e, n)].name for n in names},
  "app_error": {
    "jsonrpc": build_error_response(1, AppError("x"))["error"]["code"],
    "rest": [rest["code"], rest["status"], rest["details"][0]["reason"]],
    "grpc": AppError in g._ERROR_CODE_MAP,
  },
}))
"""


def _sdk() -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _SDK], capture_output=True, text=True, check=True)
    answers: dict[str, Any] = json.loads(out.stdout)
    return answers


def test_sdk_statuses_are_the_spec_table() -> None:
    """Spec 1.0.1 §5.4, which we serve as the SDK answers it: no correction. A failure
    here means the SDK moved off the released table; then a correction is due."""
    sdk = _sdk()
    assert sdk["http"] == {
        "TaskNotCancelableError": 400,
        "ContentTypeNotSupportedError": 400,
        "InvalidAgentResponseError": 500,
        "PushNotificationNotSupportedError": 400,
        "UnsupportedOperationError": 400,
        "VersionNotSupportedError": 400,
    }
    assert sdk["grpc"] == {
        "TaskNotCancelableError": "FAILED_PRECONDITION",
        "ContentTypeNotSupportedError": "INVALID_ARGUMENT",
        "InvalidAgentResponseError": "INTERNAL",
        "PushNotificationNotSupportedError": "FAILED_PRECONDITION",
        "UnsupportedOperationError": "FAILED_PRECONDITION",
        "VersionNotSupportedError": "FAILED_PRECONDITION",
    }


def test_sdk_still_answers_an_apps_own_error_as_internal() -> None:
    """An error class the SDK's process-wide tables do not list gets no code of its own:
    ours need the marker and the answering layer until the SDK has a per-app way."""
    assert _sdk()["app_error"] == {
        "jsonrpc": -32603,
        "rest": [500, "INTERNAL", "UNKNOWN_ERROR"],
        "grpc": False,
    }
