"""One YAML file for the whole agent: ``apcore-a2a serve --config agent.yaml``.

The file is grouped in sections (``agent``, ``modules``, ``http``, ``auth``, ``storage``...);
every key but the module sources names one :class:`~apcore_a2a.settings.Settings` field.
Loading is strict: an unknown key, a wrong type or a missing folder raises
:class:`ConfigFileError` with a one-line message naming the key and its line in the file.
Relative paths in the file are relative to the file's folder.

Precedence is *argument or CLI flag > environment variable > file > default*; the file's
values are the ``base`` of :meth:`Settings.resolve <apcore_a2a.settings.Settings.resolve>`.

Example::

    config = load_config("agent.yaml")
    settings = config.settings({"port": 9000})  # flags/kwargs on top of env on top of file
    executor = config.modules.build_executor()
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from apcore_a2a.settings import Settings, SettingsError

__all__ = [
    "SECTIONS",
    "AgentConfig",
    "ConfigFileError",
    "ModuleSources",
    "load_config",
]


class ConfigFileError(SettingsError):
    """The config file cannot be used; the message names the file, line and key."""


def _same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


# section -> key in the file -> Settings field. Module sources are not settings; they
# live under ``modules`` and are checked on their own.
SECTIONS: dict[str, dict[str, str]] = {
    "agent": _same("name", "description", "version", "url", "default_skill"),
    "http": _same("host", "port", "rpc_path", "cors_origins"),
    "logging": {"level": "log_level", "format": "log_format"},
    "grpc": {
        "port": "grpc_port",
        "tls_cert": "grpc_tls_cert",
        "tls_key": "grpc_tls_key",
        "reflection": "grpc_reflection",
    },
    "auth": {
        "type": "auth_type",
        "jwt_key": "auth_key",
        "jwks_url": "auth_jwks_url",
        "issuer": "auth_issuer",
        "audience": "auth_audience",
        "algorithms": "auth_algorithms",
        "api_keys": "api_keys",
        "require": "require_auth",
    },
    "storage": _same(
        "task_store",
        "cluster",
        "cluster_poll_interval",
        "task_max_capacity",
        "task_ttl_seconds",
        "task_retention_seconds",
    ),
    "push": {
        "enabled": "push_notifications",
        "allow_insecure_urls": "push_allow_insecure_urls",
        "timeout": "push_timeout",
        "retry_delays": "push_retry_delays",
        "signing_key": "push_signing_key",
        "encryption_key": "push_encryption_key",
    },
    "explorer": {"enabled": "explorer", "prefix": "explorer_prefix"},
    "metrics": {"enabled": "metrics"},
    "telemetry": {"enabled": "telemetry", "sdk": "sdk_telemetry"},
    "limits": _same(
        "execution_timeout",
        "shutdown_timeout",
        "max_body_bytes",
        "max_streams",
        "sync_workers",
        "cancel_on_disconnect",
    ),
}
_MODULE_KEYS = ("extensions_dirs", "bindings_dirs", "apcore_config", "acl")
# Settings whose values are file paths, resolved against the config file's folder.
_PATH_SETTINGS = ("grpc_tls_cert", "grpc_tls_key")
_PORTS = ("port", "grpc_port")
_SQLITE = re.compile(r"^(sqlite(?:\+\w+)?):///(.*)$")
_HINTS = get_type_hints(Settings)
_STR_TAG = "tag:yaml.org,2002:str"
_EXPONENT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+$")


@dataclass(frozen=True, slots=True)
class ModuleSources:
    """Where the agent's apcore modules come from (folders are scanned in order)."""

    extensions_dirs: tuple[str, ...] = ()
    bindings_dirs: tuple[str, ...] = ()
    apcore_config: str | None = None
    acl: str | None = None

    def build_executor(self, execution_timeout: float | None = None) -> Any:
        """Discover the modules and return an apcore ``Executor`` over them.

        Raises :class:`ConfigFileError` for a missing folder or file, an unusable apcore
        config or ACL, or when no module is found.
        """
        from apcore import ACL, BindingLoader, Config, Executor, Registry

        from apcore_a2a.approval import A2AApprovalHandler
        from apcore_a2a.server.factory import default_executor

        if not self.extensions_dirs and not self.bindings_dirs:
            raise ConfigFileError(
                "give --extensions-dir DIR or --bindings DIR (or modules.extensions_dirs in "
                "the config file) with apcore modules"
            )
        for directory in (*self.extensions_dirs, *self.bindings_dirs):
            if not Path(directory).is_dir():
                raise ConfigFileError(f"directory not found: {directory}")
        for what, path in (("apcore config", self.apcore_config), ("ACL file", self.acl)):
            if path and not Path(path).is_file():
                raise ConfigFileError(f"{what} not found: {path}")
        config = (
            _apcore_call("modules.apcore_config", Config.load, self.apcore_config)
            if self.apcore_config
            else None
        )
        registry = _apcore_call(
            "extensions",
            Registry,
            config=config,
            extensions_dirs=list(self.extensions_dirs) or None,
        )
        if self.extensions_dirs:
            _apcore_call("extensions", registry.discover)
        for directory in self.bindings_dirs:
            folder = str(Path(directory).resolve())
            # Binding targets are usually Python modules beside the YAML files.
            if folder not in sys.path:
                sys.path.insert(0, folder)
            _apcore_call("bindings", BindingLoader().load_binding_dir, folder, registry)
        if not registry.list():
            where = ", ".join((*self.extensions_dirs, *self.bindings_dirs))
            raise ConfigFileError(f"no apcore modules found in {where}")
        acl = _apcore_call("modules.acl", ACL.load, self.acl) if self.acl else None
        if config is None:
            # No apcore config of the user's: one setting (execution_timeout) governs.
            return default_executor(registry, acl=acl, execution_timeout=execution_timeout or 300.0)
        return Executor(registry, acl=acl, config=config, approval_handler=A2AApprovalHandler())


