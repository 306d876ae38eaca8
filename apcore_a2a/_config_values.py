"""How the agent config file's YAML becomes setting values (:mod:`apcore_a2a.config`):
the file read with a size bound, the shape of a value checked on its YAML nodes (before
anything is built, so aliases cannot multiply it), and the type words of its errors.
"""

from __future__ import annotations

import re
from typing import Any, get_args, get_origin

import yaml

#: A config file is a few kilobytes; more is a wrong path (``/dev/zero``) or an attack.
MAX_CONFIG_BYTES = 1024 * 1024
_STR_TAG = "tag:yaml.org,2002:str"
_EXPONENT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+$")


def read_capped(path: str) -> str:
    """The text of the file at *path*; ``ValueError`` past :data:`MAX_CONFIG_BYTES`."""
    with open(path, "rb") as file:
        data = file.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError("larger than 1 MiB")
    return data.decode("utf-8")


def _kind_of(node: yaml.Node) -> str:
    return "a mapping" if isinstance(node, yaml.MappingNode) else "a list"


def unflat(node: yaml.Node, is_list: bool) -> str | None:
    """What *node* holds that no setting takes ("a mapping", "a list holding a list"...),
    or ``None`` for a scalar (a list setting: a list of scalars)."""
    if is_list and isinstance(node, yaml.SequenceNode):
        inner = next((i for i in node.value if not isinstance(i, yaml.ScalarNode)), None)
        return None if inner is None else "a list holding " + _kind_of(inner)
    if is_list and isinstance(node, yaml.MappingNode):
        return "a mapping"
    return None if isinstance(node, yaml.ScalarNode) else _kind_of(node)


def retag_plain_floats(node: yaml.Node) -> None:
    # YAML 1.1 (PyYAML) reads an unquoted 1e-3 as a string; YAML 1.2 and people read a number.
    nodes = node.value if isinstance(node, yaml.SequenceNode) else [node]
    for item in nodes:
        plain = isinstance(item, yaml.ScalarNode) and item.style is None
        if plain and item.tag == _STR_TAG and _EXPONENT.match(item.value):
            item.tag = "tag:yaml.org,2002:float"


def is_type(value: Any, kind: Any) -> bool:
    if isinstance(value, bool) or kind is bool:  # a bool is an int to Python, not to people
        return isinstance(value, bool) and kind is bool
    return isinstance(value, int | float if kind is float else kind)


def describe_type(kind: Any) -> str:
    if get_origin(kind) is tuple:
        return "a list of " + {str: "strings", float: "numbers"}[get_args(kind)[0]]
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    return names.get(kind, str(kind))


def show_value(value: Any, secret: bool = False) -> str:
    """*value* for an error message; a secret's type only, never its content."""
    kind = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value))
    hidden = " (a secret: value not shown)"
    if kind is not None:
        return f"{kind}{hidden}" if secret else f"{kind} {value!r}"
    if isinstance(value, list):
        return f"a list{hidden}" if secret else f"a list {value!r}"
    return "a mapping" if isinstance(value, dict) else type(value).__name__
