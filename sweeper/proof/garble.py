"""A garble score for generated text: 0 for clean prose or code, towards 1 for junk.

A broken speculative path (wrong mask, bad padding, stale KV cache) rarely produces a subtle
difference: it produces "!!!!!!!!", "The.r the.r", or a soup of symbols. The score is the largest
of three fractions, each in [0, 1]:

- `runs`: characters inside runs of one repeated character (4 or more, digits and whitespace
  excepted: "1000000" and indentation are fine), over all non-space characters;
- `fragments`: words with letters glued to letters by sentence punctuation ("The.r", "ca,t");
  real text has some too ("e.g.", self.items, file.py), which is why a score is always compared
  with the AR baseline's score for the same prompt, not with a fixed threshold alone;
- `symbols`: characters that are neither alphanumeric, space nor sentence punctuation
  (`.,;:'"-`) over all non-space characters: code scores ~0.2, prose ~0, symbol soup ~1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RUN = re.compile(r"([^\s\d])\1{3,}")
_WORD = re.compile(r"\S+")
# Letters, then sentence punctuation, then letters again: "The.r", "ca,t" (not "f(x)").
_FRAGMENT = re.compile(r"[^\W\d_]+[.,;:!?]+[^\W\d_]+")
_SENTENCE_PUNCTUATION = frozenset(".,;:'\"-’")


@dataclass(frozen=True)
class GarbleScore:
    """The three fractions and their maximum (`score`)."""

    runs: float
    fragments: float
    symbols: float

    @property
    def score(self) -> float:
        return max(self.runs, self.fragments, self.symbols)


def garble_components(text: str) -> GarbleScore:
    """All three fractions of `text` (0 for empty text)."""
    visible = sum(1 for c in text if not c.isspace())
    if visible == 0:
        return GarbleScore(0.0, 0.0, 0.0)
    in_runs = sum(len(m.group(0)) for m in _RUN.finditer(text))
    words = _WORD.findall(text)
    fragments = sum(1 for w in words if _FRAGMENT.search(w))
    symbols = sum(1 for c in text if not (c.isspace() or c.isalnum() or c in _SENTENCE_PUNCTUATION))
    return GarbleScore(
        runs=in_runs / visible,
        fragments=fragments / len(words),
        symbols=symbols / visible,
    )


def garble_score(text: str) -> float:
    """One number in [0, 1]: the largest of the garble fractions of `text`."""
    return garble_components(text).score
