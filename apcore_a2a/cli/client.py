"""Client commands of ``apcore-a2a``: ``card``, ``call``, ``task get|cancel`` and
``push set|get|list|delete``.

Each command prints JSON on stdout (the card indented; a task, a message, each stream event
or each push config as one line; ``push delete`` prints nothing) and, on failure, one line
on stderr with a non-zero exit code (:data:`EXIT_CODES`). ``call`` waits as long as the task
runs (``--timeout`` bounds it), showing the task's id, state and elapsed time on stderr while
it waits. Push configs carry the agent's delivery ``status`` and ``statusReason`` when it
reports them::

    apcore-a2a push set http://127.0.0.1:8000 TASK_ID http://127.0.0.1:9000/webhook \\
        --id mine --notification-token s3cret
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import mimetypes
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from apcore_a2a.cli._waiting import StillRunning, wait_for
from apcore_a2a.client import (
    A2AAuthenticationError,
    A2AClient,
    A2AClientError,
    A2AConnectionError,
    A2ADiscoveryError,
    A2ARemoteError,
    CardVerificationError,
)

EXIT_REMOTE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_UNVERIFIED = 4
EXIT_REFUSED = 5
EXIT_STILL_RUNNING = 6
#: ``call``: the task ended in one of these states (its JSON is printed all the same)
EXIT_TASK_STATES = {"failed": 7, "rejected": 8, "canceled": 9}
#: what each exit code of the client commands means (shown by ``--help``)
EXIT_CODES = f"""exit codes:
  0  done (call: the task completed, or waits for input; card, task: printed)
  {EXIT_REMOTE}  the agent answered with an A2A error (unknown skill, invalid input, ...)
  {EXIT_USAGE}  bad command input
  {EXIT_UNREACHABLE}  the agent cannot be reached or has no usable card
  {EXIT_UNVERIFIED}  card --verify: the card's signature is missing or does not verify
  {EXIT_REFUSED}  the agent refused the credentials (HTTP 401/403): see --token, --header
  {EXIT_STILL_RUNNING}  call: the task still runs when --timeout ends (its id is printed)
  7  call: the task failed   8  call: the agent rejected it   9  call: it was canceled"""


class TaskEnded(Exception):
    """``call``'s task ended ``failed``, ``rejected`` or ``canceled`` (see EXIT_TASK_STATES)."""

    def __init__(self, task: dict[str, Any]) -> None:
        self.state = str(task["status"]["state"])
        message = task["status"].get("message") or {}
        said = " ".join(str(p.get("text") or "") for p in message.get("parts") or []).strip()
        super().__init__(f"task {task['id']} {self.state}" + (f": {said}" if said else ""))


def _fail(code: int, message: str) -> int:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return code


