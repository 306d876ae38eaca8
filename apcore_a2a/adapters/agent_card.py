"""Skills + interfaces + capabilities + security -> ``AgentCard`` (pure).

The card is built once (and again when the registry changes) and served from
pre-serialized bytes: :class:`CardDocument` holds three JSON forms and their ETags:

* ``v1_body``: the pure 1.0 card, valid against the 1.0 ``AgentCard`` schema, for clients
  that announce ``A2A-Version: 1.x`` on ``/.well-known/agent-card.json``;
* ``body``: the 1.0 card with the 0.3 keys merged in (as the SDK serves it), for requests
  without a version (the spec reads those as 0.3): 0.3 clients find their bindings in
  ``url``/``preferredTransport``/``additionalInterfaces``, 1.0 parsers skip those keys;
* ``legacy_body``: the pure 0.3 card for the legacy ``/.well-known/agent.json``.

``last_modified`` (seconds since the epoch) is when the content last changed, for
``Last-Modified``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import floor
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    SecurityRequirement,
    SecurityScheme,
)
from google.protobuf.json_format import MessageToDict

from apcore_a2a.adapters.skills import SCHEMA_EXTENSION_URI, SkillSpec

PROTOCOL_VERSIONS = ("1.0", "0.3")


@dataclass(frozen=True, slots=True)
class Binding:
    """One served transport: ``JSONRPC``, ``HTTP+JSON`` or ``GRPC`` at an address, in every
    protocol version (:data:`PROTOCOL_VERSIONS`)."""

    protocol: str
    url: str


@dataclass(frozen=True, slots=True)
class CardDocument:
    """A card and its pre-serialized JSON forms (see the module docstring)."""

    card: AgentCard
    body: bytes
    etag: str
    legacy_body: bytes
    legacy_etag: str
    v1_body: bytes = b""
    v1_etag: str = ""
    last_modified: float = 0.0

    def replacing(self, previous: CardDocument) -> CardDocument:
        """This document after *previous*: its date if the content is the same, else a later
        second (Last-Modified has one-second resolution; If-Modified-Since must see changes)."""
        tags = (self.etag, self.v1_etag, self.legacy_etag)
        if tags == (previous.etag, previous.v1_etag, previous.legacy_etag):
            return previous
        return replace(
            self, last_modified=max(self.last_modified, floor(previous.last_modified) + 1)
        )


def _etag(body: bytes) -> str:
    return f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'


def _whole_numbers(value: Any) -> Any:
    """Integral floats back to ints: protobuf ``Struct`` keeps every JSON number as a
    double, which would publish ``"maxItems": 8.0`` in the skill schemas."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def serialize_card(card: AgentCard, *, last_modified: float | None = None) -> CardDocument:
    """Serialize *card* for the well-known routes; *last_modified* defaults to now."""
    legacy = to_compat_agent_card(card).model_dump(mode="json", by_alias=True, exclude_none=True)
    bodies = [
        json.dumps(_whole_numbers(form), separators=(",", ":"), ensure_ascii=False).encode()
        for form in (agent_card_to_dict(card), legacy, MessageToDict(card))
    ]
    modified = time.time() if last_modified is None else last_modified
    body, legacy_body, v1_body = bodies
    return CardDocument(
        card, body, _etag(body), legacy_body, _etag(legacy_body), v1_body, _etag(v1_body), modified
    )


def rebase_card(card: AgentCard, old: str, new: str) -> AgentCard:
    """A copy of *card* whose URLs under *old* (interfaces, extension params) are under *new*.

    An agent that does not know its public URL builds its card for its bind address; when
    it is reached elsewhere (mounted under a path in a host app, say), the card names that.
    """
    old, new = old.rstrip("/"), new.rstrip("/")
    out = AgentCard()
    out.CopyFrom(card)
    if old == new:
        return out
    for interface in out.supported_interfaces:
        interface.url = _rebased(interface.url, old, new)
    for extension in out.capabilities.extensions:
        for value in extension.params.fields.values():
            if value.WhichOneof("kind") == "string_value":
                value.string_value = _rebased(value.string_value, old, new)
    return out


def _rebased(url: str, old: str, new: str) -> str:
    if url == old or url.startswith(old + "/"):
        return new + url[len(old) :]
    return url


@dataclass(slots=True)
class AgentCardBuilder:
    """Assemble an ``AgentCard`` from skills and deployment facts.

    Example::

        builder = AgentCardBuilder(name="calc", description="Adds numbers", version="1.0.0",
                                   bindings=[Binding("JSONRPC", "http://127.0.0.1:8000/")])
        card = builder.build(specs)
    """

    name: str
    #: ``None``: "apcore agent with N skills", N counted at each build
    description: str | None
    version: str
    bindings: Sequence[Binding]
    streaming: bool = True
    push_notifications: bool = False
    extended_agent_card: bool = False
    security_schemes: Mapping[str, SecurityScheme] = field(default_factory=dict)
    security_requirements: Sequence[SecurityRequirement] = ()
    extra_extensions: Sequence[AgentExtension] = ()
    documentation_url: str | None = None

    def build(self, specs: Iterable[SkillSpec]) -> AgentCard:
        specs = list(specs)
        params = {"skills": {s.module_id: s.extension_entry for s in specs}}
        extensions = [
            AgentExtension(
                uri=SCHEMA_EXTENSION_URI,
                description=(
                    "Input and output JSON Schema of every skill (refs inlined), its apcore "
                    "annotations and examples. Send inputs as a data part matching inputSchema "
                    "and name the skill in message.metadata.skillId."
                ),
                required=False,
                params=params,
            ),
            *self.extra_extensions,
        ]
        capabilities = AgentCapabilities(
            streaming=self.streaming,
            push_notifications=self.push_notifications,
            extensions=extensions,
            extended_agent_card=self.extended_agent_card or None,
        )
        return AgentCard(
            name=self.name,
            description=self.description or f"apcore agent with {len(specs)} skills",
            version=self.version,
            # 1.0 interfaces first (the preferred ones), then the 0.3 ones
            supported_interfaces=[
                AgentInterface(url=b.url, protocol_binding=b.protocol, protocol_version=version)
                for version in PROTOCOL_VERSIONS
                for b in self.bindings
            ],
            capabilities=capabilities,
            default_input_modes=sorted({m for s in specs for m in s.skill.input_modes})
            or ["application/json"],
            default_output_modes=sorted({m for s in specs for m in s.skill.output_modes})
            or ["application/json"],
            skills=[s.skill for s in specs],
            security_requirements=list(self.security_requirements),
            security_schemes=dict(self.security_schemes),
            documentation_url=self.documentation_url or None,
        )
