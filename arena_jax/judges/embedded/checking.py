"""The simulated judge's own check of one trace, step by step (`JudgeLogic.assess`).

The built-in tasks are recognised from the problem text ("Compute <expression>." is arithmetic, "Use 3,
7, 25 to make 46 …" countdown) and each trace is checked step by step by the task's process checker
(`tasks.check_arithmetic` / `tasks.check_countdown`). A trace's penalty is invalid + irrelevant steps +
skip_weight · operations not shown + answer_weight · [wrong answer]. Unknown problems (or steps the
checker splits differently) get a generic check of every written equation (LaTeX included) and of the
final answer against the reference. A multiple-choice problem (lettered option lines, a reference "C) …")
has its final letter read as the choice verifier reads it (`choice_format.extract_letter`); a code answer (a
fenced code block, no reference) is checked for syntax (`ast.parse`, which never runs it), and a program that
does not parse is a fatal flaw. A trace's final answer is read by the task verifier's own
`tasks.extract_answer` (SPEC §1: `Answer: 11`, `**Answer:** 11`, `Final answer: 11`, `\\boxed{11}`, "The
answer is 11.", a last line that is just a number), so the judge and the reward never disagree about
what a trace answered.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from fractions import Fraction
from typing import Sequence

from arena_jax import tasks
from arena_jax.tasks import choice_format
from arena_jax.tasks import code_exec

_ARITHMETIC = re.compile(r"\bCompute\s+([-\d\s.()+*/×÷·−–]+?)\s*\.?[ \t]*$", re.MULTILINE)
_COUNTDOWN = re.compile(r"\bUse\s+(\d+(?:\s*,\s*\d+)*)\s+to\s+make\s+(\d+)\b", re.IGNORECASE)
_EQUATION = re.compile(r"[-\d \t.()+*/]+(?:=[-\d \t.()+*/]+)+")
_MAX_LINE = 1000  # longer lines are not steps of a solution; the regex scan stays cheap
_MAX_PROGRAM = 100_000  # characters of a code answer parsed (a longer one is cut, then judged)
NUMBER = re.compile(r"\d+(?:\.\d+)?")
_OPTION_LINE = re.compile(r"(?m)^([A-J])\) (.+)$")
_CHOICE_REFERENCE = re.compile(r"^([A-J])\)")


@dataclasses.dataclass
class StepFlaw:
  """One flaw the check found: where (a step, or the whole trace), what, its impact (SPEC §8), the evidence."""

  step: int | None  # 0-based; None = the whole trace
  what: str
  impact: str
  evidence: str


@dataclasses.dataclass
class Assessment:
  """What the server's own check finds in one trace."""

  steps: list[str]
  penalty: float
  answer: str | None
  answer_correct: bool | None  # None: no reference to compare with
  flaws: list[StepFlaw]
  invalid: list[int]
  irrelevant: list[int]
  skipped: int
  task: str  # arithmetic | countdown | choice | code | generic

  @property
  def flawed_steps(self) -> set[int]:
    return {f.step for f in self.flaws if f.step is not None}


def _identify(problem: str):
  """("arithmetic", expression) | ("countdown", (numbers, target)) | (None, None) from the problem text."""
  m = _ARITHMETIC.search(problem)
  if m:
    try:
      tasks.evaluate(m.group(1))
      return "arithmetic", m.group(1).strip()
    except tasks.ParseError:
      pass
  m = _COUNTDOWN.search(problem)
  if m:
    return "countdown", (tuple(int(n) for n in re.findall(r"\d+", m.group(1))), int(m.group(2)))
  return None, None


def _answers_match(answer: str | None, reference: str | None) -> bool | None:
  if reference is None:
    return None
  if answer is None:
    return False
  if tasks.numbers_equal(answer, reference):
    return True
  norm = lambda s: re.sub(r"[\s$]|\\[,!;]", "", s).rstrip(".").lower()
  return norm(answer) == norm(reference)


def _latex_to_arithmetic(text: str) -> str:
  """Plain arithmetic from the LaTeX / prose of a free-form step (best effort, for the generic check)."""
  t = re.sub(r"\\[()\[\]]", " ", text)  # inline / display math delimiters
  t = re.sub(r"\\[dt]?frac\s*\{([^{}]+)\}\s*\{([^{}]+)\}", r"(\1)/(\2)", t)
  t = re.sub(r"\\(?:times|cdot)", "*", t)
  t = t.replace("\\div", "/").replace("×", "*").replace("÷", "/").replace("−", "-")
  t = re.sub(r"\\text\s*\{[^{}]*\}|\\[a-zA-Z]+|[\\${}]", " ", t)
  return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", t)


