"""Claude's memory commands for Strands Agents: a ``memory`` tool and a memory store over s3memory.

:func:`memory_tool` is one Strands tool named ``memory`` that runs Claude's six memory
commands (view, create, str_replace, insert, delete, rename) on an encrypted
:class:`~s3memory.EncryptedMemory` or a :class:`~s3memory.MountedMemory`.
:class:`S3MemoryStore` is a ``strands.memory.MemoryStore`` over the same memory, for Strands'
``MemoryManager``: its ``search_memory`` and ``add_memory`` tools, its injection of what is
remembered into the model's input at each user turn, and the ``memory`` tool beside them::

    from strands import Agent
    from strands.memory import MemoryManager
    from s3memory.integrations.strands import S3MemoryStore, memory_tool

    store = S3MemoryStore(bucket="my-bucket", user_id="alice", kms_key_id=KEY_ARN)
    agent = Agent(memory_manager=MemoryManager(stores=[store], add_tool_config=True))
    # or only the file tool, without the manager:
    agent = Agent(tools=[memory_tool(bucket="my-bucket", user_id="alice", kms_key_id=KEY_ARN)])

**Many users, one agent.** Built without ``user_id`` (or on a :class:`~s3memory.UserMemories`),
the tool and the store serve whichever user each invocation names in Strands' invocation
state; register them as the agent's hooks too, so that a run naming no user is refused
before the model is called::

    store = S3MemoryStore(bucket="my-bucket", kms_key_id=KEY_ARN)   # once, at module scope
    agent = Agent(memory_manager=MemoryManager(stores=[store]), hooks=[store])
    agent(prompt, invocation_state={"user_id": user_id})              # per request

The user comes only from the invocation state (``invocation_state["user_id"]``, or what
``user_id_from`` reads there), never from the model's tool input. The tool reads it from the
state Strands hands every tool call; a ``MemoryStore`` is handed nothing of the run, so the
store's hook (on ``BeforeInvocationEvent``) puts the run's state in a context variable that
its ``search`` and ``add`` read (the manager's tools and injection run inside the run's
tasks, which inherit it) and takes it off again on ``AfterInvocationEvent``. The same hook
checks the user first: a run naming none raises :class:`~s3memory.NoUserError` from
``agent(...)``, with nothing sent to the model and nothing added to the conversation (a
tool's exception would be an error result the model reads; a store's search failure
Strands only logs). Clients, the key cache and the store's connection pool are shared by
every user; each user's search cache and add lock are the user's own. Strands' automatic
``extraction`` is refused for a store of many users: its coordinator buffers the agent's
messages across invocations and writes them later, outside any one run. Note that an
``Agent`` keeps its conversation in ``agent.messages``: one agent for many users must start
each request with an empty conversation (or a session manager per user).

The tool answers with s3memory's text; every error reaches the model as a tool result with
``status: "error"`` and the memory tool contract's strings (a generic line for an unexpected
failure, never a traceback). Its schema declares all of Claude's fields, only ``command``
required, and Strands validates none of them: s3memory checks each one. The memory runs in
a worker thread (``asyncio.to_thread``), never on the agent's event loop; concurrent tool
calls share the memory across threads, as ``AsyncS3MemoryTool`` does.

The store keeps Strands' ``FileMemoryStore`` defaults (no ``description``, at most 10
results from ``search`` when neither the caller nor the store gives a number; through the
manager, Strands' own default of 3) where they do not conflict with encryption:

- ``search`` ranks every file by how many of the query's words (Strands' stop words left
  out) occur in its text or its path, best first, as Strands' own ``FileMemoryStore``
  does: Strands searches with whole user turns ("my cat is Miso; what tea do I drink?"), for
  which :meth:`EncryptedMemory.search`, needing every word, finds nothing. The texts come
  from the sealed search index (:meth:`EncryptedMemory.search_corpus`, one round trip when
  warm); the ranking runs in this process, so the store never sees the query.
- ``add`` writes each entry as a new file, ``/memories/notes/<UTC time>-<random>.md`` by
  default, never overwriting one, except that an entry whose first line (its topic) is that
  of a stored entry is merged into it, as ``FileMemoryStore`` merges (the lines below the
  heading that the file lacks, appended); an entry whose text a file there already holds is not
  written again (the check and the write are one step for the adds of one user through this
  store object; two processes adding the same text at the same moment may both write it).
  Names are random rather than ``FileMemoryStore``'s slug of the first line: an object key
  is visible to whoever can list the bucket, and a slug (or a hash) there would tell, or
  confirm a guess of, the content. On a :class:`~s3memory.MountedMemory` the default
  directory must be in the user's own store (a mount named ``notes`` would share every
  entry with its other users: pass ``directory=``). The text passes through the memory's
  screening like anything the model writes: with the default ``sensitive_data="refuse"`` an
  entry holding a secret is refused, nothing is written, and ``add_memory`` answers the
  model with an error naming the kind of secret.
- ``writable`` follows the memory: a store mounted read-only gives a search-only store.

Gaps: Strands cannot declare Claude's native ``memory_20250818`` tool for a tool the client
runs (its ``AnthropicModel`` takes server tools only), so ``memory`` is an ordinary function
tool whose description carries the memory protocol; it works with every model provider,
Bedrock included, without Claude's training on the native tool. s3memory is not a
server-side extractor: the store has no ``add_messages``, so ``extraction=True`` runs Strands'
``ModelExtractor`` (a model call) and stores each fact it distils through ``add``, screened
as above. Strands retries a batch with a failed write whole (the facts already stored are
not written twice), so under ``"refuse"`` a fact with a secret fails every retry until
Strands backs off; open the memory with ``sensitive_data="redact"`` for extraction.
strands-agents-tools' ``memory`` and ``mem0_memory`` tools are fixed backends (Bedrock
knowledge bases, mem0) and cannot run on s3memory. Strands' own OpenTelemetry spans record
memory queries, retrieved entries and tool results unredacted unless configured otherwise
(``OTEL_SEMCONV_STABILITY_OPT_IN``, see ``strands.telemetry.tracer``): with an exporter set
up, decrypted memory leaves the process that way. Neither the tool nor the store closes the
memory.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from strands.hooks import AfterInvocationEvent, BeforeInvocationEvent, HookRegistry
from strands.memory import ExtractionConfig, MemoryEntry, MemoryStore, SearchOptions
from strands.storage.search.keyword import STOP_WORDS, tokenize
from strands.tools import PythonAgentTool
from strands.types.tools import AgentTool, ToolResult, ToolSpec, ToolUse

from .._core.memory import EncryptedMemory
from .._core.mounts import MountedMemory
from .._errors import ConfigurationError, NoUserError, PathExistsError, S3MemoryError, unexpected_error_text
from .._factory import MemoryOptions, UserMemories
from .._paths import ROOT, parse_path
from ._common import (
    MEMORY_INPUT_SCHEMA,
    MEMORY_TOOL_DESCRIPTION,
    MEMORY_TOOL_NAME,
    Memory,
    memory_of_run,
    memory_or_users,
    run_memory_command,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["MEMORY_INPUT_SCHEMA", "MemoryTool", "S3MemoryStore", "UserIdFrom", "memory_tool"]

#: From one invocation's state (the ``invocation_state`` of ``agent(...)``) to its user's id.
UserIdFrom = Callable[[Mapping[str, Any]], object]

_HOW = (
    "pass it in the invocation state, agent(prompt, invocation_state={'user_id': ...}) (or where "
    "user_id_from reads it), with the store or tool among the agent's hooks: Agent(..., hooks=[store])"
)

# The invocation states of the runs under way in this context, innermost last: set by the
# hooks of a tool or store serving many users, read by the store (Strands hands a MemoryStore
# nothing of the run). A task the run starts (tools, injection, add_memory) inherits it.
_RUNS: ContextVar[tuple[Mapping[str, Any], ...]] = ContextVar("s3memory_strands_runs", default=())


def _user_id_in_state(state: Mapping[str, Any]) -> object:
    return state.get("user_id")


class _RunUsers:
    """The hooks of a tool or store serving many users: the run's user checked before the
    model is called, and its invocation state current for the run (``Agent(hooks=[...])``)."""

    _source: Memory | UserMemories
    _user_id_from: UserIdFrom

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Strands' ``HookProvider``: nothing for a tool or store of one user."""
        if isinstance(self._source, UserMemories):
            registry.add_callback(BeforeInvocationEvent, self._begin_run)
            registry.add_callback(AfterInvocationEvent, self._end_run)

    def _begin_run(self, event: BeforeInvocationEvent) -> None:
        # Raised here, the error ends agent(...) before the model sees anything.
        memory_of_run(self._source, self._user_id_from(event.invocation_state), _HOW)
        _RUNS.set((*_RUNS.get(), event.invocation_state))

    def _end_run(self, event: AfterInvocationEvent) -> None:
        runs = list(_RUNS.get())
        for index in range(len(runs) - 1, -1, -1):
            if runs[index] is event.invocation_state:
                del runs[index]
                _RUNS.set(tuple(runs))
                return

    def _memory_of(self, state: Mapping[str, Any] | None) -> tuple[Memory, str | None]:
        """The memory of the run with ``state`` (the current run's if ``None``), and its user
        (``None`` for a tool or store of one user)."""
        if not isinstance(self._source, UserMemories):
            return self._source, None
        if state is None:
            runs = _RUNS.get()
            if not runs:
                raise NoUserError(f"no run of an agent with this store among its hooks is under way: {_HOW}")
            state = runs[-1]
        user_id = self._user_id_from(state)
        return memory_of_run(self._source, user_id, _HOW), str(user_id)


