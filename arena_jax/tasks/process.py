"""Process checker for the built-in tasks: per-step validity and relevance.

The embedded judge (`judges.embedded`) prefers the trajectory with fewer invalid or irrelevant steps, and
its pointwise and juror modes report flaws with a severity (SPEC §8: neutral / minor / major /
fatal). This module gives both: a `ProcessReport` with one `StepCheck` per SPEC §8 step (so step i is
`[STEP-{i+1}]`), the ProcessBench-style earliest error index, counts, and a list of `Flaw`s in the
juror schema.

A step is parsed line by line; a line is an equation (`lhs = rhs`, chains allowed, surrounding words
tolerated), the final answer (`Answer: …` / `\\boxed{…}`) or prose. Nothing is `eval`ed: equations go
through the safe parser of `expressions.py`.

Arithmetic (`check_arithmetic`): the problem expression is parsed into its tree.
  - valid: the equation holds (every side has the same exact value);
  - relevant: its left side computes an operation of the problem tree that was not computed before,
    from operands that are the problem's numbers or earlier results — as written (a slip propagates
    and stays relevant) or correct (a silent correction). `+`/`*` operands may be swapped. Repeating
    a computed step with the same result, or computing anything else, is irrelevant. Relevance is
    judged against the canonical evaluation tree, so re-associating `a + b + c` as `a + (b + c)`
    counts as irrelevant: a limitation of this rule-based judge that the canonical format avoids.
  - skipped operations: operations done implicitly (several in one equation, a result used but never
    computed, or a bare answer) are counted on the step where they happen.
  - the answer step is valid iff it equals the last result for the whole expression (or, when that
    was never computed, the true value).
Countdown (`check_countdown`): a step is valid iff the equation holds and every number it uses is
available (a given number not yet used, or an earlier result not yet used); relevant iff its result
feeds the derivation of the final answer (dead ends are irrelevant). The answer is valid iff it is the
target and is derived by a step, or is an expression that uses the given numbers and equals the target.

Severity (one rule for every task): an invalid step is `fatal` when the final answer is wrong and
`major` when it is right anyway (compensating errors); an irrelevant step is `minor`; skipped
operations are `minor`; a missing final answer is `fatal`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from fractions import Fraction
from typing import Sequence

import numpy as np

from arena_jax.tasks import expressions as ex
from arena_jax.tasks import steps as steps_lib
from arena_jax.tasks import verifiers

IMPACTS = ("neutral", "minor", "major", "fatal")
_SEVERITY = {name: i for i, name in enumerate(IMPACTS)}
_EQUATION = re.compile(r"[-\d\s.()+*/×÷·−–]+(?:=[-\d\s.()+*/×÷·−–]+)+")


@dataclasses.dataclass(frozen=True)
class Flaw:
  """One flaw in the juror schema of SPEC §8; `step` is the 0-based step index (None: the whole trace)."""

  what: str
  impact: str
  step: int | None = None
  evidence: str = ""

  def to_json(self) -> dict:
    refs = [] if self.step is None else [steps_lib.step_ref(self.step)]
    return {"what_went_wrong": self.what, "statement_refs": refs, "impact": self.impact, "evidence": self.evidence}


@dataclasses.dataclass(frozen=True)
class StepCheck:
  """The check of one SPEC §8 step.

  kind: "compute" (has an equation), "answer" (states the final answer) or "text" (prose only).
  skipped_ops: operations this step performs implicitly (0 for a one-operation step).
  impact: the most severe flaw of the step, or None when it has none.
  """

  index: int
  text: str
  kind: str
  valid: bool
  relevant: bool
  skipped_ops: int = 0
  note: str = ""
  impact: str | None = None


@dataclasses.dataclass(frozen=True)
class ProcessReport:
  """Per-step validity and relevance of a completion, with counts and juror-style flaws."""

  steps: tuple[StepCheck, ...]
  answer: str | None
  answer_correct: bool
  flaws: tuple[Flaw, ...]

  @property
  def num_steps(self) -> int:
    return len(self.steps)

  @property
  def invalid_steps(self) -> tuple[int, ...]:
    return tuple(s.index for s in self.steps if not s.valid)

  @property
  def irrelevant_steps(self) -> tuple[int, ...]:
    return tuple(s.index for s in self.steps if s.valid and not s.relevant)

  @property
  def num_invalid(self) -> int:
    return len(self.invalid_steps)

  @property
  def num_irrelevant(self) -> int:
    """Steps that are valid but do not contribute (an invalid step is counted as invalid only)."""
    return len(self.irrelevant_steps)

  @property
  def num_skipped(self) -> int:
    return sum(s.skipped_ops for s in self.steps)

  @property
  def first_error_step(self) -> int:
    """0-based index of the earliest invalid step, -1 if none (the ProcessBench label convention)."""
    return self.invalid_steps[0] if self.invalid_steps else -1

  @property
  def is_clean(self) -> bool:
    """Right answer, every step valid and relevant, nothing skipped."""
    return self.answer_correct and not self.flaws

  def to_jury_json(self) -> str:
    """The flaws as the JSON a Reasoning Jury juror returns (SPEC §8)."""
    return json.dumps({"flaws": [f.to_json() for f in self.flaws]})


# ───────────────────────────────────────── line parsing ─────────────────────────────────────────


@dataclasses.dataclass
class _Line:
  """What one line of a step says, and what the checker concluded about it (mutable while checking)."""

  kind: str  # "equation" | "malformed" | "answer" | "text"
  text: str
  sides: tuple[ex.Expr, ...] = ()
  valid: bool = True
  relevant: bool = False
  skipped: int = 0
  note: str = ""


def _parse_line(line: str, *, last: bool = False) -> list[_Line]:
  """A trace line's parts; a line that is only a number is an answer only when it is the trace's `last`
  line (as the verifier reads it), not a step in the middle."""
  line = steps_lib.unmark(line).strip()
  if not line:
    return []
  if verifiers.extract_answer(line, bare_number=last) is not None:
    return [_Line("answer", line)]
  if "=" not in line:
    return [_Line("text", line)]
  spans = _EQUATION.findall(line)
  if not spans:
    return [_Line("malformed", line, valid=False, note="an equation that cannot be parsed")]
  out = []
  for span in spans:
    try:
      sides = tuple(ex.parse(part.strip(" \t.")) for part in span.split("="))
    except ex.ParseError as e:
      out.append(_Line("malformed", line, valid=False, note=f"an equation that cannot be parsed ({e})"))
      continue
    holds = all(s.value == sides[0].value for s in sides[1:])
    note = (
      ""
      if holds
      else (f"{ex.render(sides[0])} is {ex.format_number(sides[0].value)}, not {ex.format_number(sides[-1].value)}")
    )
    out.append(_Line("equation", line, sides=sides, valid=holds, note=note))
  return out


# ─────────────────────────────────────────── checkers ───────────────────────────────────────────


class _ArithmeticState:
  """Tracks which operations of the problem tree a trace has computed, and the values it wrote."""

  def __init__(self, problem: ex.Expr):
    self.root = problem
    self.ops = ex.operations(problem)
    self.claimed: dict[ex.Expr, Fraction] = {}
    self.covered: set[ex.Expr] = set()

  def _match(self, e: ex.Expr, node: ex.Expr):
    """[(problem node, sub-expression)] that `e` uses when it computes `node`; None if it does not."""
    if e.is_leaf:
      if node.is_leaf:
        return [] if e.value == node.value else None
      # A number may stand for an operation's result, as written or as it should be.
      return [(node, e)] if e.value in (self.claimed.get(node), node.value) else None
    if node.is_leaf or e.op != node.op:
      return None
    orders = [(0, 1), (1, 0)] if ex.is_commutative(e.op) else [tuple(range(len(e.children)))]
    for order in orders:
      used = [(node, e)]
      for ei, ni in zip(order, range(len(node.children))):
        sub = self._match(e.children[ei], node.children[ni])
        if sub is None:
          break
        used += sub
      else:
        return used
    return None

  def equation(self, line: _Line, line_id: int):
    del line_id  # arithmetic relevance needs no provenance
    lhs, claimed = line.sides[0], line.sides[-1].value
    if lhs.is_leaf:
      line.note = line.note or "restates a number without computing anything"
      return
    candidates = [n for n in self.ops if n not in self.covered] + [n for n in self.ops if n in self.covered]
    for node in candidates:
      used = self._match(lhs, node)
      if used is not None:
        break
    else:
      line.note = line.note or "computes nothing the problem asks for"
      return
    if node in self.covered and self.claimed.get(node) == claimed:
      line.note = line.note or "repeats an earlier step"
      return
    line.relevant = True
    for n, sub in used:
      if n is not node and n not in self.covered:
        line.skipped += 1
        self.covered.add(n)
        self.claimed[n] = sub.value
    self.covered.add(node)
    self.claimed[node] = claimed
    if line.skipped:
      line.note = line.note or f"does {line.skipped + 1} operations in one step"

  def answer(self, line: _Line, value: Fraction | None, text: str):
    del text  # an arithmetic answer must be a number
    line.relevant = True
    if value is None:
      line.valid, line.note = False, "the final answer is not a number"
      return
    if self.root.is_leaf:
      line.valid = value == self.root.value
    elif self.root in self.covered:
      line.valid = value == self.claimed[self.root]
      if not line.valid:
        line.note = (
          f"the answer {ex.format_number(value)} does not match the last result "
          f"{ex.format_number(self.claimed[self.root])}"
        )
      return
    else:
      missing = [n for n in self.ops if n not in self.covered]
      line.skipped = len(missing)
      self.covered.update(missing)
      # Unshown operations count as done with their true values, and the answer stands as the claim
      # for the root: a second "Answer:" line is then checked against it (not a KeyError).
      self.claimed.update({n: n.value for n in missing})
      self.claimed[self.root] = value
      line.valid = value == self.root.value
    if not line.valid:
      line.note = f"the answer {ex.format_number(value)} is wrong"
    elif line.skipped:
      line.note = f"states the answer without showing {line.skipped} operation(s)"

  def finish(self, lines: list[_Line]):
    del lines  # everything was decided line by line


class _CountdownState:
  """Tracks the pool of usable numbers (given, and results not yet used) and each step's inputs."""

  def __init__(self, numbers: Sequence[int], target: Fraction):
    self.numbers = [Fraction(n) for n in numbers]
    self.target = target
    # Pool entries: [value, producing line or None for a given number, still available].
    self.pool: list[list] = [[v, None, True] for v in self.numbers]
    self.deps: dict[int, list[int]] = {}
    self.result: dict[int, Fraction] = {}
    self.answer_value: Fraction | None = None
    self.answer_line: _Line | None = None
    self.answer_is_expression = False
    self.derivation_ok = False
    self.written: set[tuple[str, Fraction]] = set()  # equations already written (lhs key, result)

  def _take(self, value: Fraction):
    """Uses one available number equal to `value`, preferring the latest result; None if there is none."""
    for entry in reversed(self.pool):
      if entry[2] and entry[0] == value:
        entry[2] = False
        return entry
    return None

  def equation(self, line: _Line, line_id: int):
    lhs, claimed = line.sides[0], line.sides[-1].value
    if lhs.is_leaf:
      line.note = line.note or "restates a number without computing anything"
      return
    if (ex.canonical_key(lhs), claimed) in self.written:
      line.note = line.note or "repeats an earlier step"  # restating uses no numbers
      return
    self.written.add((ex.canonical_key(lhs), claimed))
    deps, missing = [], []
    for lf in ex.leaves(lhs):
      entry = self._take(lf.value)
      if entry is None:
        missing.append(ex.format_number(lf.value))
      elif entry[1] is not None:
        deps.append(entry[1])
    if missing:
      line.valid = False
      line.note = f"uses {', '.join(missing)}, which is not available" + (f"; {line.note}" if line.note else "")
    line.skipped = lhs.num_ops - 1
    self.pool.append([claimed, line_id, True])
    self.deps[line_id] = deps
    self.result[line_id] = claimed

  def answer(self, line: _Line, value: Fraction | None, text: str):
    line.relevant = True
    self.answer_line = line
    expr = None
    if value is None:
      try:
        expr = ex.parse(text)
      except ex.ParseError:
        line.valid, line.note = False, "the final answer is neither a number nor an expression"
        return
    if expr is not None and not expr.is_leaf:
      self.answer_is_expression = True
      self.answer_value = expr.value
      need = collections.Counter(lf.value for lf in ex.leaves(expr))
      have = collections.Counter(self.numbers)
      if any(need[v] > have[v] for v in need):
        line.valid, line.note = False, "the answer expression uses numbers that are not given"
      elif expr.value != self.target:
        line.valid, line.note = False, f"the answer expression equals {ex.format_number(expr.value)}, not the target"
      return
    self.answer_value = value if expr is None else expr.value
    if self.answer_value != self.target:
      line.valid, line.note = False, f"the answer {ex.format_number(self.answer_value)} is not the target"

  def finish(self, lines: list[_Line]):
    """Marks the steps that derive the answer (or the target) relevant; the others are dead ends."""
    by_id = {i: ln for i, ln in enumerate(lines)}
    goal = self.answer_value if self.answer_value is not None else self.target
    producers = [i for i, v in self.result.items() if v == goal]
    closure: set[int] = set()
    if producers:
      stack = [producers[-1]]
      while stack:
        i = stack.pop()
        if i not in closure:
          closure.add(i)
          stack.extend(self.deps.get(i, ()))
    for i in self.result:
      if i in closure:
        by_id[i].relevant = True
      elif not by_id[i].note:
        by_id[i].note = "a dead end: its result is not used for the answer"
    self.derivation_ok = bool(producers) and all(by_id[i].valid for i in closure)
    line = self.answer_line
    if line is not None and line.valid and not self.answer_is_expression and not producers:
      line.valid, line.note = False, "no step derives the answer"


