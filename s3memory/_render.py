"""The contract's text: what the memory tool answers, as pure functions of their inputs.

No store, no keys, no I/O: a file's view with line numbers (and the notice that tells Claude
to page with ``view_range`` when it is cut), the two-level directory listing with sizes, the
edit snippet, and the bounded echo of model-supplied values in error messages. Strings follow
the memory tool's contract and, where it is silent, the SDK's reference tool
(``BetaLocalFilesystemMemoryTool``); ``tests/core/test_render.py`` compares them with the reference.
"""

from __future__ import annotations

import reprlib
import unicodedata
from collections.abc import Iterable, Sequence

from ._errors import InvalidCommandError, LimitExceededError
from ._paths import MemoryPath

MAX_LINES = 999_999
LINE_NUMBER_WIDTH = 6
MAX_ECHOED_CHARS = 1_000  # of the model's own old_str, quoted back in an error
MAX_LISTED_LINES = 100  # line numbers named in a "multiple occurrences" error
#: The Unicode categories never shown raw where untrusted text (a stored name, a file's text,
#: an actor, a mount's description) meets a person or a model: controls (C0, DEL, C1), format
#: characters (bidi overrides, zero-width, tags), line and paragraph separators, and lone
#: surrogates; what can move a cursor, reorder or hide text, or end a line or a block. Each
#: face escapes them in its own grammar (Python's escapes in the CLI, ``\uXXXX`` in JSON and
#: in the prompt block); which characters is decided here, once.
NEVER_RAW = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def never_raw(char: str) -> bool:
    """Whether ``char`` must be escaped wherever untrusted text is shown (:data:`NEVER_RAW`)."""
    return unicodedata.category(char) in NEVER_RAW


def format_size(size: int) -> str:
    """Human-readable size, base 1024, formatted exactly as the SDK's reference does."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    index = min((size.bit_length() - 1) // 10, len(units) - 1)
    scaled = size / (1024**index)
    return f"{int(scaled)}{units[index]}" if scaled == int(scaled) else f"{scaled:.1f}{units[index]}"


def number_lines(lines: Sequence[str], first: int) -> str:
    """``lines`` as ``view`` shows them: ``{n:>6}\\t{line}``, numbered from ``first``."""
    return "\n".join(f"{n:>{LINE_NUMBER_WIDTH}}\t{line}" for n, line in enumerate(lines, start=first))


class _ShortRepr(reprlib.Repr):
    """Renders a model-supplied value for an error message: bounded in size and depth, and
    never failing (``repr`` of an int of over 4,300 digits raises ValueError)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxstring, self.maxother = 3, 6, 6, 4, 60, 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 64:
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1:,} digits>"
        return repr(x)


short_repr = _ShortRepr().repr


