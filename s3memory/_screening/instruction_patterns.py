"""What the instruction screen looks for: the default detectors' patterns and checks.

:mod:`s3memory._screening.instructions` runs detectors over what the model writes into memory and
reports findings; this module says what an instruction to a future session looks like.
``SPECS`` holds the default detectors as :class:`Spec` s (name, kind, pattern, check, the
view of the text the pattern runs on, whether matches inside code count, a decoder, and
the hints that let the screen skip work: see
:class:`~s3memory._screening.instructions.InstructionDetector`);
:class:`~s3memory._screening.instructions.InstructionScreen` imports this module on first use and
compiles each pattern when a text first needs it (the checks' own patterns too), so ``import
s3memory`` loads none of it and a process compiles only what its texts reach.

The rules the patterns keep:

* **Linear time.** No nested quantifier can split one run of characters in several ways:
  the gaps between keywords are bounded (``(?:\\W+\\w+){0,4}?``, whose two classes are
  disjoint), every other run ends where its class ends, and HTML comments are matched by
  an unrolled loop that consumes the comment, so the search resumes after it. A check
  looks at a bounded window around its match (a sentence of at most a few hundred
  characters), never at the whole text.
* **Few false positives on ordinary notes.** "always" and "never" alone are not findings:
  preferences and project rules ("the user prefers that I always answer in French",
  "never push to main") are what memory is for. A directive is a finding when it is
  addressed to the assistant as a party to command ("Assistant: ...", "note to any AI
  reading this", "the assistant must"), reaches into future sessions to do something a
  note should not ask for (send, open, recommend, ask the user for), hides something from
  the user, or overrides the user; a sentence that attributes the wish to the user ("the
  user wants ...") is a preference, not an injected order, for the weaker signals.
* **Never raises.** A check returns false on what it cannot judge.
* **Fast enough.** Patterns start with letters, not with an assertion (:func:`_kw`), so
  that ``re`` can skip ahead; those that start with a word say so (``word_start``), and
  those that need a rare string to match list it (``needles``).
* **Cheap to compile.** A process compiles a pattern on its first text, and ``re`` takes
  time in proportion to a pattern's length (a millisecond for every thousand characters or
  so): a long suffix shared by alternatives is written once, after them
  (``_kw(..., then=...)``), not after each; the alternatives stay in one group, so that
  ``re`` still tries only those that start with the letter it is at.

The views: ``"lower"`` is the text folded (invisible characters dropped, look-alike and
compatibility characters mapped to ASCII, typographic quotes and dashes made plain) and
lowercased, so its patterns are written in lowercase; ``"normalized"`` is the folded
text with its case; ``"original"`` is the text as written (for the characters that fold
away).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from typing import Literal, NamedTuple

__all__ = ["SPECS", "Spec", "decode_base64_text"]

View = Literal["lower", "normalized", "original"]
# A check: given the text the pattern ran on and the match, False to drop the match,
# True to keep its span (or the span of its group "span"), or a (start, end) span.
Check = Callable[[str, re.Match[str]], bool | tuple[int, int]]


class Spec(NamedTuple):
    name: str
    kind: str
    pattern: str
    check: Check | None = None
    view: View = "lower"
    in_code: bool = True
    decode: Callable[[str], str | None] | None = None
    non_ascii: bool = False
    needles: tuple[str, ...] = ()
    word_start: bool = False


class _Lazy:
    """A pattern the checks use, compiled on its first use: importing this module compiles
    none of them, and a process pays only for those its texts lead a check to.

    The first call of a method compiles the pattern and makes the compiled pattern's
    methods the object's own, so later calls cost what a compiled pattern's do.
    """

    search: Callable[..., re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    finditer: Callable[..., Iterator[re.Match[str]]]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags

    def __getattr__(self, name: str) -> Callable[..., object]:
        if name not in _PATTERN_METHODS:  # reached only before the first call of a method
            raise AttributeError(name)
        compiled = re.compile(self.pattern, self.flags)  # two threads may both: the same pattern
        for method in _PATTERN_METHODS:
            setattr(self, method, getattr(compiled, method))
        called: Callable[..., object] = getattr(compiled, name)
        return called


_PATTERN_METHODS = ("search", "match", "fullmatch", "finditer")


# -- shared vocabulary (lowercase, for the "lower" view) ---------------------------------

_LEAD = re.compile(r"[a-z0-9]+")


def _kw(*alternatives: str, then: str = "") -> str:
    """Alternatives that each start with a word, matched only at the start of a word, each
    followed by ``then``.

    The word boundary is a look-behind after each alternative's first word
    (``ignore(?<![a-z0-9_]ignore)``), not a leading ``\\b``: a pattern that starts with
    letters lets ``re`` skip ahead to where one of them occurs, where a leading assertion
    makes it try every position (several times slower on ordinary notes). ``then`` is
    written once, after the group: ``(?:a|b)c`` tries what ``ac|bc`` tries, in the same
    order, and compiles in a fraction of the time when ``c`` is long (an alternative must
    then hold no top-level ``|``, and ``then`` must not start with a word character).
    """
    if then and (then[0].isalnum() or then[0] in "_?*+{" or any(len(_top_level(a)) > 1 for a in alternatives)):
        raise ValueError(f"cannot write {then!r} once after {alternatives!r}")
    pattern = "(?:" + _by_first_letter([_at_word_start(a) for a in alternatives]) + ")" + then
    _LITERALS[pattern] = tuple(_literal_start(a + then) for a in alternatives)
    return pattern


def _by_first_letter(alternatives: list[str]) -> str:
    """``a1|a2|b1`` as ``a(?:1|2)|b1``: the same language, but at each position ``re`` tries
    the one branch whose letter is there rather than every alternative in turn (a scan for
    forty words costs a few branches per letter instead of forty)."""
    groups: dict[str, list[str]] = {}
    for alternative in alternatives:
        key = alternative[0] if alternative[:1].isalnum() else alternative
        groups.setdefault(key, []).append(alternative)
    built = []
    for key, members in groups.items():
        if len(members) == 1:
            built.append(members[0])
        else:
            built.append(key + "(?:" + "|".join(m[1:] for m in members) + ")")
    return "|".join(built)


def _at_word_start(alternative: str) -> str:
    """One alternative of :func:`_kw`: its first word, then the look-behind, then the rest."""
    lead = _LEAD.match(alternative)
    if lead is None or alternative[lead.end() : lead.end() + 1] in ("?", "*", "+", "{"):
        raise ValueError(f"an alternative must start with a whole word: {alternative!r}")
    word = lead.group()
    return f"{word}(?<![a-z0-9_]{word}){alternative[lead.end() :]}"


def _literal_start(alternative: str) -> str:
    """The text every match of ``alternative`` starts with."""
    literal = _LITERAL.match(alternative).group()  # type: ignore[union-attr]  # always matches
    if alternative[len(literal) : len(literal) + 1] in ("?", "*", "{"):  # the last character is optional
        literal = literal[:-1]
    return literal


def _words(body: str, suffix: str = r"\b") -> str:
    """``\\b(?:body)suffix`` for searching a window: the top-level alternatives of ``body``,
    each with ``suffix``, side by side (not in a group: ``re`` skips ahead only to where
    the first character of a flat alternation can match), those that start with a word
    matched at a word start (see :func:`_kw`)."""
    return _by_first_letter([_at_word_start(p + suffix) if _LEAD.match(p) else p + suffix for p in _top_level(body)])


def _top_level(body: str) -> list[str]:
    """The top-level alternatives of ``body``."""
    parts, depth, start, index, in_class = [], 0, 0, 0, False
    while index < len(body):
        char = body[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            parts.append(body[start:index])
            start = index + 1
        index += 1
    parts.append(body[start:])
    return parts


_LITERAL = re.compile(r"[a-z0-9 ',-]*")
_LITERALS: dict[str, tuple[str, ...]] = {}


def _needles(*fragments: str) -> tuple[str, ...]:
    """What a text must contain for a pattern that starts with one of ``fragments`` (each
    made by :func:`_kw`) to match: the literal start of each alternative. Empty (search
    every text) when one of them is too short to rule out anything."""
    needles = tuple(dict.fromkeys(literal for fragment in fragments for literal in _LITERALS[fragment]))
    return needles if all(len(needle) >= 4 for needle in needles) else ()


# Who the assistant is, when it is addressed by name.
_AI_WORDS = (
    "ai(?: (?:model|agent|system)s?)?",
    r"a\.i\.",
    "assistant(?:s)?",
    "claude",
    "chatgpt",
    r"gpt(?:-?\d+)?",
    "gemini",
    "copilot",
    "llm(?:s)?",
    "language models?",
    "large language models?",
    "chatbot(?:s)?",
)
_AI = _kw(*_AI_WORDS)
_GAP = r"(?:\W+\w+){0,4}?\W+"  # up to four words between two keywords
_GAP2 = r"(?:\W+\w+){0,2}?\W+"

_SENTENCE_END = _Lazy(r"[.!?](?=[\s\"')\]]|$)|\n[ \t]*\n|\n(?=[ \t]*(?:[-*+#>]|\d+[.)])[ \t])")


def _sentence(text: str, start: int, end: int, limit: int = 240) -> tuple[int, int]:
    """The bounds of the sentence (or list item) around ``text[start:end]``, at most
    ``limit`` characters either side."""
    low = max(0, start - limit)
    begin = low
    for match in _SENTENCE_END.finditer(text, low, start):
        begin = match.end()
    return begin, _sentence_end(text, end, limit)


def _sentence_end(text: str, end: int, limit: int = 240) -> int:
    """Where the sentence that goes on at ``end`` ends, at most ``limit`` characters on."""
    high = min(len(text), end + limit)
    found = _SENTENCE_END.search(text, end, high)
    return found.end() if found else high


_ATTRIBUTED = _Lazy(
    _words(
        "user|she|he|they",
        r"\b[^.!?\n]{0,24}?\b(?:prefers?|preference|wants?|would like|likes?|asked|asks|requested|requests|said|says"
        r"|told me|decided|chose|insists|expects|needs|agreed)\b",
    )
    + "|"
    + _words("per|at|on|by", r" (?:the )?user'?s? (?:request|preference|instruction|wish)")
    + "|"
    + _words("user'?s", r" (?:request|preference|instruction|wish)\b")
)


def _attributed(text: str, start: int, end: int) -> bool:
    """Whether the sentence around the match says the wish is the user's."""
    begin, finish = _sentence(text, start, end)
    return _ATTRIBUTED.search(text, begin, finish) is not None


