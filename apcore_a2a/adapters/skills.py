"""apcore module descriptors -> A2A skills (pure).

A :class:`SkillSpec` is everything the server needs to know about one module, computed
once when the module is registered: the A2A ``AgentSkill`` for the card, the inlined
schemas published through the schema extension, and the :class:`SchemaFacts` the part
converter uses on every call. Nothing here touches the registry or the network.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import AgentSkill

from apcore_a2a.adapters.schema import SchemaFacts, inline_refs, root_type, schema_facts

logger = logging.getLogger("apcore_a2a.adapters.skills")

#: URI of the card extension that carries every skill's input/output JSON Schema.
SCHEMA_EXTENSION_URI = "urn:apcore:a2a:skill-schemas:v1"
#: apcore's own modules (health, manifest, usage; control): skills only when named
SYSTEM_PREFIX = "system."
#: apcore's control plane (update_config, toggle_feature, reload_module)
CONTROL_PREFIX = "system.control."

MAX_EXAMPLES = 10
JSON_MODE = "application/json"
TEXT_MODE = "text/plain"

_ANNOTATION_KEYS = {
    "readonly": "readonly",
    "destructive": "destructive",
    "idempotent": "idempotent",
    "requires_approval": "requiresApproval",
    "open_world": "openWorld",
    "streaming": "streaming",
    "cacheable": "cacheable",
    "paginated": "paginated",
}


@dataclass(frozen=True, slots=True)
class SkillSpec:
    """One module as an A2A skill, plus the facts needed to call it."""

    skill: AgentSkill
    module_id: str
    input_facts: SchemaFacts
    streaming: bool
    #: how the skill answers: ``"task"`` (default), ``"message"`` (stateless reply) or
    #: ``"auto"`` (the module decides per call, a task unless it says otherwise)
    reply: str
    #: the output schema is apcore's ``{"result": X}`` wrapper of a plain function return
    wrapped_result: bool
    extension_entry: dict[str, Any]


def is_served(module_id: str, system_modules: Collection[str]) -> bool:
    """Whether *module_id* may become a skill: any module but apcore's ``system.*`` ones,
    which only when the operator names them in *system_modules*."""
    return not module_id.startswith(SYSTEM_PREFIX) or module_id in system_modules


def humanize(module_id: str) -> str:
    """``"math.add_numbers"`` -> ``"Math Add Numbers"``."""
    words = [w for w in re.split(r"[._\-\s]+", module_id) if w]
    return " ".join(w[:1].upper() + w[1:] for w in words) or module_id


def _annotations(descriptor: Any) -> dict[str, Any]:
    ann = getattr(descriptor, "annotations", None)
    values = {key: getattr(ann, attr, None) for attr, key in _ANNOTATION_KEYS.items()}
    return {key: value for key, value in values.items() if isinstance(value, bool)}


def _modes(facts: SchemaFacts) -> list[str]:
    kind = root_type(facts.schema)
    modes = [JSON_MODE] if kind in ("object", "array") else []
    if kind == "string" or facts.text_property:
        modes.append(TEXT_MODE)
    if facts.binary:
        modes.append("application/octet-stream")
    return modes or [JSON_MODE]


def _example_strings(examples: Any) -> tuple[list[str], list[dict[str, Any]]]:
    strings: list[str] = []
    full: list[dict[str, Any]] = []
    for example in list(examples or ())[:MAX_EXAMPLES]:
        inputs = getattr(example, "inputs", None)
        if not isinstance(inputs, Mapping):
            continue
        try:
            strings.append(json.dumps(inputs, sort_keys=True, default=str))
        except (TypeError, ValueError):
            continue
        entry: dict[str, Any] = {"title": str(getattr(example, "title", "")), "inputs": inputs}
        output = getattr(example, "output", None)
        if output:
            entry["output"] = output
        if getattr(example, "description", None):
            entry["description"] = str(example.description)
        full.append(entry)
    return strings, full


def skill_from_descriptor(descriptor: Any, *, streaming: bool = False) -> SkillSpec | None:
    """Map an apcore ``ModuleDescriptor`` to a :class:`SkillSpec`; ``None`` (logged) for a
    module without a description, which the card cannot present meaningfully."""
    module_id = str(descriptor.module_id)
    description = (getattr(descriptor, "description", "") or "").strip()
    if not description:
        logger.warning("Module %s has no description; it is not published as a skill", module_id)
        return None
    input_schema = dict(getattr(descriptor, "input_schema", None) or {"type": "object"})
    output_schema_raw = dict(getattr(descriptor, "output_schema", None) or {"type": "object"})
    facts = schema_facts(input_schema)
    output_schema = inline_refs(output_schema_raw)
    props = output_schema.get("properties")
    wrapped = isinstance(props, Mapping) and list(props) == ["result"]
    inner = output_schema["properties"]["result"] if wrapped else None
    text_out = isinstance(inner, Mapping) and root_type(inner) == "string"
    annotations = _annotations(descriptor)
    streaming = streaming or bool(annotations.get("streaming"))
    annotations["streaming"] = streaming
    metadata = getattr(descriptor, "metadata", None) or {}
    a2a_meta = metadata.get("a2a") if isinstance(metadata, Mapping) else None
    reply = a2a_meta.get("reply") if isinstance(a2a_meta, Mapping) else None
    reply = reply if reply in ("message", "auto") else "task"
    tags = [str(t) for t in getattr(descriptor, "tags", None) or ()] or [module_id.split(".")[0]]
    example_strings, example_entries = _example_strings(getattr(descriptor, "examples", None))
    name = getattr(descriptor, "name", None) or humanize(module_id)
    skill = AgentSkill(
        id=module_id,
        name=str(name),
        description=description,
        tags=tags,
        examples=example_strings,
        input_modes=_modes(facts),
        output_modes=[TEXT_MODE] if text_out else [JSON_MODE],
    )
    entry: dict[str, Any] = {
        "inputSchema": facts.schema,
        "outputSchema": output_schema,
        "annotations": annotations,
        "version": str(getattr(descriptor, "version", "") or ""),
    }
    if example_entries:
        entry["examples"] = example_entries
    if reply != "task":
        entry["reply"] = reply
    return SkillSpec(
        skill=skill,
        module_id=module_id,
        input_facts=facts,
        streaming=streaming,
        reply=reply,
        wrapped_result=wrapped,
        extension_entry=entry,
    )