def memory_tool(
    memory: Memory | UserMemories | None = None,
    *,
    user_id_from: UserIdFrom | None = None,
    **options: Unpack[MemoryOptions],
) -> MemoryTool:
    """The ``memory`` tool over ``memory`` (or over one opened from the keyword options of
    :func:`s3memory.open_memory`), for ``Agent(tools=[...])``.

    Without ``user_id`` in the options (or with ``memory=`` a :class:`~s3memory.UserMemories`)
    the tool serves many users: each call runs on the memory of the user the invocation state
    names (``invocation_state["user_id"]``, or ``user_id_from(invocation_state)``). Put the
    tool among the agent's hooks as well (``Agent(tools=[tool], hooks=[tool])``) so that a run
    naming no user raises :class:`~s3memory.NoUserError` from ``agent(...)`` before the model
    is called; without the hook such a run's calls answer the model with that error.

    Each call answers ``{"status": "success", "content": [{"text": ...}]}`` with the
    command's text, or ``status: "error"`` with s3memory's error text.
    """
    source = memory_or_users(memory, options)
    if user_id_from is not None and not isinstance(source, UserMemories):
        raise TypeError("user_id_from is for a tool that serves many users: leave out user_id")
    spec: ToolSpec = {
        "name": MEMORY_TOOL_NAME,
        "description": MEMORY_TOOL_DESCRIPTION,
        "inputSchema": {"json": MEMORY_INPUT_SCHEMA},
    }
    tool: MemoryTool

    async def run(tool_use: ToolUse, **invocation_state: Any) -> ToolResult:
        # The run's memory, from Strands' state for this call (never from the tool input);
        # resolved outside the command's error handling, so that NoUserError is not answered
        # as a memory error (the hook refuses such a run before this).
        target, _ = tool._memory_of(invocation_state)
        # A coroutine, so the blocking memory call is off the event loop whatever Strands
        # does with synchronous tools (1.62 threads them too).
        text, is_error = await asyncio.to_thread(run_memory_command, target, tool_use.get("input"))
        return {
            "toolUseId": tool_use["toolUseId"],
            "status": "error" if is_error else "success",
            "content": [{"text": text}],
        }

    tool = MemoryTool(MEMORY_TOOL_NAME, spec, run)
    tool._source = source
    tool._user_id_from = user_id_from or _user_id_in_state
    return tool


