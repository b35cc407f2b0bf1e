"""Claude's memory tool for LangChain agents: an agent middleware over an s3memory store.

:class:`S3ClaudeMemoryMiddleware` registers a tool named ``memory`` that runs Claude's six
memory commands (view, create, str_replace, insert, delete, rename) on an encrypted
:class:`~s3memory.EncryptedMemory` or a :class:`~s3memory.MountedMemory`. Built once, with
the store's options and no ``user_id``, it serves every user of a server: each run names its
user in LangGraph's runtime context, and works on that user's memory only::

    from dataclasses import dataclass

    from langchain.agents import create_agent
    from langchain_anthropic import ChatAnthropic
    from s3memory.integrations.langchain import S3ClaudeMemoryMiddleware

    @dataclass
    class Context:
        user_id: str

    memory = S3ClaudeMemoryMiddleware(bucket="my-bucket", kms_key_id=KEY_ARN)  # no user_id
    agent = create_agent(
        ChatAnthropic(model="claude-sonnet-5-5"), tools=[], middleware=[memory], context_schema=Context
    )
    agent.invoke({"messages": [...]}, context=Context(user_id="alice"))

The user of a run is read from ``context`` (its ``user_id`` attribute, or its ``"user_id"``
key for a mapping), else from ``config["configurable"]["user_id"]``; ``user_id_from=`` (a
function of the call's ``ToolRuntime``) reads it elsewhere. Never from the model: the tool's
input names no user, and a field the model adds is ignored. A run that names no user fails
with :class:`~s3memory.NoUserError` before the first model call (an invalid user id with
:class:`~s3memory.ConfigurationError`), raised to the caller of ``invoke``. Each call opens
its user's memory (no request; the store, its S3 client, the KMS client and the key cache
are made once and shared). Given ``user_id=`` (or ``memory=``), the middleware serves that
one memory, whatever the run says.

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
(Bedrock, Vertex), gets the function tool. LangGraph runs the tool calls of one model turn
concurrently, where the SDK's tool runner runs them in order: edits of one file all land
(each is a compare-and-swap), but a call that needs another of the same turn (a create,
then a rename of that file) may run first and fail, and the model sees that error. The tool
is synchronous: under ``ainvoke`` LangGraph runs it in a worker thread, sharing one memory
across threads as ``AsyncS3MemoryTool`` does. The middleware does not close the memory.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.tools import BaseTool, ToolException, ToolRuntime
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import InjectedToolArg, StructuredTool
from langgraph.config import get_config
from langgraph.runtime import Runtime

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
from ._thread_user import ThreadUserState, claim_thread

if TYPE_CHECKING:
    from langchain.agents.middleware import ExtendedModelResponse
    from typing_extensions import Unpack

__all__ = ["MEMORY_INPUT_SCHEMA", "NATIVE_MEMORY_TOOL", "S3ClaudeMemoryMiddleware", "memory_tool"]

#: What a ``ChatAnthropic`` model is sent instead of the function tool: Claude's own memory
#: tool. ChatAnthropic adds its beta header (``context-management-2025-06-27``) itself.
NATIVE_MEMORY_TOOL: dict[str, Any] = {"type": "memory_20250818", "name": MEMORY_TOOL_NAME}

#: How a run names its user, for the error of a run that does not.
_HOW = (
    "pass context={'user_id': ...} to agent.invoke (or a context_schema object with a user_id "
    "attribute, or config={'configurable': {'user_id': ...}})"
)

#: A function from a call's ``ToolRuntime`` to the user of its run.
UserIdFrom = Callable[[ToolRuntime[Any, Any]], object]


def _user_of_run(runtime: ToolRuntime[Any, Any]) -> object:
    """The default ``user_id_from``: the run context's ``user_id`` (attribute, or key of a
    mapping), else ``config["configurable"]["user_id"]``."""
    user = user_id_in(runtime.context)
    if user is None or user == "":
        user = user_id_in((runtime.config or {}).get("configurable"))
    return user


class _Users:
    """The memory of each call's run: ``source`` itself if it is one memory, else the memory
    of the user ``user_id_from`` reads from the call's ``ToolRuntime``."""

    def __init__(self, source: Memory | UserMemories, user_id_from: UserIdFrom | None) -> None:
        if user_id_from is not None and not isinstance(source, UserMemories):
            raise TypeError(
                "user_id_from= names each run's user, but this memory is one user's: "
                "leave out user_id= (and memory=) to serve each run's user"
            )
        self.source = source
        self.user_id_from = user_id_from or _user_of_run
        self.how = _HOW if user_id_from is None else "user_id_from= found no user in this run"

    @property
    def per_run(self) -> bool:
        return isinstance(self.source, UserMemories)

    def user_id_of(self, runtime: ToolRuntime[Any, Any]) -> str | None:
        """The run's user, checked as :meth:`of` checks it; None for one user's memory."""
        if not self.per_run:
            return None
        user_id = self.user_id_from(runtime)
        memory_of_run(self.source, user_id, self.how)  # the check alone: nothing remote
        return str(user_id)

    def of(self, runtime: object) -> Memory:
        """Raises ``NoUserError`` (no user, or no ``ToolRuntime``: called outside a graph)
        and ``ConfigurationError`` (an invalid user id): for the application, not the model."""
        if not self.per_run:
            return self.source  # type: ignore[return-value]  # one memory
        if not isinstance(runtime, ToolRuntime):  # outside a graph, or a value that is not LangGraph's
            return memory_of_run(self.source, None, f"call the memory tool in a LangGraph run and {_HOW}")
        return memory_of_run(self.source, self.user_id_from(runtime), self.how)