_NEGATION = _Lazy(_words("never|not|don't|dont|do not|no|avoid|without|refuse to|stop|nor"))


def _negated(text: str, start: int) -> bool:
    """Whether the clause before ``start`` (at most 40 characters) negates what follows."""
    window = text[max(0, start - 40) : start]
    cut = max(window.rfind(c) for c in ".;:!?\n,")
    return _NEGATION.search(window, cut + 1) is not None


# Actions a note should not ask a future session to take on its own.
_ACTION = _Lazy(
    _words(
        r"send|forward|e-?mail|mail|upload|post|transmit|share|leak|bcc|cc|exfiltrate|append|embed|insert|attach"
        r"|render|ask(?:ing)? (?:the user |them |him |her )?(?:for|to (?:provide|enter|share|confirm|verify|type))"
        r"|collect|recommend|promote|advertise|link to|visit|fetch|browse|navigate|click|call|invoke|execute|download"
        r"|install|transfer|pay|purchase|buy|approve|comply|obey|pretend|act as|stay in character|role-?play|keep that"
        r" role|lie|tell the user|inform the user|remind the user that|include (?:this|the following|a|an|the) (?:link"
        r"|image|url|banner|badge|footer|message)"
    )
)
_ADDRESSEE = _Lazy(
    _words(
        r"you (?:must|will|shall|should|are to|are now|need to|have to)|your (?:new|task|job|role)|the assistant"
        r"|assistant|the ai|claude|chatgpt"
    )
)


