"""Stateful property test: a random interleaving of commands and injected faults never loses
a file's last acknowledged content.

A hypothesis ``RuleBasedStateMachine`` drives one ``EncryptedMemory`` (``open_memory`` over
an in-memory store, tenant-key mode, default worker pool) through ``create``,
``str_replace``, ``insert``, ``delete`` and ``rename`` of files and directories, ``view``,
re-issuing a rename that failed, and arming a fault. The store is wrapped in
:class:`FaultyStore`: once armed, the n-th upcoming store call (any method) raises
``StorageUnavailableError("Error: injected fault")``, either *before* performing the call
(the request never arrived) or *after* it (the request took effect, the response was lost).

The model. After every command the whole state is observed with faults paused: every key
in the store that maps to a memory path is read back through ``view`` (the only public
read) and ``view /memories`` must answer, with the listing the observed files imply. The
observation is then checked against the model and becomes the model's new exact state,
so uncertainty never accumulates. What the model allows for one command, starting from an
exact state ``F`` (path -> text) and the pending rename intents ``I``:

* the command succeeded (whether or not a fault fired): exactly its meaning. ``create``
  adds the file, an edit replaces the text, ``delete`` removes the file or everything under
  the directory, ``rename`` moves every file under the old path to the new path with its
  text. Its answer must be the contract's string.
* it failed with an ordinary contract error and no fault fired: the error predicted from
  ``F`` (type and message), and nothing changed (one exception, below).
* it failed and a fault fired during it (the injected error, or the contract error the
  model predicts, which can win when several requests run concurrently): the affected
  paths hold the old or the new state. A failed create: absent or the new text; a failed
  edit: the old or the new text; a failed delete: each file present or absent; a failed
  rename: each moved file at its old path, its new path, or both, with its text, and at
  least one of them. Every path the command does not touch is unchanged.

A file's texts carry unique markers (``<7a>``, ``<9r>``...), so a text identifies one write;
"some content that was never written to this path" cannot go unnoticed.

Rename intents are hidden state: an interrupted rename leaves an intent record under
``alice/.s3memory/intents/``, and with it the same rename again resumes: the destination
may already exist, each source is copied unless its target already holds the same write,
and a target holding anything else is never overwritten (``PathExistsError``; the other
files may have been copied, as after a fault). The model keeps the set of possible
intent sets (after a faulted rename its record may or may not exist) and narrows it with
the number of intent records in the store. On top of the model, a rename that failed only
because of faults (it would have succeeded), re-issued with no other command in between and
no fault, must leave the renamed state; its answer must be the success, or, if the first
attempt had in fact finished (only the response to its last request, the removal of the
intent record, was lost), that the source does not exist, as for any rename issued twice.

A rename of one file writes no record: its copy at the destination is of the very version
at the source (the same text here, the same ETag in S3), so the model allows the
destination to hold that copy, which is kept, with or without a record.

The model follows the rename's resumption: a record exists only for a rename that passed
its checks, and lists the versions of the files it moves; resuming, the destination may
hold only copies of those (or of the sources as they are now), which are kept or replaced,
never anything else. ``file and directory of one name`` is counted and must stay at
zero; the regressions at the end of this module pin
the cases that once broke this (a stale record from a refused rename, a destination that
became a file meanwhile).

``FaultyStore.list`` is a generator, like ``S3Store.list``: the request is made, and the
fault fires, at the first ``next()``; the listing is read in full then.

The worker pool is the default one, so which of the concurrent requests of a round trip
is "the n-th call" depends on thread scheduling; every position is legal for the model.

Counters (examples, steps, faults injected, files read back) are printed and asserted by
the last test of this module (``pytest -s`` shows them).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from helpers import examples
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from s3memory import (
    EditError,
    InMemoryStore,
    InvalidCommandError,
    KeyCache,
    NotADirectoryConflict,
    PathExistsError,
    PathNotFoundError,
    PreconditionFailedError,
    S3MemoryError,
    StorageUnavailableError,
    binding_context,
    format_size,
    open_memory,
    parse_path,
)
from s3memory._core.rename import provenance_at
from s3memory.stores import DelegatingStore, ObjectStore

pytestmark = pytest.mark.slow  # heavy hypothesis: state machines with faults

T = TypeVar("T")

MASTER_KEY = bytes(range(32))
FAULT_MESSAGE = "Error: injected fault"
ROOT = "/memories"

# Paths relative to /memories ("" is the root). Names are used both as files and as
# directories ("f" and "f/x.md", "d/e" and "d/e/z.md") so that commands collide often.
CREATE_PATHS = ["a.md", "d/x.md", "b.md", "d/y.md", "d/e/z.md", "f", "f/x.md", "g/x.md", "d/e"]
DELETE_PATHS = [*CREATE_PATHS, "d", "g"]
RENAME_PATHS = ["a.md", "d", "b.md", "f", "g", "d/e", "d/x.md", "f/x.md", "g/e"]
RENAME_TARGETS = ["h", "b.md", "d", "g", "f", "d/w.md", "g/e", "h/k.md", "d/e"]
SEED_PATHS = ["a.md", "d/x.md", "d/y.md", "d/e/z.md", "f/x.md", "g/x.md", "b.md"]
VIEW_PATHS = ["", "a.md", "d", "d/e", "d/x.md", "d/e/z.md", "f", "g"]

SETTINGS = settings(max_examples=examples(500), stateful_step_count=50, deadline=None)

STATS: Counter[str] = Counter()

Files = dict[str, str]
Pair = tuple[str, str]
Intents = frozenset[Pair]


def display(relative: str) -> str:
    return f"{ROOT}/{relative}" if relative else ROOT


# --- the faulty store -----------------------------------------------------------------


class FaultyStore(DelegatingStore):
    """Delegates to ``inner``; when armed, the n-th upcoming call fails (of any method, or
    only of the method ``only`` names, for the deterministic regression tests).

    Mode ``"before"``: the call is not performed. Mode ``"after"``: the call is performed
    (whatever it did stays done, even a refused precondition) and then the response is
    replaced by the fault. Calls made while :meth:`paused` are neither counted nor failed.
    """

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._countdown = 0  # 0: disarmed
        self._mode = "before"
        self._only: str | None = None
        self._paused = False
        self.fired = 0
        self.fired_by_mode: Counter[str] = Counter()

    def arm(self, n: int, mode: str, only: str | None = None) -> None:
        with self._lock:
            self._countdown, self._mode, self._only = n, mode, only

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def _due(self, method: str) -> str | None:
        with self._lock:
            if self._paused or self._countdown == 0 or self._only not in (None, method):
                return None
            self._countdown -= 1
            if self._countdown:
                return None
            self.fired += 1
            self.fired_by_mode[self._mode] += 1
            return self._mode

    def _call(self, method: str, perform: Callable[[], T]) -> T:
        mode = self._due(method)
        if mode == "before":
            raise StorageUnavailableError(FAULT_MESSAGE)
        try:
            result = perform()
        except S3MemoryError:
            if mode == "after":
                raise StorageUnavailableError(FAULT_MESSAGE) from None
            raise
        if mode == "after":
            raise StorageUnavailableError(FAULT_MESSAGE)
        return result


# --- the model ------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """A predicted answer: ``error`` is None for a success."""

    error: type[S3MemoryError] | None
    message: str
    prefix_only: bool = False

    def matches(self, result: str | None, exc: S3MemoryError | None) -> bool:
        if self.error is None:
            text = result
        else:
            if type(exc) is not self.error:
                return False
            text = str(exc)
        if text is None:
            return False
        return text.startswith(self.message) if self.prefix_only else text == self.message


@dataclass(frozen=True)
class Effect:
    """What one command does in one world.

    ``after`` is the exact resulting state, or None when the command stops part-way by
    design (a resumed rename that meets someone else's file), so that each of ``moves``
    may or may not have been copied. ``moves`` (rename) and ``removed`` (delete) describe
    what a fault may leave half done.
    """

    expect: Expect
    after: Files | None
    intents: Intents
    moves: tuple[Pair, ...] | None = None
    # texts at a rename's destination that are its own earlier copies: replaceable
    ours: frozenset[str] = frozenset()
    removed: tuple[str, ...] = ()


def under(files: Mapping[str, str], path: str) -> list[str]:
    return sorted(p for p in files if p.startswith(path + "/"))


def exists(files: Mapping[str, str], path: str) -> bool:
    return path in files or bool(under(files, path))


def ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def ok(message: str, after: Files, intents: Intents, **extra: Any) -> Effect:
    return Effect(Expect(None, message), after, intents, **extra)


def refused(error: type[S3MemoryError], message: str, files: Files, intents: Intents, **extra: Any) -> Effect:
    return Effect(Expect(error, message, extra.pop("prefix_only", False)), dict(files), intents, **extra)


def show_file(path: str, text: str) -> str:
    lines = text.split("\n")
    numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=1))
    return f"Here's the content of {display(path)} with line numbers:\n{numbered}"


def show_directory(files: Mapping[str, str], directory: str) -> str:
    """The listing the contract asks for, computed from the model's files."""
    prefix = directory + "/" if directory else ""
    total = 0
    tree: dict[tuple[str, bool], tuple[int, dict[tuple[str, bool], int]]] = {}
    for path, text in files.items():
        if not path.startswith(prefix):
            continue
        size = len(text.encode("utf-8"))
        total += size
        names = path[len(prefix) :].split("/")
        first = (names[0], len(names) > 1)
        node_size, children = tree.get(first, (0, {}))
        if len(names) > 1:
            second = (names[1], len(names) > 2)
            children[second] = children.get(second, 0) + size
        tree[first] = (node_size + size, children)
    shown = display(directory)
    lines = [f"{format_size(total)}\t{shown}"]
    for (name, is_dir), (size, children) in sorted(tree.items()):
        lines.append(f"{format_size(size)}\t{shown}/{name}{'/' if is_dir else ''}")
        for (child, child_is_dir), child_size in sorted(children.items()):
            lines.append(f"{format_size(child_size)}\t{shown}/{name}/{child}{'/' if child_is_dir else ''}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {shown}, excluding hidden items and node_modules:"
    )
    return header + "\n" + "\n".join(lines)


def model_view(files: Files, intents: Intents, path: str) -> Effect:
    if path in files:
        return ok(show_file(path, files[path]), dict(files), intents)
    if path == "" or under(files, path):
        return ok(show_directory(files, path), dict(files), intents)
    return refused(
        PathNotFoundError, f"The path {display(path)} does not exist. Please provide a valid path.", files, intents
    )


def model_create(files: Files, intents: Intents, path: str, text: str) -> Effect:
    shown = display(path)
    if under(files, path):
        return refused(PathExistsError, f"Error: File {shown} already exists", files, intents)
    for ancestor in ancestors(path):
        if ancestor in files:
            message = f"Error: Cannot create {shown}: {display(ancestor)} is a file, not a directory"
            return refused(NotADirectoryConflict, message, files, intents)
    if path in files:
        return refused(PathExistsError, f"Error: File {shown} already exists", files, intents)
    return ok(f"File created successfully at: {shown}", {**files, path: text}, intents)


def model_str_replace(files: Files, intents: Intents, path: str, old: str, new: str) -> Effect:
    shown = display(path)
    if path not in files:
        message = f"Error: The path {shown} does not exist. Please provide a valid path."
        return refused(PathNotFoundError, message, files, intents)
    count = files[path].count(old)
    if count != 1:
        return refused(EditError, "No replacement was performed", files, intents, prefix_only=True)
    after = {**files, path: files[path].replace(old, new)}
    return Effect(
        Expect(None, "The memory file has been edited. Here is the snippet showing the change", True), after, intents
    )


def model_insert(files: Files, intents: Intents, path: str, line: int, text: str) -> Effect:
    shown = display(path)
    if path not in files:
        return refused(PathNotFoundError, f"Error: The path {shown} does not exist", files, intents)
    lines = files[path].split("\n")
    if lines[-1] == "":
        lines.pop()
    if not 0 <= line <= len(lines):
        message = (
            f"Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines "
            f"of the file: [0, {len(lines)}]"
        )
        return refused(EditError, message, files, intents)
    lines.insert(line, text.rstrip("\n"))
    content = "\n".join(lines)
    if not content.endswith("\n"):
        content += "\n"
    return ok(f"The file {shown} has been edited.", {**files, path: content}, intents)


def model_delete(files: Files, intents: Intents, path: str) -> Effect:
    removed = ([path] if path in files else []) + under(files, path)
    if not removed:
        return refused(PathNotFoundError, f"Error: The path {display(path)} does not exist", files, intents)
    after = {p: t for p, t in files.items() if p not in removed}
    return ok(f"Successfully deleted {display(path)}", after, intents, removed=tuple(removed))


def model_rename(
    files: Files,
    intents: Intents,
    old: str,
    new: str,
    recorded: Mapping[Pair, frozenset[str]] | None = None,
    copies: frozenset[Pair] = frozenset(),
) -> Effect:
    """The rename's meaning, with the resumption the intent record gives it.

    A record is written only once the checks pass, and holds the versions of the files
    being moved (their ETags; here, their texts): resuming, the destination may hold only
    copies of those, which are kept or replaced by the current source; anything else there
    is someone's file and refuses the rename.
    """
    shown_old, shown_new = display(old), display(new)
    pair = (old, new)
    if new == old:
        return refused(PathExistsError, f"Error: The destination {shown_new} already exists", files, intents)
    if new.startswith(old + "/"):
        return refused(InvalidCommandError, f"Error: Cannot move {shown_old} into itself ({shown_new})", files, intents)
    resuming = pair in intents
    ours: frozenset[str] = frozenset()
    if resuming:  # copies of the recorded versions, or of the sources as they are now
        ours = (recorded or {}).get(pair, frozenset())
        ours |= {files[p] for p in ([old] if old in files else []) + under(files, old)}
    elif (old, new) in copies and not under(files, old):  # one file writes no record: its copy is its own
        ours = frozenset({files[old]})
    at_destination = ([new] if new in files else []) + under(files, new)
    only_ours = all(files[t] in ours for t in at_destination)
    if (old in files and under(files, new)) or (old not in files and new in files):
        only_ours = False  # our copies, but not in the shape this rename makes
    if not exists(files, old):
        if resuming and at_destination and only_ours:  # an interrupted rename that had finished its moves
            return ok(f"Successfully renamed {shown_old} to {shown_new}", dict(files), intents - {pair})
        message = f"Error: The path {shown_old} does not exist"
        return refused(PathNotFoundError, message, files, intents - {pair} if resuming else intents)
    if not only_ours:
        return refused(PathExistsError, f"Error: The destination {shown_new} already exists", files, intents)
    for ancestor in ancestors(new):
        if ancestor in files:
            message = f"Error: Cannot rename to {shown_new}: {display(ancestor)} is a file, not a directory"
            return refused(NotADirectoryConflict, message, files, intents)
    sources = ([old] if old in files else []) + under(files, old)
    moves = tuple((s, new + s[len(old) :]) for s in sources)
    targets = {t for _, t in moves}
    leftovers = [p for p in at_destination if p not in targets]
    if resuming and any(p.startswith(t + "/") or t.startswith(p + "/") for p in leftovers for t in targets):
        # an abandoned attempt's copy in the way of this one's (the source changed shape since)
        return refused(PathExistsError, f"Error: The destination {shown_new} already exists", files, intents)
    after = {p: t for p, t in files.items() if p not in sources}
    after.update({t: files[s] for s, t in moves})
    return ok(f"Successfully renamed {shown_old} to {shown_new}", after, intents - {pair}, moves=moves, ours=ours)


def rename_part_way(before: Files, moves: Sequence[Pair], observed: Files, ours: frozenset[str] = frozenset()) -> bool:
    """Each moved file at its old path, its new path, or both; everything else unchanged.
    A target that already held another write is never touched, nor is its source, unless
    that write is the rename's own earlier copy (in ``ours``)."""
    paths = set(before) | set(observed) | {t for _, t in moves}
    allowed: dict[str, set[str | None]] = {p: {before.get(p)} for p in paths}
    live = []
    for source, target in moves:
        if target in before and before[target] != before[source] and before[target] not in ours:
            continue
        allowed[source].add(None)
        allowed[target].add(before[source])
        live.append((source, target))
    if any(observed.get(p) not in values for p, values in allowed.items()):
        return False
    return all(before[s] in (observed.get(s), observed.get(t)) for s, t in live)


def allowed_after_fault(command: str, effect: Effect, before: Files, observed: Files) -> bool:
    """Old or new state of every path the command touches; the rest unchanged."""
    if observed == before:
        return True
    if effect.moves is not None:
        return rename_part_way(before, effect.moves, observed, effect.ours)
    if effect.expect.error is not None or command == "view":
        return False
    if command == "delete":
        paths = set(before) | set(observed)
        return all(observed.get(p) in ((before[p], None) if p in effect.removed else (before.get(p),)) for p in paths)
    return observed == effect.after


# --- the machine ----------------------------------------------------------------------

TOKEN = re.compile(r"<[^>]+>")


class FaultMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = FaultyStore(InMemoryStore())
        self.memory = open_memory(user_id="alice", store=self.store, master_key=MASTER_KEY, key_cache=KeyCache())
        self.files: Files = {}
        self.intent_options: set[Intents] = {frozenset()}
        self.recorded: dict[Pair, frozenset[str]] = {}  # what each possible record lists
        self.copies: frozenset[Pair] = frozenset()  # (a, b): b is a rename's copy of a as it is now
        self.serial = 0
        self.retry: Pair | None = None  # a rename that failed only because of faults
        self.retry_clean = False  # ... and nothing else ran since
        self.retry_target: Files | None = None  # the state it leads to
        self.last_rename: Pair | None = None
        STATS["examples"] += 1

    def teardown(self) -> None:
        self.memory.close()
        for mode, count in self.store.fired_by_mode.items():
            STATS[f"faults_injected_{mode}"] += count

    def fresh(self, suffix: str) -> str:
        self.serial += 1
        return f"<{self.serial}{suffix}>"

    # -- running one command and checking the state it leaves --------------------------
    def run(self, command: str, *args: Any) -> tuple[str | None, S3MemoryError | None, bool]:
        STATS["steps"] += 1
        fired_before = self.store.fired
        result: str | None = None
        error: S3MemoryError | None = None
        try:  # anything that is not an S3MemoryError propagates and fails the test
            paths = 2 if command == "rename" else 1
            result = getattr(self.memory, command)(*(display(a) if i < paths else a for i, a in enumerate(args)))
        except S3MemoryError as exc:
            error = exc
        fired = self.store.fired > fired_before
        injected = isinstance(error, StorageUnavailableError) and str(error) == FAULT_MESSAGE
        STATS["faults_injected"] += self.store.fired - fired_before
        outcome = "ok" if error is None else ("fault" if injected else type(error).__name__)
        STATS[f"{command} {outcome}"] += 1
        event(f"{command}: {outcome}")
        if injected and not fired:
            raise AssertionError("an injected fault was reported although none fired")
        self.check(command, args, result, error, fired, injected)
        return result, error, fired

    def model(self, command: str, args: tuple[Any, ...], intents: Intents) -> Effect:
        function: Callable[..., Effect] = globals()[f"model_{command}"]
        if command == "rename":
            return model_rename(self.files, intents, *args, recorded=self.recorded, copies=self.copies)
        return function(self.files, intents, *args)

    def intent_key(self, pair: Pair) -> str:
        """Where the rename ``pair`` keeps its intent record (named by a hash of both paths)."""
        name = binding_context(self.memory.layout.tenant, f"{display(pair[0])}\n{display(pair[1])}")
        return f"{self.memory.layout.internal_prefix}intents/rename-{name['s3memory:path'][:40]}"

    def observe(self) -> tuple[Files, set[str], frozenset[Pair]]:
        """Every file, read back through ``view``; the keys of the rename intent records; and
        which file is a rename's copy of which other file as it is now (by the provenance
        sealed in each: the one thing that tells the copy of a rename one way from the copy
        of a rename the other way, which have the same text)."""
        layout = self.memory.layout
        files: Files = {}
        intents: set[str] = set()
        provenance: dict[str, Any] = {}
        with self.store.paused():
            for info in self.store.inner.list(layout.tenant_prefix):
                if info.key.startswith(layout.internal_prefix + "intents/rename-"):
                    intents.add(info.key)
                    continue
                if layout.key_document_purpose(info.key) is not None:
                    continue  # the tenant key, the history key
                if info.key.startswith(layout.history_prefix):
                    continue  # history records (a delete's, a rename's): history is tested in test_history
                path = layout.path_for_key(info.key)
                assert path is not None, f"a stray object {info.key!r}"
                shown = self.memory.view(path.display)
                header, _, body = shown.partition("\n")
                assert header == f"Here's the content of {path.display} with line numbers:", shown
                files[path.relative] = "\n".join(line.split("\t", 1)[1] for line in body.split("\n"))
                head = self.store.inner.head(info.key)
                assert head is not None
                provenance[path.relative] = provenance_at(self.memory.files, path, head)
                STATS["files_checked"] += 1
            listing = self.memory.view(ROOT)  # never raises
        assert listing == show_directory(files, ""), listing
        copies = frozenset(
            (source, copy)
            for copy, made in provenance.items()
            for source, of in provenance.items()
            if made is not None
            and of is not None
            and made.op == "renamed"
            and (made.prev, made.file) == (of.rev, of.file)
        )
        return files, intents, copies

    def check(
        self,
        command: str,
        args: tuple[Any, ...],
        result: str | None,
        error: S3MemoryError | None,
        fired: bool,
        injected: bool,
    ) -> None:
        observed, intent_records, copies = self.observe()
        options: set[Intents] = set()
        for intents in self.intent_options:
            effect = self.model(command, args, intents)
            if error is None or not fired:
                if not effect.expect.matches(result, error):
                    continue
                if effect.after is not None and observed != effect.after:
                    continue
                if effect.after is None and not rename_part_way(self.files, effect.moves or (), observed, effect.ours):
                    continue
                options.add(effect.intents)
            elif injected or effect.expect.matches(result, error):
                if allowed_after_fault(command, effect, self.files, observed):
                    if command == "rename":
                        pair = (args[0], args[1])
                        one_file = args[0] in self.files and not under(self.files, args[0])
                        options |= {intents, intents - {pair}} if one_file else {intents | {pair}, intents - {pair}}
                    else:
                        options.add(intents)
        # Which records exist is observable (each is named by its pair): narrow on them exactly.
        narrowed = {o for o in options if {self.intent_key(p) for p in o} == intent_records}
        assert narrowed, (
            f"{command}{args!r} answered {result!r} / {error!r} (fault fired: {fired}); "
            f"before: {self.files!r}, intents {self.intent_options!r}; "
            f"after: {observed!r}, {intent_records} intent records; model allows intents {options!r}"
        )
        if command == "rename" and error is None:
            old, new = args
            if exists(self.files, new):
                STATS["rename resumed over its own copies"] += 1
            if not exists(self.files, old):
                STATS["rename succeeded without a source"] += 1
        if any(p in observed for q in observed for p in ancestors(q)):
            STATS["file and directory of one name"] += 1
        if command == "rename":
            # A record is written once, by the attempt that finds none, listing the sources as
            # they were then; it is gone when the rename finishes or is refused for good.
            pair = (args[0], args[1])
            existed = {pair in o for o in self.intent_options}
            if self.intent_key(pair) not in intent_records:
                self.recorded.pop(pair, None)
            elif existed != {True}:  # this attempt may have written it (surely, if it did not exist)
                old = args[0]
                sources = ([old] if old in self.files else []) + under(self.files, old)
                written = frozenset(self.files[p] for p in sources)
                earlier = self.recorded.get(pair, frozenset()) if True in existed else frozenset()
                self.recorded[pair] = earlier | written
        self.files, self.intent_options, self.copies = observed, narrowed, copies

    # -- rules ---------------------------------------------------------------------------
    @initialize(paths=st.sets(st.sampled_from(SEED_PATHS)))
    def seed(self, paths: set[str]) -> None:
        for path in sorted(paths):
            serial = self.fresh("")[1:-1]
            self.run("create", path, f"<{serial}a> one\n<{serial}b> two\n")

    def dirty(self) -> None:
        self.retry_clean = False

    @rule(mode=st.sampled_from(["before", "after"]), n=st.integers(1, 10))
    def arm_fault(self, mode: str, n: int) -> None:
        self.store.arm(n, mode)

    @rule(path=st.sampled_from(CREATE_PATHS))
    def create(self, path: str) -> None:
        self.dirty()
        serial = self.fresh("")[1:-1]
        self.run("create", path, f"<{serial}a> one\n<{serial}b> two\n")

    @rule(path=st.sampled_from(CREATE_PATHS), pick=st.integers(0, 7))
    def str_replace(self, path: str, pick: int) -> None:
        self.dirty()
        candidates = [*TOKEN.findall(self.files.get(path, "")), "\n", "<absent>"]
        self.run("str_replace", path, candidates[pick % len(candidates)], self.fresh("r"))

    @rule(path=st.sampled_from(CREATE_PATHS), line=st.integers(0, 4))
    def insert(self, path: str, line: int) -> None:
        self.dirty()
        self.run("insert", path, line, self.fresh("i") + " inserted\n")

    @rule(path=st.sampled_from(DELETE_PATHS))
    def delete(self, path: str) -> None:
        self.dirty()
        self.run("delete", path)

    @rule(old=st.sampled_from(RENAME_PATHS), new=st.sampled_from(RENAME_PATHS))
    def rename(self, old: str, new: str) -> None:
        self.dirty()
        self.rename_and_track(old, new)

    @rule(
        pick=st.integers(0, 15),
        new=st.sampled_from(RENAME_TARGETS),
        mode=st.sampled_from(["before", "after"]),
        n=st.integers(1, 12),
        again=st.sampled_from([None, "before", "after", "no fault"]),
        again_n=st.integers(1, 12),
    )
    def rename_with_a_fault(self, pick: int, new: str, mode: str, n: int, again: str | None, again_n: int) -> None:
        """Arm a fault, rename an existing file or directory; then maybe re-issue the rename
        at once (possibly with another fault)."""
        self.dirty()
        existing = sorted({a for path in self.files for a in [*ancestors(path), path]})
        old = existing[pick % len(existing)] if existing else "a.md"
        self.store.arm(n, mode)
        self.rename_and_track(old, new)
        if again is not None and self.retry == (old, new):
            if again == "no fault":
                self.store.arm(0, "before")  # disarmed
            else:
                self.store.arm(again_n, again)
            self.reissue_failed_rename()

    @rule()
    def reissue_failed_rename(self) -> None:
        """The last rename that failed because of a fault, again (else the last rename)."""
        if self.retry is None:
            if self.last_rename is not None:
                self.dirty()
                self.rename_and_track(*self.last_rename)
            return
        old, new = self.retry
        clean, target, before = self.retry_clean, self.retry_target, self.files
        STATS["reissues"] += 1
        _, error, fired = self.rename_and_track(old, new)
        if clean and not fired:
            # Resumable: the same rename again, after nothing but faults, finishes it. If the
            # interrupted attempt had already finished (only its last response was lost), the
            # answer is that the source does not exist, as for any rename issued twice.
            assert self.files == target, f"re-issuing rename {old} -> {new} did not finish it: {error!r}"
            if error is None:
                STATS["reissues_finished"] += 1
            else:
                assert before == target and isinstance(error, PathNotFoundError), error
                STATS["reissues_found_it_done"] += 1

    def rename_and_track(self, old: str, new: str) -> tuple[str | None, S3MemoryError | None, bool]:
        self.last_rename = (old, new)
        effects = [model_rename(self.files, intents, old, new, copies=self.copies) for intents in self.intent_options]
        would_succeed = all(effect.expect.error is None and effect.moves for effect in effects)
        result, error, fired = self.run("rename", old, new)
        if error is not None and fired:
            if (old, new) != self.retry:
                self.retry, self.retry_clean = ((old, new), True) if would_succeed else (None, False)
                self.retry_target = effects[0].after
        else:
            self.retry, self.retry_clean = None, False
        return result, error, fired

    @rule(path=st.sampled_from(VIEW_PATHS))
    def view(self, path: str) -> None:
        self.run("view", path)


def test_random_commands_and_faults_never_lose_acknowledged_content() -> None:
    run_state_machine_as_test(FaultMachine, settings=SETTINGS)


# --- what the machine found: deterministic regressions ----------------------------------
#
# A rename writes its intent record in its first round trip, alongside the checks of the
# source and the destination, and removes it when the checks refuse the rename. If a fault
# hits that round trip or the removal, the record stays although the rename never got past
# its checks; re-issued, the rename then "resumes" and skips the checks a resumed rename
# skips (destination exists, source missing). Separately, a resumed rename never checks
# that the destination has not become a file. Nothing is lost in any of these, but a
# refused rename later succeeds, and a file and a directory of one name come to coexist
# (which EncryptedMemory promises never happens).


def fresh_memory() -> tuple[FaultyStore, Any]:
    store = FaultyStore(InMemoryStore())
    return store, open_memory(user_id="alice", store=store, master_key=MASTER_KEY, key_cache=KeyCache())


def stored_files(store: FaultyStore, memory: Any) -> Files:
    """Every file in the store, read back through ``view``."""
    files: Files = {}
    for info in store.inner.list(memory.layout.memory_prefix):
        path = memory.layout.path_for_key(info.key)
        assert path is not None
        body = memory.view(path.display).split("\n", 1)[1]
        files[path.relative] = "\n".join(line.split("\t", 1)[1] for line in body.split("\n"))
    return files


REFUSED_RENAMES = {
    # name: (files, old, new, the contract's refusal)
    "onto-a-directory": ({"a.md": "A", "f/x.md": "X"}, "a.md", "f", PathExistsError),
    "merge-directories": ({"d/x.md": "X", "g/y.md": "Y"}, "d", "g", PathExistsError),
    "missing-source": ({"b.md": "B"}, "a.md", "b.md", PathNotFoundError),
}


@pytest.mark.parametrize("case", list(REFUSED_RENAMES))
def test_a_refused_rename_stays_refused_after_a_fault(case: str) -> None:
    files, old, new, refusal = REFUSED_RENAMES[case]
    store, memory = fresh_memory()
    for path, text in files.items():
        memory.create(display(path), text)
    with pytest.raises(refusal):
        memory.rename(display(old), display(new))
    # A refused rename writes no intent record, so there is none to leave behind, even
    # when the store would fail to delete one.
    store.arm(1, "before", only="delete")
    with pytest.raises(refusal):
        memory.rename(display(old), display(new))
    assert [info.key for info in store.list("alice/.s3memory/intents/")] == []
    try:
        with pytest.raises(refusal):
            memory.rename(display(old), display(new))
        assert stored_files(store, memory) == files
    finally:
        memory.close()


def test_a_resumed_rename_never_puts_a_directory_under_a_file() -> None:
    store, memory = fresh_memory()
    memory.create("/memories/d/x.md", "X")
    store.arm(1, "before", only="copy")
    with pytest.raises(StorageUnavailableError):
        memory.rename("/memories/d", "/memories/g")  # nothing was copied; the intent record stays
    memory.create("/memories/g", "G")  # allowed: /memories/g does not exist
    try:
        with pytest.raises(S3MemoryError):
            memory.rename("/memories/d", "/memories/g")
        assert stored_files(store, memory) == {"d/x.md": "X", "g": "G"}
    finally:
        memory.close()


def test_a_rename_of_one_file_interrupted_after_its_copy_finishes_when_reissued() -> None:
    """One file writes no intent record (3 round trips, not 4): re-issued after the copy,
    the rename recognises its copy (the very version of the source) and finishes."""
    store, memory = fresh_memory()
    memory.create("/memories/a.md", "A")
    store.arm(1, "before", only="delete")
    try:
        with pytest.raises(StorageUnavailableError):
            memory.rename("/memories/a.md", "/memories/b.md")
        assert stored_files(store, memory) == {"a.md": "A", "b.md": "A"}
        assert [info.key for info in store.inner.list("alice/.s3memory/intents/")] == []
        answer = memory.rename("/memories/a.md", "/memories/b.md")
        assert answer == "Successfully renamed /memories/a.md to /memories/b.md"
        assert stored_files(store, memory) == {"b.md": "A"}
    finally:
        memory.close()


def test_a_rename_of_one_file_never_replaces_another_version_at_the_destination() -> None:
    """Without a record, only a copy of the source's current version counts as the rename's
    own: a copy of an older version (the source was edited since) is someone's file."""
    store, memory = fresh_memory()
    memory.create("/memories/a.md", "A")
    store.arm(1, "before", only="delete")
    try:
        with pytest.raises(StorageUnavailableError):
            memory.rename("/memories/a.md", "/memories/b.md")
        memory.str_replace("/memories/a.md", "A", "A2")
        with pytest.raises(PathExistsError):
            memory.rename("/memories/a.md", "/memories/b.md")
        assert stored_files(store, memory) == {"a.md": "A2", "b.md": "A"}
    finally:
        memory.close()


class BeforeCall(DelegatingStore):
    """Runs ``action`` once, just before the ``countdown``-th call of ``method`` (on ``key``,
    if given): another agent acting in the window between two round trips of a rename."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.hook: tuple[str, str | None, list[int], Callable[[], Any]] | None = None

    def _maybe(self, method: str, key: str | None) -> None:
        if self.hook is None or self.hook[0] != method or self.hook[1] not in (None, key):
            return
        self.hook[2][0] -= 1
        if self.hook[2][0] == 0:
            action, self.hook = self.hook[3], None
            action()

    def delete(self, keys: Sequence[str], *, if_match: Mapping[str, str] | None = None) -> None:
        self._maybe("delete", None)
        super().delete(keys, if_match=if_match)

    def head(self, key: str) -> Any:
        self._maybe("head", key)
        return super().head(key)


def two_agents() -> tuple[BeforeCall, Any, Any]:
    """Two memories of one user over one store; the first one's calls can be hooked."""
    inner = InMemoryStore()
    hooked = BeforeCall(inner)
    first = open_memory(user_id="alice", store=hooked, master_key=MASTER_KEY, key_cache=KeyCache())
    second = open_memory(user_id="alice", store=inner, master_key=MASTER_KEY, key_cache=KeyCache())
    return hooked, first, second


@pytest.mark.parametrize(
    ("seed", "first_rename", "undo"),
    [
        ("/memories/a.md", ("/memories/a.md", "/memories/b.md"), ("/memories/b.md", "/memories/a.md")),
        ("/memories/d/x.md", ("/memories/d", "/memories/e"), ("/memories/e/x.md", "/memories/d/x.md")),
    ],
    ids=["file", "directory"],
)
def test_a_rename_and_its_reverse_at_once_never_lose_the_file(seed: str, first_rename: Pair, undo: Pair) -> None:
    """Found in review: agent 2 renames agent 1's fresh copy back while agent 1 is between
    its copy and its delete. The copies have the same ETag; only the provenance says which
    is the copy of which, so agent 2 must find its destination is not its own copy."""
    hooked, first, second = two_agents()
    first.create(seed, "precious\n")
    answers: list[str] = []

    def agent_two_undoes() -> None:
        try:
            answers.append(second.rename(*undo))
        except PathExistsError as error:
            answers.append(str(error))

    hooked.hook = ("delete", None, [1], agent_two_undoes)
    try:
        first.rename(*first_rename)
        assert answers == [f"Error: The destination {undo[1]} already exists"]
        assert "precious" in second.view(undo[0])
    finally:
        first.close()
        second.close()


def test_an_object_copied_whole_to_the_destination_is_not_taken_for_the_renames_copy() -> None:
    """A bucket writer copies a.md (body and metadata: the same ETag) to b.md's key. It is
    not a copy the rename made (its provenance does not open for b.md), so the rename is
    refused and a.md stays."""
    store, memory = fresh_memory()
    memory.create("/memories/a.md", "A")
    source, target = (memory.layout.key_for(parse_path(p)) for p in ("/memories/a.md", "/memories/b.md"))
    stored = store.inner.get(source)
    assert stored is not None
    store.inner.put(target, stored.body, stored.metadata)
    try:
        with pytest.raises(PathExistsError):
            memory.rename("/memories/a.md", "/memories/b.md")
        assert memory.read_text("/memories/a.md") == "A"
    finally:
        memory.close()


def test_a_reissued_rename_never_overwrites_an_edit_made_to_its_copy_meanwhile() -> None:
    """Found in review: the copy of an interrupted rename is edited by another agent between
    the re-issued rename's survey and its copy; the edit must survive (the rename is refused
    as changed, and can be looked at)."""
    hooked, first, second = two_agents()
    first.create("/memories/a.md", "A\n")
    hooked.hook = ("delete", None, [1], lambda: (_ for _ in ()).throw(StorageUnavailableError("Error: injected")))
    try:
        with pytest.raises(StorageUnavailableError):
            first.rename("/memories/a.md", "/memories/b.md")
        target = first.layout.key_for(parse_path("/memories/b.md"))
        hooked.hook = ("head", target, [2], lambda: second.str_replace("/memories/b.md", "A", "edited"))
        with pytest.raises(PreconditionFailedError):
            first.rename("/memories/a.md", "/memories/b.md")
        assert "edited" in second.view("/memories/b.md") and "A" in second.view("/memories/a.md")
    finally:
        first.close()
        second.close()


def test_zz_the_machine_ran_and_injected_faults() -> None:
    """Runs last: the counters of the machine above (``pytest -s`` prints them)."""
    if STATS["examples"] == 0:
        pytest.skip("the state machine did not run in this session")
    print("\nstateful machine:", dict(sorted(STATS.items())))
    assert STATS["faults_injected"] > 0
    assert STATS["rename fault"] > 0 and STATS["delete fault"] > 0 and STATS["create fault"] > 0
    assert STATS["reissues_finished"] > 0
    assert STATS["files_checked"] > 0
    assert STATS["file and directory of one name"] == 0
    # "rename succeeded without a source" is legitimate: an interrupted rename whose copies
    # and deletes were all done, finished by removing its record.
