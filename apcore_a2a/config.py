"""One YAML file for the whole agent (docs/configuration.md): ``serve --config agent.yaml``.

Every key is the ``section.key`` of one :class:`~apcore_a2a.settings.Settings` field; the
file's values are the ``base`` of :meth:`Settings.resolve <apcore_a2a.settings.Settings.resolve>`
(arguments, flags and environment win). Loading is strict: :class:`ConfigFileError` names the
file, line and key. Relative paths are relative to the file's folder. :class:`ModuleSources`
says where the agent's apcore modules come from (folders, bindings, apcore config, ACL).

Example::

    config = load_config("agent.yaml")
    settings = config.settings({"port": 9000})  # flags/kwargs on top of env on top of file
"""

from __future__ import annotations

import ast
import difflib
import importlib.machinery
import importlib.util
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from apcore import BindingLoader

from apcore_a2a._config_values import (
    describe_type,
    is_type,
    read_capped,
    retag_plain_floats,
    show_value,
    unflat,
)
from apcore_a2a._settings_sources import empty_problem
from apcore_a2a.adapters.errors import message_line
from apcore_a2a.settings import SPECS, Setting, Settings, SettingsError, masked_value

logger = logging.getLogger("apcore_a2a")
#: what apcore needs of a module class in an extensions folder
_NEEDS = ("input_schema", "output_schema", "description")


class ConfigFileError(SettingsError):
    """The config file cannot be used; the message names the file, line and key."""


@dataclass(frozen=True, slots=True)
class ModuleSources:
    """Where the agent's apcore modules come from (folders are scanned in order)."""

    extensions_dirs: tuple[str, ...] = ()
    bindings_dirs: tuple[str, ...] = ()
    apcore_config: str | None = None
    acl: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ModuleSources:
        """The module sources named by *settings* (flags, environment or config file)."""
        s = settings
        return cls(s.extensions_dirs, s.bindings_dirs, s.apcore_config, s.acl)

    @property
    def given(self) -> bool:
        """Whether any module folder is named (an agent can then be built without a registry)."""
        return bool(self.extensions_dirs or self.bindings_dirs)

    def build_executor(self, execution_timeout: float | None = None) -> Any:
        """An apcore ``Executor`` over the discovered modules, or :class:`ConfigFileError`
        (a missing folder or file, an unusable apcore config or ACL, no module found)."""
        from apcore import Registry

        if not self.given:
            raise ConfigFileError(
                "no modules to serve: give a registry, or module folders with "
                "--extensions-dir / --bindings (extensions_dirs= / bindings_dirs=, "
                "APCORE_EXTENSIONS_DIR, modules.extensions_dirs in the config file)"
            )
        for directory in (*self.extensions_dirs, *self.bindings_dirs):
            if not Path(directory).is_dir():
                raise ConfigFileError(f"directory not found: {directory}")
        config = self._apcore_config()
        registry = _apcore_call(
            "extensions",
            Registry,
            config=config,
            extensions_dirs=list(self.extensions_dirs) or None,
        )
        if self.extensions_dirs:
            _apcore_call("extensions", registry.discover)
            self._report_skipped(registry, config)
        for directory in self.bindings_dirs:
            folder = str(Path(directory).resolve())
            _apcore_call("bindings", _FolderTargets(folder).load_binding_dir, folder, registry)
        if not registry.list():
            where = ", ".join((*self.extensions_dirs, *self.bindings_dirs))
            raise ConfigFileError(f"no apcore modules found in {where}")
        return self.build_executor_for(registry, execution_timeout, config=config)

    def build_executor_for(
        self, registry: Any, execution_timeout: float | None = None, *, config: Any = None
    ) -> Any:
        """An apcore ``Executor`` over *registry* with this ACL file and apcore config."""
        from apcore import ACL

        from apcore_a2a.execution.governance import default_executor

        if self.acl and not Path(self.acl).is_file():
            raise ConfigFileError(f"ACL file not found: {self.acl}")
        config = config if config is not None else self._apcore_config()
        acl = _apcore_call("modules.acl", ACL.load, self.acl) if self.acl else None
        return _apcore_call(
            "modules.apcore_config",
            default_executor,
            registry,
            acl=acl,
            config=config,
            execution_timeout=execution_timeout or 300.0,
        )

    def _report_skipped(self, registry: Any, config: Any) -> None:
        """One WARNING line per module file apcore found but did not register, saying why."""
        from apcore.registry.scanner import scan_extensions, scan_multi_root

        ignore = config.get("extensions.ignore_patterns", None) if config is not None else None
        if len(self.extensions_dirs) == 1:
            found = scan_extensions(Path(self.extensions_dirs[0]), ignore_patterns=ignore)
        else:
            roots = [{"root": d} for d in self.extensions_dirs]
            found = scan_multi_root(roots, ignore_patterns=ignore)
        served = set(registry.list())
        for item in found:
            if item.canonical_id not in served:
                reason = _why_not_a_module(Path(item.file_path))
                logger.warning("Not serving %s: %s", item.file_path, reason)

    def _apcore_config(self) -> Any:
        if not self.apcore_config:
            return None
        from apcore import Config

        if not Path(self.apcore_config).is_file():
            raise ConfigFileError(f"apcore config not found: {self.apcore_config}")
        return _apcore_call("modules.apcore_config", Config.load, self.apcore_config)


