"""Claude's memory tool for LangChain agents: an agent middleware over an s3memory store.

:class:`S3ClaudeMemoryMiddleware` registers a tool named ``memory`` that runs Claude's six
memory commands (view, create, str_replace, insert, delete, rename) on an encrypted
:class:`~s3memory.EncryptedMemory` or a :class:`~s3memory.MountedMemory`::

    from langchain.agents import create_agent
    from langchain_anthropic import ChatAnthropic
    from s3memory.integrations.langchain import S3ClaudeMemoryMiddleware

    memory = S3ClaudeMemoryMiddleware(bucket="my-bucket", user_id="alice", kms_key_id=KEY_ARN)
    agent = create_agent(ChatAnthropic(model="claude-sonnet-5-5"), tools=[], middleware=[memory])

With a ``ChatAnthropic`` model each model call declares Claude's native tool
(``{"type": "memory_20250818", "name": "memory"}``), which Claude is trained on; any other
chat model gets an ordinary function tool whose description carries the memory protocol, so
the same agent runs on every provider (``native=False`` forces the function tool). Every
error reaches the model as ``ToolMessage(status="error")`` with s3memory's text (the memory
tool contract's strings; a generic line for an unexpected failure, never a traceback).

Why not langchain-anthropic's ``StateClaudeMemoryMiddleware`` or
``FilesystemClaudeMemoryMiddleware``: neither takes a backend (graph state or a local
directory only), and in 1.7 both mishandle what Claude sends: ``rename`` with ``old_path``
fails validation ("path: Field required"), and ``insert`` with ``insert_text`` ends the run
with ``KeyError: 'new_str'``. This middleware is built from public LangChain API only and
lets s3memory check every field, so the model sees the same answers as through the SDK.

Gaps: the native tool is declared only for ``ChatAnthropic`` (and its subclasses); a model
behind ``init_chat_model``'s configurable wrapper, or Claude through another integration
(Bedrock, Vertex), gets the function tool. One middleware serves one memory, so one user:
build the agent per user. LangGraph runs the tool calls of one model turn concurrently,
where the SDK's tool runner runs them in order: edits of one file all land (each is a
compare-and-swap), but a call that needs another of the same turn (a create, then a rename
of that file) may run first and fail, and the model sees that error. The tool is
synchronous: under ``ainvoke`` LangGraph runs it in a worker thread, sharing one memory
across threads as ``AsyncS3MemoryTool`` does. The middleware does not close the memory.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.tools import BaseTool, ToolException
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import StructuredTool

from .._factory import MemoryOptions, memory_from
from ._common import MEMORY_INPUT_SCHEMA, MEMORY_TOOL_DESCRIPTION, MEMORY_TOOL_NAME, Memory, run_memory_command

if TYPE_CHECKING:
    from langchain.agents.middleware import ExtendedModelResponse
    from typing_extensions import Unpack

__all__ = ["MEMORY_INPUT_SCHEMA", "NATIVE_MEMORY_TOOL", "S3ClaudeMemoryMiddleware", "memory_tool"]

#: What a ``ChatAnthropic`` model is sent instead of the function tool: Claude's own memory
#: tool. ChatAnthropic adds its beta header (``context-management-2025-06-27``) itself.
NATIVE_MEMORY_TOOL: dict[str, Any] = {"type": "memory_20250818", "name": MEMORY_TOOL_NAME}


def memory_tool(memory: Memory | None = None, **options: Unpack[MemoryOptions]) -> BaseTool:
    """The ``memory`` function tool over ``memory`` (or one opened from the keyword options of
    :func:`s3memory.open_memory`), for any LangChain tool-calling agent.

    It answers a command's text, or raises ``ToolException`` with s3memory's error text,
    which LangChain turns into ``ToolMessage(status="error")`` (``handle_tool_error``).
    """

    target = memory_from(memory, options)

    def run(**fields: Any) -> str:
        text, is_error = run_memory_command(target, fields)
        if is_error:
            raise ToolException(text)
        return text

    return StructuredTool.from_function(
        func=run,
        name=MEMORY_TOOL_NAME,
        description=MEMORY_TOOL_DESCRIPTION,
        args_schema=MEMORY_INPUT_SCHEMA,
        infer_schema=False,
        handle_tool_error=True,
    )


def _is_chat_anthropic(model: object) -> bool:
    """Whether ``model`` is a ``ChatAnthropic`` (as langchain-anthropic's own middleware
    checks), without importing langchain-anthropic (about a second): an instance of it can
    only exist once its module is loaded."""
    module = sys.modules.get("langchain_anthropic.chat_models")
    chat_anthropic = getattr(module, "ChatAnthropic", None)
    return isinstance(chat_anthropic, type) and isinstance(model, chat_anthropic)


class S3ClaudeMemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Claude's memory tool (``memory_20250818``) over an encrypted s3memory store.

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory`;
            or leave it out and give the keyword options of :func:`s3memory.open_memory`.
        system_prompt: text appended to the agent's system message on every model call, for
            instance :func:`s3memory.memory_stores_prompt` of a ``MountedMemory`` (the tool
            itself cannot say which mounted store is read-only). ``None`` by default: unlike
            langchain-anthropic's middleware, this one does not append the memory protocol
            ("ALWAYS VIEW YOUR MEMORY DIRECTORY..."), because the API adds it to the system
            prompt itself when the native tool is declared, and the function tool's
            description carries it: appending it would only say it twice.
        native: declare Claude's native memory tool when the model is a ``ChatAnthropic``
            (the default); ``False`` sends the function tool to every model.
    """

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        system_prompt: str | None = None,
        native: bool = True,
        **options: Unpack[MemoryOptions],
    ) -> None:
        super().__init__()
        self.memory: Memory = memory_from(memory, options)
        self.system_prompt = system_prompt
        self.native = native
        self.tool = memory_tool(self.memory)
        self.tools = [self.tool]

    def _request_for(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The model request with the native descriptor in place of the function tool (for
        a ChatAnthropic) and ``system_prompt`` appended (nothing by default: see the class)."""
        overrides: dict[str, Any] = {}
        if self.native and _is_chat_anthropic(request.model):
            # In place, and only if still there: a middleware that filtered the tools out
            # (a tool selector, say) is obeyed.
            if any(_is_memory_tool(tool) for tool in request.tools):
                overrides["tools"] = [NATIVE_MEMORY_TOOL if _is_memory_tool(tool) else tool for tool in request.tools]
        if self.system_prompt:
            overrides["system_message"] = _appended(request.system_message, self.system_prompt)
        return request.override(**overrides) if overrides else request

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        return handler(self._request_for(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        return await handler(self._request_for(request))


def _is_memory_tool(tool: BaseTool | dict[str, Any]) -> bool:
    return isinstance(tool, BaseTool) and tool.name == MEMORY_TOOL_NAME


def _appended(system: SystemMessage | None, text: str) -> SystemMessage:
    """``system`` (its other attributes kept) with ``text`` after its content."""
    if system is None:
        return SystemMessage(content=text)
    content = system.content
    if isinstance(content, str):
        appended: str | list[str | dict[str, Any]] = f"{content}\n\n{text}" if content else text
    else:
        appended = [*content, {"type": "text", "text": text}]
    return system.model_copy(update={"content": appended})
