"""One webhook delivery and one attempt at it: the signed POST of an event's body where the
SSRF policy's check says (its checked addresses, or the environment's proxy), within one
deadline (``push_timeout`` for URL check, connect, send, headers and the bounded body
read), reading at most :data:`MAX_ANSWER_BYTES` of the answer, undecoded. What is queued,
retried and when is the sender's (``sender.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
from a2a.types import TaskPushNotificationConfig

from apcore_a2a._proxies import ProxyUnusable
from apcore_a2a.adapters.errors import one_line
from apcore_a2a.push.aimed import Webhooks
from apcore_a2a.push.policy import PushUrlPolicy

if TYPE_CHECKING:
    from apcore_a2a.push.signing import SigningKey

logger = logging.getLogger("apcore_a2a.push")

#: The header that carries the agent's signed JWT on every delivery.
SIGNATURE_HEADER = "X-A2A-Signature"
#: At most this much of a receiver's answer body is read; the rest is never received.
MAX_ANSWER_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event's body for one config, and what its POST needs."""

    task_id: str
    config_id: str
    url: str
    headers: dict[str, str]
    body: bytes
    issuer: str
    #: The quota key of the caller whose task it is (``""``: not known here).
    caller: str = ""
    #: The JWT's ``jti``: one per delivery, the same on its retries.
    delivery_id: str = field(default_factory=lambda: str(uuid.uuid4()))


class GiveUp(Exception):
    """The delivery cannot succeed; the message is the reason recorded on the config."""


def config_headers(config: TaskPushNotificationConfig) -> dict[str, str]:
    """The headers *config* asks each of its deliveries to carry."""
    headers = {"Content-Type": "application/json"}
    if config.token:
        headers["X-A2A-Notification-Token"] = config.token
    auth = config.authentication
    if auth.scheme and auth.credentials:
        headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
    elif auth.scheme:
        logger.warning(
            "push: config %s names authentication scheme %r without credentials; "
            "no Authorization header is sent",
            one_line(config.id),
            auth.scheme,
        )
    return headers


async def try_once(
    delivery: Delivery,
    policy: PushUrlPolicy,
    webhooks: Webhooks | None,
    key: SigningKey | None,
    seconds: float,
) -> str | None:
    """One attempt at *delivery*, within *seconds*: ``None`` on success, a retryable
    problem, or raise :class:`GiveUp`."""
    status = None  # known as soon as the answer's headers are in
    deadline = asyncio.get_running_loop().time() + seconds  # the lookup's and connection's too
    try:
        async with asyncio.timeout_at(deadline):
            checked = await policy.resolve(delivery.url, delivery.caller)
            if checked.unresolved:  # transient, maybe: retried as a connection failure
                return f"URL not resolved at delivery: {checked.refused}"
            if checked.refused is not None:
                raise GiveUp(f"URL refused at delivery: {checked.refused}")
            if key is None or webhooks is None:
                raise GiveUp("sender is not running")
            try:  # signed afresh, sent where *checked* says (``push/aimed.py``)
                token = key.sign_delivery(
                    issuer=delivery.issuer,
                    audience=delivery.url,
                    task_id=delivery.task_id,
                    body=delivery.body,
                    jti=delivery.delivery_id,
                )
                headers = {**delivery.headers, SIGNATURE_HEADER: token}
                answer = await webhooks.post(
                    delivery.url, checked, content=delivery.body, headers=headers, deadline=deadline
                )
            except ProxyUnusable as exc:  # our words: the proxy, without its credentials
                raise GiveUp(f"request cannot be sent: {exc}") from None
            except (ValueError, httpx.InvalidURL) as exc:  # UnicodeEncodeError too
                # A config stored before its values were checked: no retry can send it.
                raise GiveUp(f"request cannot be sent: {type(exc).__name__}") from None
            async with contextlib.aclosing(answer) as response:
                status = response.status_code
                # Raw bytes: a compressed answer is never inflated. Reading stops at the
                # cap; closing an unfinished body drops the connection.
                received = 0
                async for chunk in response.aiter_raw():
                    received += len(chunk)
                    if received >= MAX_ANSWER_BYTES:
                        break
    except (TimeoutError, httpx.TimeoutException):
        if status is None:
            return f"no complete answer within {seconds:g} s"
        # The status came in time; only the (ignored) body was still dripping.
    except httpx.TransportError as exc:
        if status is None:
            return f"connection error: {type(exc).__name__}"
    if 200 <= status < 300:
        return None
    if status >= 500 or status == 429:
        return f"HTTP {status}"
    raise GiveUp(f"receiver answered HTTP {status}")
