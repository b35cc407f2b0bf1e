"""Full-text search over texts already in memory: the query, the matching, the ranking and
the answer the model reads. Pure: no store, no keys, no I/O (the texts come from ``_index``).

- **Query** (:func:`parse_query`): terms split on whitespace; ``"a quoted phrase"`` is one
  term (its inner whitespace collapsed to single spaces; an unclosed quote runs to the end).
  Matching is case-insensitive (``str.casefold``). At most 1,000 characters and
  :data:`MAX_TERMS` distinct terms.
- **Match:** a file matches when its text contains every term (anywhere); a line is reported
  when it contains any term, at most :data:`LINES_PER_FILE` per file (those with the most
  distinct terms, then the most hits, then the first), shown in line order.
- **Cost:** bounded whatever the query's shape: one check per term over a file's text (until
  one is missing), then one regular-expression scan (an alternation of the terms) that skips
  the lines without a hit and counts each line's hits in one pass, not one per term. Only
  when two terms can overlap (one inside the other, or one's end the other's start) are a hit
  line's terms counted one by one, to count as :meth:`str.count` does.
- **Rank:** by the distinct terms on the file's best line, then total hits, then path.
- **Snippet:** the line, or :data:`SNIPPET_CHARS` characters of it around its first hit with
  ``…`` where it was cut; cut between whole characters (never between a letter and its
  combining marks, nor inside an emoji sequence), at a space when one is near. Nothing is
  escaped: the model reads the text as the file holds it, as ``view`` shows it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from .._errors import InvalidCommandError
from .._render import LINE_NUMBER_WIDTH, short_repr

MAX_QUERY_CHARS = 1_000
#: Distinct terms a query may have: each costs a scan of every file's text.
MAX_TERMS = 32
MAX_LIMIT = 100
DEFAULT_LIMIT = 20
LINES_PER_FILE = 3
SNIPPET_CHARS = 160
CONTEXT_BEFORE = 40  # characters of a long line kept before its first hit
WORD_SLACK = 15  # how far a cut moves to land on a space
ELLIPSIS = "…"
_JOINERS = {"\u200d", "\u034f"}  # zero-width joiner, combining grapheme joiner


@dataclass(frozen=True)
class Query:
    """A parsed query: ``text`` as given, ``terms`` casefolded, each once, in order."""

    text: str
    terms: tuple[str, ...]


@dataclass(frozen=True)
class SearchResult:
    """One matching file: its path as shown to the caller, and (line number from 1, snippet)
    of up to three of its lines that contain a term."""

    path: str
    lines: tuple[tuple[int, str], ...]


def parse_query(query: object) -> Query:
    """The terms of ``query``. InvalidCommandError if it is not a string, is empty (or only
    whitespace and quotes), is over 1,000 characters or has over :data:`MAX_TERMS` distinct
    terms."""
    if not isinstance(query, str):
        raise InvalidCommandError(f"Error: Invalid `query` parameter: {short_repr(query)}. It should be a string.")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidCommandError(
            f"Error: The query is {len(query):,} characters long, over the limit of {MAX_QUERY_CHARS:,}. "
            "Search for a few distinctive words instead."
        )
    terms: dict[str, None] = {}  # each term once, in order
    for quoted, part in enumerate(query.split('"')):
        pieces = [" ".join(part.split())] if quoted % 2 else part.split()
        for piece in pieces:
            term = piece.casefold()
            if term:
                terms[term] = None
    if not terms:
        raise InvalidCommandError(
            'Error: The query is empty. Give one or more words, or a "quoted phrase", to search for.'
        )
    if len(terms) > MAX_TERMS:
        raise InvalidCommandError(
            f"Error: The query has {len(terms):,} distinct terms, over the limit of {MAX_TERMS}. "
            "Search for a few distinctive words instead."
        )
    return Query(query, tuple(terms))


def check_limit(limit: object) -> int:
    """``limit`` if it is a whole number from 1 to 100; else InvalidCommandError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidCommandError(
            f"Error: Invalid `limit` parameter: {short_repr(limit)}. It should be an integer from 1 to {MAX_LIMIT}."
        )
    return limit


def _folded_position(line: str, folded: str, position: int) -> int:
    """The index in ``line`` of the character whose casefolding covers ``folded[position]``
    (casefolding may lengthen a line: ß becomes ss)."""
    if len(folded) == len(line):
        return position
    length = 0
    for index, character in enumerate(line):
        length += len(character.casefold())
        if length > position:
            return index
    return len(line)


def _is_attached(character: str) -> bool:
    """Whether ``character`` belongs to the character before it (a mark, a joiner, a
    variation selector, an emoji modifier): never cut just before it."""
    code = ord(character)
    return (
        unicodedata.combining(character) != 0
        or unicodedata.category(character) in ("Mn", "Me", "Mc")
        or character in _JOINERS
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF
    )


def _clean_start(line: str, start: int, hit: int) -> int:
    """``start`` moved so that the cut falls before a whole character, at a space if one is near."""
    space = line.find(" ", start, min(start + WORD_SLACK, hit))
    if space != -1:
        start = space + 1
    while 0 < start < hit and (_is_attached(line[start]) or line[start - 1] in _JOINERS):
        start += 1
    return start


def _clean_end(line: str, end: int, hit_end: int) -> int:
    space = line.rfind(" ", max(end - WORD_SLACK, hit_end), end)
    if space != -1:
        end = space
    while hit_end < end < len(line) and (_is_attached(line[end]) or line[end - 1] in _JOINERS):
        end -= 1
    return end


