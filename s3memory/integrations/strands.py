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

The tool answers with s3memory's text; every error reaches the model as a tool result with
``status: "error"`` and the memory tool contract's strings (a generic line for an unexpected
failure, never a traceback). Its schema declares all of Claude's fields, only ``command``
required, and Strands validates none of them: s3memory checks each one. The memory runs in
a worker thread (``asyncio.to_thread``), never on the agent's event loop; concurrent tool
calls share the memory across threads, as ``AsyncS3MemoryTool`` does.

The store:

- ``search`` ranks every file by how many of the query's words (Strands' stop words left
  out) occur in its text or its path, best first, as Strands' own ``FileMemoryStore``
  does: Strands searches with whole user turns ("my cat is Miso; what tea do I drink?"), for
  which :meth:`EncryptedMemory.search`, needing every word, finds nothing. The texts come
  from the sealed search index (:meth:`EncryptedMemory.search_corpus`, one round trip when
  warm); the ranking runs in this process, so the store never sees the query.
- ``add`` writes each entry as a new file, ``/memories/notes/<UTC time>-<random>.md`` by
  default, never overwriting one; an entry whose text a file there already holds is not
  written again (the check and the write are one step for the adds of this store object;
  two processes adding the same text at the same moment may both write it). Names are
  random rather than a hash of the text: an object key is visible to whoever can list the
  bucket, and a hash there would confirm a guessed content. On a
  :class:`~s3memory.MountedMemory` the default directory must be in the user's own store
  (a mount named ``notes`` would share every entry with its other users: pass ``directory=``).
  The text passes through the memory's screening like anything the model
  writes: with the default ``sensitive_data="refuse"`` an entry holding a secret is refused,
  nothing is written, and ``add_memory`` answers the model with an error naming the kind of
  secret.
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
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from strands.memory import ExtractionConfig, MemoryEntry, MemoryStore, SearchOptions
from strands.storage.search.keyword import STOP_WORDS, tokenize
from strands.tools import PythonAgentTool
from strands.types.tools import AgentTool, ToolResult, ToolSpec, ToolUse

from .._core.memory import EncryptedMemory
from .._core.mounts import MountedMemory
from .._errors import ConfigurationError, PathExistsError, S3MemoryError, unexpected_error_text
from .._factory import MemoryOptions, memory_from
from .._paths import ROOT, parse_path
from .._tool_words import STORE_DESCRIPTION
from ._common import MEMORY_INPUT_SCHEMA, MEMORY_TOOL_DESCRIPTION, MEMORY_TOOL_NAME, Memory, run_memory_command

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["MEMORY_INPUT_SCHEMA", "S3MemoryStore", "memory_tool"]


def memory_tool(memory: Memory | None = None, **options: Unpack[MemoryOptions]) -> AgentTool:
    """The ``memory`` tool over ``memory`` (or over one opened from the keyword options of
    :func:`s3memory.open_memory`), for ``Agent(tools=[...])``.

    Each call answers ``{"status": "success", "content": [{"text": ...}]}`` with the
    command's text, or ``status: "error"`` with s3memory's error text.
    """
    target = memory_from(memory, options)
    spec: ToolSpec = {
        "name": MEMORY_TOOL_NAME,
        "description": MEMORY_TOOL_DESCRIPTION,
        "inputSchema": {"json": MEMORY_INPUT_SCHEMA},
    }

    async def run(tool_use: ToolUse, **invocation_state: Any) -> ToolResult:
        # A coroutine, so the blocking memory call is off the event loop whatever Strands
        # does with synchronous tools (1.62 threads them too).
        text, is_error = await asyncio.to_thread(run_memory_command, target, tool_use.get("input"))
        return {
            "toolUseId": tool_use["toolUseId"],
            "status": "error" if is_error else "success",
            "content": [{"text": text}],
        }

    return _MemoryTool(MEMORY_TOOL_NAME, spec, run)


class _MemoryTool(PythonAgentTool):
    @property
    def supports_hot_reload(self) -> bool:
        """``False``: a second tool named ``memory`` in one agent (two stores, or a store and
        ``tools=[memory_tool(...)]``) fails the agent's construction, instead of silently
        replacing this one as a ``PythonAgentTool`` would."""
        return False


