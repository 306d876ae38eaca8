"""JSON Schema helpers: ``$ref`` inlining and the facts the part converter needs.

apcore exports Pydantic ``model_json_schema()`` output, which keeps ``$defs`` and
``$ref``. Clients building data parts want one self-contained schema, and the part
converter wants to know which properties are integers, which are binary and which single
string a plain text part could fill. All of that is computed once per module and cached
by the caller (see :class:`SchemaFacts`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SchemaFacts",
    "coerce_integers",
    "inline_refs",
    "root_type",
    "schema_facts",
    "summarize",
]

_MAX_DEPTH = 32


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of *schema* with local ``$ref`` pointers replaced by their targets.

    Recursive references are cut at the point of recursion (the ref becomes
    ``{"type": "object"}`` with a ``description`` saying so) so the result is finite and
    serializable. ``$defs``/``definitions`` are dropped from the result.

    >>> schema = {"$defs": {"A": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/A"}}}
    >>> inline_refs(schema)
    {'properties': {'a': {'type': 'integer'}}}
    """
    root = dict(schema)
    return _inline(root, root, (), 0)  # type: ignore[no-any-return]


def _resolve_pointer(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/"):
        if raw == "":
            continue
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def _inline(node: Any, root: Mapping[str, Any], seen: tuple[str, ...], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return {"type": "object", "description": "(schema truncated: nested too deeply)"}
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                return {"type": "object", "description": f"(recursive reference to {ref})"}
            target = _resolve_pointer(root, ref)
            if target is None:
                return {k: v for k, v in node.items() if k != "$ref"} or {}
            merged = _inline(target, root, (*seen, ref), depth + 1)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if siblings and isinstance(merged, dict):
                merged = {**merged, **_inline(siblings, root, seen, depth + 1)}
            return merged
        return {
            k: _inline(v, root, seen, depth + 1)
            for k, v in node.items()
            if k not in ("$defs", "definitions")
        }
    if isinstance(node, list):
        return [_inline(v, root, seen, depth + 1) for v in node]
    return node


def root_type(schema: Mapping[str, Any]) -> str:
    """The JSON type at the root of *schema* (``"object"`` when unspecified)."""
    value = schema.get("type")
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        non_null = [v for v in value if v != "null"]
        if len(non_null) == 1 and isinstance(non_null[0], str):
            return non_null[0]
    if "properties" in schema:
        return "object"
    return "object"


def _types_of(prop: Mapping[str, Any]) -> set[str]:
    value = prop.get("type")
    found: set[str] = set()
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, list):
        found.update(v for v in value if isinstance(v, str))
    for key in ("anyOf", "oneOf"):
        for option in prop.get(key) or ():
            if isinstance(option, Mapping):
                found |= _types_of(option)
    return found


def _is_binary(prop: Mapping[str, Any]) -> bool:
    if prop.get("format") == "binary" or prop.get("contentEncoding") == "base64":
        return True
    if "contentMediaType" in prop:
        return True
    return any(
        isinstance(option, Mapping) and _is_binary(option)
        for key in ("anyOf", "oneOf")
        for option in prop.get(key) or ()
    )


@dataclass(frozen=True, slots=True)
class SchemaFacts:
    """What the part converter needs to know about one module's input schema."""

    schema: dict[str, Any]
    properties: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    binary: tuple[str, ...] = ()
    #: the one required string property a plain text part may fill, if exactly one exists
    text_property: str | None = None
    summary: str = field(default="")
    #: the schema as the module declared it ($defs kept), for walking recursive refs
    source: Mapping[str, Any] = field(default_factory=dict)
    #: whether any property anywhere is typed integer (else coercion is skipped)
    has_integers: bool = False


def _resolve(node: Any, root: Mapping[str, Any]) -> Any:
    """Follow a chain of local ``$ref`` pointers (bounded) to the schema they name."""
    for _ in range(32):
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        target = _resolve_pointer(root, ref)
        if target is None:
            return {k: v for k, v in node.items() if k != "$ref"}
        node = target
    return {}


def _integral_types(node: Any, root: Mapping[str, Any], depth: int = 0) -> set[str]:
    node = _resolve(node, root)
    if not isinstance(node, Mapping) or depth > 8:
        return set()
    found = _types_of({"type": node.get("type")}) if "type" in node else set()
    for key in ("anyOf", "oneOf", "allOf"):
        for option in node.get(key) or ():
            found |= _integral_types(option, root, depth + 1)
    return found


def _coerce(value: Any, node: Any, root: Mapping[str, Any], depth: int) -> Any:
    node = _resolve(node, root)
    if not isinstance(node, Mapping) or depth > 256:
        return value
    if isinstance(value, float):
        if value.is_integer():
            types = _integral_types(node, root)
            if "integer" in types and "number" not in types:
                return int(value)
        return value
    if isinstance(value, dict):
        props = node.get("properties")
        extra = node.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if isinstance(props, Mapping) else None
            if sub is None and isinstance(extra, Mapping):
                sub = extra
            if sub is not None:
                value[key] = _coerce(item, sub, root, depth + 1)
    elif isinstance(value, list):
        items = node.get("items")
        if isinstance(items, Mapping):
            value[:] = [_coerce(item, items, root, depth + 1) for item in value]
    else:
        return value
    for key in ("anyOf", "oneOf", "allOf"):
        for option in node.get(key) or ():
            value = _coerce(value, option, root, depth + 1)
    return value


def coerce_integers(value: Any, facts: SchemaFacts) -> Any:
    """Turn integral floats back into ``int`` wherever the schema says ``integer``.

    Walks the *value* against the original schema, resolving ``$ref`` as it goes, so
    recursive schemas (trees, linked lists) are followed as deep as the data goes.
    """
    if not facts.has_integers:
        return value
    return _coerce(value, facts.source, facts.source, 0)


def summarize(schema: Mapping[str, Any], limit: int = 200) -> str:
    """A one-line human summary such as ``{a: integer, b: integer}`` for error messages."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return f"a JSON {root_type(schema)}"
    required = set(schema.get("required") or ())
    parts = []
    for name, prop in props.items():
        kinds = sorted(_types_of(prop) - {"null"}) if isinstance(prop, Mapping) else []
        kind = "|".join(kinds) or "any"
        parts.append(f"{name}{'' if name in required else '?'}: {kind}")
    text = "{" + ", ".join(parts) + "}"
    return text if len(text) <= limit else text[: limit - 4] + "...}"


def schema_facts(input_schema: Mapping[str, Any]) -> SchemaFacts:
    """Compute :class:`SchemaFacts` for a module input schema (inlines refs first)."""
    schema = inline_refs(input_schema)
    props_raw = schema.get("properties")
    props: Mapping[str, Any] = props_raw if isinstance(props_raw, Mapping) else {}
    required = frozenset(r for r in schema.get("required") or () if isinstance(r, str))
    binary = tuple(n for n, p in props.items() if isinstance(p, Mapping) and _is_binary(p))
    strings = [
        n
        for n in required
        if isinstance(props.get(n), Mapping) and "string" in _types_of(props[n]) and n not in binary
    ]
    text_property = strings[0] if len(strings) == 1 and len(required) == 1 else None
    if text_property is None and not required:
        optional_strings = [
            n for n, p in props.items() if isinstance(p, Mapping) and _types_of(p) == {"string"}
        ]
        if len(props) == 1 and len(optional_strings) == 1:
            text_property = optional_strings[0]
    return SchemaFacts(
        schema=schema,
        properties=frozenset(props),
        required=required,
        binary=binary,
        text_property=text_property,
        summary=summarize(schema),
        source=input_schema,
        has_integers='"integer"' in json.dumps(input_schema, default=str),
    )