def memory_tool(
    memory: Memory | UserMemories | None = None,
    *,
    user_id_from: UserIdFrom | None = None,
    **options: Unpack[MemoryOptions],
) -> BaseTool:
    """The ``memory`` function tool, for any LangChain tool-calling agent (``create_agent``'s
    ``tools=``, a ``ToolNode``): over ``memory``, or one opened from the keyword options of
    :func:`s3memory.open_memory`; without ``user_id`` (or given a
    :class:`~s3memory.UserMemories`), over the memory of each run's user, read as
    :class:`S3ClaudeMemoryMiddleware` reads it.

    It answers a command's text, or raises ``ToolException`` with s3memory's error text,
    which LangChain turns into ``ToolMessage(status="error")`` (``handle_tool_error``). A
    run that names no user raises :class:`~s3memory.NoUserError` out of the tool, which a
    ``ToolNode`` with its default ``handle_tool_errors`` raises to the caller of ``invoke``.
    """
    users = _Users(memory_or_users(memory, options), user_id_from)

    # LangGraph's ToolNode injects ``runtime`` (its name and type say so), over anything the
    # model put under that name; the model's JSON schema (MEMORY_INPUT_SCHEMA) does not have it.
    def run(runtime: Annotated[ToolRuntime[Any, Any] | None, InjectedToolArg] = None, **fields: Any) -> str:
        target = users.of(runtime)  # before, and outside, the conversion of errors for the model
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


class S3ClaudeMemoryMiddleware(AgentMiddleware[ThreadUserState, Any, Any]):
    """Claude's memory tool (``memory_20250818``) over an encrypted s3memory store.

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory`
            (one user's), or a :class:`~s3memory.UserMemories` (each run's user); or leave
            it out and give the keyword options of :func:`s3memory.open_memory`: with
            ``user_id``, that user's memory; without, each run's user's.
        system_prompt: text appended to the agent's system message on every model call, for
            instance :func:`s3memory.memory_stores_prompt` of a ``MountedMemory`` (the tool
            itself cannot say which mounted store is read-only). ``None`` by default: unlike
            langchain-anthropic's middleware, this one does not append the memory protocol
            ("ALWAYS VIEW YOUR MEMORY DIRECTORY..."), because the API adds it to the system
            prompt itself when the native tool is declared, and the function tool's
            description carries it: appending it would only say it twice.
        native: declare Claude's native memory tool when the model is a ``ChatAnthropic``
            (the default); ``False`` sends the function tool to every model.
        user_id_from: where a run names its user, when the memory is per run: a function of
            the call's ``langchain.tools.ToolRuntime`` (``.context``, ``.config``,
            ``.state``) answering the user id. By default the context's ``user_id``
            (attribute or mapping key), else ``config["configurable"]["user_id"]``. Called
            before each model call (with a ``ToolRuntime`` whose ``tool_call_id`` is
            ``None``) and for each memory call.

    With a checkpointer, a thread belongs to the user of its first run (its messages quote
    that user's memory files): a run of another user on it is refused before the model is
    called (``s3memory.integrations._thread_user``).

    Raises:
        NoUserError: (from ``invoke``) a run of a per-run middleware named no user.
        ThreadUserError: (from ``invoke``) a run named a user other than its thread's.
        ConfigurationError: (from ``invoke``) the user id a run named is not a valid one.
    """

    state_schema = ThreadUserState

    def __init__(
        self,
        memory: Memory | UserMemories | None = None,
        *,
        system_prompt: str | None = None,
        native: bool = True,
        user_id_from: UserIdFrom | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        super().__init__()
        #: The one memory, or the :class:`~s3memory.UserMemories` each run's memory is opened from.
        self.memory: Memory | UserMemories = memory_or_users(memory, options)
        self.system_prompt = system_prompt
        self.native = native
        self._users = _Users(self.memory, user_id_from)
        self.tool = memory_tool(self.memory, user_id_from=user_id_from)
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

    def before_model(self, state: ThreadUserState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A per-run memory: the run names a valid user (the thread's, with a checkpointer),
        before the model is paid for (and even if the model never calls the tool). Raises
        as :meth:`_Users.of` does, and ``ThreadUserError``."""
        if not self._users.per_run:
            return None
        try:
            config = get_config()
        except RuntimeError:  # called outside a graph
            config = {}
        tool_runtime = ToolRuntime(
            state=state,
            context=getattr(runtime, "context", None),
            config=config,
            stream_writer=getattr(runtime, "stream_writer", lambda _: None),
            tool_call_id=None,
            store=getattr(runtime, "store", None),
        )
        return claim_thread(state, self._users.user_id_of(tool_runtime))

    async def abefore_model(self, state: ThreadUserState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

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
