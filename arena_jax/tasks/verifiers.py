"""Final-answer extraction and numeric equality: the rule-based verifier R(x, τ) ∈ {0, 1} of SPEC §1.

A completion's final answer is the last answer it states, in any of these forms (the one that comes
latest in the text wins):

  * an answer line: `Answer: 11`, `Final answer: 11`, `**Answer:** 11`, `> Answer: $11$`;
  * `\\boxed{11}` (or `\\fbox{…}`), anywhere;
  * a sentence: "The answer is 11.", "So the final answer is $\\boxed{11}$", "my answer is 7/2";
  * failing all of these, a last line that is only a number ("11", "**11**", "$11$."), or, with
    `fallback="last_number"` (`tasks.answer_fallback`), the last number of the text ("5 + 6 = 11": 11): how
    small instruct models that ignore the answer format state a result (lm-eval-harness' flexible extract).

The same reading serves the task rewards (SPEC §1), the process checker (`process.py`) and the embedded
judge's answer check (SPEC §4, §8), so a reward and a judge never disagree about what a trace answered.
Numbers are compared exactly (`Fraction`), so "0.5", "1/2" and "\\frac{1}{2}" agree. Free-form math answers
(JSONL tasks) go through `math_verify_pool.py` instead.
"""

from __future__ import annotations

import re
from fractions import Fraction

from arena_jax.tasks import thinking

_ANSWER = re.compile(r"(?im)^[ \t>*#_]*(?:final[ \t]+)?answer[ \t*_]*[:：][ \t*_]*(.*?)[ \t]*$")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "The answer is 11." Only after the/my/our, so that "the reference answer is 35" quoted in a trace is
# not read as its own answer; `[ \t]` keeps the match on one line.
_ANSWER_IS = re.compile(r"(?i)\b(?:the|my|our)[ \t]+(?:(?:final|correct)[ \t]+)?answer[ \t]+is\b[ \t]*:?[ \t]*([^\n]*)")
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)")
_WORD = re.compile(r"[A-Za-z]{2,}")  # "the answer is not 12", "… is that": prose, not an answer
_MARKUP = "*_ \t"  # bold / italics around an answer: "**11**"
_FRAC = re.compile(r"^\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}$")
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")
_DECIMAL = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d{1,3})?$")
_RATIO = re.compile(r"^(-?\d+)\s*/\s*(-?\d+)$")
# Longer strings are not read as numbers: Python refuses int() of more than 4300 digits (a ValueError
# that would end the run on one degenerate completion), and no answer here is that long. Free-form
# answers that do not parse go to the timed math-verify pool instead (`JsonlTask`).
MAX_NUMBER_CHARS = 1000


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
  """(start, end, content) of every `\\boxed{…}` (or `\\fbox{…}`) with balanced braces, in one linear pass.

  (Degenerate output such as thousands of unclosed `\\boxed{` must not cost quadratic time.)
  """
  starts = list(_BOXED.finditer(text))
  if not starts:
    return []
  closing, stack = {}, []
  for i, ch in enumerate(text):
    if ch == "{":
      stack.append(i)
    elif ch == "}" and stack:
      closing[stack.pop()] = i
  return [
    (m.start(), closing[m.end() - 1] + 1, text[m.end() : closing[m.end() - 1]])
    for m in starts
    if m.end() - 1 in closing
  ]


def _boxed_spans(text: str) -> list[tuple[int, str]]:
  return [(start, content) for start, _, content in boxed_spans(text)]


def _clean(answer: str) -> str:
  answer = answer.strip().rstrip(".").strip(_MARKUP)
  if len(answer) >= 2 and answer[0] == answer[-1] == "$":
    answer = answer[1:-1].strip()
  return answer.rstrip(".").strip()


