"""Request values a2a-sdk 1.3 reads as something else, refused as invalid params before it
reads them: JSON-RPC 1.0 ``params`` that are no object, enum names A2A does not define
(protobuf's parser drops them), and REST query strings that are not A2A 1.0.1 §11.5's
(a boolean other than ``true``/``false``, an integer that is none, a single-valued
parameter given twice), 0.3 messages without a role (``role03_error``, also on gRPC), a
body's integer spelt as Python spells one (``"historyLength": "2_0"``, :func:`integer_errors`),
and a JSON-RPC 0.3 integer no int32 holds (the SDK's 0.3 adapter copies ``historyLength`` into
an int32 proto field outside its error handling: ``-32603``, logged at ERROR with a traceback;
REST 0.3 ``GetTask``'s query is :func:`query_error`'s). A query integer JSON writes otherwise
(``?historyLength=2.0``) is handed on as the integer (:func:`sdk_query`): the SDK's 0.3
``GetTask`` reads it with ``int()``, outside its error handling (HTTP 500); so is a JSON-RPC
0.3 integer string with an exponent (``"2e0"``, :func:`sdk_payload`), which 0.3's models
refuse where every other binding reads 2. gRPC carries integers in binary: one spelling.
"""

from __future__ import annotations

import apcore_a2a.upstream.client_first  # noqa: F401  (before the SDK server: see it)

# isort: split
import functools
import re
from collections.abc import Iterator
from types import NoneType
from typing import Any, Literal, get_args, get_origin

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

# after the dispatcher: jsonrpc_adapter imported first is a circular import
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter  # isort: skip
from a2a.utils.errors import InvalidParamsError
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message
from pydantic import BaseModel, TypeAdapter, ValidationError

from apcore_a2a._text import echoed
from apcore_a2a.classify import MESSAGE_METHODS, RequestInfo
from apcore_a2a.shape import field_items, json_leaves
from apcore_a2a.upstream.required_fields import name_errors

_MODELS: dict[str, Any] = JsonRpcDispatcher.METHOD_TO_MODEL
_INT32 = range(-(2**31), 2**31)
#: a number as JSON writes one (RFC 8259 §6), leading zeros as §11.5's decimal strings have them
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
#: an ``int`` field of 0.3's models, as they read one
_LAX_INT = TypeAdapter(int)
#: protobuf's integer types (A2A's protos have int32 alone today; the others read alike)
_INTEGERS = frozenset(
    {FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
     FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64}
)  # fmt: skip
#: REST 0.3 bodies the SDK parses, by method (1.0's are the JSON-RPC methods' requests)
_REST03_BODIES: dict[str, Any] = {
    "SendMessage": pb2_v03.SendMessageRequest,
    "SendStreamingMessage": pb2_v03.SendMessageRequest,
    "CreateTaskPushNotificationConfig": pb2_v03.CreateTaskPushNotificationConfigRequest,
}


def values_error(info: RequestInfo) -> InvalidParamsError | None:
    """The refusal of a call holding values the SDK would misread, else ``None``; after the
    version rule, as the SDK's own checks come after it."""
    return (
        query_error(info)
        or params_error(info)
        or _body_error(info)
        or _integers03_error(info)
        or _message03_error(info)
    )


def integer_errors(doc: Any, descriptor: Descriptor, prefix: str = "") -> list[dict[str, str]]:
    """The errors of each integer field of the JSON object *doc* (read as *descriptor*)
    given as a string that spells no JSON number, in the shape of ``name_errors``'.
    ProtoJSON takes an integer as a number or a string holding one (an exponent allowed);
    protobuf's parser reads a string with Python's ``int()`` (``"2_0"``: 20, ``"٢"``: 2,
    ``"+2"``, ``"\\t2"``: 2). Everything else (a fraction, a bool, past the type's range) its
    parser refuses itself."""
    leaves = json_leaves(doc, descriptor, _integer_fields, prefix)
    return [
        _spelling(name, key, item)
        for name, key, _field, item in leaves
        if isinstance(item, str) and _NUMBER.fullmatch(item) is None
    ]


