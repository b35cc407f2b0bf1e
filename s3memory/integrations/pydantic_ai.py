"""Claude's memory tool for pydantic-ai agents: a capability over an s3memory store.

:class:`S3Memory` gives an agent a tool named ``memory`` that runs Claude's six memory
commands (view, create, str_replace, insert, delete, rename) on an encrypted
:class:`~s3memory.EncryptedMemory` or a :class:`~s3memory.MountedMemory`. Built without a
``user_id``, one capability (one agent, at module scope) serves every user: each run's user
comes from pydantic-ai's ``RunContext``, the ``deps`` of ``agent.run``, never from the model::

    from pydantic_ai import Agent
    from s3memory.integrations.pydantic_ai import S3Memory

    agent = Agent("anthropic:claude-sonnet-5-5", capabilities=[S3Memory(bucket="my-bucket", kms_key_id=KEY_ARN)])

    def handler(event, context):  # each request, any user
        return agent.run_sync(event["prompt"], deps={"user_id": event["user_id"]}).output

The user is ``deps.user_id`` (an attribute), ``deps["user_id"]`` (a mapping) or ``deps``
itself (a str); ``user_id_from=`` (a function of the ``RunContext``) reads it anywhere else.
A run that names no user fails with :class:`~s3memory.NoUserError` out of ``agent.run``,
before its first model request; an invalid user id with ``ConfigurationError``. The store,
its clients and the key cache are made once and shared; each run opens its user's memory
(no request). ``user_id=`` or ``memory=`` binds the capability to one user, as before.

pydantic-ai's ``MemoryTool`` is only a flag: ``AnthropicModel`` swaps the definition of the
function tool named ``memory`` for Claude's native ``{"name": "memory", "type":
"memory_20250818"}`` and sends the ``context-management-2025-06-27`` beta; the calls still
run here. The capability declares the flag ``optional``, so a model class without the native
tool (all but ``AnthropicModel`` and the test models: Gemini, OpenAI, Claude through Bedrock
Converse...) gets the function tool instead, whose description carries the memory protocol;
``native=False`` sends the function tool to every model. A required ``MemoryTool`` would make
pydantic-ai refuse those models, pointing at ``NativeOrLocalTool``, which does not fit: the
native tool needs the local one. :func:`memory_toolset` is the function tool alone, for
``Agent(toolsets=[...])``.

Every error reaches the model as a failed tool result with s3memory's text as written
(``is_error: true`` for Claude; ``{"error": ...}`` where a provider has no error flag): the
tool raises ``ToolFailed``, which, unlike ``ModelRetry``, adds no "Fix the errors and try
again" and spends none of the run's retries. An unexpected failure answers a generic line
(logged, never a traceback). The parameters are a JSON schema, not a signature, so
pydantic-ai validates nothing and s3memory checks every field, answering in the memory tool
contract's words.

Gaps: the tool is synchronous; pydantic-ai runs each call in a worker thread, and the
parallel calls of one response share the memory (which is thread-safe). An agent holds one
``memory`` tool: a second ``S3Memory`` is refused as a name conflict; one capability without
``user_id`` serves every user, and other stores are mounted (``mounts=``), not added. The
run's user is checked by the tool's own ``prepare`` hook (at each step: it opens the user's
memory, no request); setting ``prepare`` on :func:`memory_tool`'s result replaces that check,
leaving :class:`~s3memory.NoUserError` to the first memory call. ``S3Memory`` is not built
from agent specs (a memory is not serializable) and does not close the memory. pydantic-ai's
workspaces (``SupportsFilesystem``) are a run's sandbox, not memory, and are not mapped.
pydantic-ai 2.68 needs Python 3.11 or later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_ai import FunctionToolset, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.native_tools import MemoryTool
from pydantic_core import SchemaValidator, core_schema

from .._factory import MemoryOptions, UserMemories
from ._common import (
    MEMORY_INPUT_SCHEMA,
    MEMORY_TOOL_DESCRIPTION,
    MEMORY_TOOL_NAME,
    Memory,
    memory_of_run,
    memory_or_users,
    run_memory_command,
    user_id_in,
)

if TYPE_CHECKING:
    from pydantic_ai.tools import AgentNativeTool, ToolDefinition
    from typing_extensions import Unpack

__all__ = ["MEMORY_INPUT_SCHEMA", "S3Memory", "UserIdFrom", "memory_tool", "memory_toolset", "user_id_of_deps"]

#: A function from a run's ``RunContext`` to the id of the run's user (``None``: no user).
UserIdFrom = Callable[[RunContext[Any]], object]

HOW_TO_NAME_THE_USER = (
    "pass deps= to agent.run (the user id as a str, a mapping with 'user_id', or an object with a "
    "user_id attribute), or build the tool with user_id_from=... reading it from the RunContext"
)


def user_id_of_deps(ctx: RunContext[Any]) -> object:
    """The default ``user_id_from``: the run's ``deps`` if it is a str, else ``deps["user_id"]``
    (a mapping) or ``deps.user_id`` (any other object); ``None`` when it has none."""
    return ctx.deps if isinstance(ctx.deps, str) else user_id_in(ctx.deps)


def memory_tool(
    memory: Memory | UserMemories | None = None,
    *,
    user_id_from: UserIdFrom | None = None,
    **options: Unpack[MemoryOptions],
) -> Tool[Any]:
    """The ``memory`` function tool: it answers a command's text, or raises ``ToolFailed`` with
    s3memory's error text (a failed tool result, no retry spent).

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory` (one
            user), a :class:`~s3memory.UserMemories` (each run's user); or leave it out and give
            the keyword options of :func:`s3memory.open_memory`, with ``user_id`` for one user
            or without it for each run's user.
        user_id_from: for each run's user, a function of the ``RunContext`` giving the user id;
            by default :func:`user_id_of_deps` (``deps``, ``deps["user_id"]`` or ``deps.user_id``).

    Raises (from ``agent.run``, to the application; never answered to the model):
        NoUserError: a run of a per-user tool names no user, raised before the run's first
            model request (by the tool's ``prepare`` hook).
        ConfigurationError: the run's user id is not a valid user id.
    """
    source = memory_or_users(memory, options)
    if isinstance(source, UserMemories):
        user_of = user_id_from or user_id_of_deps

        def memory_for(ctx: RunContext[Any]) -> Memory:
            return memory_of_run(source, user_of(ctx), HOW_TO_NAME_THE_USER)

    else:
        if user_id_from is not None:
            raise TypeError("user_id_from= names each run's user: give it without user_id= or a memory of one user")
        fixed = source

        def memory_for(ctx: RunContext[Any]) -> Memory:
            return fixed

    def run(ctx: RunContext[Any], **fields: Any) -> str:
        target = memory_for(ctx)  # outside the conversion below: NoUserError reaches the application
        text, is_error = run_memory_command(target, fields)
        if is_error:
            raise ToolFailed(text)
        return text

    def check_the_user(ctx: RunContext[Any], definition: ToolDefinition) -> ToolDefinition:
        # Each step, before the model is asked: a run without a user fails before it spends a token.
        memory_for(ctx)
        return definition

    tool: Tool[Any] = Tool.from_schema(
        run, name=MEMORY_TOOL_NAME, description=MEMORY_TOOL_DESCRIPTION, json_schema=MEMORY_INPUT_SCHEMA, takes_ctx=True
    )
    if isinstance(source, UserMemories):
        tool.prepare = check_the_user
    # from_schema accepts any JSON, and arguments that are not an object (a model other than
    # Claude may send ``[1, 2]`` or ``null``) would end the run with a TypeError at ``run(**args)``.
    # Objects only: anything else gets pydantic-ai's usual retry prompt, as a typed tool's would;
    # the fields themselves are still left to s3memory, which answers in the contract's words.
    tool.function_schema.validator = SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))
    return tool


def memory_toolset(
    memory: Memory | UserMemories | None = None,
    *,
    user_id_from: UserIdFrom | None = None,
    **options: Unpack[MemoryOptions],
) -> FunctionToolset[Any]:
    """A toolset with the one ``memory`` function tool, for ``Agent(toolsets=[...])``.

    Takes what :func:`memory_tool` takes: one user's memory, or each run's user (named by the
    run's ``deps``, or by ``user_id_from``). On its own it is a plain function tool on every
    model; for Claude's native one add ``capabilities=[NativeTool(MemoryTool(optional=True))]``,
    or use :class:`S3Memory`.
    """
    return FunctionToolset([memory_tool(memory, user_id_from=user_id_from, **options)], id="s3memory")


@dataclass(init=False)
class S3Memory(AbstractCapability[Any]):
    """Claude's memory tool (``memory_20250818``) over an encrypted s3memory store.

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory` (one
            user), or a :class:`~s3memory.UserMemories` (each run's user); or leave it out and
            give the keyword options of :func:`s3memory.open_memory`: without ``user_id``, one
            capability serves every user, each run's user named by its ``deps``.
        user_id_from: a function of the ``RunContext`` giving the run's user id, where the
            default (:func:`user_id_of_deps`: ``deps``, ``deps["user_id"]`` or ``deps.user_id``)
            does not fit. Only for a capability without ``user_id``.
        native: declare Claude's native memory tool on models that support it (the default;
            any other model gets the function tool); ``False`` sends the function tool to
            every model.
        instructions: text added to the agent's instructions, for instance
            :func:`s3memory.memory_stores_prompt` of a ``MountedMemory`` (the tool itself
            cannot say which mounted store is read-only). The memory protocol is not added:
            the API adds it for the native tool, and the function tool's description has it.

    Raises (from ``agent.run``): :class:`~s3memory.NoUserError` when a run of a capability
    without ``user_id`` names no user; ``ConfigurationError`` when its user id is invalid.
    """

    memory: Memory | UserMemories
    native: bool
    instructions: str | None

    def __init__(
        self,
        memory: Memory | UserMemories | None = None,
        *,
        native: bool = True,
        instructions: str | None = None,
        user_id_from: UserIdFrom | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        self.memory = memory_or_users(memory, options)
        self.native = native
        self.instructions = instructions
        self._toolset = memory_toolset(self.memory, user_id_from=user_id_from)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # built from a memory object, not from an agent spec

    def get_toolset(self) -> FunctionToolset[Any]:
        return self._toolset

    def get_native_tools(self) -> Sequence[AgentNativeTool[Any]]:
        # optional: dropped on a model without it, where the function tool takes over.
        return [MemoryTool(optional=True)] if self.native else []

    def get_instructions(self) -> str | None:
        return self.instructions or None