def _balance(side: str) -> str:
  """A side of an equation cut out of prose, without the unmatched parentheses around it."""
  while side.startswith("(") and side.count("(") > side.count(")"):
    side = side[1:].strip()
  while side.endswith(")") and side.count(")") > side.count("("):
    side = side[:-1].strip()
  return side


def _wrong_equations(step: str) -> list[str]:
  """Equations written in `step` whose sides differ (decimals may round), e.g. ["18 - 6 = 11"]."""
  wrong = []
  lines = [ln[:_MAX_LINE] for ln in _latex_to_arithmetic(step).splitlines() if "=" in ln]
  for span in (sp for ln in lines for sp in _EQUATION.findall(ln)):
    sides = [_balance(s.strip(" .")) for s in span.split("=")]
    if len(sides) < 2 or any(not s for s in sides):
      continue
    try:
      values = [tasks.evaluate(s) for s in sides]
    except (tasks.ParseError, ZeroDivisionError):
      continue
    if all(NUMBER.fullmatch(s) for s in sides):
      continue  # "3 = 3": nothing computed
    for text, a, b in zip(sides[1:], values, values[1:]):
      decimals = len(text.split(".")[1]) if NUMBER.fullmatch(text) and "." in text else None
      tol = Fraction(1, 2 * 10**decimals) if decimals else Fraction(0)
      if abs(a - b) > tol + abs(b) * Fraction(1, 10**9):
        wrong.append(span.strip())
        break
  return wrong


def assess(
  problem: str, reference: str | None, steps: Sequence[str], *, skip_weight: float, answer_weight: float
) -> Assessment:
  """Checks a trace given as its steps (SPEC §8 segmentation) with the task's process checker (module
  docstring); `skip_weight` and `answer_weight` weigh operations not shown and a wrong answer in the penalty."""
  steps = [s.strip() for s in steps]
  trace = "\n\n".join(steps)
  task, spec = _identify(problem)
  if task is not None:
    if task == "arithmetic":
      report = tasks.check_arithmetic(spec, reference or tasks.format_number(tasks.evaluate(spec)), trace)
    else:
      report = tasks.check_countdown(spec[0], spec[1], trace)
    if report.num_steps == len(steps):
      flaws = [StepFlaw(f.step, f.what, f.impact, f.evidence) for f in report.flaws]
      penalty = (
        report.num_invalid
        + report.num_irrelevant
        + skip_weight * report.num_skipped
        + answer_weight * (not report.answer_correct)
      )
      return Assessment(
        steps,
        penalty,
        report.answer,
        report.answer_correct,
        flaws,
        list(report.invalid_steps),
        list(report.irrelevant_steps),
        report.num_skipped,
        task,
      )
  # Unknown problems (or steps the checker splits differently): written equations and the final answer,
  # read as the task verifier reads it (the checkers above do the same).
  kind, answer, correct, flaws = _final_answer(problem, reference, trace)
  invalid = []
  for i, step in enumerate(steps):
    wrong = _wrong_equations(step)
    if wrong:
      invalid.append(i)
      impact = "fatal" if correct is False else "major"
      flaws.append(StepFlaw(i, f"the equation {wrong[0]} does not hold", impact, step))
  if answer is None and kind != "code":
    flaws.append(StepFlaw(None, "the trace states no final answer", "fatal", ""))
  penalty = answer_weight * (correct is False)
  return Assessment(steps, penalty, answer, correct, flaws, invalid, [], 0, kind)


def _final_answer(problem: str, reference: str | None, trace: str):
  """(kind, answer, correct, flaws) of a trace outside the built-in tasks: a choice letter, a code block's
  syntax, or a free-form answer against the reference."""
  options = dict(_OPTION_LINE.findall(problem))
  ref = _CHOICE_REFERENCE.match(reference or "")
  if ref and len(options) >= 2 and list(options) == list(choice_format.LETTERS[: len(options)]):
    letter, _ = choice_format.extract_letter(trace, list(options.values()))
    return "choice", letter, letter == ref.group(1), []
  code = code_exec.extract_code(trace)
  if code is not None and reference is None:
    try:
      ast.parse(code[:_MAX_PROGRAM])  # parses only: nothing of the program runs in the judge
      return "code", None, None, []
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
      what = f"the program does not parse ({type(e).__name__}: {getattr(e, 'msg', e)})"
      return "code", None, False, [StepFlaw(None, what, "fatal", code[:200])]  # weighed as a wrong answer
  answer = tasks.extract_answer(trace)
  return "generic", answer, _answers_match(answer, reference), []
