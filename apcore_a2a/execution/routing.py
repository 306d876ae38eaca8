"""Which skill does a message go to, and with what input?

:class:`SkillResolver` applies the routing rules, in order:

1. ``message.metadata.skillId``
2. the request's ``metadata.skillId`` (``SendMessageRequest.metadata`` in 1.0,
   ``params.metadata`` in 0.3 -- the SDK maps both to the same field)
3. a follow-up on an existing task: that task's skill
4. exactly one skill: that skill
5. the configured ``default_skill``
6. by schema (``route_by_schema``, on by default): the *one* skill the caller may call
   whose input schema accepts the message as it would be converted for it (a data part
   that validates; a text part for a skill with a single string property, or text that
   parses to a JSON object that validates). For clients that never name a skill, such as
   LLM orchestrators.
7. otherwise (none, or more than one, accepts it) -32602 "Missing required parameter:
   metadata.skillId" listing the skills the caller may call; when several accept it, the
   message names them (``matchingSkills`` in the data).

Errors list only the skills the caller may call (``availableSkills``), and a skill id the
ACL hides from the caller is answered exactly like an id that does not exist (-32601
"Skill not found"), so a caller cannot probe which skills exist.

:class:`ApCoreRequestContextBuilder` runs the resolver and the part conversion *before*
the SDK creates a task, so a request that cannot be routed or converted is answered with a
JSON-RPC error and leaves nothing behind in the task store. It also fills a follow-up's
missing ``contextId`` from the stored task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.types import Message, SendMessageRequest, Task
from a2a.utils.errors import InvalidParamsError, MethodNotFoundError
from google.protobuf.struct_pb2 import Struct

from apcore_a2a.adapters.errors import clean_for_log
from apcore_a2a.adapters.parts import input_from_parts
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.execution.catalog import SkillCatalog
from apcore_a2a.execution.identity import identity_of
from apcore_a2a.execution.preflight import Preflight

__all__ = [
    "SKILL_METADATA_KEY",
    "ApCoreRequestContext",
    "ApCoreRequestContextBuilder",
    "SkillResolver",
    "Visible",
    "skill_not_found",
]

SKILL_METADATA_KEY = "skillId"
#: the skill ids (of those given) the caller may see, sorted
Visible = Callable[[Iterable[str]], list[str]]
#: whether a skill's input schema accepts a message (as converted for that skill)
Accepts = Callable[[SkillSpec, Message], bool]
_SKILL_KEYS = (SKILL_METADATA_KEY, "skill_id")

TaskLookup = Callable[[str, ServerCallContext], Awaitable[Task | None]]


def _skill_in(metadata: Struct) -> str | None:
    for key in _SKILL_KEYS:
        value = metadata.fields.get(key)
        if value is not None and value.WhichOneof("kind") == "string_value" and value.string_value:
            return str(value.string_value)
    return None


def skill_of_task(task: Task | None) -> str | None:
    """The skill id recorded in a stored task's metadata."""
    if task is None or not task.HasField("metadata"):
        return None
    return _skill_in(task.metadata)


