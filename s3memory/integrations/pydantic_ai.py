"""Claude's memory tool for pydantic-ai agents: a capability over an s3memory store.

:class:`S3Memory` gives an agent a tool named ``memory`` that runs Claude's six memory
commands (view, create, str_replace, insert, delete, rename) on an encrypted
:class:`~s3memory.EncryptedMemory` or a :class:`~s3memory.MountedMemory`::

    from pydantic_ai import Agent
    from s3memory.integrations.pydantic_ai import S3Memory

    memory = S3Memory(bucket="my-bucket", user_id="alice", kms_key_id=KEY_ARN)
    agent = Agent("anthropic:claude-sonnet-5-5", capabilities=[memory])

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
``memory`` tool: a second ``S3Memory`` is refused as a name conflict (mount other stores
instead). ``S3Memory`` is not built from agent specs (a memory is not serializable) and does
not close the memory. pydantic-ai's workspaces (``SupportsFilesystem``) are a run's sandbox,
not memory, and are not mapped. pydantic-ai 2.68 needs Python 3.11 or later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_ai import FunctionToolset, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.native_tools import MemoryTool
from pydantic_core import SchemaValidator, core_schema

from .._factory import MemoryOptions, memory_from
from ._common import MEMORY_INPUT_SCHEMA, MEMORY_TOOL_DESCRIPTION, MEMORY_TOOL_NAME, Memory, run_memory_command

if TYPE_CHECKING:
    from pydantic_ai.tools import AgentNativeTool
    from typing_extensions import Unpack

__all__ = ["MEMORY_INPUT_SCHEMA", "S3Memory", "memory_tool", "memory_toolset"]


def memory_tool(memory: Memory | None = None, **options: Unpack[MemoryOptions]) -> Tool[Any]:
    """The ``memory`` function tool over ``memory`` (or one opened from the keyword options of
    :func:`s3memory.open_memory`): it answers a command's text, or raises ``ToolFailed`` with
    s3memory's error text (a failed tool result, no retry spent)."""
    target = memory_from(memory, options)

    def run(**fields: Any) -> str:
        text, is_error = run_memory_command(target, fields)
        if is_error:
            raise ToolFailed(text)
        return text

    tool: Tool[Any] = Tool.from_schema(
        run, name=MEMORY_TOOL_NAME, description=MEMORY_TOOL_DESCRIPTION, json_schema=MEMORY_INPUT_SCHEMA
    )
    # from_schema accepts any JSON, and arguments that are not an object (a model other than
    # Claude may send ``[1, 2]`` or ``null``) would end the run with a TypeError at ``run(**args)``.
    # Objects only: anything else gets pydantic-ai's usual retry prompt, as a typed tool's would;
    # the fields themselves are still left to s3memory, which answers in the contract's words.
    tool.function_schema.validator = SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))
    return tool


def memory_toolset(memory: Memory | None = None, **options: Unpack[MemoryOptions]) -> FunctionToolset[Any]:
    """A toolset with the one ``memory`` function tool, for ``Agent(toolsets=[...])``.

    Takes ``memory=`` (an :class:`~s3memory.EncryptedMemory` or
    :class:`~s3memory.MountedMemory`) or the keyword options of :func:`s3memory.open_memory`.
    On its own it is a plain function tool on every model; for Claude's native one add
    ``capabilities=[NativeTool(MemoryTool(optional=True))]``, or use :class:`S3Memory`.
    """
    return FunctionToolset([memory_tool(memory, **options)], id="s3memory")


@dataclass(init=False)
class S3Memory(AbstractCapability[Any]):
    """Claude's memory tool (``memory_20250818``) over an encrypted s3memory store.

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory`;
            or leave it out and give the keyword options of :func:`s3memory.open_memory`.
        native: declare Claude's native memory tool on models that support it (the default;
            any other model gets the function tool); ``False`` sends the function tool to
            every model.
        instructions: text added to the agent's instructions, for instance
            :func:`s3memory.memory_stores_prompt` of a ``MountedMemory`` (the tool itself
            cannot say which mounted store is read-only). The memory protocol is not added:
            the API adds it for the native tool, and the function tool's description has it.
    """

    memory: Memory
    native: bool
    instructions: str | None

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        native: bool = True,
        instructions: str | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        self.memory = memory_from(memory, options)
        self.native = native
        self.instructions = instructions
        self._toolset = memory_toolset(self.memory)

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