def _spelling(name: str, key: str, sent: object) -> dict[str, str]:
    shown = ("true" if sent else "false") if isinstance(sent, bool) else echoed(sent, quote=True)
    text = f"{key} must be a JSON number or a string holding one, not {shown}"
    return {"field": name, "message": text}


@functools.cache
def _integer_fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    """The fields that are integers or hold one below (google.protobuf's types hold none
    a request spells: a ``Struct``'s numbers are doubles), by every key protobuf's JSON
    parser takes for them (JSON and proto name)."""
    found = {}
    for field in descriptor.fields:
        target = field_items(field)[1]
        own = target is None or target.full_name.startswith("google.protobuf.")
        if (own and field.cpp_type in _INTEGERS) or (not own and _integer_fields(target)):
            found[field.name] = found[field.json_name] = field
    return found


def _body_error(info: RequestInfo) -> InvalidParamsError | None:
    """A REST body (1.0 or 0.3) holding an integer spelt as Python spells one."""
    doc = info.payload  # parsed once at the edge; unparseable: the SDK's parser refuses it
    if info.binding != "rest" or info.http_method != "POST" or not isinstance(doc, dict):
        return None
    bodies = _REST03_BODIES if info.version == "0.3" else _MODELS
    model = bodies.get(info.method or "")
    return None if model is None else _refusal(integer_errors(doc, model.DESCRIPTOR))


#: a 0.3 model's plan: per key (alias and name) of a field that is an ``int`` or holds
#: one below, ``(is an int, plans of the models it may hold)``
Plan = dict[str, tuple[bool, tuple["Plan", ...]]]


def _plan03(model: type[BaseModel]) -> Plan:
    """:data:`Plan` of a 0.3 model, from its fields' annotations (no 0.3 request model
    holds itself; one that did would fail here, at import)."""
    plan: Plan = {}
    for name, field in model.model_fields.items():
        kinds = _kinds(field.annotation)
        below = (k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel))
        models = tuple(p for p in map(_plan03, below) if p)
        if kinds - {NoneType} == {int} or models:
            plan[name] = plan[field.alias or name] = (kinds - {NoneType} == {int}, models)
    return plan


def _kinds(annotation: Any) -> set[Any]:
    """The types *annotation* admits, unions and lists unwrapped (``str | int`` is no
    int field: a string stays one); a dict's or a literal's values are not walked."""
    origin, args = get_origin(annotation), get_args(annotation)
    if not args:
        return {annotation}
    if origin is dict or origin is Literal:
        return set()
    return set().union(*map(_kinds, args))


_PLANS03 = {
    method: _plan03(model)
    for method, model in JSONRPC03Adapter.METHOD_TO_MODEL.items()
    if isinstance(model, type) and issubclass(model, BaseModel)
}


def _ints03(doc: Any, plan: Plan, prefix: str = "") -> Iterator[tuple[dict[str, Any], str, str]]:
    """``(holder, key, field path)`` of each integer in a JSON-RPC 0.3 request *doc*."""
    for key, value in doc.items() if plan and isinstance(doc, dict) else ():
        is_int, models = plan.get(key, (False, ()))
        if is_int:
            yield doc, key, prefix + key
        for item in value if isinstance(value, list) else (value,):
            for below in models:
                yield from _ints03(item, below, prefix + key + ".")


def _integers03_error(info: RequestInfo) -> InvalidParamsError | None:
    """A JSON-RPC 0.3 call holding an integer spelt as Python spells one (0.3's models read
    ``"2_0"``, ``"+2"``, ``"\\t2"`` and ``true`` in pydantic's lax mode), or no int32 holds
    (module docstring), read as 0.3's models read it (an integral float is an int too)."""
    plan = _PLANS03.get(info.rpc_method or "")
    if info.binding != "jsonrpc" or info.version != "0.3" or plan is None:
        return None
    for holder, key, path in _ints03(info.payload, plan):
        sent = holder[key]
        if isinstance(sent, bool) or (isinstance(sent, str) and not _NUMBER.fullmatch(sent)):
            # In the words of 0.3's other integer refusal (below): no list of errors.
            return InvalidParamsError(message=_spelling(path, key, sent)["message"])
        try:
            value = query_int32(sent) if isinstance(sent, str) else _LAX_INT.validate_python(sent)
        except (ValidationError, ValueError):
            continue  # no integer: the SDK's model refuses it (-32602)
        if value is None or value not in _INT32:
            shown = echoed(sent if value is None else value)
            return InvalidParamsError(
                message=f"{key} must be an integer from 0 to {2**31 - 1}, not {shown}"
            )
    return None