def excerpt(text: str, limit: int = MAX_ECHOED_CHARS) -> str:
    """``text``, or its beginning and how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit:,} more characters]"


def line_numbers_of(content: str, needle: str, limit: int) -> list[int]:
    """The lines of the first ``limit`` occurrences of ``needle``, counted as ``str.count``
    counts them (not overlapping): one forward pass, however long the needle."""
    numbers: list[int] = []
    line, counted_to, start = 1, 0, 0
    while len(numbers) < limit and (position := content.find(needle, start)) != -1:
        line += content.count("\n", counted_to, position)
        counted_to = position
        numbers.append(line)
        start = position + len(needle)
    return numbers


def capped(answer: str, what: str, max_view_chars: int) -> str:
    """An answer within ``max_view_chars``, like every ``view``; ``what`` names what was cut."""
    if len(answer) <= max_view_chars:
        return answer
    notice = f"\n[{what} truncated at {max_view_chars:,} characters: view the file to see the change.]"
    return answer[: max(max_view_chars - len(notice), 0)] + notice


# -- view of a file ------------------------------------------------------------------------
def file_view(shown_path: str, text: str, view_range: object, max_view_chars: int) -> str:
    """``view`` of a file: a header, then the lines (all, or ``view_range``) numbered.

    Raises:
        LimitExceededError: the file has over 999,999 lines.
        InvalidCommandError: ``view_range`` is not ``[start, end]`` with
            ``1 <= start <= lines`` and ``end >= start`` or ``end == -1``.
    """
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        raise LimitExceededError(f"File {shown_path} exceeds maximum line limit of 999,999 lines.")
    first, total = 1, len(lines)
    if view_range is not None:
        if (
            not isinstance(view_range, (list, tuple))
            or len(view_range) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)
        ):
            raise InvalidCommandError(
                f"Error: Invalid `view_range` parameter: {short_repr(view_range)}. "
                "It should be a list of two integers [start, end]."
            )
        start, end = view_range
        if not (1 <= start <= len(lines)) or (end != -1 and end < start):
            raise InvalidCommandError(
                f"Error: Invalid `view_range` parameter: [{short_repr(start)}, {short_repr(end)}]. "
                f"It should be [start, end] with 1 <= start <= {len(lines)}, and end >= start or end == -1."
            )
        lines = lines[start - 1 : None if end == -1 else end]
        first = start
    header = f"Here's the content of {shown_path} with line numbers:\n"
    body = number_lines(lines, first)
    if len(header) + len(body) <= max_view_chars:
        return header + body
    return header + truncated_lines(lines, first, total, max_view_chars)


def truncated_lines(lines: Sequence[str], first: int, total: int, max_view_chars: int) -> str:
    """As many whole numbered lines as fit, then a notice saying how to page on."""
    budget = max_view_chars - 400  # room for the header and the notice
    shown: list[str] = []
    used = 0
    for number, line in enumerate(lines, start=first):
        numbered = f"{number:>{LINE_NUMBER_WIDTH}}\t{line}"
        if used + len(numbered) + 1 > budget:
            if not shown:  # one line longer than the whole budget: show its beginning
                shown.append(numbered[: max(budget, 0)])
                note = f"line {number} alone is longer than {max_view_chars:,} characters and is cut"
                return "\n".join(shown) + f"\n[Output truncated: {note}.]"
            break
        shown.append(numbered)
        used += len(numbered) + 1
    last = first + len(shown) - 1
    step = max(len(shown), 1)
    return "\n".join(shown) + (
        f"\n[Output truncated at {max_view_chars:,} characters: showing lines {first}-{last} "
        f"of {total}. Call view again with view_range=[{last + 1}, {min(total, last + step)}] to read on.]"
    )


# -- view of a directory -------------------------------------------------------------------
def _is_hidden(name: str) -> bool:
    return name.startswith(".") or name == "node_modules"


class _Level:
    """The entries of one level of a listing and their sizes: files and directories apart
    (one name may be both, a file ``a`` beside files below ``a/``), so that adding up a
    file's size is one dict update and ordering them sorts names, not tuples."""

    __slots__ = ("dirs", "files")

    def __init__(self) -> None:
        self.files: dict[str, int] = {}
        self.dirs: dict[str, int] = {}

    def entries(self) -> list[tuple[str, bool, int]]:
        """(name, is a directory, size) of the visible entries, ordered as the sorted
        ``(name, is_dir)`` pairs: by name, a file before a directory of the same name."""
        files, dirs = self.files, self.dirs
        names = sorted(files.keys() | dirs.keys() if files and dirs else files or dirs)
        found = []
        for name in names:
            if _is_hidden(name):
                continue
            if name in files:
                found.append((name, False, files[name]))
            if name in dirs:
                found.append((name, True, dirs[name]))
        return found

    def visible(self) -> int:
        """How many of :meth:`entries` there are, without ordering them."""
        return sum(not _is_hidden(name) for name in self.files) + sum(not _is_hidden(name) for name in self.dirs)


def _tally(files: Iterable[tuple[MemoryPath, int]], depth: int) -> tuple[int, _Level, dict[str, _Level]]:
    """The total size of ``files``, and the sizes of the entries ``depth`` names down and of
    those below each of its directories (by the directory's name)."""
    total = 0
    top_files: dict[str, int] = {}
    below: dict[str, _Level] = {}
    # Files come grouped by directory (a listing is in key order), so a run of files below
    # one second-level entry is added up before it meets a dict.
    run_name, run_child, run_kind, run_size = "", "", 0, 0
    level = _Level()
    for path, size in files:
        total += size
        relative = path.relative
        if not relative:
            continue
        # The two names below the directory, and whether there are more: 1, a file in it;
        # 2, a file in a subdirectory; 3, anything deeper (the split stops there).
        names = relative.split("/", depth + 2)
        kind = len(names) - depth
        if kind <= 0:
            continue
        if kind == 1:
            name = names[depth]
            top_files[name] = top_files.get(name, 0) + size
            continue
        child = names[depth + 1]
        if kind == run_kind and child == run_child and names[depth] == run_name:
            run_size += size
            continue
        if run_kind:
            sizes = level.dirs if run_kind == 3 else level.files
            sizes[run_child] = sizes.get(run_child, 0) + run_size
        if names[depth] != run_name or not run_kind:
            run_name = names[depth]
            found = below.get(run_name)
            level = below[run_name] = _Level() if found is None else found
        run_child, run_kind, run_size = child, kind, size
    if run_kind:
        sizes = level.dirs if run_kind == 3 else level.files
        sizes[run_child] = sizes.get(run_child, 0) + run_size
    top = _Level()
    top.files = top_files
    # A first-level directory holds what its entries hold.
    top.dirs = {name: sum(level.files.values()) + sum(level.dirs.values()) for name, level in below.items()}
    return total, top, below


