"""a2a-sdk's records of a client's error, DEBUG records on our agent's requests: a filter
on the SDK's loggers while an agent of ours runs, acting only inside its requests.

So are its records of one of our own errors (``apcore_a2a.errors``): the SDK renders
them as -32603, not knowing our codes, and logs a streamed call's at ERROR; the agent
answers them with their own codes, and logs itself what an operator must see (an outage,
an unreadable task). And its records of a module's failure (an answer carrying its
``apcoreCode``), which it logs at ERROR for a 500 on REST and on a JSON-RPC stream: the
agent logged that failure once already, with its traceback. Every record of theirs inside
our requests is cut to :data:`MAX_MESSAGE` characters: they quote a request's body (DEBUG)
and a client's values whole."""

from __future__ import annotations

import logging

from apcore_a2a._text import echoed
from apcore_a2a.classify import current_request
from apcore_a2a.errors import OWN_ERRORS, WIRE_KEY
from apcore_a2a.upstream import WhileOurs

#: the SDK's loggers that report a client's error
LOGGERS = (
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.compat.v0_3.jsonrpc_adapter",
    "a2a.utils.error_handlers",
)
#: their ERROR records of a request that did not parse (their WARNINGs are all clients');
#: a tuple: a record's ``msg`` may be any object, hashable or not
_UNPARSED = (
    "Failed to validate base JSON-RPC request",
    "Failed to parse request params",
    "Failed to validate base JSON-RPC request for v0.3",
)

#: the most characters of a record of theirs kept: they quote a request's body (DEBUG)
#: and a client's values whole
MAX_MESSAGE = 1000
#: one of our errors as the SDK's record quotes its data (the marker it still carries)
_OWN_MARKS = (
    *(f"'{WIRE_KEY}': '{reason}'" for reason in OWN_ERRORS),
    "'apcoreCode': '",  # a module's failure (adapters/errors.py), logged by the executor
)


def _own_error(record: logging.LogRecord) -> bool:
    args = record.args if isinstance(record.args, tuple) else ()
    data = [arg for arg in args if isinstance(arg, str) and arg.startswith(", Data=")]
    return any(mark in text for text in data for mark in _OWN_MARKS)


class _ClientErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if current_request() is None:
            return True  # not a request of ours
        client = record.levelno == logging.WARNING or record.msg in _UNPARSED
        own = _own_error(record)
        text = record.getMessage()
        if len(text) > MAX_MESSAGE:  # the body, or a client's value, quoted whole
            record.msg, record.args = echoed(text, limit=MAX_MESSAGE), None
        if not client and not own:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_ON = WhileOurs(_ClientErrors(), *LOGGERS)


async def attach() -> None:
    """An agent of ours starts: its requests' client errors become DEBUG records."""
    _ON.attach()


async def detach() -> None:
    """An agent of ours stopped; the last one takes the filter off."""
    _ON.detach()
