"""Which skill does a message go to, and with what input?

:class:`ApCoreRequestContextBuilder` applies the routing rules of the README ("How
messages reach modules"), converts the parts and checks input schema, ACL and apcore's
toggle *before* the SDK creates a task, so a request that cannot be served is answered
with an error and leaves no task behind (apcore checks again when it runs the module).
A skill id the ACL hides is answered exactly like one that does not exist, so a caller
cannot probe which skills exist. ``Executor.validate()`` would check it all but costs
about a whole call; the module's input model and the ACL take microseconds.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.types import Message, SendMessageRequest, Task
from a2a.utils.errors import A2AError, InvalidParamsError, MethodNotFoundError, TaskNotFoundError
from apcore import ModuleDisabledError
from google.protobuf.struct_pb2 import Struct
from pydantic import ValidationError

from apcore_a2a._history import message_in
from apcore_a2a._text import echoed
from apcore_a2a.adapters.errors import as_a2a_error, map_error, sanitize
from apcore_a2a.adapters.parts import input_from_parts
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.edge.call import record_of
from apcore_a2a.errors import QuotaExceededError
from apcore_a2a.execution.catalog import SkillCatalog
from apcore_a2a.execution.identity import denial, identity_of, visible_modules
from apcore_a2a.upstream.apcore_accessors import is_disabled

logger = logging.getLogger("apcore_a2a.acl")

SKILL_METADATA_KEY = "skillId"
_SKILL_KEYS = (SKILL_METADATA_KEY, "skill_id")

TaskLookup = Callable[[str, ServerCallContext], Awaitable[Task | None]]


def _skill_in(holder: Message | SendMessageRequest | Task | None) -> str | None:
    """The skill id named in the metadata of *holder*."""
    if holder is None or not holder.HasField("metadata"):
        return None
    metadata: Struct = holder.metadata
    for key in _SKILL_KEYS:
        value = metadata.fields.get(key)
        if value is not None and value.WhichOneof("kind") == "string_value" and value.string_value:
            return str(value.string_value)
    return None


def check_follow_up(
    params: SendMessageRequest, task: Task, max_messages: int = 0, max_bytes: int = 0
) -> None:
    """A message on a waiting *task* answers the task's own skill (an approval approves
    that skill's run, an answer fills that skill's input): one naming another skill is
    refused, before it claims the task's wait, so the task is unchanged. So is one for a
    task whose history already holds *max_messages* messages or *max_bytes* bytes (0: no
    bound; ``max_task_history_*``): every turn rewrites and answers the whole history."""
    held = len(task.history)
    size = sum(m.ByteSize() for m in task.history) if max_bytes else 0
    if (max_messages and held >= max_messages) or (max_bytes and size >= max_bytes):
        bytes_held = f", {size} bytes" if max_bytes else ""  # not read when unbounded
        raise QuotaExceededError(
            f"Task {task.id} holds the most history a task may ({held} messages"
            f"{bytes_held}): cancel it and go on in a new task of the same contextId",
            retry_after=None,
        )
    own, named = _skill_in(task), _skill_in(params.message) or _skill_in(params)
    if own and named and named != own:
        raise InvalidParamsError(
            message=f"Task {task.id} runs skill {own}: a message on it answers that skill "
            f"only, and metadata.skillId names {echoed(named)}"
        )
    # The SDK counts a message whose id the history holds as saved: it would run it and
    # keep it out of the history, so the task would show an answer it never got.
    message_id = params.message.message_id
    if message_in(task.history, message_id) is not None:
        raise InvalidParamsError(
            message=f"Task {task.id} already holds message {echoed(message_id)}: "
            "a new message needs a new messageId"
        )


def _errors_of(exc: Exception) -> list[dict[str, str]]:
    items = exc.errors() if isinstance(exc, ValidationError) else []
    out = [
        {"field": "/" + "/".join(map(str, item["loc"])), "message": sanitize(item["msg"], 200)}
        for item in items
    ]
    return out or [{"field": "/", "message": sanitize(str(exc), 200)}]


class ApCoreRequestContext(RequestContext):
    """The SDK request context plus the resolved skill and module input (``None`` on a
    follow-up, whose message answers a question, e.g. an approval, instead of giving input)."""

    skill: SkillSpec | None = None
    module_input: dict[str, Any] | None = None
    stored_task: Task | None = None
    #: the answer to this caller when the ACL refuses it the skill after the check here
    #: passed (given why): the run's own check, or apcore's when the module ran
    acl_refusal: Callable[[str], A2AError] | None = None
    #: the skills published when the request came (what system views tell a caller of)
    published: Collection[str] = ()


def _skill_not_found(skill_id: str, available: list[str]) -> MethodNotFoundError:
    """The one answer for a skill id that does not exist *or* that the caller may not see."""
    return MethodNotFoundError(
        message=f"Skill not found: {echoed(skill_id)}",
        data={"availableSkills": available},
    )


@dataclass(slots=True)
class ApCoreRequestContextBuilder(RequestContextBuilder):
    """Resolve skill and input up front (the routing rules, against the live catalog) and
    check them as apcore will (input schema, ACL, toggle); fill a follow-up's context id
    from the store."""

    catalog: SkillCatalog
    lookup: TaskLookup
    registry: Any
    executor: Any
    default_skill: str | None = None
    by_schema: bool = True

    def resolve(self, params: SendMessageRequest, task: Task | None, identity: Any) -> SkillSpec:
        """The skill *params* is for, as the caller *identity* may see the skills."""
        specs = self.catalog.snapshot.specs
        named = _skill_in(params.message) or _skill_in(params)
        skill_id = named or _skill_in(task)
        if skill_id is None:
            skill_id = next(iter(specs)) if len(specs) == 1 else self.default_skill
        if skill_id is None:
            available = self.visible(specs, identity)
            fits = [i for i in available if self.by_schema and self.accepts(specs[i], params)]
            if len(fits) != 1:
                data: dict[str, Any] = {"availableSkills": available}
                reason = ""
                if fits:
                    data["matchingSkills"] = fits
                    reason = f" (the message fits several skills: {', '.join(fits)})"
                raise InvalidParamsError(
                    message=f"Missing required parameter: metadata.skillId{reason}", data=data
                )
            skill_id = fits[0]
        spec = specs.get(skill_id)
        if spec is None:
            raise _skill_not_found(skill_id, self.visible(specs, identity))
        denied = denial(self.executor, identity, spec.module_id)
        if denied is not None:
            raise self.acl_refusal(skill_id, task, identity, denied)
        if is_disabled(self.executor, skill_id):
            logger.info("Skill %s is disabled; refused", skill_id)
            refusal = ModuleDisabledError(module_id=skill_id)
            raise as_a2a_error(map_error(refusal, module_id=skill_id))
        return spec

    def acl_refusal(self, skill_id: str, task: Task | None, identity: Any, why: str) -> A2AError:
        """The answer to *identity*, whom the ACL refuses *skill_id* (for *why*), logged:
        a follow-up's *task* the caller may no longer touch is not found; a hidden skill
        answers exactly like an unknown one (refused as it runs, it is not listed either)."""
        answer = "task not found" if task is not None else "skill not found"
        who = sanitize(str(getattr(identity, "id", None) or "anonymous"), 200)
        logger.warning("ACL denied %s -> %s (%s); answered as %s", who, skill_id, why, answer)
        if task is not None:
            return TaskNotFoundError(message="Task not found")
        others = (i for i in self.catalog.ids() if i != skill_id)
        return _skill_not_found(skill_id, self.visible(others, identity))

    def visible(self, module_ids: Iterable[str], identity: Any) -> list[str]:
        """The ids of *module_ids* the ACL lets *identity* call, sorted."""
        return sorted(visible_modules(self.executor, identity, module_ids))

    def accepts(self, spec: SkillSpec, params: SendMessageRequest) -> bool:
        """Whether the message, converted for *spec*, is valid input for it (no side effects)."""
        try:
            inputs = input_from_parts(params.message.parts, spec.input_facts)
            self.check_input(spec.module_id, inputs)
        except A2AError:
            return False
        # Models usually ignore unknown keys; for routing, a key the schema does not name
        # means the message is for another skill.
        schema = spec.input_facts.schema
        named = schema.get("properties") or {}
        return schema.get("additionalProperties") is True or set(inputs) <= set(named)

    def check_input(self, module_id: str, inputs: dict[str, Any]) -> None:
        """Refuse *inputs* the module's input model does not validate, as apcore would."""
        model = getattr(self.registry.get(module_id), "input_schema", None)
        try:
            if model is not None:
                try:
                    # The object first: a 9.6 MB text took 33-87 ms of event loop through
                    # the JSON round trip, 10-70 us this way (2026-11-27). What strict Python
                    # mode refuses goes the way apcore validates (JSON, strict), which also
                    # reads dates, enums and bytes from strings: it decides, with its errors.
                    model.model_validate(inputs, strict=True)
                except Exception:
                    model.model_validate_json(json.dumps(inputs, default=str), strict=True)
        except Exception as exc:
            errors = _errors_of(exc)
            summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
            raise InvalidParamsError(
                message=f"Input does not match the skill's schema: {summary}"[:500],
                data={
                    "type": "SchemaValidationError",
                    "apcoreCode": "SCHEMA_VALIDATION_ERROR",
                    "errors": errors,
                },
            ) from None

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        stored = task
        if task_id and stored is None:
            stored = await self.lookup(task_id, context)
        if stored is not None and not context_id:
            context_id = stored.context_id
        request_context = ApCoreRequestContext(
            call_context=context, request=params, task_id=task_id, context_id=context_id, task=task
        )
        request_context.stored_task = stored
        request_context.published = self.catalog.snapshot.specs.keys()
        if params is None:
            return request_context
        identity = identity_of(context)
        spec = self.resolve(params, stored, identity)
        if stored is None:
            request_context.module_input = input_from_parts(params.message.parts, spec.input_facts)
            self.check_input(spec.module_id, request_context.module_input)
        request_context.skill = spec
        request_context.acl_refusal = functools.partial(
            self.acl_refusal, spec.module_id, stored, identity
        )
        call = record_of(context)
        call.run_task = request_context.task_id
        if call.answer is not None:  # for cancel-on-drop (``streams/answers.py``)
            call.answer.run_task = call.run_task
        if not task_id:  # the id made up for a new task: nothing is stored under it yet
            call.new_task = request_context.task_id
        if call.positions is not None and request_context.task_id:
            call.positions.watch(request_context.task_id)  # known before its events flow
        return request_context
