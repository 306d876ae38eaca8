"""How settings are declared and where their values come from (see :mod:`.settings`)."""

from __future__ import annotations

import difflib
import functools
import os
import types
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, Union, get_args, get_origin

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource

__all__ = [
    "Setting",
    "SettingsBase",
    "SettingsError",
    "advertised_url",
    "read_secret_file",
    "setting",
]


class SettingsError(ValueError):
    """A setting has a value that cannot be used (bad type, unknown choice)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """Where one setting comes from, besides keyword arguments.

    ``key`` is ``section.name`` in the config file; ``flag`` the ``serve`` option (``None``
    when the setting has no flag of its own); ``annotation`` the type without ``| None``,
    which ``optional`` says it had.
    """

    name: str
    env: str
    key: str
    flag: str | None
    help: str
    secret: bool
    annotation: Any
    optional: bool


def setting(
    default: Any,
    key: str,
    help: str,
    *,
    env: str | None = None,
    flag: str | bool = True,
    secret: bool = False,
    **limits: Any,
) -> Any:
    """Declare a field: its config-file ``section.key``, help, env var (default
    ``A2A_<NAME>``) and CLI flag (default ``--<name>``).

    *limits* are pydantic constraints (``ge=0``...), checked whatever the source.
    """
    extra: dict[str, Any] = {"env": env, "key": key, "flag": flag, "secret": secret}
    return Field(
        default,
        description=help,
        json_schema_extra={"apcore_a2a": extra},
        repr=not secret,
        **limits,
    )


def advertised_url(url: str | None, host: str, port: int) -> str:
    """*url* without its trailing slash, or ``http://host:port`` (a reachable host)."""
    if url:
        return url.rstrip("/")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def read_secret_file(path: str, where: str) -> str:
    """A secret kept in a file: its text without the trailing newline."""
    try:
        return Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SettingsError(f"{where}: cannot read {path}: {reason}") from None


def _from_environ(environ: Mapping[str, str], specs: tuple[Setting, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in specs:
        raw, path = environ.get(spec.env), environ.get(spec.env + "_FILE")
        if spec.secret and not raw and path:
            raw = read_secret_file(path, spec.env + "_FILE")
        if raw:
            out[spec.name] = raw
    return out


def _describe_error(
    exc: ValidationError,
    given: Mapping[str, Any],
    environ: Mapping[str, str],
    specs: tuple[Setting, ...],
) -> str:
    """One line naming where the first bad value came from and what was wrong."""
    error = exc.errors(include_url=False)[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message  # a rule across settings (model validator) names them itself
    name = str(error["loc"][0])
    spec = next((s for s in specs if s.name == name), None)
    if name in given or spec is None:
        where = name
    elif environ.get(spec.env):
        where = spec.env
    elif spec.secret and environ.get(spec.env + "_FILE"):
        where = spec.env + "_FILE"
    else:
        where = spec.key
    return f"{where}: {message[:1].lower()}{message[1:]}, got {error.get('input')!r}"


#: (environment, config-file values) for the Settings being built by resolve().
_SOURCES: ContextVar[tuple[Mapping[str, str], Mapping[str, Any]] | None] = ContextVar(
    "apcore_a2a_settings_sources", default=None
)


@functools.cache
def _specs(cls: type[BaseSettings]) -> tuple[Setting, ...]:
    specs = []
    for name, info in cls.model_fields.items():
        meta: dict[str, Any] = info.json_schema_extra["apcore_a2a"]  # type: ignore[index,assignment]
        flag = "--" + name.replace("_", "-") if meta["flag"] is True else meta["flag"]
        kind = info.annotation
        optional = get_origin(kind) in (Union, types.UnionType) and type(None) in get_args(kind)
        if optional:
            kind = next(a for a in get_args(kind) if a is not type(None))
        env = meta["env"] or "A2A_" + name.upper()
        help = info.description or ""
        specs.append(
            Setting(name, env, meta["key"], flag or None, help, meta["secret"], kind, optional)
        )
    return tuple(specs)


class SettingsBase(BaseSettings):
    """How a settings model is built from its sources (the fields are the subclass's)."""

    @classmethod
    def specs(cls) -> tuple[Setting, ...]:
        """Every field's name, env var, config key, flag and help, in declaration order."""
        return _specs(cls)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        environ, file_values = _SOURCES.get() or (os.environ, {})
        return (
            init_settings,
            InitSettingsSource(settings_cls, _from_environ(environ, cls.specs())),
            InitSettingsSource(settings_cls, dict(file_values)),
        )

    @classmethod
    def resolve(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        base: SettingsBase | Mapping[str, Any] | None = None,
    ) -> Self:
        """Settings from *overrides*, then *environ*, then *base*, then the defaults.

        ``None`` values in *overrides* mean "not given". *base* is what the config file
        says (a mapping of field names, or a ``Settings`` whose explicitly set fields
        count). Unknown names and unusable values raise :class:`SettingsError` naming the
        variable or key.
        """
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            near = difflib.get_close_matches(unknown[0], list(cls.model_fields), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise SettingsError(f"unknown setting {unknown[0]!r}{hint}")
        if isinstance(base, SettingsBase):
            base = {k: getattr(base, k) for k in base.model_fields_set}
        environ = os.environ if environ is None else environ
        token = _SOURCES.set((environ, dict(base or {})))
        try:
            return cls(**given)
        except ValidationError as exc:
            raise SettingsError(_describe_error(exc, given, environ, cls.specs())) from None
        finally:
            _SOURCES.reset(token)

    @classmethod
    def defaults(cls) -> Self:
        """Every setting at its default (no environment)."""
        return cls.resolve(environ={})

    def replace(self, **changes: Any) -> Self:
        """A copy with *changes* applied (validated like any other source)."""
        return type(self).resolve(changes, environ={}, base=self)

    def masked(self) -> dict[str, Any]:
        """The settings as a dict with secrets replaced by ``"***"``."""
        out = self.model_dump()
        for spec in self.specs():
            value = out.get(spec.name)
            if spec.secret and value:
                out[spec.name] = "***" if isinstance(value, str) else ["***"] * len(value)
        return out
