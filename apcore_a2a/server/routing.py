"""Which skill does a message go to, and with what input?

:class:`SkillResolver` applies the routing rules, in order:

1. ``message.metadata.skillId``
2. the request's ``metadata.skillId`` (``SendMessageRequest.metadata`` in 1.0,
   ``params.metadata`` in 0.3 -- the SDK maps both to the same field)
3. a follow-up on an existing task: that task's skill
4. exactly one skill: that skill
5. the configured ``default_skill``
6. otherwise -32602 "Missing required parameter: metadata.skillId" listing the skills.

:class:`ApCoreRequestContextBuilder` runs the resolver and the part conversion *before*
the SDK creates a task, so a request that cannot be routed or converted is answered with a
JSON-RPC error and leaves nothing behind in the task store. It also fills a follow-up's
missing ``contextId`` from the stored task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.types import Message, SendMessageRequest, Task
from a2a.utils.errors import InvalidParamsError, MethodNotFoundError
from google.protobuf.struct_pb2 import Struct

from apcore_a2a.adapters.errors import clean_for_log
from apcore_a2a.adapters.parts import input_from_parts
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.server.call_context import identity_of
from apcore_a2a.server.catalog import SkillCatalog
from apcore_a2a.server.preflight import Preflight

__all__ = [
    "SKILL_METADATA_KEY",
    "ApCoreRequestContext",
    "ApCoreRequestContextBuilder",
    "SkillResolver",
]

SKILL_METADATA_KEY = "skillId"
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

    def __init__(self, catalog: SkillCatalog, default_skill: str | None = None) -> None:
        self._catalog = catalog
        self.default_skill = default_skill

    def resolve(
        self, message: Message, request_metadata: Struct | None, task: Task | None = None
    ) -> SkillSpec:
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
        if skill_id is None:
            available = sorted(specs)
            raise InvalidParamsError(
                message="Missing required parameter: metadata.skillId",
                data={"availableSkills": available},
            )
        spec = specs.get(skill_id)
        if spec is None:
            raise MethodNotFoundError(
                message=f"Skill not found: {clean_for_log(skill_id, 200)}",
                data={"availableSkills": sorted(specs)},
            )
        return spec


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
            spec = self._resolver.resolve(params.message, request_metadata, stored)
            if self._preflight is not None:
                self._preflight.check_access(spec.module_id, identity_of(context))
            if stored is None:
                module_input = input_from_parts(params.message.parts, spec.input_facts)
                if self._preflight is not None:
                    self._preflight.check_input(spec.module_id, module_input)
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
