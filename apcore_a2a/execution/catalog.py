"""The live list of skills and the card built from it.

:class:`SkillCatalog` reads module descriptors from the apcore registry once, keeps the
:class:`SkillSpec` of every public module, and rebuilds itself (and the serialized card)
when modules are registered or unregistered at runtime. Readers always see a complete
snapshot: a rebuild prepares everything first and then swaps one reference.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import AgentCard

from apcore_a2a.adapters.agent_card import AgentCardBuilder, CardDocument, serialize_card
from apcore_a2a.adapters.skills import SkillSpec, skill_from_descriptor

__all__ = ["CatalogSnapshot", "SkillCatalog"]

logger = logging.getLogger("apcore_a2a.execution.catalog")


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    """An immutable view: skills by id and the card document built from them."""

    specs: Mapping[str, SkillSpec]
    document: CardDocument

    @property
    def card(self) -> AgentCard:
        return self.document.card


class SkillCatalog:
    """Skills of an apcore registry, kept in step with registry changes.

    ``on_change`` callbacks run after every rebuild (for example to refresh extended
    cards); they receive the new snapshot.
    """

    def __init__(self, registry: Any, builder: AgentCardBuilder) -> None:
        self._registry = registry
        self._builder = builder
        self._lock = threading.Lock()
        self._spec_cache: dict[int, SkillSpec | None] = {}
        self._listeners: list[Callable[[CatalogSnapshot], None]] = []
        self._snapshot = self._build()
        self._subscribed = False

    # -- reading ---------------------------------------------------------------------
    @property
    def snapshot(self) -> CatalogSnapshot:
        return self._snapshot

    def get(self, skill_id: str) -> SkillSpec | None:
        return self._snapshot.specs.get(skill_id)

    def ids(self) -> list[str]:
        return list(self._snapshot.specs)

    @property
    def builder(self) -> AgentCardBuilder:
        return self._builder

    # -- change tracking ---------------------------------------------------------------
    def watch(self) -> None:
        """Follow the registry's register/unregister events (idempotent)."""
        if self._subscribed or not hasattr(self._registry, "on"):
            return
        self._registry.on("register", self._on_registry_event)
        self._registry.on("unregister", self._on_registry_event)
        self._subscribed = True

    def unwatch(self) -> None:
        if not self._subscribed:
            return
        off = getattr(self._registry, "off", None)
        if off is not None:
            off("register", self._on_registry_event)
            off("unregister", self._on_registry_event)
        self._subscribed = False

    def add_listener(self, callback: Callable[[CatalogSnapshot], None]) -> None:
        self._listeners.append(callback)

    def rebuild(self, builder: AgentCardBuilder | None = None) -> CatalogSnapshot:
        """Recompute the snapshot (optionally with a new card builder) and publish it."""
        with self._lock:
            if builder is not None:
                self._builder = builder
            self._snapshot = self._build()
            snapshot = self._snapshot
        for callback in list(self._listeners):
            try:
                callback(snapshot)
            except Exception:
                logger.exception("Catalog listener failed")
        return snapshot

    def _on_registry_event(self, module_id: str, module: Any) -> None:
        self._spec_cache.pop(id(module), None)
        self.rebuild()

    # -- building ---------------------------------------------------------------------
    def _spec_for(self, module_id: str) -> SkillSpec | None:
        module = self._registry.get(module_id)
        if module is None:
            return None
        key = id(module)
        cached = self._spec_cache.get(key)
        if cached is not None and cached.module_id == module_id:
            return cached
        descriptor = self._registry.get_definition(module_id)
        if descriptor is None:
            return None
        spec = skill_from_descriptor(
            descriptor, streaming=callable(getattr(module, "stream", None))
        )
        self._spec_cache[key] = spec
        return spec

    def _build(self) -> CatalogSnapshot:
        specs: dict[str, SkillSpec] = {}
        for module_id in self._registry.list():
            try:
                spec = self._spec_for(module_id)
            except Exception:
                logger.exception("Could not describe module %s; it is not published", module_id)
                continue
            if spec is not None:
                specs[module_id] = spec
        document = serialize_card(self._builder.build(specs.values()))
        previous = getattr(self, "_snapshot", None)
        if previous is not None:
            before = previous.document
            # Last-Modified has one-second resolution: a changed card always gets a later
            # second than the one it replaces, so If-Modified-Since never hides a change.
            modified = (
                before.last_modified
                if document.same_content(before)
                else max(document.last_modified, math.floor(before.last_modified) + 1)
            )
            document = dataclasses.replace(document, last_modified=modified)
        return CatalogSnapshot(specs=specs, document=document)
