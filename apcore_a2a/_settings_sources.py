"""Where settings come from: how a field declares its config key, environment variable and
flag (:func:`setting`, :class:`Setting`), secrets read from files, list values from one
string, the one-line error naming the source of a bad value, and the base class that reads
the environment through those declarations and merges every source (``resolve``). The
settings object itself is :class:`apcore_a2a.settings.Settings`, which re-exports the
public names.
"""

from __future__ import annotations

import difflib
import functools
import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self, Union, get_args, get_origin

from pydantic import BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource

from apcore_a2a._text import hide_url_secrets


class SettingsError(ValueError):
    """A setting has a value that cannot be used (bad type, unknown choice)."""


class SettingRefusal(SettingsError):
    """Setting *name*'s *value* (a *secret*'s is not shown) refused by the room that uses
    it, once resolved: whoever resolved the settings starts the message with where
    the value came from (:meth:`SourcedSettings.namer`) and the ``detail``."""

    def __init__(self, name: str, problem: str, value: Any, *, secret: bool = False) -> None:
        got = "a secret (value not shown)" if secret else repr(value)
        self.name, self.detail = name, f"{problem}, got {got}"
        super().__init__(f"{name}: {self.detail}")


@dataclass(frozen=True, slots=True)
class Setting:
    """Where one setting comes from, besides keyword arguments.

    ``key`` is ``section.name`` in the config file; ``flag`` the ``serve`` option;
    ``annotation`` the type without ``| None``, which ``optional`` says it had. A setting
    ``from_file`` (every secret, and URLs that may carry a password) also comes from a file:
    ``<env>_FILE`` and ``<flag>-file``.
    """

    name: str
    env: str
    key: str
    flag: str
    help: str
    secret: bool
    annotation: Any
    optional: bool
    from_file: bool = False


def setting(
    default: Any,
    key: str,
    help: str,
    *,
    env: str | None = None,
    flag: str | None = None,
    secret: bool = False,
    from_file: bool = False,
    **limits: Any,
) -> Any:
    """Declare a field: its config-file ``section.key``, help, env var (default
    ``A2A_<NAME>``; the JWT settings, ``auth_<rest>``, ``JWT_<REST>``) and CLI flag (default
    ``--<name>``). A *secret* is never shown; it and a *from_file* setting (a URL that
    may hold a password, shown with the password masked) can also be read from a file.

    *limits* are pydantic constraints (``ge=0``...), checked whatever the source.
    """
    extra: dict[str, Any] = {
        "env": env,
        "key": key,
        "flag": flag,
        "secret": secret,
        "from_file": from_file or secret,
    }
    return Field(
        default,
        description=help,
        json_schema_extra={"apcore_a2a": extra},
        repr=not secret,
        **limits,
    )


def forms(spec: Setting) -> str:
    """Every way to give *spec*, for a message saying where to set it: its flags, its
    variables and its config key (``--auth-key/--auth-key-file (JWT_KEY/JWT_KEY_FILE,
    auth.jwt_key)``): a message naming only ``JWT_KEY`` hides the file forms secrets
    should use."""
    flags, variables = [spec.flag], [spec.env]
    if spec.from_file:
        flags.append(spec.flag + "-file")
        variables.append(spec.env + "_FILE")
    return f"{'/'.join(flags)} ({'/'.join(variables)}, {spec.key})"


def read_secret_file(path: str, where: str) -> str:
    """A secret kept in a file: its text without the trailing newline; *where* (the
    variable or flag naming the file) starts the error for an unreadable or empty file."""
    try:
        text = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SettingsError(f"{where}: cannot read {path}: {reason}") from None
    if not text:
        # Read as "not set", an empty secret file would quietly turn off what it guards.
        raise SettingsError(f"{where}: {path} is empty")
    if not text.strip():
        # The rule of every source (empty_problem): a blank value is no value.
        raise SettingsError(f"{where}: {path} holds only whitespace")
    return text


def file_value(spec: Setting, path: str, where: str) -> Any:
    """The value of *spec* kept in the file at *path*: its text, or one item per line for
    a list. A line holding two items is refused, naming the line and not its text (a
    key): ``k1,k2`` or ``k1 k2`` would have been one key that no caller holds."""
    text = read_secret_file(path, where)
    if get_origin(spec.annotation) is not tuple:
        return text
    items = [line.strip() for line in text.splitlines()]
    for number, item in enumerate(items, 1):
        if _two_items(item):
            raise SettingsError(
                f"{where}: {path} line {number}: holds a comma, or whitespace inside its "
                "key; the file takes one entry per line"
            )
    return [item for item in items if item]


def _two_items(item: str) -> bool:
    # The one list read from files is api_keys, KEY[=ID[:ROLE+ROLE]]: roles may be spaced
    # ("ops: operator + admin"), a key may not. A line of only commas is refused as such,
    # as in every list (_split).
    key = item.partition("=")[0]
    spaced = any(c.isspace() for c in key)
    return bool(item.replace(",", "").strip()) and ("," in item or spaced)


