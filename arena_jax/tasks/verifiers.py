"""Final-answer extraction and numeric equality: the rule-based verifier R(x, τ) ∈ {0, 1} of SPEC §1.

A completion's final answer is the last `Answer: …` line or the last `\\boxed{…}`, whichever comes
later in the text. Numbers are compared exactly (`Fraction`), so "0.5", "1/2" and "\\frac{1}{2}" agree.
Free-form math answers (JSONL tasks) go through `math_verify_pool.py` instead.
"""
from __future__ import annotations

import re
from fractions import Fraction

_ANSWER = re.compile(r"(?im)^[ \t>*#_]*(?:final[ \t]+)?answer[ \t*_]*[:：][ \t*_]*(.*?)[ \t]*$")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FRAC = re.compile(r"^\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}$")
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")
_DECIMAL = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d{1,3})?$")
_RATIO = re.compile(r"^(-?\d+)\s*/\s*(-?\d+)$")
# Longer strings are not read as numbers: Python refuses int() of more than 4300 digits (a ValueError
# that would end the run on one degenerate completion), and no answer here is that long. Free-form
# answers that do not parse go to the timed math-verify pool instead (`JsonlTask`).
MAX_NUMBER_CHARS = 1000


def _boxed_spans(text: str) -> list[tuple[int, str]]:
  """(start, content) of every `\\boxed{…}` with balanced braces, in one linear pass.

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
  out = []
  for m in starts:
    open_at = m.end() - 1
    if open_at in closing:
      out.append((m.start(), text[m.end():closing[open_at]]))
  return out


def _clean(answer: str) -> str:
  answer = answer.strip()
  if len(answer) >= 2 and answer[0] == answer[-1] == "$":
    answer = answer[1:-1].strip()
  return answer.rstrip(".").strip()


def extract_answer(completion: str) -> str | None:
  """The final answer of a completion, or None when it states none.

  The later of the last `Answer: …` line and the last `\\boxed{…}` wins; a boxed value inside the
  answer line is unwrapped ("Answer: \\boxed{7}" → "7"), and `$…$` and a trailing period are dropped.
  """
  candidates = [(m.start(), m.group(1)) for m in _ANSWER.finditer(completion)]
  candidates += _boxed_spans(completion)
  if not candidates:
    return None
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


def verify_numeric(completion: str, reference: str) -> float:
  """1.0 iff the completion's final answer equals the numeric reference answer, else 0.0."""
  return float(numbers_equal(extract_answer(completion), reference))
