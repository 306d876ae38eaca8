"""JSON Schema helpers: ``$ref`` inlining and the facts the part converter needs.

apcore exports Pydantic ``model_json_schema()`` output, which keeps ``$defs`` and ``$ref``.
Clients building data parts want one self-contained schema; the part converter wants to
know which properties are integers, which are binary and which single string a plain text
part could fill. :class:`SchemaFacts` is computed once per module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_MAX_DEPTH = 32
_CHOICES = ("anyOf", "oneOf")


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
    for raw in filter(None, ref[1:].split("/")):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def _without_ref(node: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != "$ref"}


def _inline(node: Any, root: Mapping[str, Any], seen: tuple[str, ...], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return {"type": "object", "description": "(schema truncated: nested too deeply)"}
    if isinstance(node, list):
        return [_inline(v, root, seen, depth + 1) for v in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return {
            k: _inline(v, root, seen, depth + 1)
            for k, v in node.items()
            if k not in ("$defs", "definitions")
        }
    if ref in seen:
        return {"type": "object", "description": f"(recursive reference to {ref})"}
    target = _resolve_pointer(root, ref)
    if target is None:
        return _without_ref(node)
    merged = _inline(target, root, (*seen, ref), depth + 1)
    siblings = _without_ref(node)
    if siblings and isinstance(merged, dict):
        merged = {**merged, **_inline(siblings, root, seen, depth + 1)}
    return merged


def root_type(schema: Mapping[str, Any]) -> str:
    """The JSON type at the root of *schema* (``"object"`` when unspecified)."""
    value = schema.get("type")
    if isinstance(value, list):
        non_null = [v for v in value if v != "null"]
        value = non_null[0] if len(non_null) == 1 else None
    return value if isinstance(value, str) else "object"


def json_types(prop: Mapping[str, Any]) -> set[str]:
    """The JSON types *prop* allows, ``anyOf``/``oneOf`` options included."""
    value = prop.get("type")
    found = {v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)}
    for key in _CHOICES:
        for option in prop.get(key) or ():
            if isinstance(option, Mapping):
                found |= json_types(option)
    return found


def _is_binary(prop: Mapping[str, Any]) -> bool:
    if prop.get("format") == "binary" or prop.get("contentEncoding") == "base64":
        return True
    return "contentMediaType" in prop or any(
        isinstance(option, Mapping) and _is_binary(option)
        for key in _CHOICES
        for option in prop.get(key) or ()
    )


@dataclass(frozen=True, slots=True)
class SchemaFacts:
    """What the part converter needs to know about one module's input schema."""

    schema: dict[str, Any]
    binary: tuple[str, ...] = ()
    #: the one required string property a plain text part may fill, if exactly one exists
    text_property: str | None = None
    summary: str = ""
    #: the schema as the module declared it ($defs kept), for walking recursive refs
    source: Mapping[str, Any] = field(default_factory=dict)
    #: whether any property anywhere is typed integer (else coercion is skipped)
    has_integers: bool = False


def _resolve(node: Any, root: Mapping[str, Any]) -> Any:
    """Follow a chain of local ``$ref`` pointers (bounded) to the schema they name."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(node, Mapping) or not isinstance(node.get("$ref"), str):
            return node
        target = _resolve_pointer(root, node["$ref"])
        if target is None:
            return _without_ref(node)
        node = target
    return {}


def _integral_types(node: Any, root: Mapping[str, Any], depth: int = 0) -> set[str]:
    node = _resolve(node, root)
    if not isinstance(node, Mapping) or depth > 8:
        return set()
    found = json_types({"type": node.get("type")}) if "type" in node else set()
    for key in (*_CHOICES, "allOf"):
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
    for key in (*_CHOICES, "allOf"):
        for option in node.get(key) or ():
            value = _coerce(value, option, root, depth + 1)
    return value


def coerce_integers(value: Any, facts: SchemaFacts) -> Any:
    """Turn integral floats back into ``int`` wherever the schema says ``integer``,
    following ``$ref`` (recursive schemas included) as deep as the data goes."""
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
        kinds = sorted(json_types(prop) - {"null"}) if isinstance(prop, Mapping) else []
        parts.append(f"{name}{'' if name in required else '?'}: {'|'.join(kinds) or 'any'}")
    text = "{" + ", ".join(parts) + "}"
    return text if len(text) <= limit else text[: limit - 4] + "...}"


def schema_facts(input_schema: Mapping[str, Any]) -> SchemaFacts:
    """Compute :class:`SchemaFacts` for a module input schema (inlines refs first)."""
    schema = inline_refs(input_schema)
    props_raw = schema.get("properties")
    props: Mapping[str, Any] = props_raw if isinstance(props_raw, Mapping) else {}
    typed = {n: json_types(p) for n, p in props.items() if isinstance(p, Mapping)}
    required = {r for r in schema.get("required") or () if isinstance(r, str)}
    binary = tuple(n for n in typed if _is_binary(props[n]))
    strings = [n for n in required if "string" in typed.get(n, ()) and n not in binary]
    text_property = strings[0] if len(strings) == 1 and len(required) == 1 else None
    if text_property is None and not required and len(props) == 1:
        text_property = next((n for n, t in typed.items() if t == {"string"}), None)
    return SchemaFacts(
        schema=schema,
        binary=binary,
        text_property=text_property,
        summary=summarize(schema),
        source=input_schema,
        has_integers='"integer"' in json.dumps(input_schema, default=str),
    )
