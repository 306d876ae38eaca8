"""Which registry and executor an agent serves: the caller's, or built from settings."""

from __future__ import annotations

from typing import Any

from apcore_a2a.execution.executors import resolve_executor
from apcore_a2a.settings import Settings

__all__ = ["config_value", "executor_for", "require_methods"]


def require_methods(obj: Any, methods: tuple[str, ...], what: str) -> None:
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(
            f"{what} object {type(obj).__name__} is missing methods: {', '.join(missing)}"
        )


def executor_for(obj: Any, settings: Settings) -> tuple[Any, Any]:
    """``(registry, executor)``: the caller's, or built from the settings' module sources.

    Settings that only apply to an executor we build (module folders, ACL file, apcore
    config) are refused with a one-line ``ValueError`` when the caller brings an executor,
    instead of being silently ignored.
    """
    from apcore_a2a.config import ModuleSources

    sources = ModuleSources.from_settings(settings)
    timeout = settings.execution_timeout
    if obj is None:
        executor = sources.build_executor(timeout)
        return executor.registry, executor
    if sources.given:
        raise ValueError(
            "extensions_dirs / bindings_dirs build a registry; they cannot be combined "
            "with the registry or executor you passed"
        )
    registry, executor = resolve_executor(obj, execution_timeout=timeout)
    if executor is obj and (settings.acl or settings.apcore_config):
        raise ValueError(
            "acl / apcore_config configure the executor apcore-a2a builds; set them on "
            "your own Executor instead"
        )
    if settings.acl or settings.apcore_config:
        executor = sources.build_executor_for(registry, timeout)
    return registry, executor


def config_value(executor: Any, registry: Any, key: str) -> str | None:
    for owner in (executor, registry):
        config = getattr(owner, "_config", None) or getattr(owner, "config", None)
        getter = getattr(config, "get", None)
        if callable(getter):
            try:
                value = getter(key)
            except Exception:
                value = None
            if value:
                return str(value)
    return None
