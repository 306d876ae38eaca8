"""A refused credential is logged with its reason at the default level, never the token.

Issue 34, item 7: before, the reason went to DEBUG, so an operator at the default ``info``
saw only the client's 401 and no idea why.
"""

from __future__ import annotations

import time

import httpx
import jwt

from tests._support import ROOT, TLS, cli_server

from .keys import HMAC_SECRET


def test_a_refused_jwt_is_logged_with_its_reason_and_without_the_token() -> None:
    expired = jwt.encode({"sub": "alice", "exp": int(time.time()) - 3600}, HMAC_SECRET)
    wrong_key = jwt.encode({"sub": "bob", "exp": int(time.time()) + 3600}, "x" * 40)
    args = ["--extensions-dir", str(ROOT / "examples" / "extensions"), "--auth-type", "bearer"]
    with cli_server(args, env={"JWT_KEY": HMAC_SECRET}) as (base, proc):
        for token in (expired, wrong_key):
            answer = httpx.post(
                base + "/",
                json={},
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
                verify=TLS,
            )
            assert answer.status_code == 401
    output = proc.output()
    assert "refused credentials: ExpiredSignatureError: Signature has expired" in output
    assert "refused credentials: InvalidSignatureError:" in output
    assert expired not in output and wrong_key not in output