class _FolderTargets(BindingLoader):  # type: ignore[misc]  # apcore ships no types
    """apcore's ``BindingLoader``, finding a target's top-level module in the binding
    folder first (``tools:initials`` is ``tools.py`` beside the YAML): loaded from an
    explicit location, so the folder is never added to ``sys.path``."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder

    def resolve_target(self, target_string: str) -> Callable[..., Any]:
        top = target_string.partition(":")[0].split(".")[0]
        if top and top not in sys.modules:
            spec = importlib.machinery.PathFinder.find_spec(top, [self.folder])
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                sys.modules[top] = module  # where a nested target's import finds it
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[top]
                    raise
        return super().resolve_target(target_string)  # type: ignore[no-any-return]


def _apcore_call(what: str, func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*args, **kwargs)
    except Exception as exc:  # apcore raises its own error types; report them in one line
        raise ConfigFileError(f"{what}: {message_line(str(exc))}") from exc


def _why_not_a_module(path: Path) -> str:
    """Why apcore skipped the module file *path*, read from its source (never imported)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        return f"it cannot be read as Python ({exc})"
    classes = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(
            isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "execute"
            for item in node.body
        )
    ]
    for node in classes:
        names = {
            target.id
            for item in node.body
            if isinstance(item, ast.Assign | ast.AnnAssign)
            for target in (item.targets if isinstance(item, ast.Assign) else [item.target])
            if isinstance(target, ast.Name)
        }
        missing = [name for name in _NEEDS if name not in names]
        if missing:
            return (
                f"class {node.name} has no {' and no '.join(missing)} "
                "(a module class needs input_schema and output_schema as pydantic models, "
                "a description and execute())"
            )
    if len(classes) > 1:
        return f"several module classes ({', '.join(c.name for c in classes)}); keep one per file"
    decorated = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any("module" in ast.unparse(d) for d in node.decorator_list)
    ]
    if decorated and not classes:
        return (
            f"@module functions ({', '.join(decorated)}) are not picked up from an extensions "
            "folder; register them with @module(registry=...) or a binding file"
        )
    if not classes:
        return "no module class (a class with input_schema, output_schema, description, execute)"
    return "apcore refused it (its warning above says why)"


#: section -> key in the file -> Settings field, in declaration order.
SECTIONS: dict[str, dict[str, str]] = {}
for _spec in Settings.specs():
    _section, _key = _spec.key.split(".")
    SECTIONS.setdefault(_section, {})[_key] = _spec.name