def _sentence_answers(text: str) -> list[tuple[int, str]]:
  """(start, answer) of every "the answer is …": up to the end of its sentence, and only the leading
  number when one leads it ("11, since 5 + 6 = 11" → "11"; a free-form "x = 3" is kept whole)."""
  out = []
  for m in _ANSWER_IS.finditer(text):
    value = _SENTENCE_END.split(m.group(1)[:MAX_NUMBER_CHARS], maxsplit=1)[0].strip().strip(_MARKUP)
    if not value or _WORD.match(value):
      continue
    first = value.split()[0].rstrip(",;:")
    if parse_number(value) is None and parse_number(first) is not None:
      value = first
    out.append((m.start(), value))
  return out


# A number as a result is written: "-3", "1,234", "2.5", "7/2"; not a digit inside a word ("x2", "step2").
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:/\d+)?(?![\w])")
ANSWER_FALLBACKS = ("number_line", "last_number")


def _last_number(text: str) -> str | None:
  """The last number of the text ("5 + 6 = 11\n\nThat is simple." → "11")."""
  numbers = [m.group(0).rstrip(",") for m in _NUMBER.finditer(text)]
  return numbers[-1] if numbers else None


def _bare_number_line(text: str) -> str | None:
  """The last non-empty line when it is only a number ("32", "**32**", "$32$.")."""
  lines = [ln for ln in text.splitlines() if ln.strip()]
  last = _clean(lines[-1]) if lines else ""
  return last if parse_number(last) is not None else None


def extract_answer(completion: str, *, bare_number: bool = True, fallback: str = "number_line") -> str | None:
  """The final answer of a completion, or None when it states none (forms: module docstring).

  Only the text outside any thinking block is read (`thinking.split_thinking`; None when the
  completion ended inside one). The latest `Answer: …` line, `\\boxed{…}` or "the answer is …" wins; a
  boxed value inside it is unwrapped ("Answer: \\boxed{7}" → "7"), and `$…$`, bold and a trailing period
  are dropped. Only when none is there is the `fallback` read as the answer: "number_line", a last line that
  is just a number; "last_number", the last number of the text (`bare_number=False`: neither, for reading
  one line of a trace that may not be its last).
  """
  # A reasoning policy's answer comes after its thinking: drafts inside the block are not answers, and
  # a completion that ended inside the block has none (`thinking.split_thinking`).
  split = thinking.split_thinking(completion)
  if split.unclosed:
    return None
  completion = split.visible
  candidates = [(m.start(), m.group(1)) for m in _ANSWER.finditer(completion)]
  candidates += _boxed_spans(completion)
  candidates += _sentence_answers(completion)
  if not candidates:
    if not bare_number:
      return None
    return _last_number(completion) if fallback == "last_number" else _bare_number_line(completion)
  start, text = max(candidates, key=lambda c: c[0])
  inner = _boxed_spans(text)
  if inner:
    text = inner[-1][1]
  text = _clean(text)
  return text or None


def parse_number(text: str | None) -> Fraction | None:
  """An exact number from "12", "-3", "1,234", "2.5", "1e3", "7/2", "\\frac{7}{2}" or "$12$"; else None."""
  if text is None:
    return None
  s = _clean(str(text)).replace("−", "-").replace(" ", "").replace("\\!", "")
  if s.startswith("+"):
    s = s[1:]
  if len(s) > MAX_NUMBER_CHARS:
    return None
  if _THOUSANDS.match(s):
    s = s.replace(",", "")
  m = _FRAC.match(s) or _RATIO.match(s)
  if m:
    num, den = int(m.group(1)), int(m.group(2))
    return Fraction(num, den) if den else None
  if _DECIMAL.match(s):
    return Fraction(s)
  return None


def numbers_equal(a, b) -> bool:
  """Exact equality of two answers that both parse as numbers (False if either does not)."""
  x = a if isinstance(a, Fraction) else parse_number(a)
  y = b if isinstance(b, Fraction) else parse_number(b)
  return x is not None and y is not None and x == y


def verify_numeric(completion: str, reference: str, *, fallback: str = "number_line") -> float:
  """1.0 iff the completion's final answer (`extract_answer` with `fallback`) equals the numeric reference
  answer, else 0.0."""
  return float(numbers_equal(extract_answer(completion, fallback=fallback), reference))
