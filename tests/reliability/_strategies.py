"""Hypothesis strategies for hostile A2A traffic.

Values are wrong on purpose: wrong types, missing and unknown fields, huge strings,
deep nesting, lone surrogates, control characters, numbers out of every range. URLs
only ever name loopback hosts, so no generated request can make the agent reach out
beyond this machine.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ._modules import HOSTILE_SKILLS
from ._report import examples

METHODS_10 = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
)
METHODS_03 = (
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "tasks/pushNotificationConfig/delete",
    "agent/getAuthenticatedExtendedCard",
)
#: methods that open a stream which, on a live task, would wait for its next event
SUBSCRIBE_METHODS = frozenset({"SubscribeToTask", "tasks/resubscribe"})

NASTY_STRINGS = (
    "",
    " ",
    "\x00",
    "\ud800",
    "\udfff\ud800",
    "\u202e\u0645\u0631\u062d\u0628\u0627",
    "\U0001f4a9" * 50,
    "../../../../etc/passwd",
    "..%2f..%2fetc%2fpasswd",
    "%00",
    "'; DROP TABLE tasks; --",
    '" OR 1=1 --',
    "{0.__class__.__mro__}",
    "%s%s%s%n",
    "${jndi:ldap://127.0.0.1/a}",
    "<script>alert(1)</script>",
    "\r\nX-Injected: 1",
    "NaN",
    "-1",
    "1e309",
    "null",
    "true",
    "[]",
    "{}",
    "ROLE_USER",
    "TASK_STATE_COMPLETED",
    "a" * 1024,
)
LOOPBACK_URLS = (
    "http://127.0.0.1:1/hook",
    "https://127.0.0.1/hook",
    "https://localhost/hook",
    "https://[::1]/hook",
    "http://0.0.0.0/hook",
    "file:///etc/passwd",
    "ftp://127.0.0.1/x",
    "javascript:alert(1)",
    "https://127.0.0.1:99999/hook",
    "https://user:pw@127.0.0.1/hook",
    "//127.0.0.1/hook",
    "https:///hook",
)
VERSIONS = (
    "1.0",
    "0.3",
    "",
    "1",
    "1.1",
    "2.0",
    "0.2",
    "1.0.0",
    "0.3.0",
    "99",
    "latest",
    "1.0, 0.3",
)


def huge_text() -> st.SearchStrategy[str]:
    return st.builds(
        lambda ch, n: ch * n,
        st.sampled_from(["x", "\u00e9", "\U0001f600", "\\", '"', "\x01"]),
        st.sampled_from([4_097, 65_536, 300_000, 1_000_000]),
    )


def hostile_text() -> st.SearchStrategy[str]:
    """Mostly short nasty strings; one in 32 is huge (kept rare: each costs megabytes)."""
    short = st.one_of(
        st.text(max_size=40),
        st.sampled_from(NASTY_STRINGS),
        st.text(st.characters(codec="utf-8"), max_size=20),
    )
    return st.integers(0, 31).flatmap(lambda i: huge_text() if i == 0 else short)


scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text(),
)

json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=12), st.sampled_from(NASTY_STRINGS)), inner, max_size=4
        ),
    ),
    max_leaves=6,
)


def deep_json(depth: int, kind: str) -> str:
    """A JSON text nested *depth* levels (built as text: encoders recurse too)."""
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


deep_texts = st.builds(
    deep_json,
    st.sampled_from([64, 99, 100, 101, 500, 1_000, 1_001, 20_000, 200_000]),
    st.sampled_from(["list", "dict"]),
)


def _part() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries({"text": hostile_text()}),
        st.fixed_dictionaries({"data": json_values}),
        st.fixed_dictionaries(
            {"raw": st.one_of(hostile_text(), st.sampled_from(["aGVsbG8=", "!!", "=="]))},
            optional={"mediaType": hostile_text(), "filename": hostile_text()},
        ),
        st.fixed_dictionaries(
            {"url": st.sampled_from(LOOPBACK_URLS)}, optional={"mediaType": hostile_text()}
        ),
        st.dictionaries(
            st.sampled_from(["text", "data", "raw", "url", "kind", "mediaType", "metadata"]),
            json_values,
            max_size=4,
        ),
        json_values,
    )


def _message() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries(
            {
                "messageId": st.one_of(st.uuids().map(str), scalars),
                "role": st.one_of(
                    st.sampled_from(["ROLE_USER", "ROLE_AGENT", "user", "ROLE_UNSPECIFIED", 7]),
                    scalars,
                ),
                "parts": st.one_of(st.lists(_part(), max_size=4), json_values),
            },
            optional={
                "metadata": st.one_of(
                    st.fixed_dictionaries(
                        {"skillId": st.one_of(st.sampled_from(HOSTILE_SKILLS), scalars)}
                    ),
                    json_values,
                ),
                "taskId": st.one_of(st.uuids().map(str), scalars),
                "contextId": st.one_of(st.uuids().map(str), scalars),
                "referenceTaskIds": st.one_of(st.lists(hostile_text(), max_size=3), json_values),
                "extensions": json_values,
                "kind": st.sampled_from(["message", "task", 3]),
            },
        ),
        json_values,
    )


def _configuration() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "returnImmediately": st.one_of(st.booleans(), scalars),
                "historyLength": scalars,
                "acceptedOutputModes": st.one_of(st.lists(hostile_text(), max_size=3), scalars),
                "taskPushNotificationConfig": st.one_of(
                    st.fixed_dictionaries(
                        {"url": st.sampled_from(LOOPBACK_URLS)},
                        optional={
                            "id": hostile_text(),
                            "token": hostile_text(),
                            "authentication": json_values,
                        },
                    ),
                    json_values,
                ),
            },
        ),
        json_values,
    )


def params_for(method: str, task_ids: list[str]) -> st.SearchStrategy[Any]:
    """Plausible-but-hostile params for *method*; unknown keys and wrong types included."""
    ids = (
        st.one_of(st.sampled_from(task_ids), hostile_text(), scalars)
        if task_ids
        else st.one_of(hostile_text(), scalars)
    )
    extra = st.dictionaries(st.text(max_size=10), json_values, max_size=2)
    if method in ("SendMessage", "SendStreamingMessage", "message/send", "message/stream"):
        base = st.fixed_dictionaries(
            {"message": _message()},
            optional={
                "configuration": _configuration(),
                "metadata": json_values,
                "tenant": hostile_text(),
            },
        )
    elif method in ("ListTasks",):
        base = st.fixed_dictionaries(
            {},
            optional={
                "contextId": ids,
                "status": st.one_of(
                    st.sampled_from(
                        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "working", "BOGUS"]
                    ),
                    scalars,
                ),
                "pageSize": scalars,
                "pageToken": hostile_text(),
                "historyLength": scalars,
                "statusTimestampAfter": st.one_of(
                    st.sampled_from(["2020-01-01T00:00:00Z", "0", "9999-99-99", "-1"]), scalars
                ),
                "includeArtifacts": scalars,
            },
        )
    elif "PushNotificationConfig" in method or "pushNotificationConfig" in method:
        base = st.fixed_dictionaries(
            {},
            optional={
                "taskId": ids,
                "id": ids,
                "url": st.one_of(st.sampled_from(LOOPBACK_URLS), hostile_text()),
                "token": hostile_text(),
                "authentication": json_values,
                "pushNotificationConfig": st.fixed_dictionaries(
                    {"url": st.sampled_from(LOOPBACK_URLS)}, optional={"id": hostile_text()}
                ),
                "pushNotificationConfigId": ids,
                "name": hostile_text(),
            },
        )
    else:
        base = st.fixed_dictionaries(
            {},
            optional={
                "id": ids,
                "historyLength": scalars,
                "name": hostile_text(),
                "metadata": json_values,
            },
        )
    return st.one_of(st.builds(lambda b, e: {**e, **b}, base, extra), base, json_values)


def encode(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


header_bytes = st.one_of(
    st.sampled_from(VERSIONS).map(str.encode),
    st.binary(max_size=20).map(
        lambda b: bytes(c for c in b if c == 9 or (c >= 32 and c != 127)).strip()
    ),
)


_BASE = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)


def profile(ci_examples: int) -> settings:
    """Stable (derandomized) settings with *ci_examples* scaled by ``A2A_RELIABILITY_SCALE``."""
    return settings(_BASE, max_examples=examples(ci_examples))


def from_schema(schema: Any) -> st.SearchStrategy[Any]:
    """Instances valid under the JSON Schema subset Pydantic emits for our modules.

    (hypothesis-jsonschema would be the library for this, but 0.23 fails against current
    Hypothesis internals; our card schemas use only the keywords handled here.)
    """
    if not isinstance(schema, dict):
        return json_values
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([from_schema(option) for option in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in props]
        optional = {k: from_schema(v) for k, v in props.items() if k not in required}
        if not props:
            return st.dictionaries(st.text(max_size=8), json_values, max_size=3)
        return st.fixed_dictionaries(
            {k: from_schema(props[k]) for k in required}, optional=optional
        )
    if kind == "array":
        return st.lists(
            from_schema(schema.get("items", {})),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems", 5),
        )
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 40))
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**40)), schema.get("maximum", 2**40))
    if kind == "number":
        return st.floats(
            schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values
