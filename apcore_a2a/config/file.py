"""One YAML file for the whole agent: ``apcore-a2a serve --config agent.yaml``.

The file is grouped in sections (``agent``, ``modules``, ``http``, ``auth``, ``storage``...);
every key names one :class:`~apcore_a2a.settings.Settings` field (each field declares its
``section.key``). Loading is strict: an unknown key, a wrong type or a missing folder raises
:class:`ConfigFileError` with a one-line message naming the key and its line in the file.
Relative paths in the file are relative to the file's folder.

Precedence is *argument or CLI flag > environment variable > file > default*; the file's
values are the ``base`` of :meth:`Settings.resolve <apcore_a2a.settings.Settings.resolve>`.

Example::

    config = load_config("agent.yaml")
    settings = config.settings({"port": 9000})  # flags/kwargs on top of env on top of file
"""

from __future__ import annotations

import difflib
import os
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml

from apcore_a2a.config.sources import ConfigFileError, ModuleSources
from apcore_a2a.settings import Settings, settings_specs

__all__ = ["SECTIONS", "AgentConfig", "ConfigFileError", "load_config"]


def _sections() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for spec in settings_specs():
        section, key = spec.key.split(".")
        out.setdefault(section, {})[key] = spec.name
    return out


#: section -> key in the file -> Settings field, in declaration order.
SECTIONS: dict[str, dict[str, str]] = _sections()
# Settings whose values are file paths, resolved against the config file's folder.
_PATH_SETTINGS = ("grpc_tls_cert", "grpc_tls_key", "apcore_config", "acl", "card_signing_key")
_DIR_LISTS = ("extensions_dirs", "bindings_dirs")
_MUST_EXIST = ("apcore_config", "acl")
_PORTS = ("port", "grpc_port")
_SQLITE = re.compile(r"^(sqlite(?:\+\w+)?):///(.*)$")
_HINTS = {spec.name: spec.annotation for spec in settings_specs()}
_STR_TAG = "tag:yaml.org,2002:str"
_EXPONENT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+$")


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """A loaded, validated config file."""

    path: str
    #: Settings values from the file, keyed by Settings field name.
    values: Mapping[str, Any] = field(default_factory=dict)
    #: Settings field name -> line in the file.
    lines: Mapping[str, int] = field(default_factory=dict)

    def base(self) -> Settings:
        """Defaults with the file's values on top (no environment)."""
        return Settings.resolve(environ={}, base=self.values)

    @property
    def modules(self) -> ModuleSources:
        """The module sources the file names."""
        return ModuleSources.from_settings(self.base())

    def settings(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Effective settings: *overrides* > environment > file > defaults."""
        return Settings.resolve(
            overrides, environ=os.environ if environ is None else environ, base=self.values
        )


def load_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Read and validate the agent config file at *path*.

    Raises :class:`ConfigFileError` (one line: ``FILE:LINE: key: problem``) for a missing
    or unreadable file, invalid YAML, an unknown key, a wrong type or a missing folder.
    """
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigFileError(f"{name}: cannot read config file: {reason}") from None
    return _Reader(name, text).read()


class _Reader:
    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.folder = Path(name).resolve().parent
        self.loader = yaml.SafeLoader(text)
        self.values: dict[str, Any] = {}
        self.lines: dict[str, int] = {}

    def fail(self, node: yaml.Node | None, message: str) -> ConfigFileError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return ConfigFileError(f"{self.name}{line}: {message}")

    def read(self) -> AgentConfig:
        try:
            root = self.loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigFileError(f"{self.name}{line}: invalid YAML: {problem}") from None
        finally:
            self.loader.dispose()
        if root is None:
            return AgentConfig(path=self.name)
        for key_node, section, value_node in self.entries(root, "the top level"):
            if section not in SECTIONS:
                raise self.unknown(key_node, section, list(SECTIONS), "")
            self.read_section(section, value_node)
        return AgentConfig(path=self.name, values=self.values, lines=self.lines)

    def entries(self, node: yaml.Node, where: str) -> list[tuple[yaml.Node, str, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{where} must be a mapping of keys to values")
        seen: set[str] = set()
        out = []
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str) or key_node.tag != "tag:yaml.org,2002:str":
                raise self.fail(key_node, f"keys in {where} must be plain names")
            if key in seen:
                raise self.fail(key_node, f"duplicate key {key!r} in {where}")
            seen.add(key)
            out.append((key_node, key, value_node))
        return out

    def unknown(self, node: yaml.Node, key: str, known: list[str], prefix: str) -> Exception:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {prefix + close[0]!r}?" if close else ""
        return self.fail(
            node, f"unknown key {prefix + key!r} (expected one of: {', '.join(known)}){hint}"
        )

    def read_section(self, section: str, node: yaml.Node) -> None:
        keys = SECTIONS[section]
        for key_node, key, value_node in self.entries(node, f"section {section!r}"):
            if key not in keys:
                raise self.unknown(key_node, key, list(keys), f"{section}.")
            setting = keys[key]
            where = f"{section}.{key}"
            value = self.typed(value_node, where, _HINTS[setting])
            if value is None:
                continue
            if setting in _DIR_LISTS:
                paths = tuple(self.path(item) for item in value)
                for item, path in zip(value, paths, strict=True):
                    if not Path(path).is_dir():
                        raise self.fail(value_node, f"{where}: directory not found: {item}")
                value = paths
            elif setting in _PATH_SETTINGS:
                path = self.path(value)
                if setting in _MUST_EXIST and not Path(path).is_file():
                    raise self.fail(value_node, f"{where}: file not found: {value}")
                value = path
            elif setting == "task_store":
                value = self.sqlite_url(value)
            self.values[setting] = value
            self.lines[setting] = key_node.start_mark.line + 1

    def path(self, value: str) -> str:
        return os.path.normpath(self.folder / Path(value).expanduser())

    def sqlite_url(self, url: str) -> str:
        match = _SQLITE.match(url)
        if match is None:
            return url
        scheme, rest = match.groups()
        if not rest or rest.startswith(("/", ":memory:", "?")):
            return url
        return f"{scheme}:///{os.path.normpath(self.folder / rest)}"

    def typed(self, node: yaml.Node, where: str, hint: Any) -> Any:
        """The node's value if it has the type *hint* asks for, else a one-line error."""
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            if _optional(hint):
                return None
            raise self.fail(node, f"{where}: expected {_describe(hint)}, got nothing (null)")
        core = _core(hint)
        if float in (core, *get_args(core)):
            _retag_plain_floats(node)
        value = self.loader.construct_object(node, deep=True)
        if get_origin(core) is tuple:
            item_type = get_args(core)[0]
            if not isinstance(value, list) or not all(_is(item, item_type) for item in value):
                raise self.fail(node, f"{where}: expected {_describe(hint)}, got {_show(value)}")
            return tuple(float(v) if item_type is float else v for v in value)
        if get_origin(core) is Literal:
            if value not in get_args(core):
                choices = ", ".join(map(str, get_args(core)))
                raise self.fail(node, f"{where}: expected one of {choices}, got {_show(value)}")
            return value
        if not _is(value, core):
            hint_text = _describe(hint)
            quote = " (quote it)" if core is str and isinstance(value, int | float) else ""
            raise self.fail(node, f"{where}: expected {hint_text}, got {_show(value)}{quote}")
        if core is not bool and isinstance(value, int | float):
            if where.rsplit(".", 1)[-1] in _PORTS and not 1 <= value <= 65535:
                raise self.fail(node, f"{where}: must be between 1 and 65535, got {value}")
            if value < 0:
                raise self.fail(node, f"{where}: must not be negative, got {value}")
            return float(value) if core is float else value
        return value


def _retag_plain_floats(node: yaml.Node) -> None:
    # YAML 1.1 (PyYAML) reads an unquoted 1e-3 as a string; YAML 1.2 and people read a number.
    nodes = node.value if isinstance(node, yaml.SequenceNode) else [node]
    for item in nodes:
        plain = isinstance(item, yaml.ScalarNode) and item.style is None
        if plain and item.tag == _STR_TAG and _EXPONENT.match(item.value):
            item.tag = "tag:yaml.org,2002:float"


def _optional(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint)


def _core(hint: Any) -> Any:
    if get_origin(hint) in (Union, types.UnionType):
        return next(a for a in get_args(hint) if a is not type(None))
    return hint


def _is(value: Any, kind: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, kind)


def _describe(hint: Any) -> str:
    core = _core(hint)
    if get_origin(core) is tuple:
        plural = {str: "strings", float: "numbers"}
        return f"a list of {plural[get_args(core)[0]]}"
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    if core in names:
        return names[core]
    return str(core)  # pragma: no cover - every Settings type is listed above


def _show(value: Any) -> str:
    kind = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value))
    if kind is not None:
        return f"{kind} {value!r}"
    if isinstance(value, list):
        return f"a list {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
