"""A light A2A client: call any A2A agent (1.0 or 0.3) with plain dicts.

This package imports only httpx and the standard library, so it can be used without
the server stack (``import apcore_a2a.client`` loads no starlette, uvicorn, a2a or
apcore).
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