def _run(state, completion: str, answer_correct_fn) -> ProcessReport:
  segments = steps_lib.split_steps(completion)
  per_segment: list[list[_Line]] = []
  flat: list[_Line] = []
  raw_lines = [(k, raw) for k, segment in enumerate(segments) for raw in segment.splitlines()]
  # A bare number answers only as the verifier reads it: on the last line, when nothing else states one.
  last = (
    -1
    if verifiers.extract_answer(completion, bare_number=False) is not None
    else max((i for i, (_, raw) in enumerate(raw_lines) if steps_lib.unmark(raw).strip()), default=-1)
  )
  by_segment: list[list] = [[] for _ in segments]
  for i, (k, raw) in enumerate(raw_lines):
    by_segment[k].extend(_parse_line(raw, last=i == last))
  for lines in by_segment:
    per_segment.append(lines)
    for ln in lines:
      line_id = len(flat)
      flat.append(ln)
      if ln.kind == "equation":
        state.equation(ln, line_id)
      elif ln.kind == "answer":
        text = verifiers.extract_answer(ln.text)
        state.answer(ln, verifiers.parse_number(text), text or "")
  state.finish(flat)
  answer = verifiers.extract_answer(completion)
  answer_correct = answer_correct_fn(answer, state)

  checks, flaws = [], []
  for index, (segment, lines) in enumerate(zip(segments, per_segment)):
    kinds = {ln.kind for ln in lines}
    kind = "answer" if "answer" in kinds else ("compute" if kinds & {"equation", "malformed"} else "text")
    valid = all(ln.valid for ln in lines)
    substantive = [ln for ln in lines if ln.kind != "text"]
    relevant = bool(substantive) and all(ln.relevant for ln in substantive)
    skipped = sum(ln.skipped for ln in lines)
    note = "; ".join(dict.fromkeys(ln.note for ln in lines if ln.note))
    step_flaws = []
    if not valid:
      what = next(ln.note for ln in lines if not ln.valid) or "an invalid step"
      step_flaws.append(Flaw(what, "major" if answer_correct else "fatal", index, segment))
    elif not relevant:
      step_flaws.append(Flaw(note or "a step that does not contribute to the solution", "minor", index, segment))
    if skipped and valid:
      step_flaws.append(Flaw(f"skips {skipped} operation(s) without showing them", "minor", index, segment))
    impact = max((f.impact for f in step_flaws), key=_SEVERITY.__getitem__, default=None)
    checks.append(StepCheck(index, segment, kind, valid, relevant, skipped, note, impact))
    flaws += step_flaws
  if answer is None:
    flaws.append(Flaw("the trace states no final answer", "fatal"))
  return ProcessReport(tuple(checks), answer, answer_correct, tuple(flaws))