# Settings whose values are file paths, resolved against the config file's folder.
_PATH_SETTINGS = ("grpc_tls_cert", "grpc_tls_key", "apcore_config", "acl", "card_signing_key")
_DIR_LISTS = ("extensions_dirs", "bindings_dirs")
_MUST_EXIST = ("apcore_config", "acl")
_PORTS = ("port", "grpc_port")
_SQLITE = re.compile(r"^(sqlite(?:\+\w+)?):///(.*)$")


@dataclass(frozen=True, slots=True, repr=False)
class AgentConfig:
    """A loaded, validated config file."""

    path: str
    #: Settings values from the file, keyed by Settings field name.
    values: Mapping[str, Any] = field(default_factory=dict)
    #: Settings field name -> line in the file.
    lines: Mapping[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Never the file's secrets (tracebacks, captured locals): as `config show` has them.
        values = {name: masked_value(SPECS[name], v) for name, v in self.values.items()}
        return f"AgentConfig(path={self.path!r}, values={values!r}, lines={dict(self.lines)!r})"

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
        return Settings.resolve(overrides, environ=environ, base=self.values)


def load_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Read and validate the agent config file at *path*.

    Raises :class:`ConfigFileError` (one line: ``FILE:LINE: key: problem``) for a missing
    or unreadable file, invalid YAML, an unknown key, a wrong type or a missing folder.
    """
    name = os.fspath(path)
    try:
        text = read_capped(name)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
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
        except RecursionError:  # PyYAML composes nested nodes recursively
            raise ConfigFileError(f"{self.name}: invalid YAML: nested too deeply") from None
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
            value = self.typed(value_node, where, SPECS[setting])
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

    def typed(self, node: yaml.Node, where: str, spec: Setting) -> Any:
        """The node's value if it has the setting's type, else a one-line error."""
        kind = spec.annotation
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            if spec.optional:
                return None
            raise self.fail(node, f"{where}: expected {describe_type(kind)}, got nothing (null)")
        shape = unflat(node, get_origin(kind) is tuple)
        if shape is not None:  # refused on the nodes: a value built of aliases never built
            raise self.fail(node, f"{where}: expected {describe_type(kind)}, got {shape}")
        if float in (kind, *get_args(kind)):
            retag_plain_floats(node)
        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:  # a tag SafeLoader has no constructor for
            problem = getattr(exc, "problem", None) or str(exc)
            raise self.fail(node, f"{where}: {message_line(problem)}") from None
        got = show_value(value, spec.secret)
        if get_origin(kind) is tuple:
            item_type = get_args(kind)[0]
            if not isinstance(value, list) or not all(is_type(item, item_type) for item in value):
                raise self.fail(node, f"{where}: expected {describe_type(kind)}, got {got}")
            problem = empty_problem(spec.name, value)
            if problem:
                raise self.fail(node, f"{where}: {problem}")
            return tuple(float(v) if item_type is float else v for v in value)
        if get_origin(kind) is Literal:
            if value not in get_args(kind):
                choices = ", ".join(map(str, get_args(kind)))
                raise self.fail(node, f"{where}: expected one of {choices}, got {got}")
            return value
        if not is_type(value, kind):
            quote = " (quote it)" if kind is str and isinstance(value, int | float) else ""
            raise self.fail(node, f"{where}: expected {describe_type(kind)}, got {got}{quote}")
        problem = empty_problem(spec.name, value) if kind is str else None
        if problem:  # the rule of flags and keyword arguments (Settings.resolve)
            raise self.fail(node, f"{where}: {problem} (leave the key out), got {got}")
        if kind is not bool and isinstance(value, int | float):
            if spec.name in _PORTS and not 1 <= value <= 65535:
                raise self.fail(node, f"{where}: must be between 1 and 65535, got {value}")
            if value < 0:
                raise self.fail(node, f"{where}: must not be negative, got {value}")
            return float(value) if kind is float else value
        return value
