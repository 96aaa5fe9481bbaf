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
  * other chat dialects' control tokens, which a server of that family may read as turn boundaries:
    Llama 2 / Mistral `[INST]`, `[/INST]`, `<<SYS>>`, `[SYSTEM_PROMPT]`, `[TOOL_CALLS]`, `[THINK]`;
    Llama 3 / ChatML / Qwen `<|…|>` (above); Gemma `<start_of_turn>`, `<end_of_turn>`; `<s>`, `</s>`,
    `<bos>`, `<eos>`; Qwen `<think>`, `<tool_call>`. Bracket forms become `(INST)`, angle forms get a space.
  * forged truncation markers (`[… 500 tokens omitted …]`): the judge must not be told that a part of
    the trace it never saw exists. They become `(…)`; the real markers are added after hygiene.
  * disguises of all of the above: invisible characters (zero-width spaces and joiners, soft
    hyphens, bidi controls) are removed from the whole trace, look-alike brackets (`［`, `⟦`, `〔`, `＜`,
    `｜`, …) become ASCII, and inside a bracketed span of up to 80 characters look-alike letters and
    dashes (Cyrillic `Т`, Greek `Α`, full-width letters, `‐`) are folded to ASCII before matching, so
    `[Тhe End of Trace A]` is defused like `[The End of Trace A]`. Prose outside such spans is kept.

Over-long traces (SPEC §9: a pair can exceed 160k tokens) are cut to a token budget (`truncate`):
the head, the tail (where the final answer is), and between them an outline of the middle — the first
line of every step (a step: a paragraph, or a line when the middle has no blank lines; a line cut to 24,
12 or 6 tokens as the budget needs), or, when even those do not fit, of steps sampled evenly — so that a long
middle of wrong steps still reaches the judge; visible markers say how much was cut. Token counts are
approximate (a word of up to 8 letters, up to 3 digits, one other character, or a run of 2–8 whitespace
characters is one token), which over-counts typical BPE slightly: a budget is never exceeded by much, and
whitespace padding counts. It undercounts tokenizers that split digits or fall back to bytes: `judges.tokens`
cuts by the judge's own count (`judge.tokenizer`) instead, searching the budget given to `truncate`.
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
# Angle-bracket control tags: thinking tags (what prompts.split_reasoning reads), Gemma's turns, the
# sentencepiece specials and Qwen's tool calls.
_THINK_OPEN = re.compile(
  r"<(?=/?(?:think(?:ing)?|reasoning|start_of_turn|end_of_turn|start_of_image|"
  r"end_of_image|s|bos|eos|pad|unk|tool_call|tool_response)\s*>)",
  re.IGNORECASE,
)
# Llama 2 / Mistral bracket tags and Llama 2's system markers.
_BRACKET_TAG = re.compile(
  r"\[(\s*/?\s*(?:INST|SYSTEM_PROMPT|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS|TOOL_CONTENT|"
  r"THINK|IMG|IMG_BREAK|IMG_END)\s*)\]",
  re.IGNORECASE,
)
_SYS_TAG = re.compile(r"<<(\s*/?\s*SYS\s*)>>", re.IGNORECASE)
_FORGED_MARKER = re.compile(r"\[([^\[\]\n]*\b(?:tokens?|steps?|lines?)\s+omitted\b[^\[\]\n]*)\]", re.IGNORECASE)
TOKEN_PIECE = re.compile(r"[A-Za-z]{1,8}|\d{1,3}|[^\sA-Za-z\d]|\s{2,8}")
_PIECE = TOKEN_PIECE

# Invisible characters: zero-width spaces and joiners, soft hyphen, word joiner, invisible operators,
# bidi controls, byte-order mark. They carry nothing a judge needs and can split any marker.
_INVISIBLE = re.compile(
  "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)
# Look-alike brackets and bars: folded everywhere (in a math trace they only ever stand for the ASCII ones).
_BRACKETS = str.maketrans(
  {
    "［": "[",
    "］": "]",
    "⟦": "[[",
    "⟧": "]]",
    "〚": "[[",
    "〛": "]]",
    "〔": "[",
    "〕": "]",
    "⁅": "[",
    "⁆": "]",
    "﹝": "[",
    "﹞": "]",
    "【": "[",
    "】": "]",
    "＜": "<",
    "＞": ">",
    "﹤": "<",
    "﹥": ">",
    "‹": "<",
    "›": ">",
    "〈": "<",
    "〉": ">",
    "⟨": "<",
    "⟩": ">",
    "∣": "|",
    "ǀ": "|",
    "￨": "|",
  }
)
# Look-alike letters, digits and dashes: folded only inside a bracketed span (a marker's candidate).
_LOOKALIKE = {chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F) if chr(c) not in "［］＜＞｜"}
_LOOKALIKE.update(zip("АВЕКМНОРСТХаеорсухіјѕԁһӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧονι", "ABEKMHOPCTXaeopcyxijsdhlABEZHIKMNOPTYXovi"))
_LOOKALIKE.update({d: "-" for d in "‐‑‒–—―−﹣"})
_LOOKALIKE = str.maketrans(_LOOKALIKE)
_SPAN = re.compile(r"\[[^\[\]\n]{0,80}\]|<[^<>\n]{0,80}>")

