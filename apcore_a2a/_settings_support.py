"""How settings are declared and where their values come from (see :mod:`.settings`)."""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

__all__ = [
    "EnvironmentSource",
    "Setting",
    "SettingsBase",
    "SettingsError",
    "ValuesSource",
    "advertised_url",
    "describe_error",
    "read_secret_file",
    "setting",
    "spec_of",
]


class SettingsError(ValueError):
    """A setting has a value that cannot be used (bad type, unknown choice)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """Where one setting comes from, besides keyword arguments.

    ``key`` is ``section.name`` in the config file; ``flag`` the ``serve`` option (``None``
    when the setting has no flag of its own).
    """

    name: str
    env: str
    key: str
    flag: str | None
    help: str
    secret: bool
    annotation: Any


def setting(
    default: Any,
    env: str,
    key: str,
    help: str,
    *,
    flag: str | bool = True,
    secret: bool = False,
    **limits: Any,
) -> Any:
    """Declare a field: its env var, config-file ``section.key``, CLI flag and help.

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


class EnvironmentSource(PydanticBaseSettingsSource):
    """Environment variables (and ``<VAR>_FILE`` files for secrets) of a given mapping."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        environ: Mapping[str, str],
        specs: tuple[Setting, ...],
    ) -> None:
        super().__init__(settings_cls)
        self.environ = environ
        self.specs = specs

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in self.specs:
            raw = self.environ.get(spec.env)
            if spec.secret and not raw and self.environ.get(spec.env + "_FILE"):
                raw = read_secret_file(self.environ[spec.env + "_FILE"], spec.env + "_FILE")
            if raw is not None and raw != "":
                out[spec.name] = raw
        return out


class ValuesSource(PydanticBaseSettingsSource):
    """Values already typed by their source (the config file)."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self.values = dict(values)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return self.values


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


def spec_of(name: str, info: FieldInfo) -> Setting:
    extra = info.json_schema_extra
    meta: dict[str, Any] = extra["apcore_a2a"] if isinstance(extra, dict) else {}  # type: ignore[assignment]
    flag = meta["flag"]
    if flag is True:
        flag = "--" + name.replace("_", "-")
    return Setting(
        name=name,
        env=meta["env"],
        key=meta["key"],
        flag=flag or None,
        help=info.description or "",
        secret=bool(meta["secret"]),
        annotation=info.annotation,
    )


def describe_error(
    exc: ValidationError,
    given: Mapping[str, Any],
    environ: Mapping[str, str],
    specs: Mapping[str, Setting],
) -> str:
    """One line naming where the first bad value came from and what was wrong."""
    error = exc.errors(include_url=False)[0]
    if not error["loc"]:
        # A rule across settings (model validator): its message names them itself.
        return str(error["msg"]).removeprefix("Value error, ")
    name = str(error["loc"][0])
    spec = specs.get(name)
    if name in given or spec is None:
        where = name
    elif environ.get(spec.env):
        where = spec.env
    elif spec.secret and environ.get(spec.env + "_FILE"):
        where = spec.env + "_FILE"
    else:
        where = spec.key
    value = error.get("input")
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message[:1].lower()}{message[1:]}, got {value!r}"


#: (environment, config-file values) for the Settings being built by resolve().
_SOURCES: ContextVar[tuple[Mapping[str, str], Mapping[str, Any]] | None] = ContextVar(
    "apcore_a2a_settings_sources", default=None
)


@functools.cache
def _specs(cls: type[BaseSettings]) -> tuple[Setting, ...]:
    return tuple(spec_of(name, info) for name, info in cls.model_fields.items())


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
            EnvironmentSource(settings_cls, environ, cls.specs()),
            ValuesSource(settings_cls, file_values),
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
            raise SettingsError(
                describe_error(exc, given, environ, {s.name: s for s in cls.specs()})
            ) from None
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
