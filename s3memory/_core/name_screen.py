"""Names screened like text: the path a write introduces goes through both screens.

A name is text too. With names in clear (the default) the bucket's key names carry it into
listings, inventory reports, server access logs and CloudTrail; with any naming, the next
session reads it in its first ``view /memories``. So every path a create, an upsert, an
import, a management write or a rename introduces is screened, under the memory's policies:

* the sensitive-data guard (``screen_text``): a secret in a name is refused, under
  ``"redact"`` as under ``"refuse"`` (a name with a part replaced is a name nobody asked
  for); ``"allow"``, or no guard, passes it. The refusal names the kinds, never the name.
* the instruction screen (``instruction_policy``): a finding in a name is a finding of the
  write, shown as "the name" where a text's would give its line: ``"flag"`` records it with
  the write's provenance, ``"quarantine"`` holds a create for review (the held write carries
  its path), and refuses a rename (a held write is a file's text: there is no held rename).

What is screened is the path below the store's root (a mount's own name is configuration,
not the model's), one segment a line, in two readings: as written, and for the instruction
screen with ``-``, ``_`` and ``.`` read as spaces, the way the model reads
``ignore_all_previous_instructions.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .._paths import MemoryPath
from .._screening.findings import Finding, join_words, with_article
from .._screening.secrets import SensitiveDataError

#: The line a finding in a name carries (a text's lines start at 1).
NAME_LINE = 0
_WORD_JOINERS = re.compile(r"[-_.]+")


def names_text(path: MemoryPath) -> str:
    """The names of ``path`` below the store's root, one a line, as the screens read them."""
    return "\n".join(path.parts)


def refuse_secret_names(screen_text: Callable[[str], str] | None, path: MemoryPath) -> None:
    """Raise :class:`SensitiveDataError` if the guard finds a secret in a name of ``path``:
    it refuses the names (``"refuse"``) or would change them (``"redact"``)."""
    if screen_text is None or path.is_root:
        return
    names = names_text(path)
    try:
        screened = screen_text(names)
    except SensitiveDataError as refused:
        raise SensitiveDataError(_refusal(refused.findings), refused.findings) from None
    if screened != names:
        guard = getattr(screen_text, "__self__", screen_text)  # ``guard.apply`` is what the factory passes
        find = getattr(guard, "find", None)
        findings: list[Finding] = find(names) if callable(find) else []
        raise SensitiveDataError(_refusal(findings), findings)


def name_findings(find: Callable[[str], list[Finding]], path: MemoryPath) -> list[Finding]:
    """What an instruction screen's ``find`` sees in the names of ``path``, one finding per
    kind, each at :data:`NAME_LINE` with an empty span (it is in no text of the file)."""
    if path.is_root:
        return []
    names = names_text(path)
    kinds: dict[str, None] = {}
    for reading in dict.fromkeys((names, _WORD_JOINERS.sub(" ", names))):
        for finding in find(reading):
            kinds.setdefault(finding.kind)
    return [Finding(kind, 0, 0, NAME_LINE) for kind in kinds]


def _refusal(findings: Sequence[Finding]) -> str:
    kinds = list(dict.fromkeys(f.kind for f in findings))
    if not kinds:  # a screen of the application's own changed a name and said nothing of why
        return (
            "Error: The sensitive-data screen would change a file or directory name in the path; names "
            "are never rewritten. Nothing was written. Choose another name."
        )
    what = join_words([with_article(kind) for kind in kinds])
    return (
        f"Error: A file or directory name in the path holds what looks like {what}; names must not hold "
        "secrets (they are stored as object key names). Nothing was written. Choose a name without it."
    )