class MemoryTool(_RunUsers, PythonAgentTool):
    """The ``memory`` tool (:func:`memory_tool`): a Strands ``AgentTool``, and for a tool of
    many users the ``HookProvider`` that refuses a run naming no user (``hooks=[tool]``)."""

    @property
    def supports_hot_reload(self) -> bool:
        """``False``: a second tool named ``memory`` in one agent (two stores, or a store and
        ``tools=[memory_tool(...)]``) fails the agent's construction, instead of silently
        replacing this one as a ``PythonAgentTool`` would."""
        return False


_DEFAULT_MAX_SEARCH_RESULTS = 10  # FileMemoryStore's, when neither the caller nor the store says
_MAX_SEARCH_RESULTS = 100  # as s3memory's own search: the model may ask for any number
_EXTENSION = re.compile(r"\.[^./]*$")
_TOPIC_CHARS = 50  # as FileMemoryStore: topics that agree on their first 50 are one


def _topic(text: str) -> str:
    """An entry's topic, as Strands' ``FileMemoryStore`` groups entries: its first line without
    a markdown heading's ``#``, lowercased, letters, digits, spaces and hyphens only, each run
    of spaces one hyphen, cut at 50 characters. ``""`` for an entry without one."""
    first = re.sub(r"^#+\s*", "", text.split("\n", 1)[0]).lower()
    kept = re.sub(r"\s+", "-", re.sub(r"[^a-z0-9\s-]", "", first).strip())
    return kept[:_TOPIC_CHARS].rstrip("-")


