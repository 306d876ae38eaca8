"""The hostile-input oracle: what any answer of the agent may and may not look like.

Allowed: a documented HTTP status below 500 and, inside JSON-RPC answers, a documented
A2A/JSON-RPC error code. Never: a 5xx, ``-32603`` from our own code paths, a traceback,
a source path, or a secret anywhere in the body (SSE streams are checked event by event).
Every check counts into the section's :class:`~tests.reliability._report.Tally`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import httpx

from .._support import ROOT
from ._modules import LEAKY_PATH, SECRET
from ._report import Tally

#: JSON-RPC error codes a hostile request may get (A2A spec §9 + JSON-RPC 2.0).
#: -32603 (internal) and -32006 (invalid agent response) mean a bug on our side.
DOCUMENTED_CODES = frozenset(
    {-32700, -32600, -32601, -32602, -32001, -32002, -32003, -32004, -32005, -32007, -32008, -32009}
)
#: HTTP statuses of the A2A error mapping, plus routing (404/405, Starlette's trailing-slash
#: redirects 307), auth, 413/415.
DOCUMENTED_STATUSES = frozenset({200, 204, 304, 307, 400, 401, 403, 404, 405, 409, 413, 415, 422})

_FORBIDDEN = (
    "Traceback (most recent call last)",
    'File "/',
    "site-packages",
    str(ROOT),
    SECRET,
    LEAKY_PATH,
)


class Violation(AssertionError):
    """The agent answered something the oracle forbids."""


class Oracle:
    """Checks answers against the rules above and counts them into *tally*."""

    def __init__(
        self, tally: Tally, secrets: Iterable[str] = (), *, codes: Iterable[int] = ()
    ) -> None:
        self.tally = tally
        self.forbidden = (*_FORBIDDEN, *secrets)
        #: the JSON-RPC codes allowed here: the documented ones plus *codes*
        self.codes = DOCUMENTED_CODES | frozenset(codes)

    def check(self, response: httpx.Response, *, internal_ok: bool = False) -> Any:
        """Validate one answer; return its parsed JSON payload(s) (or ``None``).

        *internal_ok* allows ``-32603`` where it is documented (a message-reply skill whose
        module failed answers ``-32603`` by design).
        """
        self.tally.cases += 1
        try:
            return self._check(response, internal_ok)
        except Violation:
            self.tally.violations += 1
            raise

    def _check(self, response: httpx.Response, internal_ok: bool) -> Any:
        status = response.status_code
        text = response.text
        where = f"{response.request.method} {response.request.url.path} -> {status}"
        if status >= 500:
            self.tally.five_xx += 1
            raise Violation(f"{where}: server error {text[:500]!r}")
        if status not in DOCUMENTED_STATUSES:
            raise Violation(f"{where}: undocumented status {text[:300]!r}")
        for marker in self.forbidden:
            if marker and marker in text:
                raise Violation(f"{where}: body reveals {marker!r}: {text[:500]!r}")
        if not text:
            return None
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            payloads = [
                json.loads(line[5:].strip())
                for line in text.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        else:
            try:
                payloads = [response.json()]
            except ValueError:
                if status == 200 and "json" in response.headers.get("content-type", ""):
                    raise Violation(f"{where}: unparsable JSON {text[:300]!r}") from None
                return None
        for payload in payloads:
            self._check_payload(payload, where, internal_ok)
        return payloads if len(payloads) > 1 else payloads[0]

    def _check_payload(self, payload: Any, where: str, internal_ok: bool) -> None:
        if not isinstance(payload, dict):
            return
        error = payload.get("error")
        if not isinstance(error, dict):
            return
        code = error.get("code")
        if "jsonrpc" in payload:
            if code == -32603 and internal_ok:
                return
            if code not in self.codes:
                raise Violation(f"{where}: JSON-RPC error {error!r}")
        elif isinstance(code, int) and code >= 500:
            raise Violation(f"{where}: REST error {error!r}")
