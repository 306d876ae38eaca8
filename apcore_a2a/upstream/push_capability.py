"""A message whose configuration carries a push config is refused by an agent without push.

Spec §3.3.4: an agent whose card does not declare ``capabilities.pushNotifications`` MUST
answer the use of push notifications with ``PushNotificationNotSupportedError``. a2a-sdk 1.3
does so for the push-config methods, but serves a ``SendMessage`` carrying a config and
drops the config: the caller waits for calls that never come. The request handler asks
:func:`refuse_push_config` first (``server/handler.py``). Deletable when the SDK refuses
such a message itself: ``tests/upstream/test_push_capability.py`` fails then.
"""

from __future__ import annotations

from a2a.types import AgentCapabilities, SendMessageRequest
from a2a.utils.errors import PushNotificationNotSupportedError


def refuse_push_config(params: SendMessageRequest, capabilities: AgentCapabilities) -> None:
    """Raise ``PushNotificationNotSupportedError`` for a push config the agent cannot serve."""
    push = params.configuration.HasField("task_push_notification_config")
    if push and not capabilities.push_notifications:
        raise PushNotificationNotSupportedError
