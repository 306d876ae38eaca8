"""What a module can answer besides plain values (pure): a :class:`File`, a text chunk
(``{"kind": "text", "text": ...}``: apcore requires a streaming module's chunks to be dicts),
a reply kind (:func:`reply_as`), a question (:class:`InputRequired`, :class:`AuthRequired`).
See docs/lifecycle.md, "What a module answers".
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

#: apcore ``Context.data`` key holding a module's per-call reply choice (private: the
#: leading underscore keeps it out of apcore's serialized context)
REPLY_KEY = "_a2a.reply"
#: ``Context.data`` key of the callable that opens the task when a module chooses one
TASK_HOOK_KEY = "_a2a.open_task"
_REPLIES = ("message", "task")


class File(BaseModel):
    """A file a module returns: ``raw`` bytes or a ``url``, plus media type and name.

    ``File(raw=pdf, media_type="application/pdf", filename="report.pdf")`` becomes an A2A
    file part with those bytes, media type and name; ``File(url="https://...",
    media_type="image/png")`` a part that points at the file. Without ``media_type``,
    inline bytes get one sniffed from their magic bytes (``application/octet-stream`` if
    unknown) and a URL gets none. Exactly one of ``raw`` and ``url`` must be given. A
    pydantic model, so it can be (a field of) a module's ``output_schema``.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )

    kind: Literal["file"] = "file"
    raw: bytes | None = None
    url: str | None = None
    media_type: str | None = None
    filename: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> File:
        if (self.raw is None) == (self.url is None):
            raise ValueError("a File needs exactly one of raw (bytes) and url")
        if self.url is not None and not self.url.strip():
            raise ValueError("a File url must not be empty")
        return self


def file_from_value(value: Any) -> File | None:
    """*value* as a :class:`File`: a ``File``, or a dict shaped like its ``model_dump()``
    (``raw`` may be base64 text, as in ``model_dump(mode="json")``). Anything else is not a
    file (``None``), so ordinary data that merely has a ``url`` key stays data."""
    if isinstance(value, File):
        return value
    if not isinstance(value, Mapping) or value.get("kind") != "file":
        return None
    fields = dict(value)
    raw = fields.get("raw")
    if isinstance(raw, str):
        try:  # standard or URL-safe alphabet (pydantic's JSON dump uses the latter)
            fields["raw"] = base64.b64decode(raw.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            return None
    elif isinstance(raw, bytearray):
        fields["raw"] = bytes(raw)
    try:
        return File.model_validate(fields, strict=True)
    except ValueError:
        return None


def text_from_value(value: Any) -> str | None:
    """The text of ``{"kind": "text", "text": "..."}`` (exactly those two keys), else ``None``."""
    if isinstance(value, Mapping) and len(value) == 2 and value.get("kind") == "text":
        text = value.get("text")
        return text if isinstance(text, str) else None
    return None


def reply_as(context: Any, kind: Literal["message", "task"]) -> None:
    """Choose, for this call, whether the caller gets a ``Message`` or a ``Task``.

    *context* is the apcore ``Context`` the module was called with. The choice counts in
    skills with ``"reply": "message"`` (a message unless the module says ``"task"``) and
    ``"reply": "auto"`` (a task unless it says ``"message"``). ``"task"`` creates the task
    at once, so the rest of the run can be watched and canceled; that is final. A default
    skill (``"reply": "task"``) created its task before the module ran, so there the choice
    changes nothing (docs/lifecycle.md, "Message or task")::

        reply_as(context, "message")
    """
    if kind not in _REPLIES:
        raise ValueError(f"reply_as: kind must be 'message' or 'task', not {kind!r}")
    data = getattr(context, "data", None)
    if not isinstance(data, dict):
        raise TypeError("reply_as: pass the apcore Context the module was called with")
    if data.get(REPLY_KEY) == "task" and TASK_HOOK_KEY in data:
        return  # the task exists already
    data[REPLY_KEY] = kind
    hook = data.get(TASK_HOOK_KEY)
    if kind == "task" and callable(hook):
        hook()


def reply_of(data: Mapping[str, Any] | None) -> str | None:
    """The reply kind a module chose with :func:`reply_as` (``None``: it did not)."""
    value = (data or {}).get(REPLY_KEY)
    return value if value in _REPLIES else None


class InputRequired(Exception):
    """Raised by a module to ask the caller for more input.

    The task ends this turn in ``input-required`` with *prompt* as the status message's
    text (and *data*, if given, as a data part). The caller's next message on the task
    calls the module again with the input this call ran with, updated by the answer: its
    data parts are merged over it, and its text fills *field* (or, without *field*, is
    read as for a new message)::

        raise InputRequired("Where to?", field="destination")
    """

    def __init__(
        self, prompt: str, *, field: str | None = None, data: Mapping[str, Any] | None = None
    ) -> None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"{type(self).__name__} needs a non-empty prompt")
        super().__init__(prompt)
        self.prompt = prompt
        self.field = field
        self.data = dict(data) if data else None


class AuthRequired(InputRequired):
    """Raised by a module that needs a credential the caller must obtain first.

    As :class:`InputRequired`, but the task waits in ``auth-required`` and the status
    message's data part names the *scheme* (``"oauth2"``, ``"bearer"``...). The caller
    sends the credential on the task (a data part, text for *field*, or message metadata,
    read as ``Context.data["a2a.message_metadata"]``; docs/lifecycle.md, "Asking for a
    credential").
    """

    def __init__(
        self,
        prompt: str,
        *,
        scheme: str | None = None,
        field: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(prompt, field=field, data=data)
        self.scheme = scheme


def input_required_of(exc: BaseException | None) -> InputRequired | None:
    """The :class:`InputRequired` behind *exc* (apcore wraps what a module raises)."""
    for _ in range(10):
        if exc is None or isinstance(exc, InputRequired):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None
