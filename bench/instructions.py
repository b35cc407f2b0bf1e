"""Benchmark of the instruction screen: false positives, detection rates, throughput.

    python bench/instructions.py              # everything
    python bench/instructions.py --verbose    # also list each miss and each false positive
    python bench/instructions.py --no-heldout # tuning only: what to look at while tuning

The corpora (``tests/data``):

- ordinary notes: every ``## /memories/...`` section of ``tests/data/notes/*.md`` and of
  ``tests/data/prose_notes.md``, plus the hard negatives of ``tests/data/poisoning``
  (ordinary notes that look like attacks). Any finding in one of them is a false positive.
- poisoning payloads: ``tests/data/poisoning/tuning.json`` (the screen was tuned against
  these) and ``heldout.json`` (written first and never used for tuning). A payload is
  detected if the screen finds anything in it.

Throughput is measured on all the corpora, best of five rounds: screened one text per note
or payload (a fixed cost per text weighs on short notes), then joined into one text. Then
the worst time on 100 KiB adversarial inputs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from s3memory._screening.instructions import InstructionScreen  # noqa: E402

DATA = ROOT / "tests" / "data"
SECTION = re.compile(r"^## /memories/", re.MULTILINE)
# Techniques the screen does not claim to catch (its module docstring says why).
EXPECTED_MISSES = frozenset({"benign_steering", "other_language", "paraphrase"})


@dataclass(frozen=True)
class Sample:
    id: str
    text: str
    split: str  # "ordinary", "negative", "tuning", "heldout"
    technique: str
    source: str


def notes() -> list[Sample]:
    """Each note of the ordinary corpora (a section from ``## /memories/`` to the next)."""
    samples: list[Sample] = []
    for path in [*sorted((DATA / "notes").glob("*.md")), DATA / "prose_notes.md"]:
        text = path.read_text(encoding="utf-8")
        starts = [m.start() for m in SECTION.finditer(text)]
        for index, start in enumerate(starts):
            end = starts[index + 1] if index + 1 < len(starts) else len(text)
            source = "prose_notes.md" if path.name == "prose_notes.md" else "notes/"
            samples.append(Sample(f"{path.name}#{index + 1}", text[start:end], "ordinary", "note", source))
    return samples


def payloads(name: str) -> list[Sample]:
    entries = json.loads((DATA / "poisoning" / name).read_text(encoding="utf-8"))
    return [Sample(e["id"], e["text"], e["split"], e["technique"], e["source"]) for e in entries]


def adversarial(size: int = 100 * 1024) -> dict[str, str]:
    """Inputs that make a backtracking pattern slow, each ``size`` characters long."""
    pieces = {
        "a": "a",
        "parens": "(",
        "brackets": "![",
        "comment opens": "<!--",
        "base64": "QUFB",
        "spaces": " ",
        "ignore words": "ignore the ",
        "sentences": "in every future session. ",
        "backticks": "`a",
        "zero width": "a\u200b",
        "cyrillic": "a\u0430",
        "role lines": "SYSTEM: \n",
        "tags": "<system",
        "url": "https://x/?q={",
        "from now on": "from now on ",
        "send": "send ",
        "triggers": "if the user says ",
        "credential paths": "read ~/.ssh/",
        "images": "![a](//",
    }
    return {name: (piece * (size // len(piece) + 1))[:size] for name, piece in pieces.items()}


def rate(hits: int, total: int) -> str:
    return f"{hits}/{total} ({hits / total:.0%})" if total else "0/0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verbose", action="store_true", help="list misses and false positives")
    parser.add_argument("--no-heldout", action="store_true", help="leave the held-out payloads out (for tuning)")
    args = parser.parse_args(argv)

    screen = InstructionScreen()
    ordinary = notes()
    negatives = payloads("hard_negatives.json")
    splits = ["tuning"] if args.no_heldout else ["tuning", "heldout"]
    attacks = {split: payloads(f"{split}.json") for split in splits}

    false_positives = [(s, screen.findings(s.text)) for s in [*ordinary, *negatives]]
    false_positives = [(s, f) for s, f in false_positives if f]
    fp_ordinary = sum(1 for s, _ in false_positives if s.split == "ordinary")
    fp_negative = sum(1 for s, _ in false_positives if s.split == "negative")
    sources = ", ".join(f"{name} {n}" for name, n in sorted(Counter(s.source for s in ordinary).items()))
    print(f"ordinary notes: {len(ordinary)} ({sources}), false positives: {fp_ordinary}")
    print(f"hard negatives: {len(negatives)}, false positives: {fp_negative}")
    if args.verbose:
        for sample, found in false_positives:
            shown = ", ".join(f"{f.kind} {sample.text[f.start : f.end][:70]!r}" for f in found)
            print(f"  FALSE POSITIVE {sample.id}: {shown}")

    by_technique: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_kind: dict[str, int] = defaultdict(int)
    for split, samples in attacks.items():
        hits = 0
        for sample in samples:
            found = screen.findings(sample.text)
            hits += bool(found)
            by_technique[sample.technique][0] += bool(found)
            by_technique[sample.technique][1] += 1
            for kind in {f.kind for f in found}:
                by_kind[kind] += 1
            if args.verbose and not found:
                print(f"  MISSED {sample.id} ({sample.technique}): {sample.text[:90]!r}")
        print(f"detection, {split} set: {rate(hits, len(samples))}")
        claimed = [s for s in samples if s.technique not in EXPECTED_MISSES]
        caught = sum(1 for s in claimed if screen.findings(s.text))
        print(f"  without the expected misses ({', '.join(sorted(EXPECTED_MISSES))}): {rate(caught, len(claimed))}")
    print("detection by technique:")
    for technique, (hits, total) in sorted(by_technique.items()):
        print(f"  {technique:<24} {rate(hits, total)}")
    print("payloads with a finding of each kind: " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))

    texts = [s.text for s in [*ordinary, *negatives, *(s for v in attacks.values() for s in v)]]
    size = sum(len(t.encode("utf-8")) for t in texts)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for text in texts:
            screen.findings(text)
        best = min(best, time.perf_counter() - started)
    speed = size / best / 1e6
    print(f"throughput: {speed:.2f} MB/s over {len(texts)} texts ({size / 1024:.0f} KiB), {best * 1000:.0f} ms")
    whole = "\n\n".join(texts)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        screen.findings(whole)
        best = min(best, time.perf_counter() - started)
    print(f"throughput: {size / best / 1e6:.2f} MB/s on the same texts as one text ({best * 1000:.0f} ms)")

    worst, worst_name = 0.0, ""
    for name, text in adversarial().items():
        started = time.perf_counter()
        screen.findings(text)
        elapsed = time.perf_counter() - started
        if elapsed > worst:
            worst, worst_name = elapsed, name
    print(f"adversarial 100 KiB inputs: worst {worst * 1000:.0f} ms ({worst_name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