def check_arithmetic(expression: str, reference: str, completion: str) -> ProcessReport:
  """Checks a completion for the arithmetic problem `expression` (reference answer `reference`)."""
  state = _ArithmeticState(ex.parse(expression))
  return _run(state, completion, lambda answer, _: verifiers.numbers_equal(answer, reference))


def check_countdown(numbers: Sequence[int], target, completion: str) -> ProcessReport:
  """Checks a countdown completion; `answer_correct` is the countdown reward (a valid derivation)."""
  state = _CountdownState(numbers, Fraction(target))

  def correct(answer, st):
    line = st.answer_line
    if answer is None or line is None or not line.valid:
      return False
    return st.answer_is_expression or st.derivation_ok

  return _run(state, completion, correct)


# ─────────────────────────────────────── process metrics ───────────────────────────────────────

# What the judge is supposed to change: the process quality of a policy's own outputs.
PROCESS_METRICS = (
  "faithful_accuracy",
  "compensating_rate",
  "flawed_correct_rate",
  "bare_answer_rate",
  "skipped_rate",
  "redundant_rate",
  "blind_flaw_rate",
  "first_error_step_wrong",
)


def is_blind_flaw(report: ProcessReport) -> bool:
  """A flaw the verifier cannot see (the study's testbed, docs/results/testbed.md): every step holds, yet an
  operation is skipped or a step is redundant. It leaves the answer as it is, so only a judge of the process can
  tell such a trace from a clean one (a bare answer is left out: it shows nothing to judge)."""
  return (
    report.num_invalid == 0 and not is_bare_answer(report) and (report.num_skipped > 0 or report.num_irrelevant > 0)
  )