#: Settings whose empty value is not the default: ``host`` "" listens on every interface.
EMPTY_MEANS_SOMETHING = frozenset({"host"})


def empty_problem(name: str, value: Any) -> str | None:
    """Why *value*, given on purpose for setting *name* (a flag, a keyword argument, a
    config-file key), is refused as empty, or ``None``: read as "not given", an empty
    string would quietly be the default (``--name ""`` served ``apcore-agent``), and an
    empty item of a list names nothing. Blank (only whitespace) is empty, in every source.
    An environment variable set to exactly "" counts as unset instead
    (:func:`from_environ`): that is how env files and templates leave one out."""
    if name in EMPTY_MEANS_SOMETHING:
        return None
    if isinstance(value, str):
        return None if value.strip() else "must not be empty"
    if isinstance(value, list | tuple) and any(
        isinstance(item, str) and not item.strip() for item in value
    ):
        return "must not hold an empty value"
    return None


def from_environ(environ: Mapping[str, str], specs: tuple[Setting, ...]) -> dict[str, Any]:
    """The settings *environ* gives (a variable set to "" counts as unset), files read."""
    out: dict[str, Any] = {}
    for spec in specs:
        raw, path = environ.get(spec.env), environ.get(spec.env + "_FILE")
        if spec.from_file and path:
            where = spec.env + "_FILE"
            if raw:
                raise SettingsError(f"{where}: set {spec.env} or {where}, not both")
            out[spec.name] = file_value(spec, path, where)
        elif raw:
            _blank(spec, raw)
            if not raw.isascii():
                _utf8(raw, spec.env)
            out[spec.name] = raw
    return out


def _blank(spec: Setting, raw: str) -> None:
    # Only "" leaves a variable out: no template writes "  ", and read as a value it would
    # be what the same blank is refused as everywhere else (a name of spaces on the card).
    if empty_problem(spec.name, raw):
        raise SettingsError(
            f'{spec.env}: must not be only whitespace (set it to "" or unset it for the '
            f"default), got {raw!r}"
        )


def _utf8(raw: str, where: str) -> None:
    # Bytes that are not UTF-8 arrive as lone surrogates (PEP 383), which fail much later,
    # where the value is written out (the card), with a message naming no setting.
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise SettingsError(f"{where}: not valid UTF-8") from None


def source_of(
    name: str,
    given: Mapping[str, Any],
    environ: Mapping[str, str],
    specs: tuple[Setting, ...],
    passed_in: SourcedSettings | None = None,
) -> str:
    """Where setting *name* came from, as its errors start: the name itself when *given*
    (the CLI names its flag), the environment variable (or its ``_FILE``), the settings
    object *passed_in* (an app's ``settings=``), else the config file key."""
    spec = next((s for s in specs if s.name == name), None)
    if spec is None or given.get(name) is not None:
        return name
    if environ.get(spec.env):
        return spec.env
    if spec.from_file and environ.get(spec.env + "_FILE"):
        return spec.env + "_FILE"
    if passed_in is not None:
        return f"{name} of the settings passed in"
    return spec.key


def describe_error(
    exc: ValidationError, where: Callable[[str], str], specs: tuple[Setting, ...]
) -> str:
    """One line naming where (*where*) the first bad value came from and what was wrong."""
    error = exc.errors(include_url=False)[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message  # a rule across settings (model validator) names them itself
    name = str(error["loc"][0])
    spec = next((s for s in specs if s.name == name), None)
    shown = repr(hide_url_secrets(error.get("input")))
    got = "a secret (value not shown)" if spec and spec.secret else shown
    return f"{where(name)}: {message[:1].lower()}{message[1:]}, got {got}"


def _split(value: Any, sep: str, keep: Callable[[str], str]) -> Any:
    """*value* (one string: the environment's form) as its items between *sep*, empty
    ones skipped; a list is checked item by item. Nothing but separators is refused: read
    as "none", ``A2A_API_KEYS=","`` served without authentication while the operator
    believed keys were set. An item of only separators (a file line ``,``) likewise."""
    if isinstance(value, str):
        items = [keep(v) for v in value.split(sep) if v.strip()]
        if not items:
            raise ValueError(f"holds only separators ({sep!r}), no item (for none, leave it out)")
        return items
    if isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, str) and item.strip() and not item.replace(sep, "").strip():
                raise ValueError(f"must not hold an item of only separators ({sep!r})")
    return value


def _items(value: Any) -> Any:
    return _split(value, ",", str.strip)


def _paths(value: Any) -> Any:
    # A folder name may start or end with a space: only the separators are taken away.
    return _split(value, os.pathsep, str)


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