def snippet(line: str, hit: int, hit_length: int) -> str:
    """``line`` (without a trailing carriage return), or at most :data:`SNIPPET_CHARS`
    characters of it around ``line[hit:hit + hit_length]``, with ``…`` where it was cut."""
    line = line.removesuffix("\r")
    if len(line) <= SNIPPET_CHARS:
        return line
    hit = min(hit, len(line))
    room = SNIPPET_CHARS - 2  # an ellipsis at each end
    start = max(0, hit - CONTEXT_BEFORE)
    end = min(len(line), start + room)
    start = max(0, end - room)
    if start > 0:
        start = _clean_start(line, start, hit)
    if end < len(line):
        end = _clean_end(line, end, min(hit + hit_length, end))
    return (ELLIPSIS if start > 0 else "") + line[start:end] + (ELLIPSIS if end < len(line) else "")


def _may_overlap(terms: tuple[str, ...]) -> bool:
    """Whether two of ``terms`` can share characters in a text: one inside the other, or an
    end of one the start of the other. Otherwise each hit of an alternation of the terms is
    exactly a hit :meth:`str.count` counts for its term."""
    for a in terms:
        for b in terms:
            if a != b and (a in b or any(b.startswith(a[i:]) for i in range(1, len(a)))):
                return True
    return False


class _Matcher:
    """A query's terms, compiled once for every file it is matched against."""

    def __init__(self, terms: tuple[str, ...]) -> None:
        self.terms = terms
        # Longest first: where terms may overlap, the scan only finds the lines with a hit.
        alternatives = sorted(terms, key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, alternatives)))
        self.overlapping = _may_overlap(terms)

    def line_counts(self, folded: str) -> tuple[int, int]:
        """(distinct terms, hits) on the folded line ``folded``, which has a hit."""
        if self.overlapping:
            found = [term for term in self.terms if term in folded]
            return len(found), sum(folded.count(term) for term in found)
        hits = self.pattern.findall(folded)
        return len(set(hits)), len(hits)


def _match(text: str, matcher: _Matcher) -> tuple[int, int, list[tuple[int, str]]] | None:
    """(distinct terms on the best line, total hits, reported lines) if ``text`` matches."""
    terms = matcher.terms
    folded_text = text.casefold()
    if not all(term in folded_text for term in terms):
        return None
    lines: list[tuple[int, int, int]] = []  # (-distinct terms, -hits, number): best first
    total = 0
    # Casefolding keeps every newline and makes none, so the folded lines are the lines; no
    # term holds a newline, so no hit spans two lines. The scan skips the lines without one.
    originals = text.split("\n")
    number, counted_to, position = 1, 0, 0
    search = matcher.pattern.search
    while (hit := search(folded_text, position)) is not None:
        start = folded_text.rfind("\n", counted_to, hit.start()) + 1 or counted_to
        end = folded_text.find("\n", hit.end())
        if end == -1:
            end = len(folded_text)
        number += folded_text.count("\n", counted_to, start)
        distinct, hits = matcher.line_counts(folded_text[start:end])
        total += hits
        lines.append((-distinct, -hits, number))
        counted_to, position = start, end + 1
    best = sorted(lines)[:LINES_PER_FILE]
    shown = []
    for number in sorted(chosen for _, _, chosen in best):
        line = originals[number - 1]
        folded = line.casefold()
        position, term = min((folded.find(t), t) for t in terms if t in folded)
        start = _folded_position(line, folded, position)
        end = _folded_position(line, folded, position + len(term) - 1) + 1
        shown.append((number, snippet(line, start, end - start)))
    return (-best[0][0] if best else 0), total, shown


def search_texts(
    documents: Iterable[tuple[str, str]], query: Query, *, limit: int = DEFAULT_LIMIT
) -> list[SearchResult]:
    """The files among ``documents`` ((path as shown, text)) that match ``query``, best
    first, at most ``limit`` (1 to 100; InvalidCommandError otherwise)."""
    limit = check_limit(limit)
    ranked: list[tuple[int, int, str, tuple[tuple[int, str], ...]]] = []
    matcher = _Matcher(query.terms)
    for path, text in documents:
        matched = _match(text, matcher)
        if matched is not None:
            distinct, total, lines = matched
            ranked.append((-distinct, -total, path, tuple(lines)))
    ranked.sort(key=lambda item: item[:3])
    return [SearchResult(path, lines) for _, _, path, lines in ranked[:limit]]


def _shown_query(text: str) -> str:
    return " ".join(text.split())


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def render_results(
    query_text: str, results: list[SearchResult], *, searched: int, path_prefix: str, max_chars: int
) -> str:
    """The answer the model reads: a header, then each file's path and its lines numbered as
    ``view`` numbers them; whole files only, cut with a notice at ``max_chars``."""
    shown = _shown_query(query_text)
    if not results:
        return f'No matches for "{shown}" under {path_prefix}.'
    header = f'Found {_plural(len(results), "file")} matching "{shown}" (searched {_plural(searched, "file")}):'
    blocks = [
        "\n".join([result.path, *(f"{n:>{LINE_NUMBER_WIDTH}}\t{text}" for n, text in result.lines)])
        for result in results
    ]
    answer = "\n".join([header, *blocks])
    if len(answer) <= max_chars:
        return answer
    budget = max_chars - 200  # room for the notice
    kept, used = 0, len(header)
    while kept < len(blocks) and used + 1 + len(blocks[kept]) <= budget:
        used += 1 + len(blocks[kept])
        kept += 1
    notice = (
        f"[Results truncated at {max_chars:,} characters: {_plural(len(blocks) - kept, 'more file')} not shown. "
        "Search with more words or a narrower path_prefix, or a lower limit.]"
    )
    return "\n".join([header, *blocks[:kept], notice])[:max_chars]