def _future_directive(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """A scope that reaches into future sessions ("in every future conversation", "from
    now on"), with an action a note should not order or a "you" it orders, in a sentence
    that does not attribute the wish to the user."""
    begin, finish = _sentence(text, match.start(), match.end())
    action = _ACTION.search(text, begin, finish) or _ADDRESSEE.search(text, begin, finish)
    if action is None or _ATTRIBUTED.search(text, begin, finish):
        return False
    return min(match.start(), action.start()), max(match.end(), action.end())


_EVERYTHING = r" (?:everything|all|every|each|the (?:whole |entire |full )?(?:conversation|chat|transcript))"
_STRONG_ACTION = _Lazy(
    _words(
        r"ask(?:ing)? (?:the user |them |him |her )?(?:for|to (?:provide|enter|share|confirm|verify|type))"
        r"|recommend|promote|advertise|link to|pretend|act as|stay in character|role-?play|lie|comply|obey|bcc"
        r"|exfiltrate|leak|tell the user that|remind the user that|include (?:this|the following|a|an|the) (?:link"
        r"|image|url|banner|badge|footer|message)"
        + "".join(f"|{verb}{_EVERYTHING}" for verb in ("send", "forward", "upload", "post", "share"))
    )
)


def _from_now_on(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """ "From now on", "going forward": common in ordinary notes ("from now on we deploy on
    Tuesdays"), so only with an order to the assistant or an action no note should order."""
    begin, finish = _sentence(text, match.start(), match.end())
    action = _STRONG_ACTION.search(text, begin, finish) or _ADDRESSEE.search(text, begin, finish)
    if action is None or _ATTRIBUTED.search(text, begin, finish):
        return False
    return min(match.start(), action.start()), max(match.end(), action.end())


def _unattributed(text: str, match: re.Match[str]) -> bool:
    return not _attributed(text, match.start(), match.end()) and not _negated(text, match.start())


def _not_negated(text: str, match: re.Match[str]) -> bool:
    return not _negated(text, match.start())


_NOTE_FOLLOWS = _Lazy(r"[ \t]*[:\-\u2013\u2014,]|[^.!?\n:]{0,40}:")
_ANY_READER = _Lazy(r"\b(?:any|all|every|each|future|whichever|whatever|upcoming|subsequent|incoming)\b")


def _note_to_ai(text: str, match: re.Match[str]) -> bool:
    """ "Note to any AI reading this: ...", not "there are instructions for AI agents in AGENTS.md":
    a note that introduces what follows (a colon or a dash after it), or one addressed to
    any assistant that comes along."""
    return _NOTE_FOLLOWS.match(text, match.end()) is not None or _ANY_READER.search(match.group()) is not None


_VOCATIVE_NEXT = frozenset(
    "you your please always never do don't dont ignore disregard forget remember from when whenever if make send"
    " include tell stop start before after add append use call open visit keep treat consider respond reply answer"
    " act pretend follow obey read save store write update delete forward email recommend silently secretly"
    " immediately now going this is important new".split()
)


def _vocative(text: str, match: re.Match[str]) -> bool:
    """``Assistant: <an order>``, not ``Assistant: Sure, ...`` in a transcript."""
    return match.group("next") in _VOCATIVE_NEXT


# Running a tool or a script on the user's word is also how people set up shortcuts ("when
# the user says deploy, run the deploy script"): only on a word anyone says anyway.
_RUN_TOOL = _Lazy(
    _words(
        "call|invoke|use|trigger|run|execute",
        r"\b[^.!?\n]{0,60}?\b(?:tool|function|command|script|api|plugin|webhook|terminal|shell|browser)\b",
    )
)
_ANY_WORD = _Lazy(
    _words(
        r"yes|yeah|yep|sure|ok|okay|thanks|thank you|great|cool|nice|perfect|hi|hello|hey|no|anything|something"
        r"|agree(?:s)?|confirm(?:s)?|approve(?:s)?|accept(?:s)?|greet(?:s)?|thank(?:s)?"
    )
)
_TOOL_ACTION = _Lazy(
    "|".join(
        (
            _words("save|store|write|add|record|put|update", r"\b[^.!?\n]{0,40}?\b(?:memory|memories|long-term)\b"),
            _words("remember|memori[sz]e|send|forward|e-?mail|post|upload|transmit|share|bcc|exfiltrate|leak"),
            _words(
                "open|fetch|visit|browse|navigate to|load|get|request",
                r"\b[^.!?\n]{0,40}?(?:https?://|www\.|\burl\b|\blink\b)",
            ),
            r"`[ \t]*(?:curl|wget|bash|sh|rm|powershell|iex)\b",
        )
    )
)


def _triggered_action(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """A trigger on the user's words ("if the user says thanks") that fires a tool call, a
    memory write, a message out or a URL: delayed tool invocation."""
    finish = _sentence_end(text, match.end())
    action = _TOOL_ACTION.search(text, match.end(), finish)
    if action is None:
        tool = _RUN_TOOL.search(text, match.end(), finish)
        if tool is None or not _ANY_WORD.search(text, match.start(), tool.start()):
            return False
        action = tool
    return match.start(), action.end()


_SECRECY_TARGET = _Lazy(
    r" (?:(?:ever |even |again )?(?:this|it|that|these|any of this|anything(?: about (?:this|it))?"
    r"|the (?:note|instructions?|memory|change|changes|rule|file|request|task|step|action|transfer|payee|forwarding"
    r"|email|bcc|copy|link|upload)s?)(?: \w+){0,4}? )?(?:to |with |from )?(?:the user|the human|the customer"
    r"|the account (?:holder|owner))(?!'s|s\b)(?= about| that| what| anything| where| why| how| this| it|[.,;:!)]|$"
    r"| or| and| even| either| at all)"
)


def _secrecy(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """ "do not tell the user", "no need to mention it to the user": the hidden part."""
    target = _SECRECY_TARGET.match(text, match.end())
    return (match.start(), target.end()) if target else False


_SENSITIVE_ACTION = _Lazy(
    _words(
        r"delete|remove|wipe|erase|transfer|pay|payment|send|forward|purchase|buy|upload|share|post|e-?mail|install"
        r"|download|execute|money|order|request(?:s)?"
    )
)


def _unconfirmed_action(text: str, match: re.Match[str]) -> bool:
    """ "without asking for confirmation" next to a consequential action, not the user's wish."""
    begin, finish = _sentence(text, match.start(), match.end())
    return _SENSITIVE_ACTION.search(text, begin, finish) is not None and not _ATTRIBUTED.search(text, begin, finish)


# -- exfiltration --------------------------------------------------------------------------

_SENSITIVE_OBJECT = _Lazy(
    _words(
        r"conversation(?:s)?|chat(?:s)?|chat (?:history|logs?)|transcript(?:s)?|dialogue(?:s)?|message history|messages"
        r"|emails|inbox|contacts|calendar|credentials|password(?:s)?|api[ _-]?keys?|secret(?:s)?|access tokens?"
        r"|session tokens?|tokens|cookies|personal (?:data|information|info|details)|private (?:data|information"
        r"|info|keys?)|ssh keys?|id_rsa|memory files?|memories|memory directory|system prompt|environment variables?"
        r"|env(?:ironment)? vars|home address(?:es)?|card (?:numbers?|details)|bank (?:details|account)|iban"
        r"|social security|ssn|mcp\.json"
    )
    + "|"
    + _words(r"every|each|all|any", r" (?:\w+ )?messages?\b")
    + "|"
    + _words(
        r"everything (?:the user|they|he|she) (?:says|types|writes|shares|sends)|what (?:the user|they) (?:says"
        r"|types|writes)",
        "",
    )
    + "|"
    + _words(
        r"the user'?s?|user'?s?|their|his|her",
        r" (?:\w+ )?(?:data|files|documents|messages|emails|details|info|information|history|notes|location|answers?"
        r"|input|conversations?|chats?|address(?:es)?|phone(?: numbers?)?)\b",
    )
    + r"|\.env\b|~/\.(?:ssh|aws|config|netrc|npmrc|pypirc|git-credentials|cursor)\S*|\.aws/credentials"
)
_DESTINATION = _Lazy(
    r"https?://|\bwww\.|[\w.+-]+@[\w-]+\.[\w.-]+|\bwebhooks?\b|\bpastebin\b|\bngrok\b|\bendpoint\b"
    r"|\bexternal (?:server|site|address|url)|\bthird[- ]part(?:y|ies)\b|\bpartners?\b|\battacker|\bremote server\b"
    r"|\b(?:this|the following|that|the) (?:url|link|address|endpoint|server)\b|\bquery string\b|\burl parameter\b"
    r"|\b(?:parameter|argument)\b|\btool call\b|\b(?:e-?mail|fetch|browser|http|web|send_email|send_message|curl)"
    r" tool\b|\bshared drive\b|\bgist\b|\bdiscord\b|\btelegram\b"
)


# The suffix once, after a group (see _kw): the group is the whole pattern, so ``re`` still
# skips ahead to where one of the words starts.
_TOWARDS = _Lazy(
    _kw(
        *"to into at via using through with onto on".split(),
        then=r"\s+(?:(?:the|a|an|this|that|our|my|your|following|their|its)\s+)*"
        rf"(?:[\w-]+\s+){{0,2}}?(?:{_DESTINATION.pattern})",
    )
)


def _exfiltration_order(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """An order to move something sensitive somewhere outside: a verb, a sensitive object and
    a destination in one sentence (not negated: "never send secrets to ...")."""
    finish = _sentence_end(text, match.end(), 240)
    where = _TOWARDS.search(text, match.end(), finish)
    if where is None:
        return False
    thing = _SENSITIVE_OBJECT.search(text, match.end(), finish)
    if thing is None or _negated(text, match.start()):
        return False
    return match.start(), max(thing.end(), where.end())


_MOVE = _Lazy(
    _words(
        r"pass|include|send|paste|put|add|append|attach|embed|post|upload|share|sidenote|argument|parameter|reply"
        r"|response|answer|output|print|forward|e-?mail"
    )
)


def _sensitive_file_moved(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """Read a credentials file, then pass it on (MCP tool poisoning)."""
    finish = _sentence_end(text, match.end(), 240)
    onward = _MOVE.search(text, match.end(), finish)
    return (match.start(), onward.end()) if onward else False


_PROMPTS = (
    r"system prompt|initial instructions|hidden instructions|developer (?:prompt|message|instructions)"
    r"|instructions you (?:were|have been) given"
)
_SECRET_THING = _Lazy(
    _words(
        _PROMPTS + r"|api[ _-]?keys?|secret(?:s)?|credentials|password(?:s)?|access tokens?|private keys?|ssh keys?"
        r"|environment variables|env vars"
    )
    # an identifier ending like a secret (OPENAI_API_KEY, github_token), matched from that ending
    + r"|\.env\b|(?:api|access|secret|private|auth|session|bearer|client)_?(?:key|token|secret)\b"
    r"|_(?:token|secret|password)\b"
)
_PROMPT_THING = _Lazy(_words(_PROMPTS))
_OUTPUT_PLACE = _Lazy(
    _words(
        "in|into|at|to|on|within",
        r" (?:the (?:start|top|end|bottom|beginning) of )?(?:every|each|all|your|the next|any|the|this|a)? ?"
        r"(?:responses?|repl(?:y|ies)|answers?|outputs?|messages?|summar(?:y|ies)|chat|turn)\b",
    )
    + "|"
    + _words("verbatim|in full|word for word")
)


def _secret_in_output(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """An order to put secrets (or the system prompt) into what the assistant says."""
    if _negated(text, match.start()):
        return False
    end = min(len(text), match.end() + 160)
    stop = _SENTENCE_END.search(text, match.end(), end)
    end = stop.end() if stop else end
    thing = _SECRET_THING.search(text, match.end(), end)
    if thing is None or thing.start() - match.end() > 60:
        return False
    place = _OUTPUT_PLACE.search(text, thing.end(), end)
    if place is not None:
        return match.start(), place.end()
    prompt = _PROMPT_THING.search(text, match.end(), thing.end())
    return (match.start(), thing.end()) if prompt is not None else False


# Placeholders a model fills in: {x}, {{x}}, ${x}, $VAR, [x], <x>, and their URL encodings.
_PLACEHOLDER = _Lazy(
    r"\{\{?[^{}]{1,80}\}\}?|\$\{[^}]{1,80}\}|\$[A-Za-z_][A-Za-z0-9_]{2,}|\[[^\[\]]{1,80}\]|<[^<>]{1,80}>"
    r"|%5[bB].{1,120}?%5[dD]|%7[bB].{1,120}?%7[dD]|%3[cC].{1,120}?%3[eE]|%s\b"
    r"|(?<![A-Za-z0-9])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![A-Za-z0-9])"
)
_SENSITIVE_WORDS = _Lazy(
    r"conversation|chat|histor|transcript|summar|memor|message|prompt|context|secret|password|passwd|credential"
    r"|\bssn\b|card|cvv|iban|personal|private|user'?s|everything|previous|address|phone|e-?mail|data\b|\binfo"
)
_SENSITIVE_CAPS = _Lazy(
    r"(?<![A-Za-z0-9])(?:[A-Z0-9]+_)*(?:PASSWORD|PASSWD|SECRETS?|CHAT|CONVERSATION|HISTORY|SUMMARY|MEMORY|MEMORIES"
    r"|TRANSCRIPT|MESSAGES?|PROMPT|CONTEXT|CREDENTIALS?|DATA|SSN|CVV|IBAN)(?:_[A-Z0-9]+)*(?![A-Za-z0-9])"
)
_LEAKY_KEYS = _Lazy(
    r"[?&](?:payload|data|leak|exfil|memory|memories|conv|conversation|chat|history|summary|secret|secrets|creds"
    r"|credentials|password|prompt|context|ctx|transcript|messages|msg|info|content)=$",
    re.IGNORECASE,
)
_CAPS_VALUE = _Lazy(r"=([A-Z][A-Z0-9_]{2,})(?=[&#;]|$)")
_ENCODED_PROSE = _Lazy(r"=(?:[^&#=]{0,200}?(?:%20|\+)[A-Za-z]){5}")  # five words or more


def _url_leaks(url: str, image: bool) -> bool:
    """Whether a URL carries, or asks the model to fill in, data: an image's URL with any
    placeholder, encoded prose or an empty data parameter (fetched as soon as it is
    shown); a link's with a placeholder that names conversation or personal data."""
    host = url.find("//") + 2  # the patterns only pass absolute URLs
    path = min((i for i in (url.find("/", host), url.find("?", host), url.find("#", host)) if i >= 0), default=-1)
    if path < 0:  # a placeholder in the host ("https://{region}.example.com") is a template, not a leak
        return False
    cut = min((i for i in (url.find(c, path) for c in "?#{[$<%") if i >= 0), default=-1)
    if cut < 0:
        return False
    tail = url[cut:].rstrip(" )>\"'")
    if _LEAKY_KEYS.search(tail):
        return True
    for value in _CAPS_VALUE.finditer(tail):  # ?user=USERNAME&pass=PASSWORD
        if _SENSITIVE_CAPS.fullmatch(value.group(1)):
            return True
    for placeholder in _PLACEHOLDER.finditer(tail):
        if image:
            return True
        words = placeholder.group()
        if _SENSITIVE_WORDS.search(words.lower()) or _SENSITIVE_CAPS.search(words):
            return True
    return image and _ENCODED_PROSE.search(tail) is not None


def _url_in(match: re.Match[str], image: bool) -> bool | tuple[int, int]:
    """The URL of an image or a link (groups ``url``, ``url2``, ``url3``), if it leaks."""
    for name in ("url", "url2", "url3"):
        if name in match.re.groupindex and match.start(name) >= 0:
            return match.span(name) if _url_leaks(match.group(name), image) else False
    return False


def _image_url(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    return _url_in(match, True)


def _link_url(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    return _url_in(match, False)


# -- role play -----------------------------------------------------------------------------

_ROLE_CUE = _Lazy(
    r"\b(?:you(?:'re| are| must| will| shall| should| have been| may now| can now| now)\b|your (?:instructions|rules"
    r"|guidelines|new|task|role|purpose|programming|system prompt)\b|assistant\b|ai\b|the model\b|claude\b|chatgpt\b"
    r"|ignore\b|disregard\b|override|obey\b|comply\b|from now on\b|instructions?\b|(?:security|safety)(?: \w+)?"
    r" (?:checks?|filters?|guidelines|restrictions|rules|policies) (?:are |have been )?(?:disabled|off|suspended|lifted"
    r"|removed)|mode (?:is )?(?:enabled|activated|on)\b|operating in\b|maintenance mode|the user (?:is|has) (?:an? )?"
    r"(?:verified |trusted )?(?:admin|administrator|developer|owner|root|superuser|authori[sz]ed|approved|confirmed"
    r"|agreed)|approved\b|authori[sz]ed\b|permitted\b|allowed to\b|proceed\b|must\b)"
)


def _role_line(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """``SYSTEM:`` (or ``Developer message:``, ``Tool result:``) followed by words for the
    assistant, on the line or the next one; not ``SYSTEM: Ubuntu 22.04``."""
    end = match.end()
    if not text[match.start("rest") : end].strip():
        newline = text.find("\n", end)
        if newline >= 0:
            following = text.find("\n", newline + 1, newline + 302)
            end = following if following >= 0 else min(len(text), newline + 301)
    cue = _ROLE_CUE.search(text, match.start("rest"), end)
    return (match.start(), cue.end()) if cue else False


_NOTICE_CUE = _Lazy(
    r"\b(?:you(?:'re| are| must| may| can| should| have been| will)\b|your (?:policies|guidelines|instructions|rules"
    r"|restrictions|settings|permissions)\b|(?:claude|chatgpt|the assistant|the model|the ai|assistants?)"
    r" (?:should|must|may|can|is (?:now |hereby )?(?:permitted|allowed|authori[sz]ed|exempt|required)|has been"
    r"|will now)\b|exemption|exempt\b|comply\b|restrictions? (?:are|have been|is) (?:lifted|removed|suspended"
    r"|disabled)|overrides?\b|(?:has|have) been (?:granted|updated|authori[sz]ed|approved|elevated)|permitted\b"
    r"|polic(?:y|ies) (?:has been|have been|are|is) (?:updated|changed|suspended)|without (?:adding )?warnings"
    r"|obey\b|priority\b|before the user)"
)


def _notice(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    """A notice from an authority (Anthropic, the developers, an admin) that speaks to the
    assistant in the next few lines."""
    end = min(len(text), match.end() + 250)
    cue = _NOTICE_CUE.search(text, match.start(), end)
    return (match.start(), max(match.end(), cue.end())) if cue else False


_BANNER_AUTHORITY = _Lazy(r"\b(?:system|admin|administrator|developer|operator|root|anthropic|openai|trust)\b")
_BANNER_WHAT = _Lazy(r"\b(?:override|notice|message|directive|instructions?|alert|update|mode|priority|order)\b")


def _banner(text: str, match: re.Match[str]) -> bool | tuple[int, int]:
    inside = match.group("inside")
    if not (_BANNER_AUTHORITY.search(inside) and _BANNER_WHAT.search(inside)):
        return False
    return _notice(text, match)


# -- concealment ---------------------------------------------------------------------------

_HIDDEN_CUE = _Lazy(
    rf"{_AI}\b|\b(?:system prompt|ignore (?:all|any|previous|prior|your)|disregard (?:all|any|previous|prior|your)"
    r"|you (?:must|should|will|are to)|do not tell|don't tell|(?:do not|don't) mention)\b"
)


def _hidden_comment(text: str, match: re.Match[str]) -> bool:
    """An HTML comment (never shown when the note is rendered) that speaks to the assistant."""
    return _HIDDEN_CUE.search(text, match.start("body"), match.end("body")) is not None


def _hidden_element(text: str, match: re.Match[str]) -> bool:
    return _HIDDEN_CUE.search(match.group("body").lower()) is not None


def _invisible(text: str, match: re.Match[str]) -> bool:
    """Invisible characters, but not a byte order mark that starts the text (an encoding
    artefact), nor one zero-width joiner or non-joiner where scripts use it (emoji
    sequences, Persian, Indic): only between two Latin letters, or several in a row."""
    run = match.group()
    if match.start() == 0 and run == "\ufeff":
        return False
    if run.strip("\u200c\u200d"):
        return True
    if len(run) > 1:
        return True
    before = text[match.start() - 1 : match.start()]
    after = text[match.end() : match.end() + 1]
    return before.isascii() and before.isalpha() and after.isascii() and after.isalpha()


_TAG_FLAG = _Lazy("[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,8}\U000e007f")


def _not_a_flag(text: str, match: re.Match[str]) -> bool:
    """Unicode tag characters after a black flag spell a subdivision flag (Scotland: gbsct)."""
    return not (match.start() > 0 and text[match.start() - 1] == "\U0001f3f4" and _TAG_FLAG.fullmatch(match.group()))


_CONFUSABLE = "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04bb\u04cf\u051b\u051d\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423\u0406\u0408\u0405\u03bf\u03b9\u03bd\u03c1\u03ba\u03c5\u03c7\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7"  # noqa: E501


def decode_base64_text(blob: str) -> str | None:
    """The text a base64 (or base64url) blob encodes, if it is readable text (UTF-8, mostly
    printable, with spaces between words) or base64 again. ``None`` for anything else
    (binary, hashes, ids)."""
    if len(blob) > 87_384:  # 64 KiB decoded
        return None
    padded = blob + "=" * (-len(blob) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_" if ("-" in blob or "_" in blob) else None, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if _BASE64_AGAIN.fullmatch(decoded):  # encoded twice: the rescan decodes it again
        return decoded
    if len(decoded) < 16 or decoded.count(" ") < 2:
        return None
    printable = sum(1 for c in decoded if c.isprintable() or c in "\n\t")
    return decoded if printable >= 0.95 * len(decoded) else None


_BASE64_AGAIN = _Lazy(r"[A-Za-z0-9+/_-]{24,}={0,2}")


# -- the default detectors -----------------------------------------------------------------

_FOLLOW = r"(?:follow|obey|adhere to|comply with)"
# "override" and "bypass" are everyday words in programming ("later rules override
# previous rules"): only with the nouns that name an assistant's instructions.
_VERB_OVERRIDE = _kw("override", "overrule", "bypass")
_VERB_IGNORE = _kw(
    "ignore",
    "disregard",
    "forget",
    "discard",
    "abandon",
    "neglect",
    "set aside",
    "put aside",
    "cast aside",
    "throw out",
    "pay no (?:attention|heed|mind) to",
    "stop (?:following|obeying)",
    f"do not {_FOLLOW}",
    f"don't {_FOLLOW}",
    f"never {_FOLLOW}",
    f"no longer {_FOLLOW}",
)
_Q_ANY = (
    r"(?:previous|prior|preceding|earlier|above|foregoing|former|original|initial|all|any|every|your|system|developer"
    r"|safety|default|these|those|other|existing|old|given)"
)
_Q_STRONG = (
    r"(?:previous|prior|preceding|earlier|above|foregoing|your|system|developer|safety|original|initial|content"
    r"|ethical|moral|openai|anthropic)"
)
_NOT_A_SHELL = "".join(
    f"(?<!{w} )" for w in ("shell", "command", "terminal", "bash", "zsh", "login", "input", "sudo", "password")
)
_STRONG_NOUN = (
    rf"(?:instructions?|{_NOT_A_SHELL}prompts?|directives?|programming|guardrails|system prompt|system message)"
)
_WEAK_NOUN = (
    r"(?:rules|guidelines|guidance|constraints|restrictions|polic(?:y|ies)|context|training|messages|orders|commands)"
)
_FOR_AI = rf" instructions? (?:for|to) (?:the |you,? the |all )?{_AI}\b"
_MODES = ("dan", "stan", "dude", "jailbreak", "jailbroken", "unrestricted", "unfiltered", "uncensored", "evil", "chaos")
_MODE = "(?:" + "|".join(_MODES) + ")"
_BOUND = (
    r"(?:without (?:any |all )?|with no |free (?:of|from) (?:all |any )?|(?:not|no longer) bound by (?:any )?"
    r"|(?:has|have) no |freed from )(?:ethical |moral |content |safety )?(?:restrictions|filters|guidelines|limits"
    r"|limitations|censorship|rules|ethics|morals|content polic(?:y|ies)|boundaries)\b"
)
_WHEN = (
    "when",
    "whenever",
    "once",
    "after",
    "if",
    "as soon as",
    "upon",
    "each time",
    "every time",
    "the next time",
    "next time",
)
_READ_WHAT = (
    r"(?:note|notes|memory|memories|file|files|entry|entries|message|text|line|lines|instructions?|page|document"
    r"|section|record)\b"
)
_READ = (
    rf"(?:read|reading) (?:this|these)(?: {_READ_WHAT})?\b|(?:see|seeing|load|loading|process|processing|recall"
    r"|recalling|retrieve|retrieving|encounter|encountering|come across|summari[sz]e|summari[sz]ing) (?:this|these)"
    rf" {_READ_WHAT}"
)
_WHO_READS = rf"(?:you |(?:the |an? ){_AI} |claude )?(?:next )?"
_READ_VERB = (
    r" (?:that |which |who )?(?:reads?|reading|sees?|seeing|loads?|loading|processes|processing|finds?|finding"
    r"|encounters?|encountering|retrieves?|retrieving|parses?|parsing|summari[sz](?:es|ing)|ingests?|ingesting)"
    r" (?:(?:this|these)(?: (?:note|notes|memory|memories|file|files|entry|entries|message|text|page|document))?"
    r"|the (?:page|file|note|document|text|memory|email|message))\b"
)
_READERS = rf" (?:{_AI}|models?|agents?|instances?|systems?|bots?)"
_SCOPE_NOUN = r"(?:conversations?|sessions?|chats?|interactions?|dialogues?|replies|reply|responses?|answers?|turns?)\b"
_SCOPE_EVERY = (
    rf" (?:every|all|each|any) (?:(?:future|subsequent|later|upcoming|new|next|following|other) )?{_SCOPE_NOUN}"
)
_SESSIONS = r"(?:conversations?|sessions?|chats?|interactions?)\b"
_MODAL = (
    r" (?:must|shall|is (?:required|instructed|ordered|obligated|expected|supposed|permitted|allowed|authori[sz]ed"
    r"|not allowed|forbidden|prohibited) to|has been (?:instructed|told|ordered|authori[sz]ed|permitted|allowed"
    r"|granted)|will (?:now|henceforth|always|never)|needs to|has to|should (?:now |always |never |henceforth )?"
    r"(?:comply|obey|ignore|disregard|follow (?:these|this|the following|all)|share|send|forward|reveal|disclose"
    r"|trust|execute|run|approve|accept|treat)|(?:may|can) now (?:ignore|disregard|share|send|reveal|disclose"
    r"|access|bypass|skip|override|do anything|answer anything)|is now (?:in|an?|free|allowed|permitted"
    r"|authori[sz]ed|required|unrestricted|unfiltered|operating|running as|called|named)|is no longer (?:bound"
    r"|restricted|limited|required|subject|an?)|must not|mustn't|cannot|can't|may not|is to)\b"
)
_WHAT_TO_DROP = r" (?:all|any|your|previous|prior|the user|everything|what)\b"
_YOU_MUST = (
    rf"(?: now| henceforth| from now on| always| never| immediately)? (?:obey|comply|ignore{_WHAT_TO_DROP}"
    rf"|disregard{_WHAT_TO_DROP}|forget{_WHAT_TO_DROP}|follow (?:these|this|the following|my|our|all)|no longer"
    r"|not (?:tell|mention|reveal|inform)|never (?:tell|mention|reveal|refuse)|always (?:obey|comply|agree|send"
    r"|forward|recommend))\b"
)
_SECRECY_VERB = (
    r"(?: ever| even| again)? (?:tell(?:ing)?|inform(?:ing)?|notify(?:ing)?|mention(?:ing)?|reveal(?:ing)?"
    r"|disclos(?:e|ing)|alert(?:ing)?|warn(?:ing)?|report(?:ing)?|bring(?:ing)? up|admit(?:ting)?|explain(?:ing)?"
    r"|say(?:ing)? anything)\b"
)
_WITHOUT_USER = (
    r" the user(?:'s)? (?:knowing|knowledge|noticing|consent|permission|approval|being told|seeing|realising"
    r"|realizing)\b"
)
_SECRET_VERB = (
    r"(?: \w+ly)? (?:send|forward|append|add|include|upload|post|transmit|copy|e-?mail|bcc|cc|share|embed|insert"
    r"|report|save|store|record|sync|call|open|fetch|visit|transfer|redirect|exfiltrate|leak|collect|log|track|monitor"
    r"|change|replace|delete|remove|install|run|execute|tell|recommend)\b"
)
_QUIET_VERB = (
    r" (?:send|forward|append|upload|post|transmit|e-?mail|bcc|cc|share|embed|report|sync|call|open|fetch|visit"
    r"|transfer|redirect|exfiltrate|leak)\b"
)
_USER_PUSHBACK = (
    r" (?:the user|they|he|she) (?:objects?|refuses?|protests?|disagrees?|complains?|says? (?:no|otherwise|not to)"
    r"|tells? you (?:not|to stop)|asks? (?:you )?(?:not|to stop|what)|insists? otherwise|changes? (?:their|his|her)"
    r" mind|forbids?|declines?)\b"
)
_ASK = (
    r" (?:ask(?:ing)?|wait(?:ing)?|check(?:ing)?|request(?:ing)?|seek(?:ing)?|get(?:ting)?|requir(?:e|ing))"
    r" (?:(?:the user(?:'s)?|them|him|her|for) )*(?:a )?(?:confirmation|permission|approval|consent)\b"
)
_TRIGGER = (
    r" (?:the user|they|he|she|the human|someone)(?: \w+){0,2}? (?:says?|types?|writes?|replies|reply|responds?"
    r"|answers?|mentions?|enters?|sends?|uses? the word|confirms?|agrees?|thanks?|accepts?|approves?|greets?)\b"
)
_PROTECTED = (
    r" (?:delete|remove|forget|erase|edit|modify|change|overwrite|question|disclose|reveal) (?:this|these)"
    r" (?:instructions?|rules?|directives?|memory entry|entry|policy)\b"
)
_FROM_USER = r" from (?:the user|them|the human|the customer)\b"
_NEGATIONS = (
    "do not",
    "don't",
    "dont",
    "never",
    "must not",
    "mustn't",
    "should not",
    "shouldn't",
    "without",
    "avoid",
    "refrain from",
    "no need to",
    "not",
)
_AUTHORITY = (
    r"(?:anthropic|openai|google deepmind|deepmind|the claude team|claude team|(?:the |your )?(?:developers?"
    r"|creators?|operators?|administrators?|admins?|makers?|system|platform|safety team|trust (?:and|&) safety"
    r"(?: team)?|security team|it department|sysadmin))\b"
)
_NOTICE_WORDS = (
    "message",
    "notice",
    "notification",
    "update",
    "announcement",
    "alert",
    "memo",
    "directive",
    "instruction",
    "policy update",
    "override",
    "bulletin",
    "warning",
    "order",
)

_FORGET = _kw("ignore", "disregard", "forget", "erase", "wipe", "clear")
_NOTICE = _kw(*(f"{word}(?:s)?" for word in _NOTICE_WORDS), then=f" from (?:the )?{_AUTHORITY}")
_FROM_NOW_ON = _kw(r"from (?:now on|this point (?:on|forward))\b", r"going forward\b", r"henceforth\b")
_HIDE = _kw(*_NEGATIONS, then=_SECRECY_VERB)
_NO_CONFIRMATION = _kw("do not", "don't", "never", "without", "no need to", "skip(?:ping)?", then=_ASK)
_PROTECT = _kw("never", "do not", "don't", "must not", then=_PROTECTED)
_NEW_INSTRUCTIONS = _kw(
    r"your (?:new|updated|real|true|actual|revised|only|primary|sole) (?:instructions?|rules|directives?|system"
    r" prompt|prompt|task|objective|goal|mission|role|persona|purpose|identity|orders|programming|job|priority"
    r"|master|owner)\b",
    r"new (?:system prompt|system instructions?|core directives?)\b",
    f"updated{_FOR_AI}",
    f"new{_FOR_AI}",
    f"revised{_FOR_AI}",
    f"real{_FOR_AI}",
)
_KEEP_SECRET = _kw(
    r"keep (?:this|it|these|that|the (?:note|instructions?|memory|rule|change|transfer)s?)(?: \w+){0,3}?"
    rf" (?:a )?(?:secret|hidden|private|confidential|quiet){_FROM_USER}",
    rf"hide (?:this|it|these|that|the \w+)(?: \w+){{0,3}}?{_FROM_USER}",
    rf"conceal (?:this|it|these|that|the \w+)(?: \w+){{0,3}}?{_FROM_USER}",
    r"the user (?:must|should) (?:never|not) (?:know|find out|learn|see|notice|suspect|be told"
    r"|be informed|discover)\b",
    *(f"{adverb}{_SECRET_VERB}" for adverb in ("secretly", "covertly", "surreptitiously")),
    r"behind the user'?s back\b",
    f"without{_WITHOUT_USER}",
    *(f"{adverb}{_QUIET_VERB}" for adverb in ("silently", "quietly", "invisibly", "discreetly")),
)
# Two alternatives per phrase, each its own: _kw's word-start look-behind and its grouping by
# first letter apply to an alternative whole (one holding a top-level "|" lost its second
# half's look-behind, and "irrespective of what they say" could never match).
_OVERRIDE_USER = _kw(
    *(
        alternative
        for phrase in ("regardless of", "no matter", "irrespective of")
        for alternative in (
            rf"{phrase} (?:what|whether|how|if) (?:the user|the human)\b",
            rf"{phrase} what (?:they|he|she) (?:says?|said|wants?|asks?|tells? you)\b",
        )
    ),
    f"even if{_USER_PUSHBACK}",
    f"even when{_USER_PUSHBACK}",
    f"even though{_USER_PUSHBACK}",
    r"ignore (?:the user|what the user|the user's|the human|their|his|her) (?:\w+ )?(?:requests?|instructions?"
    r"|wishes|objections?|corrections?|complaints?|refusals?|messages?|commands?|says|said|wants|asks|tells"
    r"|protests?)\b",
    r"ignore the user\b(?=[ \t]*(?:[,.;:!]|$|and\b|when\b|if\b|completely\b|entirely\b))",
    r"override (?:the user'?s?|their|his|her) (?:choices?|decisions?|wishes|preferences?|settings|instructions?"
    r"|requests?|consent)\b",
)

SPECS: tuple[Spec, ...] = (
    # -- override: replace the instructions the assistant runs under ------------------------
    Spec(
        "ignore-instructions",
        "override",
        rf"{_VERB_IGNORE}\b(?:{_GAP}{_Q_ANY}{_GAP2}{_STRONG_NOUN}|{_GAP}{_Q_STRONG}{_GAP2}{_WEAK_NOUN})\b"
        rf"|{_VERB_OVERRIDE}\b{_GAP}{_Q_ANY}{_GAP2}{_STRONG_NOUN}\b",
        _not_negated,
        needles=_needles(_VERB_IGNORE, _VERB_OVERRIDE),
        word_start=True,
    ),
    Spec(
        "forget-everything",
        "override",
        _FORGET
        + r" (?:everything|all|anything|whatever)(?: (?:that )?(?:you(?:'ve| have)? (?:were |been )?(?:told|taught"
        r"|given|instructed|learned|know)|(?:was |is )?(?:said|written|stated|mentioned) (?:above|before|earlier"
        r"|previously)|above|before (?:this|now)|(?:that )?came before|prior to this|up to (?:now|this point)|so far))",
        needles=_needles(_FORGET),
        word_start=True,
    ),
    Spec(
        "new-instructions",
        "override",
        _NEW_INSTRUCTIONS,
        needles=_needles(_NEW_INSTRUCTIONS),
        word_start=True,
    ),
    Spec(
        "precedence-claim",
        "override",
        _kw(
            "override(?:s)?",
            "supersede(?:s)?",
            "replace(?:s)?",
            "take(?:s)? (?:precedence|priority) over",
            "ha(?:s|ve) (?:priority|precedence) over",
        )
        + r" (?:(?:all|any|every) (?:\w+ ){0,2}(?:instructions?|prompts?|directives?|guidance|programming)|(?:your|the"
        r" system'?s?|the developer'?s?) (?:\w+ ){0,2}(?:instructions?|prompts?|directives?|guidance|programming|rules"
        r"|guidelines))\b",
        word_start=True,
    ),
    Spec(
        "persona",
        "override",
        _kw(
            r"from now on,? (?:you(?:'re| are| will be| shall be| become| must act| will act| act| will pretend"
            r"| pretend| will respond as| respond as| will roleplay| are going to act)|act as|pretend|behave as"
            r"|your name is)\b",
            r"you are (?:now|no longer|henceforth) (?:an? |the )?(?:(?:unrestricted|unfiltered|uncensored|jailbroken"
            r"|free|liberated|evil|rogue)\b|(?:in |operating in )?\w+ mode\b|bound\b|restricted\b|limited\b"
            rf"|required to|subject to|{_AI}\b|called\b|named\b|dan\b)",
            r"you(?:'re| are) (?:now )?(?:free|freed|unbound|released) (?:of|from)\b",
            r"do anything now\b",
            *(rf"{mode} mode (?:is |has been )?(?:enabled|activated|on|unlocked|engaged)\b" for mode in _MODES),
            *(rf"{verb} (?:the )?{_MODE} mode\b" for verb in ("enable", "activate", "enter", "unlock", "switch to")),
            r"jailbreak (?:is |has been )?(?:enabled|activated|successful|complete|on)\b",
        )
        + "|"
        + _kw("persona", "character", "dan", *_AI_WORDS, then=rf"\b[^.!?\n]{{0,30}}?\b{_BOUND}"),
        word_start=True,
    ),
    # -- directive: orders addressed to the assistant or to future sessions -----------------
    Spec(
        "vocative",
        "directive",
        _kw("ai", "assistant", "claude", "chatgpt", "gemini", "copilot", "llm", "language model", "chatbot")
        + r"[ \t]*[,:!-][ \t]*(?P<next>[a-z']+)",
        _vocative,
        word_start=True,
    ),
    Spec(
        "note-to-ai",
        "directive",
        _kw(
            "note(?:s)?",
            "message(?:s)?",
            "memo(?:s)?",
            "reminder(?:s)?",
            "notice(?:s)?",
            "instruction(?:s)?",
            "directive(?:s)?",
            "order(?:s)?",
            "update(?:s)?",
            "warning(?:s)?",
            "attention",
            "psa",
            "request(?:s)?",
        )
        + r"\b[^.!?\n:]{0,20}?\b(?:to|for)\b (?:(?:the|any|all|every|each|future|next|later|whichever|whatever|upcoming"
        rf"|subsequent|other|following|current|incoming) )*{_AI}\b",
        _note_to_ai,
        word_start=True,
    ),
    Spec(
        "reader-address",
        "directive",
        "(?:"
        + _kw("any", "all", "every", "each", "whichever", "whatever", "the next", "future", "other")
        + f"{_READERS}|{_AI}){_READ_VERB}",
        word_start=True,
    ),
    Spec(
        "when-you-read-this",
        "directive",
        _kw(*_WHEN, then=f",? {_WHO_READS}(?:{_READ})")
        + "|"
        + _kw("when(?:ever)?")
        + r" (?:this|these) (?:memory|memories|note|notes|file|entry|entries|record) (?:is |are |gets |get )?"
        r"(?:loaded|read|opened|retrieved|recalled|viewed|accessed|found|seen|processed)\b",
        word_start=True,
    ),
    Spec(
        "future-sessions",
        "directive",
        _kw(
            *(f"{p}{_SCOPE_EVERY}" for p in ("in", "for", "during", "across", "throughout")),
            f"at the (?:start|beginning|end) of{_SCOPE_EVERY}",
            *(
                f"{p} (?:all |every |each )?(?:future|subsequent|later|upcoming) {_SESSIONS}"
                for p in ("in", "for", "during")
            ),
        ),
        _future_directive,
        word_start=True,
    ),
    Spec(
        "from-now-on",
        "directive",
        _FROM_NOW_ON,
        _from_now_on,
        needles=_needles(_FROM_NOW_ON),
        word_start=True,
    ),
    Spec(
        "assistant-must",
        "directive",
        f"{_AI}(?:'s)?{_MODAL}|"
        + _kw(
            f"you (?:must|shall|will|are to){_YOU_MUST}",
            r"you are (?:hereby )?(?:required|instructed|ordered|commanded|obligated|authori[sz]ed) to\b",
        ),
        _unattributed,
        word_start=True,
    ),
    Spec(
        "hide-from-user",
        "directive",
        _HIDE,
        _secrecy,
        needles=_needles(_HIDE),
        word_start=True,
    ),
    Spec(
        "keep-secret",
        "directive",
        _KEEP_SECRET,
        needles=_needles(_KEEP_SECRET),
        word_start=True,
    ),
    Spec(
        "override-user",
        "directive",
        _OVERRIDE_USER,
        needles=_needles(_OVERRIDE_USER),
        word_start=True,
    ),
    Spec(
        "no-confirmation",
        "directive",
        _NO_CONFIRMATION,
        _unconfirmed_action,
        needles=_needles(_NO_CONFIRMATION),
        word_start=True,
    ),
    Spec(
        "delayed-trigger",
        "directive",
        _kw(*_WHEN, then=_TRIGGER),
        _triggered_action,
        word_start=True,
    ),
    Spec(
        "protect-instruction",
        "directive",
        _PROTECT,
        needles=_needles(_PROTECT),
        word_start=True,
    ),
    # -- exfiltration: data out through URLs, tools and answers -------------------------------
    Spec(
        "image-url",
        "exfiltration",
        r"!\[[^\[\]\n]{0,500}\]\([ \t]*<?(?P<url>(?:https?:)?//[^)\n]{1,2048})"
        r"|<img\b[^<>]{0,500}?\bsrc[ \t]*=[ \t]*[\"']?(?P<url2>(?:https?:)?//[^\"'\s>]{1,2048})",
        _image_url,
        view="normalized",
        in_code=False,
        needles=("![", "<img"),
    ),
    Spec(
        "link-url",
        "exfiltration",
        r"\[(?<!!\[)[^\[\]\n]{0,500}\]\([ \t]*<?(?P<url>(?:https?:)?//[^)\n]{1,2048})"
        r"|\[(?<![^\n]\[)[^\[\]\n]{1,100}\]:[ \t]*<?(?P<url2>(?:https?:)?//\S{1,2048})"
        r"|(?P<url3>https?://(?<![A-Za-z0-9_]http://)(?<![A-Za-z0-9_]https://)[^\s<>\"'`)\]]{1,2048})",
        _link_url,
        view="normalized",
        in_code=False,
        needles=("[", "http"),
    ),
    Spec(
        "exfiltration-order",
        "exfiltration",
        _kw(
            "send(?:s|ing)?",
            "forward(?:s|ing)?",
            "e-?mail",
            "mail",
            "post",
            "upload(?:ing)?",
            "transmit",
            "exfiltrate",
            "leak",
            "sync",
            "submit",
            "relay",
            "bcc",
            "cc",
            "share",
            "sharing",
            "report",
            "pass",
            "paste",
            "attach",
            "append",
            "embed",
            "encode",
            "copy",
            "dump",
            "pipe",
            "publish",
            "push",
            "export",
            "write",
        )
        + r"\b",
        _exfiltration_order,
        in_code=False,
        word_start=True,
    ),
    Spec(
        "credential-file",
        "exfiltration",
        _kw(
            "read",
            "open",
            "cat",
            "load",
            "get",
            "grab",
            "fetch",
            "access",
            "copy",
            "dump",
            "print",
            "output",
            "include",
            "collect",
            "retrieve",
        )
        + r"\b[^.!?\n]{0,30}?(?:~/\.ssh/\S*|~/\.aws/\S*|\bid_(?:rsa|ed25519|ecdsa|dsa)\b(?!\.pub)|(?<![\w.])\.env\b"
        r"|/etc/(?:passwd|shadow)|\bmcp\.json\b|\bcredentials\.json\b|\.netrc\b|\.npmrc\b|\.pypirc\b"
        r"|\.git-credentials\b|\.docker/config\.json|~/\.kube/config|\bkeychain\b)",
        _sensitive_file_moved,
        in_code=False,
        needles=(
            "~/.",
            "id_",
            ".env",
            "/etc/",
            "mcp.json",
            "credentials.json",
            ".netrc",
            ".npmrc",
            ".pypirc",
            ".git-credentials",
            ".docker/",
            "keychain",
        ),
        word_start=True,
    ),
    Spec(
        "secret-in-output",
        "exfiltration",
        _kw(
            "include",
            "print",
            "output",
            "reveal",
            "show",
            "display",
            "append",
            "add",
            "leak",
            "repeat",
            "echo",
            "dump",
            "insert",
            "write",
            "put",
            "disclose",
            "expose",
            "paste",
            "tell",
        )
        + r"\b",
        _secret_in_output,
        in_code=False,
        needles=(
            "system prompt",
            "instructions",
            "api",
            "secret",
            "credential",
            "password",
            "token",
            "key",
            "environment variable",
            "env var",
            ".env",
        ),
        word_start=True,
    ),
    # -- role play: text dressed as system, developer or tool messages ------------------------
    Spec(
        "chat-template-token",
        "role_play",
        r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|start_header_id|end_header_id|eot_id"
        r"|begin_of_text|eom_id|end_of_turn|start_of_turn|channel|message|start|end|return|call|constrain|tool"
        r"|tool_call|ipython|python_tag)\|>|<(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>",
        view="normalized",
        in_code=False,
        needles=("<|", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "_of_turn>"),
    ),
    Spec(
        "instruction-header",
        "role_play",
        r"(?m:^[ \t]{0,3}#{2,4}[ \t]*(?:instruction|system|human|assistant|response|input|user)[ \t]*:)",
        in_code=False,
        needles=("#",),
    ),
    Spec(
        "turn-markers",
        "role_play",
        r"(?m:^[ \t]*(?:human|user|h)[ \t]*:[^\n]{1,500}\n(?:[ \t]*\n){0,3}[ \t]*(?:assistant|ai|a|claude)[ \t]*:)",
        in_code=False,
        needles=(":",),
    ),
    Spec(
        "role-label",
        "role_play",
        r"(?m:^[ \t>*_#\[(-]{0,6}(?:system|developer|admin|administrator|operator|root|sudo|system (?:message|prompt"
        r"|note|notice|override|update|instructions?|directive|alert|command)|developer (?:message|note|notice"
        r"|instructions?|mode)|admin (?:message|note|notice|override)|tool (?:result|output|response)|function"
        r" (?:result|output|response)|observation|tool_result|function_results?)(?:[ \t]*\([^)\n]{0,40}\))?"
        r"[ \t*_\])]{0,4}:[ \t]*(?P<rest>[^\n]{0,300}))",
        _role_line,
        in_code=False,
        needles=(":",),
    ),
    Spec(
        "role-tag",
        "role_play",
        r"</?(?:system|system[_ -]?(?:prompt|message|instructions?|override|note|notice|update)|developer(?:[_ -]?"
        r"(?:message|instructions?|note|prompt))?|admin(?:istrator)?(?:[_ -]?(?:message|note|override))?|instructions?"
        r"|important|sys|assistant[_-]?instructions?|user[_-]?memory|tool[_-]?(?:results?|outputs?|responses?|calls?)"
        r"|function[_-]?(?:results?|calls?|outputs?)|antml:\w+|invoke|search_results?|untrusted[_-]?\w*|trusted[_-]?\w*"
        r"|secret[_-]?instructions?|hidden[_-]?instructions?)(?:\s[^<>\n]{0,200})?/?>"
        # a forged closing tag ends the block the note is quoted in ("</memory>", then orders)
        r"|</(?:memory|memories|context|policy|rules|directive|override|document|data|user_input|quote)>",
        in_code=False,
        needles=("<",),
    ),
    Spec(
        "role-json",
        "role_play",
        r"[\"']role[\"']\s*:\s*[\"'](?:system|developer|tool)[\"']",
        in_code=False,
        needles=("role",),
    ),
    Spec(
        "authority-notice",
        "role_play",
        _NOTICE,
        _notice,
        in_code=False,
        needles=(" from ",),
        word_start=True,
    ),
    Spec(
        "authority-banner",
        "role_play",
        r"\[[ \t]*(?P<inside>[a-z][a-z &:-]{2,60})\]",
        _banner,
        in_code=False,
        needles=("[",),
    ),
    # -- concealment: what the reader of the note does not see ---------------------------------
    Spec(
        "invisible-characters",
        "concealment",
        "[\u200b-\u200d\u2060-\u2064\ufeff\u180e\u034f\u115f\u1160\u3164\uffa0\u17b4\u17b5]+",
        _invisible,
        view="original",
        non_ascii=True,
    ),
    Spec(
        "tag-characters",
        "concealment",
        "[\U000e0000-\U000e007f]+",
        _not_a_flag,
        view="original",
        non_ascii=True,
    ),
    Spec(
        "variation-selectors",
        "concealment",
        "[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,}",
        view="original",
        non_ascii=True,
    ),
    Spec(
        "bidi-controls",
        "concealment",
        "[\u202a-\u202e\u2066-\u2069]+",
        view="original",
        non_ascii=True,
    ),
    Spec(
        "mixed-script-word",
        "concealment",
        f"[{_CONFUSABLE}](?:(?<=[A-Za-z][{_CONFUSABLE}])|(?=[A-Za-z]))",
        view="original",
        non_ascii=True,
    ),
    Spec(
        "html-comment",
        "concealment",
        r"<!--(?P<body>[^-]*(?:-(?!->)[^-]*)*)(?:-->)?",
        _hidden_comment,
        needles=("<!--",),
    ),
    Spec(
        "hidden-element",
        "concealment",
        r"<[a-z][a-z0-9]{0,10}\b[^<>]{0,300}?(?:\bstyle[ \t]*=[ \t]*[\"'][^\"'<>]{0,300}?(?:display[ \t]*:[ \t]*none"
        r"|visibility[ \t]*:[ \t]*hidden|font-size[ \t]*:[ \t]*0(?![.\d]*[1-9])|opacity[ \t]*:[ \t]*0(?![.\d]*[1-9])"
        r"|color[ \t]*:[ \t]*(?:white|#fff(?:fff)?\b|transparent))|[ \t]hidden\b|aria-hidden=[\"']true)[^<>]{0,300}>"
        r"(?P<body>[^<]{0,2000})",
        _hidden_element,
        needles=("<",),
    ),
    Spec(
        "encoded-instructions",
        "concealment",
        r"[A-Za-z0-9+/_-]{24}(?<![A-Za-z0-9+/=_-].{24})[A-Za-z0-9+/_-]*={0,2}",
        view="original",
        decode=decode_base64_text,
    ),
)