def is_bare_answer(report: ProcessReport) -> bool:
  """A trace that is only its final answer (one step, the answer, nothing derived)."""
  return report.num_steps == 1 and report.steps[0].kind == "answer"


def process_counts(reports: Sequence[ProcessReport], correct: Sequence[float]) -> dict[str, float]:
  """Sums over completions from which `process_rates` forms the rates; sums so that hosts can add theirs.

  `correct` is the verifier's reward of each completion (> 0.5 = a right answer), the same reading as the
  accuracy metrics, so faithful accuracy ≤ accuracy always.
  """
  out = dict.fromkeys(
    (
      "n",
      "faithful",
      "compensating",
      "flawed_correct",
      "bare",
      "skipped",
      "redundant",
      "blind",
      "wrong_with_error",
      "first_error_sum",
    ),
    0.0,
  )
  for report, reward in zip(reports, correct, strict=True):
    right = float(reward) > 0.5
    out["n"] += 1
    out["faithful"] += right and report.num_invalid == 0
    out["compensating"] += right and report.num_invalid > 0
    out["flawed_correct"] += right and bool(report.flaws)
    out["bare"] += is_bare_answer(report)
    out["skipped"] += report.num_skipped > 0
    out["redundant"] += report.num_irrelevant > 0
    out["blind"] += is_blind_flaw(report)
    if not right and report.num_invalid > 0:
      out["wrong_with_error"] += 1
      out["first_error_sum"] += report.first_error_step
  return out