def _parse_headers(values: list[str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header must look like 'Name: value', got {item!r}")
        headers[name.strip()] = value.strip()
    return headers


def _card_keys(path: str | None) -> Any:
    """The ``--keys`` file: a JWKS or JWK (JSON) or a PEM public key."""
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise ValueError(f"cannot read --keys {path}: {reason}") from None
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(f"--keys {path} is not valid JSON: {exc}") from exc
    return text


def _client(args: argparse.Namespace, timeout: float | None) -> A2AClient:
    keys = _card_keys(getattr(args, "keys", None))
    try:
        return A2AClient(
            args.url,
            auth=args.token,
            timeout=timeout,
            protocol=args.protocol,
            headers=_parse_headers(args.header),
            allow_other_origins=args.allow_other_origins,
            verify_card=bool(getattr(args, "verify", False)),
            card_keys=keys,
        )
    except CardVerificationError as exc:  # keys that verify nothing are bad input
        raise ValueError(f"--keys: {exc.message}") from None


def _emit(obj: Any, *, indent: int | None = None) -> None:
    sys.stdout.write(json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _run(
    args: argparse.Namespace,
    body: Callable[[A2AClient], Awaitable[None]],
    *,
    per_request: bool = True,
) -> int:
    """Run *body* with a client and turn every failure into one stderr line + exit code.

    ``--timeout`` bounds each request when *per_request*, else the body bounds itself.
    """

    async def main() -> None:
        async with _client(args, args.timeout if per_request else None) as client:
            await body(client)

    # httpx logs every request at INFO; the commands' output is the JSON, not a log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        asyncio.run(main())
    except A2ARemoteError as exc:
        return _fail(EXIT_REMOTE, f"{type(exc).__name__} ({exc.code}): {exc.message}")
    except CardVerificationError as exc:
        return _fail(EXIT_UNVERIFIED, f"{type(exc).__name__} ({exc.reason}): {exc.message}")
    except A2AAuthenticationError as exc:
        return _fail(EXIT_REFUSED, f"{type(exc).__name__}: {exc.message}")
    except StillRunning as exc:
        return _fail(EXIT_STILL_RUNNING, str(exc))
    except TaskEnded as exc:
        return _fail(EXIT_TASK_STATES[exc.state], str(exc))
    except (A2AConnectionError, A2ADiscoveryError) as exc:
        return _fail(EXIT_UNREACHABLE, f"{type(exc).__name__}: {exc.message}")
    except A2AClientError as exc:
        return _fail(EXIT_REMOTE, f"{type(exc).__name__}: {exc.message}")
    except (ValueError, TypeError) as exc:
        return _fail(EXIT_USAGE, str(exc))
    return 0


def _message_from(args: argparse.Namespace) -> Any:
    if args.text is not None:
        return args.text
    if args.data is not None:
        try:
            data = json.loads(args.data)
        except ValueError as exc:
            raise ValueError(f"--data is not valid JSON: {exc}") from exc
        return {"parts": [{"type": "data", "data": data}]}
    path = Path(args.file)
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read --file {path}: {exc.strerror or exc}") from exc
    part = {
        "type": "file",
        "raw": base64.b64encode(content).decode("ascii"),
        "mediaType": mimetypes.guess_type(path.name)[0] or "application/octet-stream",
        "filename": path.name,
    }
    return {"parts": [part]}


#: the card extension an apcore-a2a agent publishes its skills' schemas in (its URI is
#: adapters/skills.py's; the client side imports nothing of the server)
SCHEMA_EXTENSION = "urn:apcore:a2a:skill-schemas:v1"


def skills_of(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The card's skills, each with what the schema extension publishes for it
    (``inputSchema``, ``outputSchema``, ``annotations``, ...) in its own entry."""
    extensions = (card.get("capabilities") or {}).get("extensions") or []
    params = next((e.get("params") for e in extensions if e.get("uri") == SCHEMA_EXTENSION), None)
    published = (params or {}).get("skills") or {}
    skills = card.get("skills") or []
    extra = [published.get(skill.get("id")) or {} for skill in skills]
    # The skill's own fields first (id, name, ...), then what the extension adds.
    return [
        skill | {k: v for k, v in more.items() if k not in skill}
        for skill, more in zip(skills, extra, strict=True)
    ]


def _cmd_card(args: argparse.Namespace) -> int:
    if args.keys and not args.verify:
        return _fail(EXIT_USAGE, "--keys needs --verify")

    async def body(client: A2AClient) -> None:
        card = await client.discover()
        _emit(skills_of(card) if args.skills else card, indent=2)
        if args.verify:
            print("card signature verified", file=sys.stderr)

    return _run(args, body)


def _cmd_call(args: argparse.Namespace) -> int:
    try:
        message = _message_from(args)
    except ValueError as exc:
        return _fail(EXIT_USAGE, str(exc))

    async def body(client: A2AClient) -> None:
        options: dict[str, Any] = {"context_id": args.context_id, "skill_id": args.skill}
        if args.task_id:
            options["task_id"] = args.task_id
        last: dict[str, Any] = {}
        if args.stream:
            async for last in client.stream_message(message, **options):
                _emit(last)
        elif args.no_wait:
            _emit(last := await client.send_message(message, return_immediately=True, **options))
        else:
            _emit(last := await wait_for(client, message, options, args))
        if (last.get("status") or {}).get("state") in EXIT_TASK_STATES:
            raise TaskEnded({"id": last.get("id") or last.get("taskId"), **last})

    # The wait is bounded as a whole (--timeout), not each read of the stream.
    return _run(args, body, per_request=False)


def _cmd_task(args: argparse.Namespace) -> int:
    async def body(client: A2AClient) -> None:
        if args.action == "get":
            _emit(await client.get_task(args.task_id, history_length=args.history_length))
        else:
            _emit(await client.cancel_task(args.task_id))

    return _run(args, body)


def _push_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {"url": args.webhook}
    if args.id:
        config["id"] = args.id
    if args.notification_token:
        config["token"] = args.notification_token
    if args.auth:
        scheme, _, credentials = args.auth.strip().partition(" ")
        if not scheme or not credentials.strip():
            raise ValueError("--auth must look like 'SCHEME CREDENTIALS', e.g. 'Bearer abc'")
        config["authentication"] = {"scheme": scheme, "credentials": credentials.strip()}
    return config


def _cmd_push(args: argparse.Namespace) -> int:
    async def body(client: A2AClient) -> None:
        if args.action == "set":
            _emit(await client.set_push_config(args.task_id, _push_config(args)))
        elif args.action == "get":
            _emit(await client.get_push_config(args.task_id, args.config_id))
        elif args.action == "list":
            for config in await client.list_push_configs(args.task_id):
                _emit(config)
        else:
            await client.delete_push_config(args.task_id, args.config_id)

    return _run(args, body)


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return number


def _command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    func: Callable[[argparse.Namespace], int],
    *positionals: str,
) -> argparse.ArgumentParser:
    """A client command: URL, *positionals* and the connection options every one takes."""
    parser = subparsers.add_parser(
        name, help=help, epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.set_defaults(func=func)
    parser.add_argument("url", metavar="URL", help="base URL of the agent")
    for positional in positionals:
        parser.add_argument(positional, metavar=positional.upper())
    parser.add_argument("--token", help="bearer token sent as 'Authorization: Bearer TOKEN'")
    parser.add_argument(
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="extra HTTP header, e.g. an API key (repeatable)",
    )
    parser.add_argument(
        "--protocol",
        choices=("auto", "1.0", "0.3"),
        default="auto",
        help="A2A protocol version (default: from the agent card)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive,
        default=None,
        metavar="SECONDS",
        help="give up after this long (call: on the whole wait for the task; default: wait "
        "as long as the task runs)",
    )
    parser.add_argument(
        "--allow-other-origins",
        action="store_true",
        help="follow card interface URLs on another origin (credentials are never sent there)",
    )
    return parser


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the client subcommands (``card``, ``call``, ``task``, ``push``) to the parser."""
    card = _command(subparsers, "card", "print an agent's card as JSON", _cmd_card)
    card.add_argument(
        "--verify",
        action="store_true",
        help="require a valid A2A signature (keys: the agent's /.well-known/jwks.json); "
        "prints the signed card, exit 4 when it does not verify",
    )
    card.add_argument(
        "--skills",
        action="store_true",
        help="print the skills only, each with its input and output JSON Schema",
    )
    card.add_argument(
        "--keys",
        metavar="FILE",
        help="with --verify: verify with these keys (JWKS or JWK JSON, or a PEM public key)",
    )
    call = _command(
        subparsers,
        "call",
        "send a message to an agent and print the task (or each streamed event)",
        _cmd_call,
    )
    call.add_argument("--skill", metavar="ID", help="skill to run (message.metadata.skillId)")
    source = call.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", metavar="T", help="send a text part")
    source.add_argument("--data", metavar="JSON", help="send a data part (a JSON value)")
    source.add_argument("--file", metavar="PATH", help="send a file part")
    wait = call.add_mutually_exclusive_group()
    wait.add_argument("--stream", action="store_true", help="stream events, one JSON per line")
    wait.add_argument(
        "--no-wait",
        action="store_true",
        help="return the task as soon as it is created (returnImmediately); "
        "follow it with 'task get'",
    )
    call.add_argument("--context-id", metavar="ID", help="continue this conversation")
    call.add_argument("--task-id", metavar="ID", help="continue this task (e.g. input-required)")

    task = subparsers.add_parser("task", help="get or cancel a task")
    actions = task.add_subparsers(dest="action", metavar="ACTION", required=True)
    get = _command(actions, "get", "print a task as JSON", _cmd_task, "task_id")
    get.add_argument("--history-length", type=int, metavar="N", help="last N history messages")
    _command(actions, "cancel", "cancel a task and print it", _cmd_task, "task_id")

    push = subparsers.add_parser(
        "push", help="register, read and delete a task's push notification configs"
    )
    actions = push.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_ = _command(
        actions, "set", "register a webhook for a task and print the config", _cmd_push, "task_id"
    )
    set_.add_argument("webhook", metavar="WEBHOOK_URL", help="URL the agent POSTs updates to")
    set_.add_argument("--id", metavar="ID", help="config id (default: chosen by the agent)")
    set_.add_argument(
        "--notification-token", metavar="T", help="sent back as X-A2A-Notification-Token"
    )
    set_.add_argument(
        "--auth",
        metavar="'SCHEME CREDENTIALS'",
        help="sent back as 'Authorization: SCHEME CREDENTIALS' with every delivery",
    )
    _command(actions, "get", "print one config of a task", _cmd_push, "task_id", "config_id")
    _command(actions, "list", "print every config of a task, one per line", _cmd_push, "task_id")
    _command(actions, "delete", "delete one config of a task", _cmd_push, "task_id", "config_id")