# From the environment, a list is one string: comma-separated, module folders os.pathsep.
Strings = Annotated[tuple[str, ...], BeforeValidator(_items)]
Numbers = Annotated[tuple[float, ...], BeforeValidator(_items)]
Paths = Annotated[tuple[str, ...], BeforeValidator(_paths)]
LogLevel = Annotated[
    Literal["critical", "error", "warning", "info", "debug"], BeforeValidator(_lower)
]
LogFormat = Literal["text", "json"]
AuthType = Literal["bearer", "apikey"]


def config_path(environ: Mapping[str, str] | None = None) -> str | None:
    """The config file ``A2A_CONFIG`` names, if any (``--config`` / ``config=`` win)."""
    return (os.environ if environ is None else environ).get("A2A_CONFIG") or None


def field_specs(fields: Mapping[str, FieldInfo]) -> tuple[Setting, ...]:
    """Every field's name, env var, config key, flag and help, in declaration order."""
    specs = []
    for name, info in fields.items():
        meta: dict[str, Any] = info.json_schema_extra["apcore_a2a"]  # type: ignore[index,assignment]
        flag = meta["flag"] or "--" + name.replace("_", "-")
        kind = info.annotation
        optional = get_origin(kind) in (Union, types.UnionType) and type(None) in get_args(kind)
        if optional:
            kind = next(a for a in get_args(kind) if a is not type(None))
        if get_origin(kind) is Annotated:  # pydantic unwraps it only outside a union
            kind = get_args(kind)[0]
        prefix, rest = ("JWT_", name[5:]) if name.startswith("auth_") else ("A2A_", name)
        env = meta["env"] or (prefix + rest).upper()
        help = info.description or ""
        if get_origin(kind) is tuple:
            sep = "os.pathsep" if BeforeValidator(_paths) in info.metadata else "comma"
            help += f" (repeatable; env: {sep}-separated)"
        specs.append(
            Setting(
                name,
                env,
                meta["key"],
                flag,
                help,
                meta["secret"],
                kind,
                optional,
                meta["from_file"],
            )
        )
    return tuple(specs)


def masked_value(spec: Setting, value: Any) -> Any:
    """*value* of the setting *spec* as it may be printed: a secret as ``***`` (one per
    item of a list), a URL without its password."""
    if spec.secret and value:
        return "***" if isinstance(value, str) else ["***"] * len(value)
    return hide_url_secrets(value)


class SourcedSettings(BaseSettings):
    """A settings model whose fields declare their sources with :func:`setting`: its
    :meth:`specs`, and ``os.environ`` read through them when built as ``Cls()``."""

    @classmethod
    @functools.cache
    def specs(cls) -> tuple[Setting, ...]:
        """Every field's name, env var, config key, flag and help, in declaration order."""
        return field_specs(cls.model_fields)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Cls() reads os.environ; Settings.resolve() merges its own sources (model_validate).
        return (
            init_settings,
            InitSettingsSource(settings_cls, from_environ(os.environ, cls.specs())),
        )

    @classmethod
    def resolve(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        base: SourcedSettings | Mapping[str, Any] | None = None,
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
        for name, value in given.items():
            problem = empty_problem(name, value)
            if problem and isinstance(value, str):
                raise SettingsError(f"{name}: {problem} (leave it out), got {value!r}")
            if problem:  # the list is not shown: it may hold secrets (api_keys)
                raise SettingsError(f"{name}: {problem}")
        passed_in = None
        if isinstance(base, SourcedSettings):
            passed_in, base = base, {k: getattr(base, k) for k in base.model_fields_set}
        environ = os.environ if environ is None else environ
        try:
            return cls.model_validate(
                {**(base or {}), **from_environ(environ, cls.specs()), **given}
            )
        except ValidationError as exc:
            said = describe_error(exc, cls.namer(given, environ, passed_in), cls.specs())
            raise SettingsError(said) from None

    @classmethod
    def namer(
        cls,
        given: Mapping[str, Any],
        environ: Mapping[str, str],
        passed_in: SourcedSettings | None = None,
    ) -> Callable[[str], str]:
        """:func:`source_of` for the sources of one :meth:`resolve`: where a setting's value
        came from, as the refusal of a value checked after it starts."""
        return functools.partial(
            source_of, given=given, environ=environ, specs=cls.specs(), passed_in=passed_in
        )

    @classmethod
    def defaults(cls) -> Self:
        """Every setting at its default (no environment)."""
        return cls.resolve(environ={})

    def replace(self, **changes: Any) -> Self:
        """A copy with *changes* applied (validated like any other source)."""
        return type(self).resolve(changes, environ={}, base=self)

    def masked(self) -> dict[str, Any]:
        """The settings as a dict, secrets as ``"***"`` and URLs without their password."""
        values = self.model_dump()
        return {spec.name: masked_value(spec, values[spec.name]) for spec in self.specs()}

    def __repr_args__(self) -> Any:
        return list(self.masked().items())  # repr(), str(), tracebacks: never a secret
