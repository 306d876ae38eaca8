"""The live list of skills and the card built from it.

:class:`SkillCatalog` reads module descriptors from the apcore registry once, keeps the
:class:`SkillSpec` of every public module (apcore's ``system.*`` modules only when named,
:func:`~apcore_a2a.adapters.skills.is_served`), and rebuilds itself (and the serialized card)
when modules are registered or unregistered at runtime. Readers always see a complete
snapshot: a rebuild prepares everything first and then swaps one reference.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import AgentCard

from apcore_a2a.adapters.agent_card import AgentCardBuilder, CardDocument, serialize_card
from apcore_a2a.adapters.skills import SkillSpec, is_served, skill_from_descriptor

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
    """Skills of an apcore registry, kept in step with registry changes."""

    def __init__(
        self, registry: Any, builder: AgentCardBuilder, system_modules: Collection[str] = ()
    ) -> None:
        self._registry = registry
        self._builder = builder
        self._system = frozenset(system_modules)
        #: why a module may not be published, if it may not (``governance.check_served``)
        self.unservable: Callable[[str], str | None] | None = None
        self._lock = threading.Lock()
        self._spec_cache: dict[int, SkillSpec | None] = {}
        self._snapshot = self._build(None)
        self._subscribed = False

    @property
    def snapshot(self) -> CatalogSnapshot:
        return self._snapshot

    def get(self, skill_id: str) -> SkillSpec | None:
        return self.snapshot.specs.get(skill_id)

    def ids(self) -> list[str]:
        return list(self.snapshot.specs)

    def watch(self) -> None:
        """Follow the registry's register/unregister events (idempotent)."""
        if self._subscribed or not hasattr(self._registry, "on"):
            return
        self._registry.on("register", self._on_registry_event)
        self._registry.on("unregister", self._on_registry_event)
        self._subscribed = True

    def unwatch(self) -> None:
        off = getattr(self._registry, "off", None)
        if self._subscribed and off is not None:
            off("register", self._on_registry_event)
            off("unregister", self._on_registry_event)
        self._subscribed = False

    def rebuild(self) -> CatalogSnapshot:
        """Recompute the snapshot and publish it."""
        with self._lock:
            self._snapshot = self._build(self._snapshot)
            return self._snapshot

    def _on_registry_event(self, module_id: str, module: Any) -> None:
        self._spec_cache.pop(id(module), None)
        self.rebuild()

    def _spec_for(self, module_id: str) -> SkillSpec | None:
        module = self._registry.get(module_id)
        if module is None:
            return None
        cached = self._spec_cache.get(id(module))
        if cached is not None and cached.module_id == module_id:
            return cached
        descriptor = self._registry.get_definition(module_id)
        if descriptor is None:
            return None
        streaming = callable(getattr(module, "stream", None))
        spec = self._spec_cache[id(module)] = skill_from_descriptor(descriptor, streaming=streaming)
        return spec

    def _build(self, previous: CatalogSnapshot | None) -> CatalogSnapshot:
        specs: dict[str, SkillSpec] = {}
        for module_id in self._registry.list():
            if not is_served(module_id, self._system):
                continue
            if self.unservable is not None and (why := self.unservable(module_id)):
                logger.error("Module %s is not published: %s", module_id, why)
                continue
            try:
                spec = self._spec_for(module_id)
            except Exception:
                logger.exception("Could not describe module %s; it is not published", module_id)
                continue
            if spec is not None:
                specs[module_id] = spec
        document = serialize_card(self._builder.build(specs.values()))
        if previous is not None:
            document = document.replacing(previous.document)
        return CatalogSnapshot(specs=specs, document=document)
