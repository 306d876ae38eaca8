"""Call any A2A agent (1.0 or 0.3) with plain dicts, over a2a-sdk's client transports.

``import apcore_a2a.client`` loads nothing of the server side (no uvicorn, apcore,
``a2a.server``), so a process that only calls agents stays light.
"""

from apcore_a2a.client.card_fetcher import AgentCardFetcher
from apcore_a2a.client.client import A2AClient
from apcore_a2a.client.errors import (
    A2AAuthenticationError,
    A2AClientError,
    A2AConnectionError,
    A2ADiscoveryError,
    A2ARemoteError,
    A2AServerError,
    CardVerificationError,
    ContentTypeNotSupportedError,
    CrossOriginEndpointError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    QuotaExceededError,
    StoreUnavailableError,
    TaskBusyError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

__all__ = [
    "A2AAuthenticationError",
    "A2AClient",
    "A2AClientError",
    "A2AConnectionError",
    "A2ADiscoveryError",
    "A2ARemoteError",
    "A2AServerError",
    "AgentCardFetcher",
    "CardVerificationError",
    "ContentTypeNotSupportedError",
    "CrossOriginEndpointError",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "InvalidAgentResponseError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONParseError",
    "MethodNotFoundError",
    "PushNotificationNotSupportedError",
    "QuotaExceededError",
    "StoreUnavailableError",
    "TaskBusyError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnsupportedOperationError",
    "VersionNotSupportedError",
]