def directory_view(
    directory: MemoryPath,
    files: Iterable[tuple[MemoryPath, int]],
    max_view_chars: int,
    *,
    shown_as: str | None = None,
    extra_dirs: Iterable[str] = (),
) -> str:
    """``view`` of a directory: two levels deep, hidden entries and ``node_modules`` left out.

    ``files`` are every file below ``directory`` (hidden ones too) with its plaintext size; a
    directory's size is the total of the files under it. A listing over ``max_view_chars`` is
    cut with a notice. ``shown_as`` is how ``directory`` is shown when that is not its own
    ``display`` (in a mounted store); ``extra_dirs`` are names of subdirectories to
    show even when empty (the mount points at the root).
    """
    total, top, below = _tally(files, len(directory.parts))
    for name in extra_dirs:
        top.dirs.setdefault(name, 0)
    shown = directory.display if shown_as is None else shown_as
    header = (
        f"Here're the files and directories up to 2 levels deep in {shown}, excluding hidden items and node_modules:"
    )
    # Lines are kept while they fit, in order, up to the first that does not; the others
    # are only counted, so a listing of many files formats what it shows, not all of them.
    budget = max_view_chars - len(header) - 200
    lines: list[str] = []
    used = 0
    cut = 0  # lines left out

    def add(line: str) -> None:
        nonlocal used, cut
        if cut or used + len(line) + 1 > budget:
            cut += 1
        else:
            used += len(line) + 1
            lines.append(line)

    add(f"{format_size(total)}\t{shown}")
    for name, is_dir, size in top.entries():
        second = below.get(name) if is_dir else None
        if cut:
            cut += 1 + (0 if second is None else second.visible())
            continue
        add(f"{format_size(size)}\t{shown}/{name}{'/' if is_dir else ''}")
        if second is None:
            continue
        if cut:
            cut += second.visible()
            continue
        entries = second.entries()
        for index, (child, child_is_dir, child_size) in enumerate(entries):
            if cut:
                cut += len(entries) - index
                break
            add(f"{format_size(child_size)}\t{shown}/{name}/{child}{'/' if child_is_dir else ''}")
    if cut:
        lines.append(f"[Listing truncated: {cut} more entries. View a subdirectory to see them.]")
    return header + "\n" + "\n".join(lines)


# -- edits ---------------------------------------------------------------------------------
def edit_snippet(written: str, changed_line: int, max_view_chars: int) -> str:
    """``str_replace``'s answer: the lines from two before to two after the changed one
    (0-based ``changed_line``) of the file as written, numbered as ``view`` numbers them."""
    new_lines = written.split("\n")
    first = max(0, changed_line - 2)
    last = min(len(new_lines), changed_line + 3)
    snippet = number_lines(new_lines[first:last], first + 1)
    return capped(
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + snippet,
        "Snippet",
        max_view_chars,
    )


def multiple_occurrences(old_str: str, content: str, count: int, max_view_chars: int) -> str:
    """``str_replace``'s refusal when ``old_str`` occurs ``count`` (> 1) times in ``content``."""
    listed = ", ".join(map(str, line_numbers_of(content, old_str, MAX_LISTED_LINES)))
    if count > MAX_LISTED_LINES:
        listed += f", ... ({count:,} occurrences in all)"
    return capped(
        f"No replacement was performed. Multiple occurrences of old_str `{excerpt(old_str)}` "
        f"in lines: {listed}. Please ensure it is unique",
        "Error",
        max_view_chars,
    )
