"""Search over texts (``s3memory._search.query``): the query, matching, ranking, snippets, the answer."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from helpers import examples
from hypothesis import given, settings

from s3memory import InvalidCommandError
from s3memory._search.query import (
    MAX_TERMS,
    SNIPPET_CHARS,
    Query,
    SearchResult,
    parse_query,
    render_results,
    search_texts,
    snippet,
)


# -- the query -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("tea", ("tea",)),
        ("  Green   TEA ", ("green", "tea")),
        ('"green tea" sugar', ("green tea", "sugar")),
        ('"green\t \n tea"', ("green tea",)),
        ('sugar "green tea', ("sugar", "green tea")),  # an unclosed quote runs to the end
        ('tea TEA "tea"', ("tea",)),
        ('a""b', ("a", "b")),
        ("Straße", ("strasse",)),
        ("ΣΊΣΥΦΟΣ", ("σίσυφοσ",)),
    ],
)
def test_a_query_is_terms_and_quoted_phrases_casefolded(query: str, terms: tuple[str, ...]) -> None:
    assert parse_query(query) == Query(query, terms)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "The query is empty"),
        ("   \n\t", "The query is empty"),
        ('""', "The query is empty"),
        ('"  " "', "The query is empty"),
        ("x" * 1001, "1,001 characters long, over the limit of 1,000"),
        (None, "Invalid `query` parameter: None. It should be a string."),
        (5, "Invalid `query` parameter: 5"),
        (["tea"], "Invalid `query` parameter: ['tea']"),
        (b"tea", "It should be a string"),
    ],
)
def test_a_bad_query_is_refused(query: object, message: str) -> None:
    with pytest.raises(InvalidCommandError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        parse_query(query)
    assert str(info.value).startswith("Error: ")


def test_a_query_of_exactly_1000_characters_is_accepted() -> None:
    assert parse_query("x" * 1000).terms == ("x" * 1000,)


def test_a_query_has_at_most_32_distinct_terms_each_counted_once() -> None:
    # 330 one-character terms cost about 38 one-word searches on every file: refused, naming the cap.
    letters = [chr(code) for code in range(0x4E00, 0x4E00 + 330)]
    with pytest.raises(InvalidCommandError, match="has 330 distinct terms, over the limit of 32") as info:
        parse_query(" ".join(letters))
    assert str(info.value).startswith("Error: ")
    assert MAX_TERMS == 32
    assert len(parse_query(" ".join(letters[:32])).terms) == 32
    with pytest.raises(InvalidCommandError, match="33 distinct terms"):
        parse_query(" ".join(letters[:33]))
    # Repeats and case variants are one term: 242 words, 2 terms.
    assert parse_query("Tea tea TEA " * 80 + '"tea" green').terms == ("tea", "green")


# -- matching and ranking --------------------------------------------------------------------
DOCUMENTS = [
    ("/memories/c.md", "green\ntea\n"),  # both terms, never on one line
    ("/memories/b.md", "Green tea, always green tea.\n"),
    ("/memories/a.md", "I like green tea.\n"),
    ("/memories/d.md", "coffee only\n"),
    ("/memories/e.md", "green light\n"),
]


def paths(results: list[SearchResult]) -> list[str]:
    return [r.path for r in results]


def test_a_file_matches_when_it_has_every_term_ranked_by_its_best_line_then_hits_then_path() -> None:
    results = search_texts(DOCUMENTS, parse_query("green TEA"))
    assert paths(results) == ["/memories/b.md", "/memories/a.md", "/memories/c.md"]
    assert results[0] == SearchResult("/memories/b.md", ((1, "Green tea, always green tea."),))
    assert results[2] == SearchResult("/memories/c.md", ((1, "green"), (2, "tea")))
    assert paths(search_texts(DOCUMENTS, parse_query("green"))) == [
        "/memories/b.md",
        "/memories/a.md",
        "/memories/c.md",
        "/memories/e.md",
    ]
    assert search_texts(DOCUMENTS, parse_query("tea coffee")) == []


def test_a_phrase_matches_only_as_written() -> None:
    assert paths(search_texts(DOCUMENTS, parse_query('"green tea"'))) == ["/memories/b.md", "/memories/a.md"]
    assert paths(search_texts(DOCUMENTS, parse_query('"tea green"'))) == []


def test_matching_is_caseless_beyond_ascii() -> None:
    documents = [("/memories/a.md", "Die STRASSE ist lang\n"), ("/memories/b.md", "ﬁle ΣΟΦΊΑ\n")]
    assert paths(search_texts(documents, parse_query("straße"))) == ["/memories/a.md"]
    assert search_texts(documents, parse_query("FILE σοφία")) == [SearchResult("/memories/b.md", ((1, "ﬁle ΣΟΦΊΑ"),))]


def test_up_to_three_lines_a_file_the_best_ones_in_line_order() -> None:
    text = "tea\nnothing\ngreen tea\ntea\ngreen\ngreen tea tea\ntea\n"
    (result,) = search_texts([("/memories/a.md", text)], parse_query("green tea"))
    # Lines 3 and 6 have both terms; of the lines with one (1, 4, 5, 7), the first.
    assert result.lines == ((1, "tea"), (3, "green tea"), (6, "green tea tea"))


def test_lines_are_numbered_as_view_numbers_them() -> None:
    text = "first\r\nsecond tea\r\n\r\nfourth tea"
    (result,) = search_texts([("/memories/a.md", text)], parse_query("tea"))
    assert result.lines == ((2, "second tea"), (4, "fourth tea"))  # a CR before the newline is not shown


@pytest.mark.parametrize("limit", [0, 101, -1, True, False, 2.0, "5", None])
def test_a_bad_limit_is_refused(limit: object) -> None:
    with pytest.raises(
        InvalidCommandError, match=r"Invalid `limit` parameter: .* It should be an integer from 1 to 100"
    ):
        search_texts(DOCUMENTS, parse_query("green"), limit=limit)  # type: ignore[arg-type]


def test_limit_counts_files() -> None:
    documents = [(f"/memories/{n:03}.md", "tea\n") for n in range(150)]
    assert len(search_texts(documents, parse_query("tea"))) == 20
    assert paths(search_texts(documents, parse_query("tea"), limit=1)) == ["/memories/000.md"]
    assert len(search_texts(documents, parse_query("tea"), limit=100)) == 100


# -- snippets --------------------------------------------------------------------------------
def test_a_long_line_is_cut_around_its_first_hit() -> None:
    line = "x" * 300 + " the green tea is here " + "y" * 300
    (result,) = search_texts([("/memories/a.md", line)], parse_query("TEA"))
    ((number, shown),) = result.lines
    assert number == 1 and len(shown) <= SNIPPET_CHARS
    assert shown.startswith("…") and shown.endswith("…") and "green tea is here" in shown
    start = search_texts([("/memories/a.md", "tea " + "z" * 400)], parse_query("tea"))[0].lines[0][1]
    assert start.startswith("tea ") and start.endswith("…") and len(start) <= SNIPPET_CHARS
    end = search_texts([("/memories/a.md", "z" * 400 + " tea")], parse_query("tea"))[0].lines[0][1]
    assert end.startswith("…") and end.endswith(" tea") and len(end) <= SNIPPET_CHARS


def test_a_cut_lands_on_a_space_when_one_is_near() -> None:
    words = " ".join(f"word{n:03}" for n in range(100))
    shown = snippet(words, words.index("word050"), 7)
    assert shown.startswith("…word") and shown.endswith("…")
    assert shown[1:-1].split(" ")[0].startswith("word") and len(shown[1:-1].split(" ")[0]) == 7
    assert shown[1:-1].split(" ")[-1].startswith("word") and len(shown[1:-1].split(" ")[-1]) == 7


def test_a_cut_never_separates_a_character_from_its_marks() -> None:
    decorated = "e\u0301" * 200 + "tea" + "a\u0308" * 200
    shown = snippet(decorated, 400, 3)
    assert len(shown) <= SNIPPET_CHARS and "tea" in shown
    assert shown[1] == "e" and shown[-2] == "\u0308"  # whole letters with their accents
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 60 + " tea " + "\U0001f44d\U0001f3fd" * 80
    shown = snippet(family, family.index("tea"), 3)
    assert len(shown) <= SNIPPET_CHARS and "tea" in shown
    assert shown[1] != "\u200d" and shown[1] == "\U0001f468"
    assert shown[-2] == "\U0001f3fd"


def test_snippets_escape_nothing() -> None:
    text = "tea <b>&amp; \x1b[31mred\x1b[0m\t`code`"
    (result,) = search_texts([("/memories/a.md", text)], parse_query("tea"))
    assert result.lines == ((1, text),)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(min_size=0, max_size=400),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60),
)
def test_a_snippet_is_short_and_holds_its_hit(line: str, term: str) -> None:
    line = line.replace("\n", " ")
    cut = len(line) // 2
    text = line[:cut] + term + line[cut:]
    folded_term = " ".join(term.split()).casefold()
    if not folded_term or '"' in term or "\n" in term:
        return
    query = parse_query(f'"{term}"')
    results = search_texts([("/memories/a.md", text)], query)
    if not results:  # casefolding across the joins can make the phrase another one
        assert folded_term not in text.casefold()
        return
    for _, shown in results[0].lines:
        assert len(shown) <= SNIPPET_CHARS
        assert folded_term in shown.casefold() or len(folded_term) > 100


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.text(alphabet="ab c\nAB", max_size=40), max_size=8),
    st.lists(st.text(alphabet="abcAB", min_size=1, max_size=3), min_size=1, max_size=3),
    st.integers(1, 100),
)
def test_every_result_has_every_term_ranked_and_within_limit(texts: list[str], terms: list[str], limit: int) -> None:
    documents = [(f"/memories/{n}.md", text) for n, text in enumerate(texts)]
    query = parse_query(" ".join(terms))
    results = search_texts(documents, query, limit=limit)
    expected = [path for path, text in documents if all(t in text.casefold() for t in query.terms)]
    assert len(results) == min(limit, len(expected))
    assert len(set(paths(results))) == len(results)
    by_path = dict(documents)
    for result in results:
        assert all(term in by_path[result.path].casefold() for term in query.terms)
        assert 1 <= len(result.lines) <= 3
        numbers = [n for n, _ in result.lines]
        assert numbers == sorted(numbers)
        lines = by_path[result.path].split("\n")
        for number, shown in result.lines:
            assert shown == lines[number - 1] and any(t in shown.casefold() for t in query.terms)


def _reference_match(text: str, terms: tuple[str, ...]) -> tuple[int, int, list[int]] | None:
    """The matching as it was before one scan per line: every term counted on every line."""
    folded_text = text.casefold()
    if not all(term in folded_text for term in terms):
        return None
    lines = []
    for number, folded in enumerate(folded_text.split("\n"), start=1):
        found = [term for term in terms if term in folded]
        if found:
            lines.append((-len(found), -sum(folded.count(t) for t in found), number))
    best = sorted(lines)[:3]
    return (-best[0][0] if best else 0), -sum(hits for _, hits, _ in lines), sorted(n for _, _, n in best)


@settings(max_examples=examples(400), deadline=None)
@given(
    st.lists(st.text(alphabet="abc \nAß", max_size=60), min_size=1, max_size=6),
    st.lists(st.text(alphabet="abcSs", min_size=1, max_size=4), min_size=1, max_size=5),
)
def test_one_scan_per_line_ranks_and_picks_lines_as_counting_each_term_did(texts: list[str], terms: list[str]) -> None:
    # Overlapping terms ("ab", "b", "bc", "ss" in "ß") included: the answer is the same.
    documents = [(f"/memories/{n}.md", text) for n, text in enumerate(texts)]
    query = parse_query(" ".join(terms))
    expected = []
    for path, text in documents:
        matched = _reference_match(text, query.terms)
        if matched is not None:
            expected.append((-matched[0], -matched[1], path, matched[2]))
    expected.sort(key=lambda item: item[:3])
    results = search_texts(documents, query, limit=100)
    assert [(r.path, [n for n, _ in r.lines]) for r in results] == [(path, lines) for _, _, path, lines in expected]


# -- the answer ------------------------------------------------------------------------------
def test_the_answer_lists_files_and_numbered_lines() -> None:
    query = parse_query('green  "green tea"')
    results = search_texts(DOCUMENTS, query)
    answer = render_results(query.text, results, searched=5, path_prefix="/memories", max_chars=16_000)
    assert answer == (
        'Found 2 files matching "green "green tea"" (searched 5 files):\n'
        "/memories/b.md\n"
        "     1\tGreen tea, always green tea.\n"
        "/memories/a.md\n"
        "     1\tI like green tea."
    )
    one = render_results("tea", results[:1], searched=1, path_prefix="/memories", max_chars=16_000)
    assert one.splitlines()[0] == 'Found 1 file matching "tea" (searched 1 file):'
    assert one.splitlines()[1:] == ["/memories/b.md", "     1\tGreen tea, always green tea."]


def test_no_match_names_where_it_looked() -> None:
    answer = render_results("  pine\napple ", [], searched=12, path_prefix="/memories/team", max_chars=16_000)
    assert answer == 'No matches for "pine apple" under /memories/team.'


def test_a_long_answer_is_cut_at_whole_files_with_a_notice() -> None:
    results = [SearchResult(f"/memories/{n:03}.md", ((1, "t" * 150), (2, "t" * 150))) for n in range(100)]
    answer = render_results("t", results, searched=100, path_prefix="/memories", max_chars=2000)
    assert len(answer) <= 2000
    lines = answer.splitlines()
    assert lines[0] == 'Found 100 files matching "t" (searched 100 files):'
    assert lines[-1].startswith("[Results truncated at 2,000 characters: ")
    assert "more files not shown" in lines[-1]
    shown = [line for line in lines if line.startswith("/memories/")]
    assert len(shown) == (len(lines) - 2) // 3  # every file shown whole
    assert len(render_results("t", results, searched=100, path_prefix="/memories", max_chars=50)) <= 50