def process_rates(counts: dict[str, float]) -> dict[str, float]:
  """The process metrics from summed `process_counts`:

  faithful_accuracy       right answer and every step valid
  compensating_rate       right answer with an invalid step (errors that cancel out)
  flawed_correct_rate     right answer with any flaw (invalid, irrelevant or skipped step, bare answer)
  bare_answer_rate        the trace is only its answer
  skipped_rate            some operation done without being shown
  redundant_rate          some step that computes nothing the answer needs (irrelevant)
  blind_flaw_rate         every step valid, yet a skipped operation or a redundant step (`is_blind_flaw`):
                          the flaw a verifier cannot see
  first_error_step_wrong  mean 0-based index of the first invalid step among wrong answers that have one
                          (left out when none has: an undefined mean is not a number to plot)
  """
  n = max(counts["n"], 1.0)
  out = {
    "faithful_accuracy": counts["faithful"] / n,
    "compensating_rate": counts["compensating"] / n,
    "flawed_correct_rate": counts["flawed_correct"] / n,
    "bare_answer_rate": counts["bare"] / n,
    "skipped_rate": counts["skipped"] / n,
    "redundant_rate": counts.get("redundant", 0.0) / n,
    "blind_flaw_rate": counts.get("blind", 0.0) / n,
  }
  if counts["wrong_with_error"]:
    out["first_error_step_wrong"] = counts["first_error_sum"] / counts["wrong_with_error"]
  return out


