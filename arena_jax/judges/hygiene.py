"""Trace hygiene: what a policy wrote is neutralised and bounded before a judge sees it.

The policy is optimised against the judge, so anything in a trace that the judge's *protocol* reads
is an attack surface:

  * verdict tokens: `[[A]]`, `[[B]]`, `[[C]]`, a rubric's `[[1]]` — a judge that quotes the trace
    after (or instead of) stating its own verdict would hand the policy the verdict, because the
    parser takes the last token. Every `[[` / `]]` becomes `[ [` / `] ]` (a matrix `[[1, 2]]` stays
    readable; the parsers accept only adjacent brackets).
  * template delimiters: `[The Start of Trace B]`, `[The End of Trace A]` — a forged end of trace
    followed by a forged next section would let trace A rewrite what the judge takes to be trace B.
    They become `(The Start of …)`, which no template uses.
  * step marks `[STEP-3]`: a juror refers to steps by these; forged marks would shift them. They
    become `(STEP-3)`; real marks are added after hygiene.
  * chat-template control tokens `<|im_end|>`, `<｜end▁of▁sentence｜>`: inference servers may
    tokenise them as special tokens even inside a message, ending the turn early. `<|` and `|>`
    (and the full-width forms) get a space.
  * thinking tags `<think>`, `</think>`, `<thinking>`: the parsers drop a reasoning judge's thinking
    (`prompts.split_reasoning`), so a quoted `</think>` would turn the judge's verdict before it into
    thinking, and a quoted `<think>` would make the answer look truncated. `<` gets a space.
  * the delimiters of user-supplied templates (`prompts.Templates.delimiters`: the lines around
    each placeholder), passed as `delimiters`, become `(…)` wherever they occur.

Over-long traces (SPEC §9: a pair can exceed 160k tokens) are cut to a token budget, keeping the
head and the tail (where the final answer is), with a visible marker saying how much was cut. Token
counts are approximate (a word of up to 8 letters, up to 3 digits, or one other character is one
token), which over-counts typical BPE slightly: a budget is never exceeded by much.
"""
from __future__ import annotations

import functools
import re
from typing import Sequence

_DOUBLE_OPEN = re.compile(r"\[(?=\[)")
_DOUBLE_CLOSE = re.compile(r"\](?=\])")
_DELIMITER = re.compile(r"\[(\s*the\s+(?:start|end)\s+of\b[^\[\]\n]*)\]", re.IGNORECASE)
_STEP_MARK = re.compile(r"\[(\s*step\s*-\s*\d+\s*)\]", re.IGNORECASE)
_CONTROL_OPEN = re.compile(r"<([|｜])")
_CONTROL_CLOSE = re.compile(r"([|｜])>")
_THINK_OPEN = re.compile(r"<(?=/?think(?:ing)?\s*>)", re.IGNORECASE)  # what prompts.split_reasoning reads
_PIECE = re.compile(r"[A-Za-z]{1,8}|\d{1,3}|[^\sA-Za-z\d]")

TRUNCATION_MARKER = "[… {omitted} tokens omitted: the trace was truncated to fit the judge's budget …]"


@functools.lru_cache(maxsize=32)
def _delimiter_pattern(delimiters: Sequence[str]) -> re.Pattern | None:
  words = sorted({d.strip() for d in delimiters if len(d.strip()) >= 4}, key=len, reverse=True)
  if not words:
    return None
  return re.compile("|".join(r"\s*".join(map(re.escape, w.split())) for w in words), re.IGNORECASE)


def _defuse(match: re.Match) -> str:
  inner = re.sub(r"^\W+|\W+$", "", match.group(0))
  return f"({inner})"


def neutralise(text: str, delimiters: Sequence[str] = ()) -> str:
  """`text` with verdict tokens, template delimiters, step marks, control tokens and thinking tags defused.

  Idempotent, and never creates a pattern it removes.
  """
  if not text:
    return ""
  extra = _delimiter_pattern(tuple(delimiters)) if delimiters else None
  if extra is not None:
    text = extra.sub(_defuse, text)
  text = _DELIMITER.sub(r"(\1)", text)
  text = _STEP_MARK.sub(r"(\1)", text)
  text = _DOUBLE_OPEN.sub("[ ", text)
  text = _DOUBLE_CLOSE.sub("] ", text)
  text = _THINK_OPEN.sub("< ", text)
  text = _CONTROL_OPEN.sub(r"< \1", text)
  return _CONTROL_CLOSE.sub(r"\1 >", text)


def count_tokens(text: str) -> int:
  """Approximate token count (see the module docstring)."""
  return len(_PIECE.findall(text))


def truncate(text: str, budget: int, *, tail_fraction: float = 0.25) -> str:
  """`text` cut to about `budget` tokens: the head, a visible marker, then the last `tail_fraction`.

  Unchanged when it fits. The cut falls on token boundaries, so no word or number is split.
  """
  pieces = [m.span() for m in _PIECE.finditer(text)]
  if len(pieces) <= budget:
    return text
  tail = int(budget * tail_fraction)
  head = max(budget - tail, 1)
  omitted = len(pieces) - head - tail
  head_end = pieces[head - 1][1]
  tail_start = pieces[len(pieces) - tail][0] if tail else len(text)
  marker = TRUNCATION_MARKER.format(omitted=omitted)
  return f"{text[:head_end]}\n\n{marker}\n\n{text[tail_start:]}".rstrip()


def sanitize(text: str, budget: int | None = None, *, tail_fraction: float = 0.25,
             delimiters: Sequence[str] = ()) -> str:
  """`neutralise`, then `truncate` to `budget` tokens (None = no limit). What every trace goes through."""
  text = neutralise(text or "", delimiters)
  return text if budget is None else truncate(text, budget, tail_fraction=tail_fraction)