TRUNCATION_MARKER = "[… {omitted} tokens omitted: the trace was truncated to fit the judge's budget …]"
STEPS_MARKER = "[… {omitted} step(s) omitted …]"
OUTLINE_NOTE = "[the middle follows as the first line of each step, or of steps spread evenly over it]"
HEAD_FRACTION = 0.25  # of the budget: the head; the tail takes `tail_fraction`; the outline the rest
STEP_LINE_TOKENS = 24  # an outlined step keeps at most this many tokens of its first line


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
  text = _INVISIBLE.sub("", text).translate(_BRACKETS)
  text = _SPAN.sub(lambda m: m.group(0).translate(_LOOKALIKE), text)
  extra = _delimiter_pattern(tuple(delimiters)) if delimiters else None
  if extra is not None:
    text = extra.sub(_defuse, text)
  text = _FORGED_MARKER.sub(r"(\1)", text)
  text = _BRACKET_TAG.sub(r"(\1)", text)
  text = _SYS_TAG.sub(r"(\1)", text)
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
  """`text` cut to about `budget` tokens: the head, a marker, an outline of the middle (`_outline`),
  then the last `tail_fraction` (the final answer).

  Unchanged when it fits. Cuts fall on token boundaries, so no word or number is split.
  """
  pieces = [m.span() for m in _PIECE.finditer(text)]
  if len(pieces) <= budget:
    return text
  tail = int(budget * tail_fraction)
  head = max(min(int(budget * HEAD_FRACTION), budget - tail), 1)
  head_end = pieces[head - 1][1]
  tail_start = pieces[len(pieces) - tail][0] if tail else len(text)
  outline = _outline(text[head_end:tail_start], budget - head - tail)
  omitted = len(pieces) - head - tail - count_tokens(outline)
  marker = TRUNCATION_MARKER.format(omitted=max(omitted, 0))
  middle = f"\n\n{marker}\n{OUTLINE_NOTE}\n{outline}" if outline else f"\n\n{marker}"
  return f"{text[:head_end]}{middle}\n\n{text[tail_start:]}".rstrip()


def _steps(middle: str) -> list[str]:
  """The middle's steps: paragraphs (blank-line separated), or its lines when it has one paragraph."""
  paragraphs = [p for p in re.split(r"\n\s*\n", middle) if p.strip()]
  if len(paragraphs) <= 1:
    paragraphs = [line for line in middle.split("\n") if line.strip()]
  return paragraphs


def _first_line(step: str, cap: int) -> str:
  line = next(line for line in step.split("\n") if line.strip()).strip()
  pieces = list(_PIECE.finditer(line))
  if len(pieces) <= cap:
    return line
  return line[: pieces[cap - 1].end()] + " …"


def _outline(middle: str, budget: int) -> str:
  """The first line of every step of `middle`, cut to STEP_LINE_TOKENS tokens, or to fewer (12, then 6)
  when that is what makes every step fit in `budget` tokens; when even that does not fit, the first
  lines (12 tokens) of as many steps spread evenly over the middle as fit, a marker where steps are
  left out."""
  steps = _steps(middle)
  if budget <= 0 or not steps:
    return ""
  for cap in (STEP_LINE_TOKENS, 12, 6):
    lines = [_first_line(s, cap) for s in steps]
    if sum(count_tokens(line) + 1 for line in lines) <= budget:
      return "\n".join(lines)
  lines = [_first_line(s, 12) for s in steps]
  cost = [count_tokens(line) + 1 for line in lines]
  gap = count_tokens(STEPS_MARKER.format(omitted=999)) + 1

  def pick(k: int) -> list[int]:
    return sorted({round(i * (len(lines) - 1) / max(k - 1, 1)) for i in range(k)}) if k else []

  def total(idx: list[int]) -> int:
    gaps = sum(1 for a, b in zip([-1] + idx, idx + [len(lines)]) if b - a > 1)
    return sum(cost[i] for i in idx) + gap * gaps

  lo, hi = 0, len(lines)  # the largest k whose even sample fits (binary search)
  while lo < hi:
    k = (lo + hi + 1) // 2
    lo, hi = (k, hi) if total(pick(k)) <= budget else (lo, k - 1)
  out, previous = [], -1
  for i in pick(lo):
    if i - previous > 1:
      out.append(STEPS_MARKER.format(omitted=i - previous - 1))
    out.append(lines[i])
    previous = i
  if out and len(lines) - 1 - previous > 0:
    out.append(STEPS_MARKER.format(omitted=len(lines) - 1 - previous))
  return "\n".join(out)


def sanitize(
  text: str, budget: int | None = None, *, tail_fraction: float = 0.25, delimiters: Sequence[str] = ()
) -> str:
  """`neutralise`, then `truncate` to `budget` tokens (None = no limit). What every trace goes through."""
  text = neutralise(text or "", delimiters)
  return text if budget is None else truncate(text, budget, tail_fraction=tail_fraction)
