"""The SDK's REQUIRED-field check, with a walk planned once per message type that stops at
google.protobuf's types (the SDK reads every field's options of every ``Value``), and that
refuses an enum number A2A does not define (the SDK takes A2A's enums as open), and an enum
name it does not define (protobuf's parser, told to ignore unknown fields, drops such a name:
a ``ListTasks`` status filter of a misspelt state became no filter at all).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import _append_nested_errors, _check_required_field_violation
from a2a.utils.telemetry import SpanKind, trace_function
from google.api.field_behavior_pb2 import REQUIRED, field_behavior
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from apcore_a2a._text import echoed
from apcore_a2a.shape import field_items, json_leaves

_ONE, _MANY, _MAP, _ENUM = 1, 2, 3, 4
H = TypeVar("H")
R = TypeVar("R")


def unchecked(method: Callable[..., Any]) -> Callable[..., Any]:
    """*method* of ``DefaultRequestHandler`` without its check, traced as the SDK traces it.

    The class attribute is ``trace_class``'s wrapper around ``validate_request_params``'s
    around the method; each keeps the one below as ``__wrapped__`` (``functools.wraps``).
    """
    inner = method.__wrapped__.__wrapped__  # type: ignore[attr-defined]
    cls = DefaultRequestHandler
    span = f"{cls.__module__}.{cls.__name__}.{inner.__name__}"
    traced: Callable[..., Any] = trace_function(span_name=span, kind=SpanKind.SERVER)(inner)
    return traced


def check(request: Message) -> None:
    """Raise ``InvalidParamsError`` as the SDK does for a REQUIRED field left unset."""
    errors = _errors(request)
    if errors:
        raise InvalidParamsError(message="Validation failed", data={"errors": errors})


def checked(
    method: Callable[[H, Message, Any], Coroutine[Any, Any, R]],
) -> Callable[[H, Message, Any], Coroutine[Any, Any, R]]:
    """*method* ``(self, params, context)`` of the SDK's handler, after :func:`check`."""

    @functools.wraps(method)
    async def checked_first(self: H, params: Message, context: Any) -> R:
        check(params)
        return await method(self, params, context)

    return checked_first


def _errors(message: Message) -> list[Any]:
    errors: list[Any] = []
    for field, required, nested in _plan(message.DESCRIPTOR):
        if required and (violation := _check_required_field_violation(message, field)):
            errors.append(violation)
        value = getattr(message, field.name)
        if nested == _ENUM:
            defined = field.enum_type.values_by_number
            for number in value if field_items(field)[0] else (value,):
                if number not in defined:
                    text = f"{number} is not a value of {field.enum_type.name}"
                    errors.append({"field": field.name, "message": text})
        if nested == _ONE and message.HasField(field.name):
            _append_nested_errors(errors, field.name, _errors(value))
        elif nested in (_MANY, _MAP):
            for key, item in value.items() if nested == _MAP else enumerate(value):
                _append_nested_errors(errors, f"{field.name}[{key}]", _errors(item))
    return errors


@functools.cache
def _plan(descriptor: Descriptor) -> tuple[tuple[FieldDescriptor, bool, int], ...]:
    """Per field to look at: is it REQUIRED, and which messages below it to walk (or an
    enum to check)."""
    plan = []
    for field in descriptor.fields:
        required = REQUIRED in field.GetOptions().Extensions[field_behavior]
        many, target, is_map = field_items(field)
        nested = _MAP if is_map else _MANY if many else _ONE
        if target is None or target.full_name.startswith("google.protobuf."):
            nested = _ENUM if field.enum_type is not None else 0
        if required or nested:
            plan.append((field, required, nested))
    return tuple(plan)


def name_errors(doc: Any, descriptor: Descriptor, prefix: str = "") -> list[dict[str, str]]:
    """The errors of each enum *name* in the JSON object *doc* (read as *descriptor*) that
    the enum does not define, in the shape of :func:`check`'s. Numbers, and numbers as
    strings (which protobuf reads as numbers), are left to :func:`check`."""
    errors = []
    for name, _key, field, item in json_leaves(doc, descriptor, _enum_fields, prefix):
        enum = field.enum_type
        if isinstance(item, str) and item not in enum.values_by_name and not _numeral(item):
            text = f"{echoed(item, quote=True)} is not a value of {enum.name}"
            errors.append({"field": name, "message": text})
    return errors


def _numeral(text: str) -> bool:
    """Whether protobuf reads *text* as an enum number A2A's JSON spells (ASCII digits:
    ``int()`` reads ``"\u0663"``, another script's 3, alike; ``str.isdigit`` takes it)."""
    digits = text.removeprefix("-")
    return digits.isascii() and digits.isdigit()


@functools.cache
def _enum_fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    """The fields that are enums or hold one below (a message's parts hold none: not
    walked), by every key protobuf's JSON parser takes for them (JSON and proto name)."""
    found = {}
    for field in descriptor.fields:
        target = field_items(field)[1]
        own = target is None or target.full_name.startswith("google.protobuf.")
        if field.enum_type is not None or (not own and _enum_fields(target)):
            found[field.name] = found[field.json_name] = field
    return found


#: ``DefaultRequestHandler``'s message methods, for :func:`check` to stand in for the SDK's
SEND = unchecked(DefaultRequestHandler.on_message_send)
SEND_STREAM = unchecked(DefaultRequestHandler.on_message_send_stream)