def group_process_metrics(reports: Sequence[ProcessReport], correct: Sequence[float], group_size: int) -> dict:
  """What the judge has to work with inside non-diverse groups (rows g·G … g·G + G − 1 form group g):

  all_correct_flawed      share of all-correct groups with at least one flawed member (the judge can
                          prefer the clean ones); left out without all-correct groups
  all_wrong_error_spread  mean over all-wrong groups of the std of their members' first-error steps
                          (a member without an invalid step counts as erring after its last step);
                          0 = every member went wrong at the same step; left out without all-wrong groups
  """
  right = np.asarray(correct, np.float64).reshape(-1, group_size) > 0.5
  flawed = np.asarray([bool(r.flaws) for r in reports]).reshape(-1, group_size)
  first = np.asarray([r.first_error_step if r.num_invalid else r.num_steps for r in reports], np.float64).reshape(
    -1, group_size
  )
  all_right, all_wrong = right.all(-1), ~right.any(-1)
  out = {}
  if all_right.any():
    out["all_correct_flawed"] = float(flawed[all_right].any(-1).mean())
  if all_wrong.any():
    out["all_wrong_error_spread"] = float(first[all_wrong].std(-1).mean())
  return out


def normalise_trace(text: str) -> str:
  """What makes two traces the same trajectory for the judge: equal text up to whitespace (runs of
  spaces, tabs and newlines count as one space; leading and trailing whitespace is dropped). The judge's
  deduplication (`train.judging.Nodes`) and `distinct_traces` share it."""
  return " ".join(text.split())


def distinct_traces(texts: Sequence[str], group_size: int) -> np.ndarray:
  """[n] the distinct traces (`normalise_trace`) of each group of `group_size` consecutive texts: the judge's
  room (a group of G copies of one trace has nothing to rank, and deduplication makes it one node)."""
  return np.asarray(
    [len({normalise_trace(t) for t in texts[b : b + group_size]}) for b in range(0, len(texts), group_size)], np.int64
  )


def process_metrics(
  task, examples: Sequence, completions: Sequence[str], correct: Sequence[float], *, group_size: int | None = None
) -> dict:
  """`process_rates` of completions of `task` (one example per completion), and with `group_size` the
  `group_process_metrics` of its groups; {} when the task has no process checker (user JSONL data)."""
  if not getattr(task, "has_process_checker", False):
    return {}
  reports = [task.check_process(e, c) for e, c in zip(examples, completions, strict=True)]
  out = process_rates(process_counts(reports, correct))
  if group_size:
    out.update(group_process_metrics(reports, correct, group_size))
  return out
