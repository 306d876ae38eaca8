"""``?A2A-Version=`` is the value the request's record parsed from its query, for every layer.

A2A 1.0.1 §3.6.1 lets a client send the version as a request parameter; the agent reads it
as the header (``upstream/version_param.py``). The request's record parses the query once
(``RequestInfo.params``, as Starlette parses it for the SDK), and the version rule, the
SDK's own check, the card route and the query checks read that one parse: the first
``A2A-Version`` of any case, its name and value percent-decoded, ``+`` a space, stripped
as a header's value is. Each case is sent on REST 1.0 and 0.3 (and JSON-RPC, which reads
the parameter too), then again with the value as the header: the answers are the same.

Before, the version parameter was parsed a second time and its value kept in latin-1:
``?A2A-Version=9.9%E2%82%AC`` was refused as ``'9.9?'``, and ``1.0`` followed by an
ideographic space (U+3000, white space as U+00A0 is, which was read as 1.0) as ``'1.0?'``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from packaging.version import InvalidVersion, Version

from tests._support import TLS
from tests.bindings._agent import Agent

QUERIES = [
    "A2A-Version=1.0",
    "A2A-Version=0.3",
    "A2A%2DVersion=1.0",  # a percent-encoded name
    "a2a-VERSION=1%2E0",
    "a2a-version=0.3&A2A-Version=1.0",  # given twice: the first
    "A2A-Version=1.0&a2a-version=0.3",
    "A2A-Version=&A2A-Version=1.0",  # an empty first value: none, 0.3
    "A2A-Version",  # no "=": empty
    "A2A-Version=+1.0+",  # "+" and "%20" are both a space
    "A2A-Version=%201.0%20",
    "A2A-Version=1.0%C2%A0",  # U+00A0, white space as a header's value strips it
    "A2A-Version=1.0%E3%80%80",  # U+3000, white space outside latin-1
    "A2A-Version=9.9%E2%82%AC",  # no version, outside latin-1: quoted as sent
    "A2A-Version=%2Fetc%2Fpasswd",
    "A2A-Version=1.0%00",
    "A2A-Version+=1.0",  # another name ("A2A-Version "): none
    "historyLength=1.0&A2A-Version=1.0",  # beside a value the query check reads, rewritten
]


def _announced(query: str) -> str:
    """What the record announces: the first ``A2A-Version`` of any case, stripped."""
    found = [v for k, v in parse_qsl(query, keep_blank_values=True) if k.lower() == "a2a-version"]
    return found[0].strip() if found else ""


def _served(announced: str, spoken: str) -> bool:
    """Whether a method of protocol *spoken* serves a caller announcing *announced*."""
    try:
        asked = Version(announced or "0.3")
    except InvalidVersion:
        return False
    return (asked.major, asked.minor) == (Version(spoken).major, Version(spoken).minor)


@pytest.fixture(scope="module")
def http(agent: Agent) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=agent.url, timeout=30, verify=TLS) as client:
        yield client


@pytest.fixture(scope="module")
def task(http: httpx.Client) -> str:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skillId": "demo.echo"}}  # fmt: skip
    sent = http.post("/message:send", json={"message": message}, headers={"A2A-Version": "1.0"})
    assert sent.status_code == 200, sent.text
    found: str = sent.json()["task"]["id"]
    return found


def _calls(task: str) -> list[tuple[str, str, str, dict[str, Any] | None]]:
    """(name, path, protocol, JSON-RPC body or None for a REST GET) of one task's reads."""
    return [
        ("REST 1.0", f"/tasks/{task}", "1.0", None),
        ("REST 0.3", f"/v1/tasks/{task}", "0.3", None),
        ("JSON-RPC 1.0", "/", "1.0", {"method": "GetTask", "params": {"id": task}}),
        ("JSON-RPC 0.3", "/", "0.3", {"method": "tasks/get", "params": {"id": task}}),
    ]


def _send(http: httpx.Client, path: str, body: dict[str, Any] | None, **kw: Any) -> Any:
    if body is None:
        return http.get(path, **kw)
    return http.post(path, json={"jsonrpc": "2.0", "id": 1, **body}, **kw)


def _outcome(answer: httpx.Response, rest: bool) -> tuple[int, str | None, str]:
    """(HTTP status, the task's id or None, the error's message or "")."""
    document = answer.json()
    error = document.get("error") or {}
    found = document if rest else document.get("result") or {}
    return answer.status_code, found.get("id"), str(error.get("message", ""))


@pytest.mark.parametrize("query", QUERIES)
def test_every_layer_reads_the_records_version_parameter(
    http: httpx.Client, task: str, query: str
) -> None:
    announced = _announced(query)
    for name, path, spoken, body in _calls(task):
        rest = body is None
        status, found, message = _outcome(_send(http, f"{path}?{query}", body), rest)
        if _served(announced, spoken):  # our version rule and the SDK's both let it through
            assert (status, found, message) == (200, task, ""), (name, message)
        else:
            assert (status, found) == ((400, None) if rest else (200, None)), name
            said = repr(announced) if announced else "a request without A2A-Version"
            assert said in message, (name, message)
        try:
            header = announced.encode("latin-1")
        except UnicodeEncodeError:
            continue  # no header carries it
        if b"\x00" in header:
            continue  # nor a NUL (h11 refuses to send it)
        sent = _send(http, path, body, headers={b"A2A-Version": header} if header else None)
        # Read as the header: the same answer (the empty header as none, spec §3.6.2).
        assert _outcome(sent, rest) == (status, found, message), name


def test_a_header_wins_over_the_parameter_on_rest(http: httpx.Client, task: str) -> None:
    query = "A2A-Version=1.0"
    old = http.get(f"/v1/tasks/{task}?{query}", headers={"A2A-Version": "0.3"})
    assert (old.status_code, old.json()["id"]) == (200, task)
    new = http.get(f"/tasks/{task}?{query}", headers={"A2A-Version": "0.3"})
    assert new.status_code == 400
    assert "'0.3' is not supported" in new.json()["error"]["message"]


#: majors no int() reads (a superscript one, 5,000 digits): before, HTTP 500 or a reset
ODD_MAJORS = ["A2A-Version=%C2%B9.0", "A2A-Version=" + "1" * 5000, "A2A-Version=%D9%A1.0"]


@pytest.mark.parametrize("query", QUERIES + ODD_MAJORS, ids=lambda query: query[:48])
def test_the_card_route_reads_the_same_parameter(http: httpx.Client, query: str) -> None:
    """The card route serves the 1.0 card to a caller announcing 1.x or later, else the
    merged one: the parameter as the record reads it, the same as the header. A major is
    ASCII digits, as the version rule reads one (superscript one, U+00B9, and the
    Arabic-Indic one, U+0661, name no version)."""
    major = _announced(query).split(".", 1)[0]
    by_param = http.get(f"/.well-known/agent-card.json?{query}")
    assert by_param.status_code == 200, by_param.text
    v1 = "protocolVersion" not in by_param.json()
    assert v1 == (major.isascii() and major.isdigit() and major.strip("0") != ""), major[:9]
    header = _announced(query).encode("utf-8")
    if b"\x00" not in header and (header.isascii() or header == "\u00b9.0".encode()):
        sent = header.decode("utf-8").encode("latin-1")
        by_header = http.get("/.well-known/agent-card.json", headers={b"A2A-Version": sent})
        assert (by_header.status_code, by_header.json()) == (200, by_param.json())