_DEFAULT_MAX_SEARCH_RESULTS = 5
_MAX_SEARCH_RESULTS = 100  # as s3memory's own search: the model may ask for any number
_EXTENSION = re.compile(r"\.[^./]*$")


class S3MemoryStore(MemoryStore):
    """A ``strands.memory.MemoryStore`` over an s3memory memory (see the module docstring).

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory`;
            or leave it out and give the keyword options of :func:`s3memory.open_memory`.
        name: the store's name in the manager's tools (``stores=[...]``).
        description: shown to the model in the ``search_memory`` and ``add_memory`` tools.
        directory: where ``add`` writes, a directory under ``/memories``; by default
            ``notes`` under the memory's root (``/memories/notes``), which on a
            ``MountedMemory`` must not be a mount.
        max_search_results: at most this many entries per search when the caller gives no
            number (``MemoryManager`` gives its own for injection); any number is capped at
            100, as s3memory's own search is.
        max_entry_chars: an entry longer than this is cut, with a line telling the model
            which file to ``view`` for the rest: injection puts every hit into the model's
            input, and a memory file may hold 100 KB.
        writable: whether ``add`` may write; by default, whether ``directory`` is writable
            (``False`` in a store mounted read-only). ``True`` for a read-only directory
            raises ``ConfigurationError``.
        extraction: Strands' automatic extraction (``True`` or an ``ExtractionConfig``): a
            model call distils facts from the conversation every few turns, each stored
            through ``add``. Off by default.
        tool: give the agent the ``memory`` tool (:meth:`get_tools`). An agent has one tool
            of that name, so with a second store over other memory pass ``False`` there (or
            give one store a :class:`~s3memory.MountedMemory`: one tree, one tool).

    Raises:
        ConfigurationError: ``directory`` is not a valid directory of the memory (or,
            left to its default, is a mount), ``writable=True`` where the memory is
            read-only, or a limit is below 1.
    """

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        name: str = "s3memory",
        description: str | None = STORE_DESCRIPTION,
        directory: str | None = None,
        max_search_results: int | None = _DEFAULT_MAX_SEARCH_RESULTS,
        max_entry_chars: int = 4_000,
        writable: bool | None = None,
        extraction: ExtractionConfig | bool | None = None,
        tool: bool = True,
        **options: Unpack[MemoryOptions],
    ) -> None:
        self.memory: Memory = memory_from(memory, options)
        for setting, value in (("max_search_results", max_search_results), ("max_entry_chars", max_entry_chars)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"S3MemoryStore: {setting} must be a whole number of at least 1")
        self.name = name
        self.description = description
        self.max_search_results = max_search_results
        self.max_entry_chars = max_entry_chars
        self.directory = self._directory(directory)
        allowed = self._writable_at(self.directory)
        if writable and not allowed:
            raise ConfigurationError(f"S3MemoryStore {name}: {self.directory} is read-only; leave writable unset")
        self.writable: bool = allowed if writable is None else writable
        self.extraction = extraction
        self.tool = tool
        # Each file's words, kept while its text is unchanged: a warm search tokenizes only
        # what changed (the corpus itself comes from the sealed index, one round trip).
        self._words: dict[str, tuple[str, frozenset[str]]] = {}
        self._adding = threading.Lock()

    def _directory(self, directory: str | None) -> str:
        defaulted = directory is None
        if directory is None:
            # A mounted store opened on its own (a MountedMemory's own store is at /memories).
            root = self.memory.files.shown_root if isinstance(self.memory, EncryptedMemory) else ROOT
            directory = f"{root}/notes"
        try:
            parsed = parse_path(directory, max_path_bytes=self.memory.limits.max_path_bytes)
        except S3MemoryError as error:
            raise ConfigurationError(f"S3MemoryStore: directory: {error}") from None
        if parsed.is_root:
            raise ConfigurationError("S3MemoryStore: directory must be below /memories, not /memories itself")
        if defaulted and isinstance(self.memory, MountedMemory) and self.memory.route(directory)[0] is not None:
            # The user's personal facts would go to a store others mount: only if asked for.
            raise ConfigurationError(
                f"S3MemoryStore: {parsed.display} is a mounted store, shared with its other users; "
                "pass directory=... for where added entries go"
            )
        return parsed.display

    def _writable_at(self, directory: str) -> bool:
        if isinstance(self.memory, MountedMemory):
            return not self.memory.route(directory)[1].read_only
        if not isinstance(self.memory, EncryptedMemory):  # another Memory: its own rules decide
            return True
        root = parse_path(self.memory.files.shown_root)
        if not parse_path(directory).is_within(root):
            raise ConfigurationError(f"S3MemoryStore: directory {directory} is not in the memory at {root.display}")
        return not self.memory.read_only

    # -- MemoryStore ----------------------------------------------------------------------------
    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        """The files sharing the most words with ``query``, best first (ties by path), at
        most ``options["max_search_results"]`` (else the store's number); each entry's
        metadata holds its ``path`` and ``score`` (the number of shared words)."""
        limit = (options or {}).get("max_search_results")
        if limit is None:
            limit = self.max_search_results if self.max_search_results is not None else _DEFAULT_MAX_SEARCH_RESULTS
        if limit < 1:
            raise ValueError("max_search_results must be >= 1")
        words = tokenize(query) - STOP_WORDS
        if not words:
            return []
        # Fetching and ranking in a worker thread: tokenizing a large memory takes long
        # enough to stall every other task on the agent's event loop.
        return await asyncio.to_thread(self._ranked, frozenset(words), min(limit, _MAX_SEARCH_RESULTS))

    def _ranked(self, words: frozenset[str], limit: int) -> list[MemoryEntry]:
        known, current = self._words, {}
        scored = []
        for path, text in self.memory.search_corpus():
            cached = known.get(path)
            if cached is None or cached[0] != text:
                # The path counts without its extension and the /memories everyone shares.
                named = _EXTENSION.sub("", path.removeprefix(ROOT))
                cached = (text, frozenset(tokenize(named) | tokenize(text)))
            current[path] = cached
            score = len(words & cached[1])
            if score:
                scored.append((score, path, text))
        self._words = current  # only files that still exist (one assignment: safe across threads)
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
        """Write ``content`` as a new file in ``directory``; answers its path. Text that a
        file in ``directory`` already holds is not written again (that file's path is the
        answer): Strands retries a failed extraction batch whole, its stored facts included,
        and runs one ``add_memory`` call's entries at once. ``metadata`` is not stored (a
        memory file is the text the model reads).

        Raises:
            ValueError: the store is not writable.
            S3MemoryError: s3memory refused the text (a secret, the size or quota limits,
                ``instruction_policy="quarantine"``) or the store failed; its message is
                safe to show the model, and it is what ``add_memory`` answers.
        """
        if not self.writable:
            raise ValueError(f"S3MemoryStore {self.name} is not writable")
        text = content if content.endswith("\n") else content + "\n"
        return await asyncio.to_thread(self._create, text)

    def _create(self, text: str) -> str:
        with self._adding:  # the check for a repeat and the write, one add at a time
            try:
                return self._create_once(text)
            except S3MemoryError:
                raise
            except Exception as error:
                raise S3MemoryError(unexpected_error_text(error)) from error

    def _create_once(self, text: str) -> str:
        for path, existing in self.memory.search_corpus(self.directory):
            if existing == text:
                return path
        for _ in range(3):
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            path = f"{self.directory}/{stamp}-{secrets.token_hex(4)}.md"
            try:
                self.memory.create(path, text)
            except PathExistsError:
                continue  # the same second and the same 32 random bits: draw again
            return path
        raise PathExistsError(f"Error: could not find a free file name in {self.directory}")

    def get_tools(self) -> list[AgentTool]:
        """The ``memory`` tool over the same memory, registered beside the manager's tools
        (none with ``tool=False``)."""
        return [memory_tool(self.memory)] if self.tool else []