def sdk_payload(info: RequestInfo) -> None:
    """*info*'s JSON-RPC 0.3 payload as the SDK is to read it, after :func:`values_error`
    found nothing: an integer string with a fraction or an exponent (``"2e0"``, which 0.3's
    models refuse; ``"2.0"``) as the integer it is, as every other binding reads it."""
    plan = _PLANS03.get(info.rpc_method or "")
    if info.binding != "jsonrpc" or info.version != "0.3" or plan is None:
        return
    rewritten = False
    for holder, key, _path in _ints03(info.payload, plan):
        sent = holder[key]
        value = query_int32(sent) if isinstance(sent, str) else None
        if value is not None and sent != str(value):
            holder[key], rewritten = value, True
    if rewritten:
        info.rewrite_payload(info.payload)


def _message03_error(info: RequestInfo) -> InvalidParamsError | None:
    """A REST 0.3 message naming an enum value A2A does not define (0.3's parse dropped
    ``"role": "ROLE_ROBOT"`` and served the message as the agent's; 1.0 refuses such a role
    as unset), or of no role (:func:`role03_error`)."""
    if info.binding != "rest" or info.version != "0.3" or info.method not in MESSAGE_METHODS:
        return None
    doc = info.payload  # parsed once at the edge; unparseable: the SDK's parser refuses it
    if not isinstance(doc, dict):
        return None
    errors = name_errors(doc, pb2_v03.SendMessageRequest.DESCRIPTOR)
    message = doc.get("message", doc.get("request"))  # its JSON and its proto name
    if not isinstance(message, dict):
        return _refusal(errors)  # no message: the SDK's parser refuses it in its own words
    # The role alone, read as protobuf reads it (a name, a number, a numeral): a parse of
    # the whole message cost as much as the SDK's own (108 µs of 20 parts; edge_parse).
    try:
        role = ParseDict({"role": message.get("role")}, pb2_v03.Message())
    except (ParseError, ValueError, TypeError):
        return _refusal(errors)  # the SDK's parser refuses it in its own words
    return _refusal(errors) or role03_error(pb2_v03.SendMessageRequest(request=role))


def role03_error(request: Message) -> InvalidParamsError | None:
    """The refusal of a 0.3 ``SendMessageRequest`` (gRPC, or REST's body) whose message has
    no role or one 0.3 does not define, else ``None``: a2a-sdk 1.3's 0.3 conversion reads
    every role but ``ROLE_USER`` as the agent's, so such a message was served as an agent
    message (1.0 refuses an unset role, and a number its enum does not define)."""
    if not isinstance(request, pb2_v03.SendMessageRequest) or not request.HasField("request"):
        return None
    role = request.request.role
    if role in (pb2_v03.ROLE_USER, pb2_v03.ROLE_AGENT):
        return None
    text = f"{role} is not a value of Role" if role else "Field is required."
    return _refusal([{"field": "message.role", "message": text}])


def params_error(info: RequestInfo) -> InvalidParamsError | None:
    """The refusal of a JSON-RPC 1.0 call whose ``params`` the SDK would misread, else
    ``None``. ``null`` reached protobuf and was answered in Python's words (``'NoneType'
    object is not iterable``), an array was read as no params at all (``ListTasks``
    listed every task); A2A's params are objects. Other values the SDK refuses itself
    (``-32600``)."""
    payload = info.payload
    model = _MODELS.get(info.rpc_method or "")
    if info.version != "1.0" or model is None or not isinstance(payload, dict):
        return None
    params = payload.get("params", {})
    if params is None or isinstance(params, list):
        return InvalidParamsError(message="params must be a JSON object")
    descriptor = model.DESCRIPTOR
    return _refusal(name_errors(params, descriptor) + integer_errors(params, descriptor))


