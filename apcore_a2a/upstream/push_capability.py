"""A message carrying a push config, to an agent without push, is refused (spec §3.3.4)."""

from __future__ import annotations

from a2a.types import AgentCapabilities, SendMessageRequest
from a2a.utils.errors import PushNotificationNotSupportedError


def refuse_push_config(params: SendMessageRequest, capabilities: AgentCapabilities) -> None:
    """Raise ``PushNotificationNotSupportedError`` for a push config the agent cannot serve."""
    push = params.configuration.HasField("task_push_notification_config")
    if push and not capabilities.push_notifications:
        raise PushNotificationNotSupportedError
