"""A webhook receiver that verifies apcore-a2a push notifications before trusting them.

Every delivery is a JSON ``POST`` of one task update: for a config registered over A2A
1.0 one event (``{"task": ...}``, ``{"statusUpdate": ...}`` or ``{"artifactUpdate": ...}``),
for one registered over 0.3 the whole task (``{"kind": "task", ...}``). It carries
``X-A2A-Signature: <JWT>``, signed by the agent; the public keys are at
``<agent>/.well-known/jwks.json``. Checking a delivery means:

1. the signature verifies with the agent's key named by the JWT's ``kid``;
2. ``iss`` is the agent's URL, ``aud`` is *this* webhook's URL, ``exp`` has not passed;
3. ``body_sha256`` equals the hex SHA-256 of the exact request body bytes;
4. optionally, ``X-A2A-Notification-Token`` equals the token you registered, and
   ``Authorization`` equals ``<scheme> <credentials>`` of the config's ``authentication``.

``jti`` identifies the delivery and is the same on retries of it, so you can use it to
drop duplicates.

Run it (the agent needs ``--push-notifications --push-allow-insecure-urls`` to call an
``http://127.0.0.1`` receiver)::

    python examples/push_receiver.py --agent http://127.0.0.1:8000 --port 9000 --token s3cret

then register ``http://127.0.0.1:9000/webhook`` with token ``s3cret`` as a push config
(docs/push.md ends with the commands).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

logger = logging.getLogger("push_receiver")


class DeliveryRejected(Exception):
    """The delivery is not authentic (bad signature, claims, body hash or token)."""


@dataclass
class DeliveryVerifier:
    """Verifies deliveries from the agent at *agent_url* addressed to *webhook_url*."""

    agent_url: str
    webhook_url: str
    token: str | None = None
    authorization: str | None = None
    jwks_path: str = "/.well-known/jwks.json"
    signature_header: str = "x-a2a-signature"
    _keys: dict[str, jwt.PyJWK] = field(default_factory=dict)

    async def refresh_keys(self) -> None:
        """Fetch the agent's JWKS (done on first use and when an unknown ``kid`` shows up)."""
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(self.agent_url.rstrip("/") + self.jwks_path)
            response.raise_for_status()
        keyset = jwt.PyJWKSet.from_dict(response.json())
        self._keys = {str(key.key_id): key for key in keyset.keys}

    async def verify(self, headers: Any, body: bytes) -> dict[str, Any]:
        """Return the JWT claims of an authentic delivery, else raise ``DeliveryRejected``."""
        token = headers.get(self.signature_header, "")
        if not token:
            raise DeliveryRejected(f"missing {self.signature_header} header")
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError as exc:
            raise DeliveryRejected(f"malformed token: {exc}") from None
        if kid not in self._keys:
            await self.refresh_keys()
        key = self._keys.get(kid)
        if key is None:
            raise DeliveryRejected(f"unknown signing key {kid!r}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[key.algorithm_name],
                audience=self.webhook_url,
                issuer=self.agent_url.rstrip("/"),
                options={"require": ["iss", "aud", "iat", "exp", "jti", "body_sha256"]},
            )
        except jwt.PyJWTError as exc:
            raise DeliveryRejected(f"invalid token: {exc}") from None
        digest = hashlib.sha256(body).hexdigest()
        if not hmac.compare_digest(str(claims["body_sha256"]), digest):
            raise DeliveryRejected("body does not match the signed body_sha256")
        if self.token is not None and not hmac.compare_digest(
            headers.get("x-a2a-notification-token", ""), self.token
        ):
            raise DeliveryRejected("notification token mismatch")
        if self.authorization is not None and not hmac.compare_digest(
            headers.get("authorization", ""), self.authorization
        ):
            raise DeliveryRejected("authorization mismatch")
        return claims


def create_app(verifier: DeliveryVerifier, path: str = "/webhook") -> Starlette:
    """A Starlette app that accepts verified deliveries at *path* and logs each event."""
    seen: set[str] = set()

    async def webhook(request: Request) -> Response:
        body = await request.body()
        try:
            claims = await verifier.verify(request.headers, body)
        except DeliveryRejected as exc:
            logger.warning("rejected delivery: %s", exc)
            return JSONResponse({"error": str(exc)}, status_code=401)
        if claims["jti"] in seen:
            return Response(status_code=204)  # a retry of something we already have
        seen.add(claims["jti"])
        event = json.loads(body)
        if event.get("kind") == "task":  # a config registered over A2A 0.3: the whole task
            kind, shown = "task (0.3)", event.get("status", {})
        else:
            kind = next(iter(event), "?")
            shown = event[kind]
        logger.info("task %s: %s %s", claims["task_id"], kind, json.dumps(shown)[:200])
        return Response(status_code=204)

    return Starlette(routes=[Route(path, webhook, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, help="agent base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--path", default="/webhook")
    parser.add_argument("--token", default=None, help="expected X-A2A-Notification-Token")
    parser.add_argument(
        "--authorization", default=None, help="expected Authorization, e.g. 'Bearer abc'"
    )
    parser.add_argument("--public-url", default=None, help="URL the agent posts to (aud)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    webhook_url = args.public_url or f"http://{args.host}:{args.port}{args.path}"
    verifier = DeliveryVerifier(
        args.agent, webhook_url, token=args.token, authorization=args.authorization
    )

    import uvicorn

    uvicorn.run(create_app(verifier, args.path), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
