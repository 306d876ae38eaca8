"""Where an agent's apcore modules come from: folders, bindings, apcore config, ACL."""

from __future__ import annotations

import ast
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apcore_a2a.settings import SettingsError

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

__all__ = ["ConfigFileError", "ModuleSources", "why_not_a_module"]

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
        return cls(
            extensions_dirs=settings.extensions_dirs,
            bindings_dirs=settings.bindings_dirs,
            apcore_config=settings.apcore_config,
            acl=settings.acl,
        )

    @property
    def given(self) -> bool:
        """Whether any module folder is named (an agent can then be built without a registry)."""
        return bool(self.extensions_dirs or self.bindings_dirs)

    def build_executor(self, execution_timeout: float | None = None) -> Any:
        """Discover the modules and return an apcore ``Executor`` over them.

        Raises :class:`ConfigFileError` for a missing folder or file, an unusable apcore
        config or ACL, or when no module is found.
        """
        from apcore import BindingLoader, Registry

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
            # Binding targets are usually Python modules beside the YAML files.
            if folder not in sys.path:
                sys.path.insert(0, folder)
            _apcore_call("bindings", BindingLoader().load_binding_dir, folder, registry)
        if not registry.list():
            where = ", ".join((*self.extensions_dirs, *self.bindings_dirs))
            raise ConfigFileError(f"no apcore modules found in {where}")
        return self.build_executor_for(registry, execution_timeout, config=config)

    def build_executor_for(
        self, registry: Any, execution_timeout: float | None = None, *, config: Any = None
    ) -> Any:
        """An apcore ``Executor`` over *registry* with this ACL file and apcore config."""
        from apcore import ACL, Executor

        from apcore_a2a.approval import A2AApprovalHandler
        from apcore_a2a.execution.executors import cache_schemas, default_executor

        if self.acl and not Path(self.acl).is_file():
            raise ConfigFileError(f"ACL file not found: {self.acl}")
        config = config if config is not None else self._apcore_config()
        acl = _apcore_call("modules.acl", ACL.load, self.acl) if self.acl else None
        if config is None:
            # No apcore config of the user's: one setting (execution_timeout) governs.
            return default_executor(registry, acl=acl, execution_timeout=execution_timeout or 300.0)
        return cache_schemas(
            Executor(registry, acl=acl, config=config, approval_handler=A2AApprovalHandler())
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
                reason = why_not_a_module(Path(item.file_path))
                logger.warning("Not serving %s: %s", item.file_path, reason)

    def _apcore_config(self) -> Any:
        if not self.apcore_config:
            return None
        from apcore import Config

        if not Path(self.apcore_config).is_file():
            raise ConfigFileError(f"apcore config not found: {self.apcore_config}")
        return _apcore_call("modules.apcore_config", Config.load, self.apcore_config)


def _apcore_call(what: str, func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*args, **kwargs)
    except Exception as exc:  # apcore raises its own error types; report them in one line
        message = " ".join(str(exc).split())
        raise ConfigFileError(f"{what}: {message}") from exc


def why_not_a_module(path: Path) -> str:
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