_KEPT_USERS = 256  # users whose search caches stay warm between their runs


class _UserState:
    """What the store keeps for one user: each file's words while its text is unchanged
    (a warm search tokenizes only what changed), and the lock making an add's check for a
    repeat and its write one step."""

    __slots__ = ("__weakref__", "adding", "words")

    def __init__(self) -> None:
        self.words: dict[str, tuple[str, frozenset[str]]] = {}
        self.adding = threading.Lock()


class S3MemoryStore(_RunUsers, MemoryStore):
    """A ``strands.memory.MemoryStore`` over an s3memory memory (see the module docstring).

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory`
            (one user), or a :class:`~s3memory.UserMemories` (the user of each run); or
            leave it out and give the keyword options of :func:`s3memory.open_memory`, with
            ``user_id`` for one user, without it for the user of each run.
        user_id_from: for a store of many users, the run's user id from its invocation state;
            by default ``invocation_state["user_id"]``.
        name: the store's name in the manager's tools (``stores=[...]``).
        description: shown to the model in the ``search_memory`` and ``add_memory`` tools;
            none by default, as Strands' ``FileMemoryStore``.
        directory: where ``add`` writes, a directory under ``/memories``; by default
            ``notes`` under the memory's root (``/memories/notes``), which on a
            ``MountedMemory`` must not be a mount.
        max_search_results: at most this many entries per search when the caller gives no
            number (``MemoryManager`` always gives one: this, else its default of 3); left
            ``None``, a direct ``search`` gives at most 10, as ``FileMemoryStore``. Any
            number is capped at 100, as s3memory's own search is.
        max_entry_chars: an entry longer than this is cut, with a line telling the model
            which file to ``view`` for the rest: injection puts every hit into the model's
            input, and a memory file may hold 100 KB.
        writable: whether ``add`` may write; by default, whether ``directory`` is writable
            (``False`` in a store mounted read-only). ``True`` for a read-only directory
            raises ``ConfigurationError``.
        extraction: Strands' automatic extraction (``True`` or an ``ExtractionConfig``): a
            model call distils facts from the conversation every few turns, each stored
            through ``add``. Off by default; refused for a store of many users.
        tool: give the agent the ``memory`` tool (:meth:`get_tools`). An agent has one tool
            of that name, so with a second store over other memory pass ``False`` there (or
            give one store a :class:`~s3memory.MountedMemory`: one tree, one tool).

    Raises:
        ConfigurationError: ``directory`` is not a valid directory of the memory (or,
            left to its default, is a mount), ``writable=True`` where the memory is
            read-only, a limit is below 1, or ``extraction`` for a store of many users.
    """

    def __init__(
        self,
        memory: Memory | UserMemories | None = None,
        *,
        user_id_from: UserIdFrom | None = None,
        name: str = "s3memory",
        description: str | None = None,
        directory: str | None = None,
        max_search_results: int | None = None,
        max_entry_chars: int = 4_000,
        writable: bool | None = None,
        extraction: ExtractionConfig | bool | None = None,
        tool: bool = True,
        **options: Unpack[MemoryOptions],
    ) -> None:
        self._source = memory_or_users(memory, options)
        many = isinstance(self._source, UserMemories)
        if user_id_from is not None and not many:
            raise TypeError("user_id_from is for a store that serves many users: leave out user_id")
        self._user_id_from = user_id_from or _user_id_in_state
        for setting, value in (("max_search_results", max_search_results), ("max_entry_chars", max_entry_chars)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"S3MemoryStore: {setting} must be a whole number of at least 1")
        if many and extraction:
            raise ConfigurationError(
                "S3MemoryStore: extraction needs a store of one user (Strands buffers an agent's messages "
                "across its invocations and writes them after the run): give user_id, or use add_memory"
            )
        self.name = name
        self.description = description
        self.max_search_results = max_search_results
        self.max_entry_chars = max_entry_chars
        # A store of many users is checked on one user's memory (opening one sends no request).
        probe = self._source.sample() if isinstance(self._source, UserMemories) else self._source
        self.directory = self._directory(directory, probe)
        allowed = self._writable_at(self.directory, probe)
        if writable and not allowed:
            raise ConfigurationError(f"S3MemoryStore {name}: {self.directory} is read-only; leave writable unset")
        self.writable: bool = allowed if writable is None else writable
        self.extraction = extraction
        self.tool = tool
        # Per user: the recent users' states kept, and any state still in use found again
        # (so that two adds of one user at once share its lock).
        self._users: OrderedDict[str | None, _UserState] = OrderedDict()
        self._users_in_use: weakref.WeakValueDictionary[str | None, _UserState] = weakref.WeakValueDictionary()
        self._users_lock = threading.Lock()
        # Agents being built with this store among their hooks and not yet initialized by
        # their MemoryManager (see initialize).
        self._hooked_agents = 0

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        super().register_hooks(registry, **kwargs)
        with self._users_lock:
            self._hooked_agents += 1

    async def initialize(self) -> None:
        """Called by the ``MemoryManager`` while an agent is built (after the agent has
        registered its ``hooks``): a store of many users refuses an agent that did not
        register it among its hooks, which would run without naming its users.

        Raises:
            ConfigurationError: a store of many users, not among the agent's ``hooks``.
        """
        if not isinstance(self._source, UserMemories):
            return
        with self._users_lock:
            if self._hooked_agents > 0:
                self._hooked_agents -= 1
                return
        raise ConfigurationError(
            f"S3MemoryStore {self.name} serves many users: give it to the agent's hooks too, "
            "Agent(memory_manager=MemoryManager(stores=[store]), hooks=[store]), so that each run's "
            "user is checked before the model is called"
        )

    @property
    def memory(self) -> Memory:
        """The memory the store runs on: its one user's, or the current run's user's.

        Raises:
            NoUserError: a store of many users, outside a run (or the run names no user).
        """
        return self._memory_of(None)[0]

    @staticmethod
    def _directory(directory: str | None, memory: Memory) -> str:
        defaulted = directory is None
        if directory is None:
            # A mounted store opened on its own (a MountedMemory's own store is at /memories).
            root = memory.files.shown_root if isinstance(memory, EncryptedMemory) else ROOT
            directory = f"{root}/notes"
        try:
            parsed = parse_path(directory, max_path_bytes=memory.limits.max_path_bytes)
        except S3MemoryError as error:
            raise ConfigurationError(f"S3MemoryStore: directory: {error}") from None
        if parsed.is_root:
            raise ConfigurationError("S3MemoryStore: directory must be below /memories, not /memories itself")
        if defaulted and isinstance(memory, MountedMemory) and memory.route(directory)[0] is not None:
            # The user's personal facts would go to a store others mount: only if asked for.
            raise ConfigurationError(
                f"S3MemoryStore: {parsed.display} is a mounted store, shared with its other users; "
                "pass directory=... for where added entries go"
            )
        return parsed.display

    @staticmethod
    def _writable_at(directory: str, memory: Memory) -> bool:
        if isinstance(memory, MountedMemory):
            return not memory.route(directory)[1].read_only
        if not isinstance(memory, EncryptedMemory):  # another Memory: its own rules decide
            return True
        root = parse_path(memory.files.shown_root)
        if not parse_path(directory).is_within(root):
            raise ConfigurationError(f"S3MemoryStore: directory {directory} is not in the memory at {root.display}")
        return not memory.read_only

    def _state_of(self, user_id: str | None) -> _UserState:
        with self._users_lock:
            state = self._users.pop(user_id, None) or self._users_in_use.get(user_id) or _UserState()
            self._users[user_id] = state  # the most recent last
            self._users_in_use[user_id] = state
            while len(self._users) > _KEPT_USERS:
                self._users.popitem(last=False)
            return state

    # -- MemoryStore ----------------------------------------------------------------------------
    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        """The files sharing the most words with ``query``, best first (ties by path), at
        most ``options["max_search_results"]`` (else the store's number, else 10); each
        entry's metadata holds its ``path`` and ``score`` (the number of shared words).

        Raises:
            NoUserError: a store of many users, outside a run naming its user.
        """
        limit = (options or {}).get("max_search_results")
        if limit is None:
            limit = self.max_search_results if self.max_search_results is not None else _DEFAULT_MAX_SEARCH_RESULTS
        if limit < 1:
            raise ValueError("max_search_results must be >= 1")
        memory, user_id = self._memory_of(None)
        words = tokenize(query) - STOP_WORDS
        if not words:
            return []
        # Fetching and ranking in a worker thread: tokenizing a large memory takes long
        # enough to stall every other task on the agent's event loop.
        state = self._state_of(user_id)
        return await asyncio.to_thread(self._ranked, memory, state, frozenset(words), min(limit, _MAX_SEARCH_RESULTS))

    def _ranked(self, memory: Memory, state: _UserState, words: frozenset[str], limit: int) -> list[MemoryEntry]:
        known, current = state.words, {}
        scored = []
        for path, text in memory.search_corpus():
            cached = known.get(path)
            if cached is None or cached[0] != text:
                # The path counts without its extension and the /memories everyone shares.
                named = _EXTENSION.sub("", path.removeprefix(ROOT))
                cached = (text, frozenset(tokenize(named) | tokenize(text)))
            current[path] = cached
            score = len(words & cached[1])
            if score:
                scored.append((score, path, text))
        state.words = current  # only files that still exist (one assignment: safe across threads)
        scored.sort(key=lambda hit: (-hit[0], hit[1]))
        return [
            MemoryEntry(content=self._entry(path, text), metadata={"path": path, "score": score})
            for score, path, text in scored[:limit]
        ]

    def _entry(self, path: str, text: str) -> str:
        text = text.strip()
        if len(text) <= self.max_entry_chars:
            return text
        return f"{text[: self.max_entry_chars]}\n[truncated: view {path} for the rest]"

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """Write ``content`` as a new file in ``directory``; answers its path. As Strands'
        ``FileMemoryStore``, an entry whose first line (its heading: its topic) is that of an
        entry already there is merged into it: the lines below the heading that the file lacks
        are appended. Text that a file in ``directory`` already holds is not written again
        (that file's path is the answer), nor is a line the entry already has: Strands retries
        a failed extraction batch whole, its stored facts included, and runs one
        ``add_memory`` call's entries at once. ``metadata`` is not stored (a memory file is
        the text the model reads).

        Raises:
            ValueError: the store is not writable.
            NoUserError: a store of many users, outside a run naming its user.
            S3MemoryError: s3memory refused the text (a secret, the size or quota limits,
                ``instruction_policy="quarantine"``) or the store failed; its message is
                safe to show the model, and it is what ``add_memory`` answers.
        """
        if not self.writable:
            raise ValueError(f"S3MemoryStore {self.name} is not writable")
        memory, user_id = self._memory_of(None)
        text = content if content.endswith("\n") else content + "\n"
        return await asyncio.to_thread(self._create, memory, self._state_of(user_id), text)

    def _create(self, memory: Memory, state: _UserState, text: str) -> str:
        with state.adding:  # the check for a repeat and the write, one add of this user at a time
            try:
                return self._create_once(memory, text)
            except S3MemoryError:
                raise
            except Exception as error:
                raise S3MemoryError(unexpected_error_text(error)) from error

    def _create_once(self, memory: Memory, text: str) -> str:
        topic = _topic(text)
        for path, existing in memory.search_corpus(self.directory):
            if existing == text:
                return path
            if topic and _topic(existing) == topic:
                return self._append_facts(memory, path, existing, text)
        for _ in range(3):
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            path = f"{self.directory}/{stamp}-{secrets.token_hex(4)}.md"
            try:
                memory.create(path, text)
            except PathExistsError:
                continue  # the same second and the same 32 random bits: draw again
            return path
        raise PathExistsError(f"Error: could not find a free file name in {self.directory}")

    @staticmethod
    def _append_facts(memory: Memory, path: str, existing: str, text: str) -> str:
        """The lines below ``text``'s heading that ``existing`` (the entry of the same topic
        at ``path``) lacks, appended to it: one compare-and-swap edit, with history."""
        known = {line.strip() for line in existing.splitlines()}
        new = [line for line in text.splitlines()[1:] if line.strip() and line.strip() not in known]
        if new:
            memory.write_text(path, existing.rstrip("\n") + "\n" + "\n".join(new) + "\n")
        return path

    def get_tools(self) -> list[AgentTool]:
        """The ``memory`` tool over the same memory (of the same run's user), registered
        beside the manager's tools (none with ``tool=False``)."""
        if not self.tool:
            return []
        if isinstance(self._source, UserMemories):
            return [memory_tool(self._source, user_id_from=self._user_id_from)]
        return [memory_tool(self._source)]
