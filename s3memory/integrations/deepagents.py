"""A deep agent's ``/memories/`` in an encrypted s3memory store: a deepagents backend.

:class:`S3MemoryBackend` implements deepagents' ``BackendProtocol`` over an encrypted
:class:`~s3memory.EncryptedMemory` or a :class:`~s3memory.MountedMemory`. Route it at
``/memories/`` with a ``CompositeBackend``, so that the agent's ``ls``, ``read_file``,
``write_file``, ``edit_file``, ``delete``, ``grep`` and ``glob`` tools work on S3 under
``/memories/`` and on the default backend (the graph state) everywhere else;
:func:`deep_agent_backend` builds that composite::

    from deepagents import create_deep_agent
    from s3memory.integrations.deepagents import deep_agent_backend

    backend = deep_agent_backend(bucket="my-bucket", user_id="alice", kms_key_id=KEY_ARN)
    agent = create_deep_agent(model="anthropic:claude-sonnet-5-5", backend=backend, memory=["/memories/AGENTS.md"])

``memory=[...]`` loads ``AGENTS.md`` into the system prompt through ``download_files``, so
it too is read from the encrypted store. The composite strips the route: this backend is
called with ``/notes.md`` for ``/memories/notes.md`` (and ``/`` for ``/memories``), works on
``/memories/notes.md`` in the store, and answers with ``/notes.md``, which the composite
prefixes again. So it belongs at ``/memories/`` and nowhere else.

Each method is one s3memory call: ``ls`` and ``glob`` one listing; ``read`` and
``download_files`` one GET a file; ``write`` :meth:`~s3memory.EncryptedMemory.write_text`
(create, or replace the whole text as a compare-and-swap edit with history); ``edit``
``str_replace`` (``old_string`` must be unique) or, with ``replace_all``,
:meth:`~s3memory.EncryptedMemory.replace_all`; ``delete`` the file or the whole directory;
``grep`` (a literal string, as the protocol says) the sealed search index
(:meth:`~s3memory.EncryptedMemory.search_corpus`, one round trip when warm, never a GET per
file), matched in this process; ``glob`` deepagents' own matcher of its glob contract
(``compile_grep_include_glob``). Everything the model writes passes s3memory's path checks,
secret guard, instruction screening and quotas, as through the memory tool.

Errors are returned in the result's ``error``, never raised, in deepagents' own words where
deepagents has them (its ``StoreBackend``'s, word for word, with the path as the backend was
given it: ``/x`` for ``/memories/x``, as for a ``StoreBackend`` routed there): a missing
file (or a directory) to ``read`` is ``File '/x' not found`` (``read_file`` adds
``"Error: "``), to ``edit`` and ``delete`` ``Error: File '/x' not found``; an ``edit`` whose
``old_string`` is absent, repeated (with the ``replace_all=True`` hint), empty, or ends with
a newline the file lacks gets ``perform_string_replacement``'s answer (the text is read again
to word it, on that path only). Where deepagents has no word, the text is s3memory's
(``str(S3MemoryError)``, without its ``"Error: "`` for ``ls``, ``read`` and ``glob``): a
secret refused, a write under a read-only mount, a quota or size limit, a path s3memory does
not accept, a write where a directory is; an unexpected failure is a generic line (logged,
never a traceback). ``download_files`` and ``upload_files`` answer the protocol's codes
where one fits: ``file_not_found``, ``invalid_path``, ``is_directory``,
``permission_denied`` (a store mounted read-only, access denied by S3, or a binary upload);
other refusals (a secret, a quota) keep s3memory's text. ``ls`` of a missing directory lists
nothing, as deepagents' ``StoreBackend`` does; ``ls`` of a file answers ``not_a_directory``,
as its ``FilesystemBackend`` does. The ``a*`` methods are the protocol's: the sync method in
a worker thread (``asyncio.to_thread``), the memory shared across threads as
``AsyncS3MemoryTool`` shares it.

One backend serves many users when it is built without ``user_id`` (``bucket=`` or
``store=`` and a key, or ``memory=`` a :class:`~s3memory.UserMemories`): each call works on
the memory of the run's user, resolved per call as ``StoreBackend`` resolves its namespace,
from the LangGraph run the call belongs to: ``user_id`` in ``context=`` given to ``invoke``
(a mapping key or an attribute), else ``config["configurable"]["user_id"]``, or what
``user_id_from(runtime)`` returns. Never from the model: no tool has a user field. A run
that names no user raises :class:`~s3memory.NoUserError` to the caller of ``invoke`` (not a
tool result), as does a call outside any run. So the agent is built once, at module scope in
a server or a Lambda function, and each request names its user::

    backend = deep_agent_backend(bucket="my-bucket", kms_key_id=KEY_ARN)  # no user_id
    agent = create_deep_agent(model=..., backend=backend, memory=["/memories/AGENTS.md"])

    def handler(event, context):
        return agent.invoke({"messages": event["messages"]}, context={"user_id": event["user_id"]})

With a checkpointer, a thread keeps the ``AGENTS.md`` deepagents loaded on its first run:
add :class:`ThreadUserMiddleware` to the agent's ``middleware`` to hold each thread to the
user of its first run.

What does not map: deepagents has no rename or move tool (files can be moved with the
memory tool, ``s3memory.S3MemoryTool``, or the ``s3memory`` command line); entries carry no
``modified_at`` (s3memory's listing has sizes, not times), so ``glob`` sorts by path, not by
age; files are UTF-8 text only: a binary upload is refused, and so is a name deepagents
reads as binary (an image, PDF, audio or video name: it would send the text as base64
data), on a write and on a read; the backend runs no commands (``execute``
stays the default backend's). deepagents 0.7 needs Python 3.11 or later.

A path that names a file in ``/memories/`` in another spelling is refused, not sent
elsewhere: deepagents' own path check keeps a leading ``//`` (POSIX allows it a meaning of
its own), and deepagents' ``CompositeBackend`` routes by the prefix as written, so it would
send ``//memories/x`` (or ``/x/../memories/x``, or ``memories/x`` from a caller that skips
the check) to the default backend: the model would be told "Updated file" and the text
would live in the conversation's state, not in the memory. The composite
:func:`deep_agent_backend` builds compares each path's normal form (backslashes as slashes,
leading slashes as one, ``.`` and ``..`` resolved) with the route the path takes as written;
where they differ, every method answers ``invalid_path`` (with the path to use) and touches
no backend. Such paths are refused rather than routed because deepagents' permission rules
match the path as written: routing ``//memories/x`` to the memory would let it past a rule
that denies writes to ``/memories/**``.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from deepagents.backends import CompositeBackend, StateBackend
from deepagents.backends.composite import _route_for_path
from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileData,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.utils import (
    EMPTY_OLD_STRING_ERROR,
    InvalidGlobPatternError,
    _get_backend_read_file_type,
    compile_grep_include_glob,
    grep_matches_from_files,
    perform_string_replacement,
    slice_read_response,
)
from langchain.agents.middleware import AgentMiddleware
from langgraph.config import get_config
from langgraph.runtime import Runtime, get_runtime

from .._core.mounts import MountedMemory
from .._errors import (
    EditError,
    InvalidCommandError,
    InvalidPathError,
    NoUserError,
    PathExistsError,
    PathNotFoundError,
    ReadOnlyMountError,
    S3MemoryError,
    StorageAccessDeniedError,
    unexpected_error_text,
)
from .._factory import MemoryOptions, UserMemories
from .._paths import ROOT
from ._common import Memory, memory_of_run, memory_or_users, user_id_in
from ._thread_user import ThreadUserState, claim_thread

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["MEMORIES_ROUTE", "S3MemoryBackend", "ThreadUserMiddleware", "deep_agent_backend", "user_of_run"]

#: Where :class:`S3MemoryBackend` belongs in a ``CompositeBackend``.
MEMORIES_ROUTE = ROOT + "/"

#: ``upload_files``' answer for bytes that are not UTF-8 text (memory files are text only).
_BINARY_REFUSED = PERMISSION_DENIED

T = TypeVar("T")


class _Failure:
    """What a memory call answered instead of a result: the text for the model, and the
    s3memory error (``None`` for an unexpected failure, whose text is generic)."""

    __slots__ = ("error", "text")

    def __init__(self, text: str, error: S3MemoryError | None) -> None:
        self.text = text
        self.error = error

    @property
    def bare(self) -> str:
        """The text without its leading ``"Error: "``, for the tools that add their own."""
        return self.text.removeprefix("Error: ")


def _attempt(call: Callable[[], T]) -> T | _Failure:
    """``call()``, or what went wrong in the words the model is shown: s3memory's text; a
    generic line, logged, for anything else."""
    try:
        return call()
    except NoUserError:
        raise  # the application's error, never the model's
    except S3MemoryError as exc:
        return _Failure(str(exc), exc)
    except Exception as exc:
        return _Failure(unexpected_error_text(exc), None)


def _text_file(text: str) -> FileData:
    # No timestamps: s3memory keeps none that it could show (create_file_data would say "now").
    return {"content": text, "encoding": "utf-8"}


def _binary_name(path: str) -> str | None:
    """Why a memory file cannot have this name here, or None. deepagents' ``read_file`` picks
    the block it sends the model by the name alone: for an image, PDF, audio or video name
    it sends the content as base64 data, and a memory file's text there is invalid data the
    Messages API rejects (with the conversation left holding it). Memory files are text, so
    such names are refused: on a write, and on a read of a file another tool named so.
    The classifier is deepagents' own (private, hence the extra's pin to 0.7)."""
    if _get_backend_read_file_type(path) == "text":
        return None
    suffix = PurePosixPath(path).suffix
    return (
        f"{path}: memory files are text, and a file named *{suffix} would be read as binary; "
        "name it .md or .txt (the memory tool can rename it)"
    )


#: How a run names its user, for the error of a run that does not.
_HOW = (
    "pass context={'user_id': ...} to agent.invoke (or config={'configurable': {'user_id': ...}}), "
    "or give the backend user_id_from=..."
)


def _run_runtime() -> Runtime[Any] | None:
    """The runtime of the graph run this call belongs to, or None outside a run."""
    try:
        return get_runtime()
    except (RuntimeError, KeyError):
        return None


def user_of_run(runtime: Runtime[Any]) -> object:
    """The default ``user_id_from``: ``user_id`` in the run's context (``context=`` given to
    ``invoke``: a mapping key or an attribute), else ``config["configurable"]["user_id"]``."""
    user_id = user_id_in(runtime.context)
    if user_id is None or user_id == "":
        try:
            user_id = user_id_in(get_config().get("configurable"))
        except RuntimeError:
            return None
    return user_id


class S3MemoryBackend(BackendProtocol):
    """An encrypted memory as a deepagents backend, to route at ``/memories/``.

    Args:
        memory: an :class:`~s3memory.EncryptedMemory` or :class:`~s3memory.MountedMemory`,
            one user's; or a :class:`~s3memory.UserMemories`, the memory of each run's user;
            or leave it out and give the keyword options of :func:`s3memory.open_memory`:
            with ``user_id=``, one user's; without it, each run's user's.
        user_id_from: with many users, the run's user from the run's LangGraph ``Runtime``
            (called at each call, as ``StoreBackend`` calls its ``namespace``); by default
            :func:`user_of_run`: ``context={"user_id": ...}`` given to ``invoke``, else
            ``config={"configurable": {"user_id": ...}}``.

    Raises (at a call, to whoever invoked the agent, never as a tool result):
        NoUserError: the backend serves many users and the run names none (or the call is
            not part of a graph run).

    Paths in and out are the backend's, below the route (``/notes.md``); see the module.
    The backend does not close the memory.
    """

    def __init__(
        self,
        memory: Memory | UserMemories | None = None,
        *,
        user_id_from: Callable[[Runtime[Any]], object] | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        self._source = memory_or_users(memory, options)
        if user_id_from is not None and not isinstance(self._source, UserMemories):
            raise TypeError("user_id_from= is for a backend of many users: leave out user_id= (and memory=)")
        self._user_id_from = user_id_from if user_id_from is not None else user_of_run

    @property
    def memory(self) -> Memory:
        """The memory this call works on: the one memory, or the memory of the run's user.

        Raises:
            NoUserError: the backend serves many users and the run names none.
        """
        if not isinstance(self._source, UserMemories):
            return self._source
        return memory_of_run(self._source, self._named_user(), _HOW)

    def _named_user(self) -> object:
        """What ``user_id_from`` reads from the current run (None outside a run)."""
        runtime = _run_runtime()
        return None if runtime is None else self._user_id_from(runtime)

    def user_of_this_run(self) -> str | None:
        """The user the current run names, checked as :attr:`memory` checks it; None for a
        backend of one user's memory.

        Raises:
            NoUserError: the backend serves many users and the run names none.
            ConfigurationError: the user id is not a valid one.
        """
        if not isinstance(self._source, UserMemories):
            return None
        user_id = self._named_user()
        memory_of_run(self._source, user_id, _HOW)  # opens nothing remote: the check alone
        return str(user_id)

    # -- paths ---------------------------------------------------------------------------
    @staticmethod
    def _memory_path(path: str | None) -> str:
        """The memory's path for a backend path: ``/`` is ``/memories``, ``/x`` ``/memories/x``.
        Nothing is normalized here: s3memory judges the result (``..``, ``//``...)."""
        if not path or path == "/":
            return ROOT
        return ROOT + (path if path.startswith("/") else "/" + path)

    @staticmethod
    def _shown(target: str) -> str:
        """``target`` (a memory path) as s3memory shows it: NFC, no trailing slash."""
        return unicodedata.normalize("NFC", target.rstrip("/"))

    @staticmethod
    def _backend_path(shown: str) -> str:
        """A path the memory shows (``/memories/x``) as the backend's (``/x``)."""
        return shown[len(ROOT) :] or "/"

    # -- listing -------------------------------------------------------------------------
    def ls(self, path: str) -> LsResult:
        """The files and directories (``/dir/``, ``is_dir``) directly in ``path``, with sizes."""
        memory, target = self.memory, self._memory_path(path)
        files = _attempt(lambda: memory.list_files(target))
        if isinstance(files, _Failure):
            if isinstance(files.error, PathNotFoundError):
                return LsResult(entries=[])  # as StoreBackend: a missing directory is empty
            return LsResult(error=files.bare)
        base = self._shown(target) + "/"
        entries: list[FileInfo] = []
        directories: set[str] = set()
        for file in files:
            if not file.path.startswith(base):  # ``path`` names this file
                return LsResult(error=f"Path '{path}': not_a_directory")  # FilesystemBackend's words
            rest = file.path[len(base) :]
            if "/" in rest:
                directories.add(self._backend_path(base + rest.split("/", 1)[0]) + "/")
            else:
                entries.append({"path": self._backend_path(file.path), "is_dir": False, "size": file.size})
        if base == ROOT + "/" and isinstance(memory, MountedMemory):
            directories.update(f"/{mount.name}/" for mount in memory.mounts)  # shown also when empty
        entries.extend({"path": directory, "is_dir": True} for directory in directories)
        return LsResult(entries=sorted(entries, key=lambda entry: entry["path"]))

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """The files under ``path`` matching ``pattern``, by deepagents' glob contract (see
        ``BackendProtocol.glob``), sorted by path."""
        memory = self.memory
        try:
            matches = compile_grep_include_glob(pattern)
        except InvalidGlobPatternError as exc:
            return GlobResult(error=str(exc))
        files = _attempt(lambda: memory.list_files(self._memory_path(path)))
        if isinstance(files, _Failure):
            if isinstance(files.error, PathNotFoundError):
                return GlobResult(matches=[])
            return GlobResult(error=files.bare)
        root = self._backend_path(self._shown(self._memory_path(path)))
        found: list[FileInfo] = []
        for file in files:
            shown = self._backend_path(file.path)
            # Relative to the search root, as deepagents' matcher expects (a file searched
            # for by its own path: its name).
            if shown == root:
                relative = PurePosixPath(shown).name
            else:
                relative = shown[len(root) :].lstrip("/")
            if matches(relative):
                found.append({"path": shown, "is_dir": False, "size": file.size})
        return GlobResult(matches=found)

    # -- reading -------------------------------------------------------------------------
    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Lines ``offset`` (0-based) to ``offset + limit`` of the file, raw (the middleware
        numbers them); one GET. A name deepagents reads as binary is refused (see
        :func:`_binary_name`)."""
        memory, target = self.memory, self._memory_path(file_path)
        refused = _binary_name(target)
        if refused is not None:
            return ReadResult(error=refused)
        text = _attempt(lambda: memory.read_text(target))
        if isinstance(text, _Failure):
            if self._no_file(memory, text, target):
                return ReadResult(error=f"File '{file_path}' not found")  # the tool adds "Error: "
            return ReadResult(error=text.bare)
        return slice_read_response(_text_file(text), offset, limit)

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Every line holding the literal ``pattern`` in the files under ``path`` (those
        matching ``glob``), from the sealed search index: one round trip when warm."""
        memory = self.memory
        corpus = _attempt(lambda: memory.search_corpus(self._memory_path(path)))
        if isinstance(corpus, _Failure):
            return GrepResult(error=corpus.text)
        files = {self._backend_path(shown): _text_file(text) for shown, text in sorted(corpus)}
        root = self._backend_path(self._shown(self._memory_path(path)))  # the files' form of ``path``
        return grep_matches_from_files(files, pattern, root, glob, max_count=max_count)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Each file's bytes (UTF-8), or the protocol's code for what went wrong."""
        memory = self.memory
        responses: list[FileDownloadResponse] = []
        for path in paths:
            target = self._memory_path(path)
            text = _attempt(lambda: memory.read_text(target))  # noqa: B023 (called at once)
            if isinstance(text, _Failure):
                responses.append(FileDownloadResponse(path=path, error=self._code(memory, text, target)))
            else:
                responses.append(FileDownloadResponse(path=path, content=text.encode("utf-8")))
        return responses

    # -- writing -------------------------------------------------------------------------
    def write(self, file_path: str, content: str) -> WriteResult:
        """Create the file, or replace its whole text (an edit, with history)."""
        memory, target = self.memory, self._memory_path(file_path)
        refused = _binary_name(target)
        if refused is not None:
            return WriteResult(error=f"Error: {refused}")
        written = _attempt(lambda: memory.write_text(target, content))
        if isinstance(written, _Failure):
            return WriteResult(error=written.text)
        return WriteResult(path=file_path)

    def edit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """Replace ``old_string``, which must occur once; or, with ``replace_all``, every
        occurrence. One compare-and-swap edit either way. A refused edit is answered in
        deepagents' words (``perform_string_replacement``'s), with its ``replace_all`` hint."""
        memory, target = self.memory, self._memory_path(file_path)
        if old_string == "":
            return EditResult(error=EMPTY_OLD_STRING_ERROR)

        def replace() -> int:
            if replace_all:
                return memory.replace_all(target, old_string, new_string)
            memory.str_replace(target, old_string, new_string)  # its answer is a snippet: unused
            return 1

        count = _attempt(replace)
        if not isinstance(count, _Failure):
            return EditResult(path=file_path, occurrences=count)
        if self._no_file(memory, count, target):
            return EditResult(error=f"Error: File '{file_path}' not found")
        if isinstance(count.error, EditError):
            # Refused for the text (old_string absent or repeated): deepagents' answer for the
            # text as it is now (a GET, on this path only). A text changed meanwhile so that
            # the edit would now apply keeps s3memory's answer.
            text = _attempt(lambda: memory.read_text(target))
            if isinstance(text, str):
                answer = perform_string_replacement(text, old_string, new_string, replace_all)
                if isinstance(answer, str):
                    return EditResult(error=answer)
        return EditResult(error=count.text)

    def delete(self, file_path: str) -> DeleteResult:
        """Delete the file, or the directory with everything under it."""
        memory = self.memory
        deleted = _attempt(lambda: memory.delete(self._memory_path(file_path)))
        if isinstance(deleted, _Failure):
            if isinstance(deleted.error, PathNotFoundError):
                return DeleteResult(error=f"Error: File '{file_path}' not found")
            return DeleteResult(error=deleted.text)
        return DeleteResult(path=file_path)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each file (as :meth:`write`): UTF-8 text only; bytes that are not are
        refused with ``permission_denied`` and nothing is written."""
        memory = self.memory
        responses: list[FileUploadResponse] = []
        for path, data in files:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                responses.append(FileUploadResponse(path=path, error=_BINARY_REFUSED))
                continue
            if _binary_name(path) is not None:
                responses.append(FileUploadResponse(path=path, error=_BINARY_REFUSED))
                continue
            target = self._memory_path(path)
            written = _attempt(lambda: memory.write_text(target, text))  # noqa: B023 (called at once)
            error = self._code(memory, written, target) if isinstance(written, _Failure) else None
            responses.append(FileUploadResponse(path=path, error=error))
        return responses

    # -- deepagents' words for s3memory's errors -----------------------------------------------
    def _no_file(self, memory: Memory, failure: _Failure, target: str) -> bool:
        """Whether ``failure`` means no file is at ``target``: nothing there, or a directory
        (which deepagents' store and filesystem backends also answer as "not found")."""
        error = failure.error
        if isinstance(error, PathNotFoundError):
            return True
        if target == ROOT and isinstance(error, InvalidPathError):  # "/memories is a directory"
            return True
        return type(error) is InvalidCommandError and self._is_directory(memory, target)

    def _code(self, memory: Memory, failure: _Failure, target: str) -> str:
        """The protocol's code for ``failure`` where one fits, else the text."""
        error = failure.error
        if isinstance(error, PathNotFoundError):
            return FILE_NOT_FOUND
        if isinstance(error, InvalidPathError):
            return INVALID_PATH
        if isinstance(error, (ReadOnlyMountError, StorageAccessDeniedError)):
            return PERMISSION_DENIED
        if isinstance(error, PathExistsError):  # a write where a directory is
            return IS_DIRECTORY
        if type(error) is InvalidCommandError and self._is_directory(memory, target):  # a read of a directory
            return IS_DIRECTORY
        return failure.text

    @staticmethod
    def _is_directory(memory: Memory, target: str) -> bool:
        files = _attempt(lambda: memory.list_files(target))
        return not isinstance(files, _Failure) and any(file.path != target for file in files)