def _apcore_call(what: str, func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*args, **kwargs)
    except Exception as exc:  # apcore raises its own error types; report them in one line
        message = " ".join(str(exc).split())
        raise ConfigFileError(f"{what}: {message}") from exc


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """A loaded, validated config file."""

    path: str
    #: Settings overrides from the file, keyed by Settings field name.
    values: Mapping[str, Any] = field(default_factory=dict)
    modules: ModuleSources = field(default_factory=ModuleSources)
    #: Settings field name (or ``modules.<key>``) -> line in the file.
    lines: Mapping[str, int] = field(default_factory=dict)

    def base(self) -> Settings:
        """Defaults with the file's values on top (no environment)."""
        return Settings.resolve(self.values, environ={})

    def settings(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Effective settings: *overrides* > environment > file > defaults."""
        return Settings.resolve(
            overrides, environ=os.environ if environ is None else environ, base=self.base()
        )

    def module_sources(
        self,
        *,
        extensions_dirs: Sequence[str] | None = None,
        bindings_dirs: Sequence[str] | None = None,
        acl: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ModuleSources:
        """Module sources with flags > environment (``APCORE_*_DIR``) > file."""
        env = Settings.resolve(environ=os.environ if environ is None else environ)
        ext = extensions_dirs or ((env.extensions_dir,) if env.extensions_dir else None)
        bnd = bindings_dirs or ((env.bindings_dir,) if env.bindings_dir else None)
        return dataclasses.replace(
            self.modules,
            extensions_dirs=tuple(ext) if ext else self.modules.extensions_dirs,
            bindings_dirs=tuple(bnd) if bnd else self.modules.bindings_dirs,
            acl=acl or self.modules.acl,
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
        self.modules: dict[str, Any] = {}

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
            if section == "modules":
                self.read_modules(value_node)
            elif section in SECTIONS:
                self.read_section(section, value_node)
            else:
                raise self.unknown(key_node, section, [*SECTIONS, "modules"], "")
        return AgentConfig(
            path=self.name,
            values=self.values,
            modules=ModuleSources(**self.modules),
            lines=self.lines,
        )

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
            value = self.typed(value_node, f"{section}.{key}", _HINTS[setting])
            if value is None:
                continue
            if setting in _PATH_SETTINGS:
                value = self.path(value)
            elif setting == "task_store":
                value = self.sqlite_url(value)
            self.values[setting] = value
            self.lines[setting] = key_node.start_mark.line + 1

    def read_modules(self, node: yaml.Node) -> None:
        for key_node, key, value_node in self.entries(node, "section 'modules'"):
            if key not in _MODULE_KEYS:
                raise self.unknown(key_node, key, list(_MODULE_KEYS), "modules.")
            where = f"modules.{key}"
            if key.endswith("_dirs"):
                items = self.typed(value_node, where, tuple[str, ...]) or ()
                paths = tuple(self.path(item) for item in items)
                for item, path in zip(items, paths, strict=True):
                    if not Path(path).is_dir():
                        raise self.fail(value_node, f"{where}: directory not found: {item}")
                self.modules[key] = paths
            else:
                item = self.typed(value_node, where, str | None)
                if item is None:
                    continue
                path = self.path(item)
                if not Path(path).is_file():
                    raise self.fail(value_node, f"{where}: file not found: {item}")
                self.modules[key] = path
            self.lines[where] = key_node.start_mark.line + 1

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
