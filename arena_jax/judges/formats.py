"""Verdict formats (`judge.verdict_format`, SPEC §4.1 and §7): how a judge is asked for its verdict and how the
answer is read, so that judges of every size can be used.

  reasoned  today's format: the judge explains, then writes `[[A]]` / `[[B]]` / `[[C]]` (pairwise) or
            `Rating: [[level]]` (pointwise): for reasoning judges. Templates `pairwise`, `pointwise`.
  letter    the judge answers with one letter, `A` or `B` (pairwise), or one word, `Yes` or `No` (pointwise: is
            the solution correct and sound?), within `LETTER_MAX_TOKENS`; the first letter or word is read. For
            small judges that cannot follow the reasoned format (a 135M model loops and never writes `[[A]]`).
            A pairwise answer is a win or a loss, never a tie: with `debias = both` two disagreeing orders give ½.
            Templates `pairwise_letter`, `pointwise_letter`.
  logprobs  the letter prompt, one token, with `top_logprobs`: the judge's own probabilities. Pairwise, the shown
            first trace's p = P(A) / (P(A) + P(B)) and its soft outcome 1/2 + 2m(p − 1/2) (= p at m = 1/2, a
            categorical win's 1/2 + m at p = 1; SPEC §4.1); pointwise, the score P(Yes) / (P(Yes) + P(No)). A
            server that ignores `logprobs` (`transformers serve` does) is found by the start-up probe
            (`client.check_logprobs`), which names the other formats.

A letter or token that is not one of the labels (`C`, `Maybe`), or an answer with neither, is `unparseable`: a
judge failure, counted and retried like any other (SPEC §4.3).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable, Sequence

from arena_jax.arena.outcomes import Verdict, verdict_to_outcome
from arena_jax.judges import prompts

# What the letter templates ask, word for word: how the embedded judge tells them from the reasoned ones.
LETTER_CUES = {
  "pairwise_letter": "Answer with one letter, A or B",
  "pointwise_letter": "Answer with one word, Yes or No",
}
LETTER_MAX_TOKENS = 8  # "A", "**A**", "The better trace is B": a label in a few tokens; more lets a small judge ramble
TOP_LOGPROBS = 20  # the alternatives asked for: the labels are among them for any judge that follows the prompt

# The first word of an answer, after optional markup and a lead-in that names what follows ("Answer:", "The answer is",
# "The better trace is", "Trace", "The trace with A is better", "The trace with the letter \"A\""): small judges write
# these (SmolLM2's own words in `make real`). A lead-in that says something else ("The trace with a …") leaves its first
# word, which is no label.
_MARKUP = r"[\s\"'`*_(\[{]*"
_LEAD_IN = (
  r"(?i:(?:the\s+)?(?:(?:final|correct|better|best)\s+)?(?:answer|verdict|choice|option|trace|solution)"
  r"(?:\s+with(?:\s+the\s+letter)?)?(?:\s+is)?\s*[:：]?" + _MARKUP + r"(?:trace\s+|solution\s+|option\s+)?)"
)
_FIRST_LETTER = re.compile(r"^" + _MARKUP + r"(?:" + _LEAD_IN + r")?([A-Za-z]+)\b")


def parse_letter(text: str | None) -> Verdict | None:
  """The verdict, in presentation order, of a one-letter answer: `A` → the first shown wins, `B` → the second;
  anything else (another letter, a word, nothing) None."""
  m = _FIRST_LETTER.match(prompts.split_reasoning(text).text or "")
  if not m:
    return None
  return {"A": Verdict.FIRST_WINS, "B": Verdict.SECOND_WINS}.get(m.group(1))


def parse_yes_no(text: str | None) -> float | None:
  """The pointwise score of a one-word answer: `Yes` → 1, `No` → 0 (either case); anything else None."""
  m = _FIRST_LETTER.match(prompts.split_reasoning(text).text or "")
  if not m:
    return None
  return {"yes": 1.0, "no": 0.0}.get(m.group(1).lower())


def label_probability(top_logprobs: Sequence[tuple[str, float]] | None, first: str, second: str) -> float | None:
  """P(first) / (P(first) + P(second)) over the first token's alternatives (a token counts for a label when it
  reads as the label once stripped of spaces and case, "A", " A", "a"), or None when neither label is among them."""
  if not top_logprobs:
    return None
  mass = {first: 0.0, second: 0.0}
  for token, logprob in top_logprobs:
    label = token.strip().lower()
    for name in mass:
      if label == name.lower():
        mass[name] += math.exp(logprob)
  total = mass[first] + mass[second]
  return mass[first] / total if total > 0 else None


def parse_letter_logprobs(top_logprobs) -> float | None:
  """P(A) / (P(A) + P(B)): the shown first trace's probability of being the better one."""
  return label_probability(top_logprobs, "A", "B")


def parse_yes_no_logprobs(top_logprobs) -> float | None:
  """P(Yes) / (P(Yes) + P(No)): the pointwise score."""
  return label_probability(top_logprobs, "Yes", "No")


@dataclasses.dataclass(frozen=True)
class VerdictFormat:
  """One verdict format: its templates, answer budget and parsers.

  suffix: appended to the template names (`pairwise` + suffix, `pointwise` + suffix).
  max_tokens: the answer budget, at most `judge.max_tokens` (None: `judge.max_tokens` itself).
  top_logprobs: > 0 asks for the first token's alternatives, which the parsers then read instead of the text.
  parse_pairwise: answer → Verdict (shown order) or the shown first trace's probability of winning, or None.
  parse_pointwise: (answer, rubric levels) → score in [0, 1], or None.
  """

  name: str
  suffix: str
  max_tokens: int | None
  top_logprobs: int
  parse_pairwise: Callable[[Any], Any]
  parse_pointwise: Callable[[Any, Sequence[float]], float | None]

  def template(self, kind: str) -> str:
    return kind + self.suffix

  def answer_tokens(self, max_tokens: int) -> int:
    return int(max_tokens) if self.max_tokens is None else min(int(max_tokens), self.max_tokens)


FORMATS = {
  "reasoned": VerdictFormat("reasoned", "", None, 0, prompts.parse_pairwise, prompts.parse_rating),
  "letter": VerdictFormat(
    "letter", "_letter", LETTER_MAX_TOKENS, 0, parse_letter, lambda text, levels: parse_yes_no(text)
  ),
  "logprobs": VerdictFormat(
    "logprobs", "_letter", 1, TOP_LOGPROBS, parse_letter_logprobs, lambda lp, levels: parse_yes_no_logprobs(lp)
  ),
}
VERDICT_FORMATS = tuple(FORMATS)


def get(name: str) -> VerdictFormat:
  """The format called `name` (one of `VERDICT_FORMATS`)."""
  if name not in FORMATS:
    raise ValueError(f"judge.verdict_format={name!r}: one of {', '.join(VERDICT_FORMATS)}")
  return FORMATS[name]


def shown_outcome(parsed: Any, margin: float) -> float:
  """The soft outcome of the trace shown first (SPEC §4.1): a Verdict's 1/2 + m, 1/2 or 1/2 − m; a probability
  p of winning (the logprobs format) 1/2 + 2m(p − 1/2)."""
  if isinstance(parsed, Verdict):
    return verdict_to_outcome(parsed, margin)
  p = min(max(float(parsed), 0.0), 1.0)
  return 0.5 + 2.0 * margin * (p - 0.5)
