"""Per-version JSON-RPC vocabulary (A2A 1.0 and 0.3) and endpoint selection from a card."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from apcore_a2a.client._messages import to_v03_message, to_v03_push_config
from apcore_a2a.client.errors import A2ADiscoveryError

__all__ = ["V03", "V10", "Dialect", "Protocol", "select_endpoint"]

Protocol = Literal["auto", "1.0", "0.3"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """Method names and parameter shapes of one A2A protocol version."""

    version: Literal["1.0", "0.3"]
    send: str
    stream: str
    get: str
    cancel: str
    list: str | None
    subscribe: str
    push_set: str
    push_get: str
    push_list: str
    push_delete: str
    extended_card: str

    @property
    def is_v10(self) -> bool:
        return self.version == "1.0"

    def send_params(
        self,
        message: Mapping[str, Any],
        *,
        metadata: Mapping[str, Any] | None,
        return_immediately: bool,
    ) -> dict[str, Any]:
        params: dict[str, Any]
        if self.is_v10:
            params = {"message": dict(message)}
            if return_immediately:
                params["configuration"] = {"returnImmediately": True}
        else:
            params = {
                "message": to_v03_message(message),
                "configuration": {"blocking": not return_immediately},
            }
        if metadata:
            params["metadata"] = dict(metadata)
        return params

    def push_set_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return dict(config) if self.is_v10 else to_v03_push_config(config)

    def push_ref_params(self, task_id: str, config_id: str | None) -> dict[str, Any]:
        if self.is_v10:
            ref = {"taskId": task_id}
            if config_id is not None:
                ref["id"] = config_id
            return ref
        ref = {"id": task_id}
        if config_id is not None:
            ref["pushNotificationConfigId"] = config_id
        return ref


V10 = Dialect(
    version="1.0",
    send="SendMessage",
    stream="SendStreamingMessage",
    get="GetTask",
    cancel="CancelTask",
    list="ListTasks",
    subscribe="SubscribeToTask",
    push_set="CreateTaskPushNotificationConfig",
    push_get="GetTaskPushNotificationConfig",
    push_list="ListTaskPushNotificationConfigs",
    push_delete="DeleteTaskPushNotificationConfig",
    extended_card="GetExtendedAgentCard",
)

V03 = Dialect(
    version="0.3",
    send="message/send",
    stream="message/stream",
    get="tasks/get",
    cancel="tasks/cancel",
    list=None,
    subscribe="tasks/resubscribe",
    push_set="tasks/pushNotificationConfig/set",
    push_get="tasks/pushNotificationConfig/get",
    push_list="tasks/pushNotificationConfig/list",
    push_delete="tasks/pushNotificationConfig/delete",
    extended_card="agent/getAuthenticatedExtendedCard",
)


def _jsonrpc_urls(card: Mapping[str, Any], major: str) -> list[str]:
    urls: list[str] = []
    for iface in card.get("supportedInterfaces") or []:
        if not isinstance(iface, Mapping):
            continue
        binding = str(iface.get("protocolBinding") or "").upper()
        version = str(iface.get("protocolVersion") or "")
        # An unversioned interface is a 0.3-era declaration (the SDK reads it that way too).
        if binding == "JSONRPC" and (version.split(".")[0] if version else "0") == major:
            urls.append(str(iface.get("url") or ""))
    if major == "0":
        if str(card.get("preferredTransport") or "JSONRPC").upper() == "JSONRPC" and card.get(
            "url"
        ):
            urls.append(str(card["url"]))
        for iface in card.get("additionalInterfaces") or []:
            if isinstance(iface, Mapping) and str(iface.get("transport")).upper() == "JSONRPC":
                urls.append(str(iface.get("url") or ""))
    return [u for u in urls if u]


def select_endpoint(
    card: Mapping[str, Any] | None, base_url: str, protocol: Protocol
) -> tuple[Dialect, str]:
    """Pick the wire version and JSON-RPC URL.

    ``auto`` speaks 1.0 when the card declares a 1.0 JSON-RPC interface, else 0.3. A
    pinned version uses the card's interface for that version when there is one, and
    the client's own URL otherwise. ``auto`` raises :class:`A2ADiscoveryError` when
    the card lists interfaces but none of them is JSON-RPC.
    """
    v10 = _jsonrpc_urls(card, "1") if card else []
    v03 = _jsonrpc_urls(card, "0") if card else []
    if protocol == "auto" and card and card.get("supportedInterfaces") and not (v10 or v03):
        bindings = sorted({str(i.get("protocolBinding")) for i in card["supportedInterfaces"]})
        raise A2ADiscoveryError(
            f"the agent offers no JSON-RPC interface (only {', '.join(bindings)}); "
            "this client speaks JSON-RPC"
        )
    if protocol == "1.0" or (protocol == "auto" and v10):
        return V10, v10[0] if v10 else base_url
    return V03, v03[0] if v03 else base_url