def deep_agent_backend(
    memory: Memory | UserMemories | None = None,
    *,
    default: BackendProtocol | None = None,
    user_id_from: Callable[[Runtime[Any]], object] | None = None,
    **options: Unpack[MemoryOptions],
) -> CompositeBackend:
    """A ``CompositeBackend`` for ``create_deep_agent(backend=...)``: ``/memories/`` in the
    encrypted memory (an :class:`S3MemoryBackend` on ``memory``, or on the options of
    :func:`s3memory.open_memory`: with ``user_id=`` one user's memory, without it the memory
    of each run's user, named by ``context={"user_id": ...}`` on ``invoke`` or by
    ``user_id_from``), every other path in ``default`` (deepagents' ``StateBackend()``, the
    conversation's state, if none is given). A path that is in ``/memories/`` only once
    normalised (``//memories/x``) is refused with ``invalid_path`` rather than sent to
    ``default`` (see the module). Build it once (at module scope in a server): it holds no
    user's state."""
    return _CanonicalRoutes(
        default=default if default is not None else StateBackend(),
        routes={MEMORIES_ROUTE: S3MemoryBackend(memory, user_id_from=user_id_from, **options)},
    )


class ThreadUserMiddleware(AgentMiddleware[ThreadUserState, Any, Any]):
    """For ``create_deep_agent(middleware=[...])`` with a checkpointer, when ``backend``
    serves many users: a thread belongs to the user of its first run. A later run on it
    that names another user raises :class:`~s3memory.ThreadUserError`, and one that names
    none :class:`~s3memory.NoUserError`, before any model call (deepagents loads
    ``AGENTS.md`` once per thread, so without this the second user's model would be shown
    the first user's; see ``s3memory.integrations._thread_user``). Nothing to check for a
    backend of one user.

    Args:
        backend: what ``deep_agent_backend`` returned, or an :class:`S3MemoryBackend`.
    """

    state_schema = ThreadUserState

    def __init__(self, backend: BackendProtocol) -> None:
        super().__init__()
        self._backend = _memory_backend_in(backend)

    def before_agent(self, state: ThreadUserState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return claim_thread(state, self._backend.user_of_this_run())

    async def abefore_agent(self, state: ThreadUserState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)


def _memory_backend_in(backend: BackendProtocol) -> S3MemoryBackend:
    """``backend`` if it is an :class:`S3MemoryBackend`, else the one a composite routes to."""
    if isinstance(backend, S3MemoryBackend):
        return backend
    if isinstance(backend, CompositeBackend):
        for routed in backend.routes.values():
            if isinstance(routed, S3MemoryBackend):
                return routed
    raise TypeError("ThreadUserMiddleware wants the backend deep_agent_backend() made, or an S3MemoryBackend")


def _normal_form(path: str) -> str:
    """``path`` as one file name: backslashes as slashes (as deepagents' ``validate_path``
    reads them), absolute, leading slashes as one, ``.`` and ``..`` resolved."""
    return posixpath.normpath("/" + path.replace("\\", "/").lstrip("/"))


class _CanonicalRoutes(CompositeBackend):
    """deepagents' ``CompositeBackend``, but a path whose normal form is in a route it does not
    take as written (``//memories/x``, ``/a/../memories/x``, ``memories/x``) is refused,
    ``invalid_path``, by every method, instead of going to another backend (see the module)."""

    def _misrouted(self, path: str | None) -> str | None:
        """Why ``path`` is refused (the text without ``"Error: "``), or None."""
        if path is None:
            return None
        normal = _normal_form(path)
        _, _, wanted = _route_for_path(default=self.default, sorted_routes=self.sorted_routes, path=normal)
        if wanted is None:
            return None
        _, _, taken = _route_for_path(default=self.default, sorted_routes=self.sorted_routes, path=path)
        if taken == wanted:
            return None  # in the route: the routed backend judges the rest ("..", "//" below it)
        return f"{INVALID_PATH}: {path!r} is {normal!r} written another way; use {normal!r}"

    # ls, read and glob: deepagents puts "Error: " before the text; the others show it as it is.
    def ls(self, path: str) -> LsResult:
        refused = self._misrouted(path)
        return LsResult(error=refused) if refused else super().ls(path)

    async def als(self, path: str) -> LsResult:
        refused = self._misrouted(path)
        return LsResult(error=refused) if refused else await super().als(path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        refused = self._misrouted(file_path)
        return ReadResult(error=refused) if refused else super().read(file_path, offset, limit)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        refused = self._misrouted(file_path)
        return ReadResult(error=refused) if refused else await super().aread(file_path, offset, limit)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        refused = self._misrouted(path)
        return GlobResult(error=refused) if refused else super().glob(pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        refused = self._misrouted(path)
        return GlobResult(error=refused) if refused else await super().aglob(pattern, path)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        refused = self._misrouted(path)
        if refused:
            return GrepResult(error=f"Error: {refused}")
        return super().grep(pattern, path, glob, max_count=max_count)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        refused = self._misrouted(path)
        if refused:
            return GrepResult(error=f"Error: {refused}")
        return await super().agrep(pattern, path, glob, max_count=max_count)

    def write(self, file_path: str, content: str) -> WriteResult:
        refused = self._misrouted(file_path)
        return WriteResult(error=f"Error: {refused}") if refused else super().write(file_path, content)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        refused = self._misrouted(file_path)
        return WriteResult(error=f"Error: {refused}") if refused else await super().awrite(file_path, content)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        refused = self._misrouted(file_path)
        if refused:
            return EditResult(error=f"Error: {refused}")
        return super().edit(file_path, old_string, new_string, replace_all=replace_all)

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        refused = self._misrouted(file_path)
        if refused:
            return EditResult(error=f"Error: {refused}")
        return await super().aedit(file_path, old_string, new_string, replace_all=replace_all)

    def delete(self, file_path: str) -> DeleteResult:
        refused = self._misrouted(file_path)
        return DeleteResult(error=f"Error: {refused}") if refused else super().delete(file_path)

    async def adelete(self, file_path: str) -> DeleteResult:
        refused = self._misrouted(file_path)
        return DeleteResult(error=f"Error: {refused}") if refused else await super().adelete(file_path)

    # The batch methods: the protocol's code for each refused path, the others passed on.
    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        passed = [file for file in files if not self._misrouted(file[0])]
        answers = iter(super().upload_files(passed) if passed else [])
        return [
            FileUploadResponse(path=path, error=INVALID_PATH) if self._misrouted(path) else next(answers)
            for path, _ in files
        ]

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        passed = [file for file in files if not self._misrouted(file[0])]
        answers = iter(await super().aupload_files(passed) if passed else [])
        return [
            FileUploadResponse(path=path, error=INVALID_PATH) if self._misrouted(path) else next(answers)
            for path, _ in files
        ]

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        passed = [path for path in paths if not self._misrouted(path)]
        answers = iter(super().download_files(passed) if passed else [])
        return [
            FileDownloadResponse(path=path, error=INVALID_PATH) if self._misrouted(path) else next(answers)
            for path in paths
        ]

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        passed = [path for path in paths if not self._misrouted(path)]
        answers = iter(await super().adownload_files(passed) if passed else [])
        return [
            FileDownloadResponse(path=path, error=INVALID_PATH) if self._misrouted(path) else next(answers)
            for path in paths
        ]