class SkillResolver:
    """Apply the routing rules against the live :class:`SkillCatalog`."""

    def __init__(
        self, catalog: SkillCatalog, default_skill: str | None = None, *, by_schema: bool = True
    ) -> None:
        self._catalog = catalog
        self.default_skill = default_skill
        self.by_schema = by_schema

    def skill_ids(self) -> list[str]:
        return list(self._catalog.snapshot.specs)

    def resolve(
        self,
        message: Message,
        request_metadata: Struct | None,
        task: Task | None = None,
        visible: Visible | None = None,
        accepts: Accepts | None = None,
    ) -> SkillSpec:
        """The skill *message* is for; *visible* filters the ids a caller may see listed,
        *accepts* tells whether a skill's schema takes the message (routing step 6)."""
        specs = self._catalog.snapshot.specs
        skill_id = _skill_in(message.metadata) if message.HasField("metadata") else None
        if skill_id is None and request_metadata is not None:
            skill_id = _skill_in(request_metadata)
        if skill_id is None:
            skill_id = skill_of_task(task)
        if skill_id is None:
            if len(specs) == 1:
                return next(iter(specs.values()))
            if self.default_skill is not None:
                skill_id = self.default_skill
        available = visible(specs) if visible is not None else sorted(specs)
        matches: list[str] = []
        if skill_id is None and self.by_schema and accepts is not None:
            matches = [i for i in available if accepts(specs[i], message)]
            if len(matches) == 1:
                return specs[matches[0]]
        if skill_id is None:
            data: dict[str, Any] = {"availableSkills": available}
            reason = ""
            if matches:
                data["matchingSkills"] = matches
                reason = f" (the message fits several skills: {', '.join(matches)})"
            raise InvalidParamsError(
                message=f"Missing required parameter: metadata.skillId{reason}", data=data
            )
        spec = specs.get(skill_id)
        if spec is None:
            raise skill_not_found(skill_id, available)
        return spec


def skill_not_found(skill_id: str, available: list[str]) -> MethodNotFoundError:
    """The one answer for a skill id that does not exist *or* that the caller may not see."""
    return MethodNotFoundError(
        message=f"Skill not found: {clean_for_log(skill_id, 200)}",
        data={"availableSkills": available},
    )


def _requested_id(params: SendMessageRequest, spec: SkillSpec) -> str:
    """The skill id as the caller named it (the resolved one when it named none)."""
    named = _skill_in(params.message.metadata) if params.message.HasField("metadata") else None
    if named is None and params.HasField("metadata"):
        named = _skill_in(params.metadata)
    return named or spec.module_id


class ApCoreRequestContext(RequestContext):
    """The SDK request context plus the resolved skill and module input.

    ``module_input`` is ``None`` on a follow-up to an existing task, where the new
    message answers a question (e.g. an approval) instead of carrying new input.
    """

    skill: SkillSpec | None = None
    module_input: dict[str, Any] | None = None
    stored_task: Task | None = None


class ApCoreRequestContextBuilder(RequestContextBuilder):
    """Resolve skill and input up front; fill a follow-up's context id from the store."""

    def __init__(
        self, resolver: SkillResolver, lookup: TaskLookup, preflight: Preflight | None = None
    ) -> None:
        self._resolver = resolver
        self._lookup = lookup
        self._preflight = preflight

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
            stored = await self._lookup(task_id, context)
        if stored is not None and not context_id:
            context_id = stored.context_id
        spec: SkillSpec | None = None
        module_input: dict[str, Any] | None = None
        if params is not None:
            request_metadata = params.metadata if params.HasField("metadata") else None
            preflight = self._preflight
            identity = identity_of(context)
            visible: Visible | None = None
            if preflight is not None:

                def visible(ids: Iterable[str]) -> list[str]:
                    return preflight.visible(ids, identity)

            accepts = preflight.accepts if preflight is not None else None
            spec = self._resolver.resolve(
                params.message, request_metadata, stored, visible, accepts
            )
            if preflight is not None:
                if stored is not None:
                    preflight.check_access(spec.module_id, identity)
                elif not preflight.may_call(spec.module_id, identity):
                    # A hidden skill answers exactly like an unknown one.
                    available = visible(self._resolver.skill_ids()) if visible else []
                    raise skill_not_found(_requested_id(params, spec), available)
            if stored is None:
                module_input = input_from_parts(params.message.parts, spec.input_facts)
                if preflight is not None:
                    preflight.check_input(spec.module_id, module_input)
        request_context = ApCoreRequestContext(
            call_context=context,
            request=params,
            task_id=task_id,
            context_id=context_id,
            task=task,
        )
        request_context.skill = spec
        request_context.module_input = module_input
        request_context.stored_task = stored
        return request_context