def query_error(info: RequestInfo) -> InvalidParamsError | None:
    """The refusal of a REST ``GET`` whose query string the SDK would misread (it keeps a
    repeated parameter's last value, reads any boolean but ``true`` as false and drops an
    unknown enum name: ``?status=working`` listed every task), else ``None``."""
    model = _query_model(info)
    if model is None:
        return None
    fields = {field.camelcase_name: field for field in model.DESCRIPTOR.fields}
    errors: list[dict[str, str]] = []
    doc: dict[str, Any] = {}
    for _pair, key, value in info.params:
        field = fields.get(key)
        if field is None:
            continue
        if field_items(field)[0]:
            doc.setdefault(key, []).extend(item for item in value.split(",") if item)
        elif key in doc:
            errors.append({"field": field.name, "message": f"{key} is given more than once"})
        else:
            doc[key] = value
            if field.type == FieldDescriptor.TYPE_BOOL and value not in ("true", "false"):
                text = f"{key} must be true or false, not {echoed(value, quote=True)}"
                errors.append({"field": field.name, "message": text})
            if field.type == FieldDescriptor.TYPE_INT32 and query_int32(value) is None:
                text = f"{key} must be an integer from {-(2**31)} to {2**31 - 1}, not "
                errors.append({"field": field.name, "message": text + echoed(value, quote=True)})
    return _refusal(errors + name_errors(doc, model.DESCRIPTOR))


def query_int32(text: str) -> int | None:
    """A query value as the int32 it writes, else ``None``: read as the JSON number it
    spells, the value JSON-RPC reads in the same text (``2.0``, ``2e0``: 2; A2A 1.0.1 §11.5,
    numbers are decimal strings). Python's own spellings (``2_0``, ``+2``, ``٢``, `` 2``)
    are none: the SDK answered those, and ``abc``, in Python's or protobuf's words
    (``invalid literal for int() with base 10: 'abc'``)."""
    number = _NUMBER.fullmatch(text)
    if number is None:
        return None
    if number.group(1) is None and number.group(2) is None:
        # Digits alone, read exactly; more than int32's ten are past it, leading zeros
        # counted (int() of 4300 digits, zeros too, raises in Python's words: HTTP 500).
        value = int(text) if len(text.removeprefix("-")) <= 10 else None
    else:
        # As JSON-RPC's parser reads a fraction or an exponent: a double (1e400 is inf).
        double = float(text)
        value = int(double) if double.is_integer() else None
    # Never `None in range`: a range tests what is no int by walking its 2**32 members.
    return value if value is not None and value in _INT32 else None


def sdk_query(info: RequestInfo) -> bytes:
    """*info*'s query as the SDK is to read it, after :func:`query_error` found none: an
    integer written otherwise than in digits (``historyLength=2.0``) as its digits, every
    other byte as sent. a2a-sdk 1.3's REST 0.3 ``GetTask`` reads ``historyLength`` with
    ``int()`` outside its error handling (``2.0``: HTTP 500, logged at ERROR); its 1.0
    routes read such a value as ProtoJSON does, the same integer."""
    model = _query_model(info)
    if model is None:
        return info.query
    integers = {
        field.camelcase_name
        for field in model.DESCRIPTOR.fields
        if field.type == FieldDescriptor.TYPE_INT32 and not field_items(field)[0]
    }
    pairs: list[bytes] | None = None  # each pair rewritten alone: the others stay byte for byte
    for pair, key, value in info.params:
        number = query_int32(value) if key in integers else None
        if number is not None and value != str(number):
            pairs = pairs or info.query.split(b"&")
            pairs[pair] = pairs[pair].partition(b"=")[0] + b"=" + str(number).encode()
    return info.query if pairs is None else b"&".join(pairs)


def _query_model(info: RequestInfo) -> Any:
    """The request message a REST ``GET``'s query fills, if it has a query and the SDK
    reads one (1.0's routes; of 0.3's, ``GetTask`` alone), else ``None``."""
    if info.binding != "rest" or info.http_method != "GET" or not info.query:
        return None
    if info.version == "0.3":
        return pb2_v03.GetTaskRequest if info.method == "GetTask" else None
    return _MODELS.get(info.method or "")


def _refusal(errors: list[dict[str, str]]) -> InvalidParamsError | None:
    """In the shape of the SDK's own refusal of a request's values."""
    if not errors:
        return None
    return InvalidParamsError(message="Validation failed", data={"errors": errors})
