"""Push commands of ``apcore-a2a``: ``push set|get|list|delete``.

Each prints the task's push configs as JSON, one a line, with their delivery status when
the agent serves it (``A2AClient.push_status``); failures are those of every client
command (``cli/client.py``: one stderr line, ``EXIT_CODES``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from apcore_a2a.cli import emit
from apcore_a2a.cli.client import command

if TYPE_CHECKING:
    from apcore_a2a.client import A2AClient


async def _push(client: A2AClient, args: argparse.Namespace) -> None:
    if args.action == "set":
        config: dict[str, Any] = {"url": args.webhook_url, "id": args.id}
        config["token"] = args.notification_token
        if args.auth:
            scheme, _, credentials = args.auth.strip().partition(" ")
            if not scheme or not credentials.strip():
                raise ValueError("--auth must look like 'SCHEME CREDENTIALS', e.g. 'Bearer abc'")
            config["authentication"] = {"scheme": scheme, "credentials": credentials.strip()}
        configs = [await client.set_push_config(args.task_id, config)]
    elif args.action == "get":
        configs = [await client.get_push_config(args.task_id, args.config_id)]
    elif args.action == "list":
        configs = await client.list_push_configs(args.task_id)
    else:
        await client.delete_push_config(args.task_id, args.config_id)
        return
    for shown in await _with_status(client, args.task_id, configs):
        emit(shown)


async def _with_status(
    client: A2AClient, task_id: str, configs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """*configs* with ``status``/``statusReason`` from the agent's push status route
    (``A2AClient.push_status``); as they are from an agent that does not serve it."""
    report = await client.push_status(task_id) if configs else None
    found = {str(c.get("id")): c for c in (report or {}).get("configs", []) if isinstance(c, dict)}
    keys = ("status", "statusReason")
    shown = [(c, found.get(str(c.get("id") or task_id))) for c in configs]
    return [c if s is None else {**c, **{k: s.get(k) for k in keys}} for c, s in shown]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``push`` subcommands to the parser."""
    push = subparsers.add_parser(
        "push", help="register, read and delete a task's push notification configs"
    )
    actions = push.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_ = command(
        actions, "set", "register a webhook for a task and print the config", _push, "task_id"
    )
    set_.add_argument("webhook_url", metavar="WEBHOOK_URL", help="URL the agent POSTs updates to")
    set_.set_defaults(positionals=("url", "task_id", "webhook_url"))
    set_.add_argument("--id", metavar="ID", help="config id (default: chosen by the agent)")
    set_.add_argument(
        "--notification-token", metavar="T", help="sent back as X-A2A-Notification-Token"
    )
    set_.add_argument(
        "--auth",
        metavar="'SCHEME CREDENTIALS'",
        help="sent back as 'Authorization: SCHEME CREDENTIALS' with every delivery",
    )
    command(actions, "get", "print one config of a task", _push, "task_id", "config_id")
    command(actions, "list", "print every config of a task, one per line", _push, "task_id")
    command(actions, "delete", "delete one config of a task", _push, "task_id", "config_id")
