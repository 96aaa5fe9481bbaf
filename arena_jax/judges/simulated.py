"""The simulated judge behind the embedded server: a rule-based process judge (DESIGN: "The embedded default").

`JudgeLogic.answer(prompt, seed)` reads a prompt rendered from the project's own templates
(`prompts.py`): the `[The Start of X]` sections a prompt has tell it what it is asked (pairwise,
pointwise, juror, consolidation, debate, moderator, synthesis), and `prompts.parse_sections` finds the
problem, the reference answer and the traces (hygiene has neutralised any forged delimiter inside
them). It then judges like a careful but imperfect LLM:

  * the built-in tasks are recognised from the problem text ("Compute <expression>." is arithmetic,
    "Use 3, 7, 25 to make 46 …" countdown) and each trace is checked step by step by the task's
    process checker (`tasks.check_arithmetic` / `tasks.check_countdown`). A trace's penalty is
    invalid + irrelevant steps + skip_weight · operations not shown + answer_weight · [wrong
    answer]. Pairwise (SPEC §4): d = penalty_B − penalty_A + position_bias + Logistic(0, noise);
    |d| ≤ tie_band is [[C]], else [[A]] when d > 0, [[B]] otherwise; when the penalties differ, a
    share `flip_rate` of these [[A]] / [[B]] verdicts is reversed (a judge of verdict accuracy
    1 − flip_rate on pairs that differ in process). Unknown problems: final-answer
    correctness against the reference, then a tie. A trace's final answer is read by the task
    verifier's own `tasks.extract_answer` (SPEC §1: `Answer: 11`, `**Answer:** 11`, `Final answer: 11`,
    `\\boxed{11}`, "The answer is 11.", a last line that is just a number), so the judge and the
    reward never disagree about what a trace answered;
  * pointwise (SPEC §7): the rubric level (read from the prompt's rubric) nearest to 1 for a flawless
    trace, the middle for a right answer reached with flaws, 0 for a wrong answer;
  * juror: the checker's flaws as Phase-1 JSON (SPEC §8), each flawed step missed with probability
    `miss_rate`, each clean step flagged with `false_alarm_rate`; unknown problems get a generic
    check of every written equation (LaTeX included). Errors are drawn from a hash of (server seed,
    request seed, trace, step): jurors asked with different seeds err independently;
  * consolidation keeps a step's flaw that a majority reported, or that fewer reported and its own
    check confirms; in deliberation a juror confirms a claim by its own check (`debate_*` rates),
    the moderator asks the juror with the most open positions about them and stops when every claim
    is settled, and the synthesis reports the accepted claims.

How it writes what it decided is the `style` knob (`JudgeLogic.reply`): `plain`, one short answer that
ends in the template's format (`answer`); `reasoning`, the answer of a served reasoning LLM — thinking
that names verdicts it does not give, drafts JSON and restates the format, in `reasoning_content` or
inline in `<think>`, then the verdict in one of the forms such models write, a share `truncate_rate` cut
mid-thought. The verdicts are the same; only the cut answers lose theirs (SPEC §4: a failure, dropped).

The knobs are those of `config.server_config()`; the HTTP layer (`server.py`) adds latency and faults.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from fractions import Fraction
from typing import Any, Callable, Sequence

import ml_collections

from arena_jax import tasks
from arena_jax.judges import hygiene
from arena_jax.judges import prompts

# Which template a prompt was rendered from, by the sections it has (first match wins).
_KINDS = (
    ("synthesis", {"Final Consensus State"}),
    ("moderator", {"Consensus State"}),
    ("consolidation", {"Juror Verdicts", "Step-Marked Trace"}),
    ("debate", {"Claims Under Discussion", "Step-Marked Trace"}),
    ("juror", {"Step-Marked Trace"}),
    ("pairwise", {"Trace A", "Trace B"}),
    ("pointwise", {"Trace"}),
)
_ARITHMETIC = re.compile(r"\bCompute\s+([-\d\s.()+*/×÷·−–]+?)\s*\.?[ \t]*$", re.MULTILINE)
_COUNTDOWN = re.compile(r"\bUse\s+(\d+(?:\s*,\s*\d+)*)\s+to\s+make\s+(\d+)\b", re.IGNORECASE)
_STEP_MARK = re.compile(r"^\[STEP-(\d+)\][ \t]*", re.MULTILINE)
_EQUATION = re.compile(r"[-\d \t.()+*/]+(?:=[-\d \t.()+*/]+)+")
_MAX_LINE = 1000  # longer lines are not steps of a solution; the regex scan stays cheap
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_UNKNOWN = "I can only judge prompts written with arena_jax's judge templates."
_TOKEN_PIECE = hygiene.TOKEN_PIECE  # hygiene.count_tokens's tokens


# ───────────────────────────────────────── deterministic draws ─────────────────────────────────────────


def _unit(*parts) -> float:
  """A uniform draw in [0, 1) that depends only on `parts` (same question → same answer)."""
  digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode("utf-8"), digest_size=8).digest()
  return int.from_bytes(digest, "big") / 2.0 ** 64


def _logistic(u: float, scale: float) -> float:
  u = min(max(u, 1e-12), 1.0 - 1e-12)
  return scale * math.log(u / (1.0 - u))


def cut_tokens(text: str, max_tokens: int) -> str:
  """`text` cut after its first `max_tokens` tokens (`hygiene.count_tokens`), as a server cuts at max_tokens."""
  pieces = list(_TOKEN_PIECE.finditer(text))
  return text[:pieces[max_tokens - 1].end()] if 0 < max_tokens <= len(pieces) else text


# ───────────────────────────────────────────── answers ─────────────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class Reply:
  """One answer as the server sends it. `reasoning` becomes `message.reasoning_content` (None: absent);
  `content` None is an answer that never came (thinking cut short behind a reasoning parser)."""

  kind: str
  content: str | None
  reasoning: str | None = None
  finish_reason: str = "stop"


@dataclasses.dataclass(frozen=True)
class _Judgment:
  """What the judge decided and why, before it is written in a style.

  notes: the findings (a plain answer's explanation; the core of a reasoning answer's thinking).
  final: the verdict — pairwise "A" | "B" | "C", pointwise the level, else the JSON object.
  conclusion: one line that states the verdict in words; hidden: the plain style's reasoning_content.
  options: the verdicts it could give (a reasoning answer's thinking weighs one it does not give).
  """

  notes: str
  final: Any
  conclusion: str = ""
  hidden: str = ""
  options: tuple = ()


# ──────────────────────────────────────────── assessments ────────────────────────────────────────────


@dataclasses.dataclass
class _StepFlaw:
  step: int | None   # 0-based; None = the whole trace
  what: str
  impact: str
  evidence: str


@dataclasses.dataclass
class _Assessment:
  """What the server's own check finds in one trace."""

  steps: list[str]
  penalty: float
  answer: str | None
  answer_correct: bool | None   # None: no reference to compare with
  flaws: list[_StepFlaw]
  invalid: list[int]
  irrelevant: list[int]
  skipped: int
  task: str                     # arithmetic | countdown | generic

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


def _given(text: str | None) -> str | None:
  text = (text or "").strip()
  return None if not text or text == prompts.NOT_GIVEN else text


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
    if all(_NUMBER.fullmatch(s) for s in sides):
      continue  # "3 = 3": nothing computed
    for text, a, b in zip(sides[1:], values, values[1:]):
      decimals = len(text.split(".")[1]) if _NUMBER.fullmatch(text) and "." in text else None
      tol = Fraction(1, 2 * 10 ** decimals) if decimals else Fraction(0)
      if abs(a - b) > tol + abs(b) * Fraction(1, 10 ** 9):
        wrong.append(span.strip())
        break
  return wrong


class JudgeLogic:
  """The judging rules of the embedded server, without HTTP (module docstring)."""

  def __init__(self, cfg: ml_collections.ConfigDict):
    self.cfg = cfg

  # ── checking traces ──

  def assess(self, problem: str, reference: str | None, steps: Sequence[str]) -> _Assessment:
    """Checks a trace given as its steps (SPEC §8 segmentation) with the task's process checker."""
    steps = [s.strip() for s in steps]
    trace = "\n\n".join(steps)
    task, spec = _identify(problem)
    cfg = self.cfg
    if task is not None:
      if task == "arithmetic":
        report = tasks.check_arithmetic(spec, reference or tasks.format_number(tasks.evaluate(spec)), trace)
      else:
        report = tasks.check_countdown(spec[0], spec[1], trace)
      if report.num_steps == len(steps):
        flaws = [_StepFlaw(f.step, f.what, f.impact, f.evidence) for f in report.flaws]
        penalty = (report.num_invalid + report.num_irrelevant + cfg.skip_weight * report.num_skipped
                   + cfg.answer_weight * (not report.answer_correct))
        return _Assessment(steps, penalty, report.answer, report.answer_correct, flaws, list(report.invalid_steps),
                           list(report.irrelevant_steps), report.num_skipped, task)
    # Unknown problems (or steps the checker splits differently): written equations and the final answer,
    # read as the task verifier reads it (the checkers above do the same).
    answer = tasks.extract_answer(trace)
    correct = _answers_match(answer, reference)
    flaws, invalid = [], []
    for i, step in enumerate(steps):
      wrong = _wrong_equations(step)
      if wrong:
        invalid.append(i)
        impact = "fatal" if correct is False else "major"
        flaws.append(_StepFlaw(i, f"the equation {wrong[0]} does not hold", impact, step))
    if answer is None:
      flaws.append(_StepFlaw(None, "the trace states no final answer", "fatal", ""))
    penalty = cfg.answer_weight * (correct is False)
    return _Assessment(steps, penalty, answer, correct, flaws, invalid, [], 0, "generic")

  def _assess_trace(self, problem, reference, trace) -> _Assessment:
    return self.assess(problem, reference, tasks.split_steps(trace) or [trace])

  # ── answers by kind ──

  def judge(self, prompt: str, seed: int) -> tuple[str, _Judgment | None]:
    """(kind, what the judge decides) for a prompt rendered from one of the project's templates; the
    judgment is None when the prompt is not one of them (kind "unknown")."""
    sections = prompts.parse_sections(prompt)
    kind = next((k for k, need in _KINDS if need <= sections.keys()), None)
    if kind is None:
      return "unknown", None
    return kind, getattr(self, f"_{kind}")(sections, seed)

  def answer(self, prompt: str, seed: int) -> tuple[str, str, str]:
    """(kind, content, reasoning) of the plain style for a prompt rendered from the project's templates."""
    kind, j = self.judge(prompt, seed)
    if j is None:
      return kind, _UNKNOWN, ""
    return kind, self._plain(kind, j), j.hidden

  def reply(self, prompt: str, seed: int, *, malformed: bool = False, max_tokens: int | None = None) -> Reply:
    """The whole answer to one request in the configured `style`: `malformed` replaces the verdict by
    text with nothing to parse; an answer longer than `max_tokens` is cut (finish_reason "length")."""
    kind, j = self.judge(prompt, seed)
    if self.cfg.style == "reasoning" and j is not None:
      return self._reasoned(kind, j, prompt, seed, malformed, max_tokens)
    content = _UNKNOWN if j is None else (self.malformed(kind) if malformed else self._plain(kind, j))
    reasoning = (j.hidden if j is not None else "") if self.cfg.emit_reasoning else None
    if max_tokens and hygiene.count_tokens(content) > max_tokens:
      return Reply(kind, cut_tokens(content, max_tokens), reasoning, "length")
    return Reply(kind, content, reasoning)

  # ── styles ──

  def _plain(self, kind: str, j: _Judgment) -> str:
    """One short answer: the findings, then the verdict in the template's format."""
    if kind == "pairwise":
      explanation = f"{j.notes}\n{j.conclusion}"
      return (f"Verdict: [[{j.final}]]\n\n{explanation}" if self.cfg.verdict_first
              else f"{explanation}\n\n[[{j.final}]]")
    if kind == "pointwise":
      return f"{j.notes}\n\nRating: [[{j.final:g}]]"
    answer = json.dumps(j.final, ensure_ascii=False)
    if kind == "juror":
      return f"{j.notes}\n\n```json\n{answer}\n```"
    return f"{j.notes}\n\n{answer}" if kind == "consolidation" else answer

  def _reasoned(self, kind: str, j: _Judgment, prompt: str, seed: int, malformed: bool,
                max_tokens: int | None) -> Reply:
    """The answer of a served reasoning LLM (`style = "reasoning"`; docs/judges.md).

    Its thinking weighs a verdict it does not give, drafts and restates the format; then comes the final
    answer, in a form drawn from the request seed. The thinking arrives in `reasoning_content` (a vLLM /
    SGLang reasoning parser), inline in `<think>…</think>`, or inline after a template-opened block (only
    `</think>`). At `truncate_rate` the model stops mid-thought, as when it runs out of max_tokens.
    """
    cfg = self.cfg
    digest = hashlib.blake2b(prompt.encode("utf-8"), digest_size=8).hexdigest()
    draw = lambda tag: _unit(cfg.seed, seed, digest, "style", tag)
    thinking = _thinking(kind, j, draw)
    final = self.malformed(kind) if malformed else _final_answer(kind, j, draw)
    placement = draw("placement")
    # What the model generates; with a reasoning parser or a template-opened block, `<think>` is in the prompt.
    opener = "<think>\n" if 0.5 <= placement < 0.75 else ""
    raw, finish = f"{opener}{thinking}\n</think>\n\n{final}", "stop"
    if draw("truncate") < cfg.truncate_rate:
      kept = max(1, int(hygiene.count_tokens(thinking) * (0.2 + 0.6 * draw("cut"))))
      raw, finish = opener + cut_tokens(thinking, kept), "length"
    elif max_tokens and hygiene.count_tokens(raw) > max_tokens:
      raw, finish = cut_tokens(raw, max_tokens), "length"
    if placement < 0.5:  # a reasoning parser splits the thinking off; no answer yet when it never closed
      thought, closed, answer = raw.partition("</think>")
      return Reply(kind, answer.strip() if closed else None, thought.strip(), finish)
    return Reply(kind, raw, None, finish)

  def malformed(self, kind: str) -> str:
    """An answer a flaky judge might give: it looks fine but has nothing to parse."""
    if kind in ("juror", "consolidation", "synthesis"):
      return 'After careful review: {"flaws": [{"what_went_wrong": "the step'
    if kind == "debate":
      return 'My position: {"positions": [{"claim": '
    if kind == "moderator":
      return "Let us continue the discussion with the next juror."
    return "Both traces have their merits; it is hard to say which one is better."

  def _pairwise(self, sections, seed):
    cfg = self.cfg
    problem, reference = sections.get("Problem", ""), _given(sections.get("Reference Answer"))
    a = self._assess_trace(problem, reference, sections["Trace A"])
    b = self._assess_trace(problem, reference, sections["Trace B"])
    d = b.penalty - a.penalty + cfg.position_bias
    if cfg.noise > 0:
      d += _logistic(_unit(cfg.seed, seed, "pair", problem, sections["Trace A"], sections["Trace B"]), cfg.noise)
    verdict = "C" if abs(d) <= cfg.tie_band else ("A" if d > 0 else "B")
    if (verdict != "C" and a.penalty != b.penalty and cfg.flip_rate > 0
        and _unit(cfg.seed, seed, "flip", problem, sections["Trace A"], sections["Trace B"]) < cfg.flip_rate):
      verdict = "B" if verdict == "A" else "A"  # a wrong judge: the verdict on traces that differ is reversed
    lines = [_summary("A", a), _summary("B", b)]
    for name, s in (("A", a), ("B", b)):
      if s.steps:
        lines.append(f'Trace {name} ends with: "{s.steps[-1][:300]}"')
    reason = {"A": "Trace A has the sounder process.", "B": "Trace B has the sounder process.",
              "C": "Neither trace is clearly better."}[verdict]
    penalties = f"Penalties: A {a.penalty:g}, B {b.penalty:g}; position bias {cfg.position_bias:g}."
    return _Judgment("\n".join(lines), verdict, conclusion=reason, hidden=penalties, options=("A", "B", "C"))

  def _pointwise(self, sections, seed):
    cfg = self.cfg
    levels = sorted({float(v) for v in re.findall(r"\[\[\s*([-+]?\d+(?:\.\d+)?)\s*\]\]", sections.get("Rubric", ""))})
    if len(levels) < 2:
      levels = [0.0, 0.5, 1.0]
    problem, reference = sections.get("Problem", ""), _given(sections.get("Reference Answer"))
    s = self._assess_trace(problem, reference, sections["Trace"])
    quality = 0.0 if s.answer_correct is False or s.answer is None else (1.0 if s.penalty == 0 and not s.flaws else 0.5)
    if cfg.noise > 0:
      quality += 0.25 * _logistic(_unit(cfg.seed, seed, "point", problem, sections["Trace"]), cfg.noise)
    lo, hi = levels[0], levels[-1]
    level = min(levels, key=lambda v: abs((v - lo) / (hi - lo) - quality))
    return _Judgment(_summary("", s), level, options=tuple(levels))

  def _juror_view(self, sections):
    problem, reference = sections.get("Problem", ""), _given(sections.get("Reference Answer"))
    marked = sections["Step-Marked Trace"]
    steps = [s.strip() for s in _STEP_MARK.split(marked)[2::2]] or [marked.strip()]
    return problem, reference, steps, self.assess(problem, reference, steps)

  def _juror(self, sections, seed):
    cfg = self.cfg
    problem, reference, steps, truth = self._juror_view(sections)
    key = (cfg.seed, seed, problem, "\n".join(steps))
    by_step: dict[int | None, list[_StepFlaw]] = {}
    for f in truth.flaws:
      by_step.setdefault(f.step, []).append(f)
    reported = []
    for i in range(len(steps)):
      if i in by_step:
        if _unit(*key, i, "miss") >= cfg.miss_rate:
          reported += [_flaw_json(f, specificity=5) for f in by_step[i]]
      elif _unit(*key, i, "false_alarm") < cfg.false_alarm_rate:
        reported.append(_false_alarm(i, steps[i], _unit(*key, i, "which")))
    if None in by_step and _unit(*key, "global", "miss") >= cfg.miss_rate:
      reported += [_flaw_json(f, specificity=4) for f in by_step[None]]
    return _Judgment(f"I checked all {len(steps)} steps and found {len(reported)} flaw(s).", {"flaws": reported})

  def _confirms(self, truth: _Assessment, step: int | None, key, tag) -> bool:
    """The server's own (noisy) verdict on a claimed flaw at `step`."""
    cfg = self.cfg
    real = any(f.step is None for f in truth.flaws) if step is None else step in truth.flawed_steps
    u = _unit(*key, step, tag)
    return u >= cfg.debate_miss_rate if real else u < cfg.debate_false_alarm_rate

  def _consolidation(self, sections, seed):
    problem, reference, steps, truth = self._juror_view(sections)
    try:
      verdicts = json.loads(sections["Juror Verdicts"])
    except ValueError:
      verdicts = []
    verdicts = [v for v in verdicts if isinstance(v, dict) and isinstance(v.get("flaws"), list)]
    n = max(len(verdicts), 1)
    # The jurors' flaws merged as the jury merges them (`prompts.group_flaws`): different flaws on one
    # step stay different claims.
    flaws = [[f for f in (prompts.normalise_flaw(f, len(steps)) for f in v["flaws"]) if f is not None]
             for v in verdicts]
    numbers = [v.get("juror") for v in verdicts]
    key = (self.cfg.seed, seed, problem, "\n".join(steps))
    groups, kept = prompts.group_flaws(flaws), []
    for flaw, raisers in groups:
      jurors = sorted({numbers[r] for r in raisers if isinstance(numbers[r], int) and not isinstance(numbers[r], bool)})
      refs = flaw["statement_refs"]
      step = prompts.step_ref_index(refs[0], len(steps)) if refs else None
      if len(jurors) * 2 > n or self._confirms(truth, step, key, "consolidate"):
        kept.append({**flaw, "jurors": jurors})
    return _Judgment(f"Merged {len(groups)} claim(s); {len(kept)} kept.", {"flaws": kept})

  def _debate(self, sections, seed):
    problem, reference, steps, truth = self._juror_view(sections)
    try:
      claims = json.loads(sections["Claims Under Discussion"])
    except ValueError:
      claims = []
    key = (self.cfg.seed, seed, problem, "\n".join(steps))
    positions = []
    for c in claims if isinstance(claims, list) else []:
      if not isinstance(c, dict) or "id" not in c:
        continue
      refs = c.get("statement_refs") or []
      step = prompts.step_ref_index(refs[0], len(steps)) if refs else None
      agree = self._confirms(truth, step, key, "debate")
      where = f"STEP-{step + 1}" if step is not None else "the trace"
      if agree:
        real = [f.what for f in truth.flaws if f.step == step]
        argument = f"{where}: {real[0] if real else c.get('what_went_wrong', 'the flaw is there')}."
      else:
        quoted = f'"{steps[step][:200]}" is correct.' if step is not None else "no such flaw."
        argument = f"{where} checks out: {quoted}"
      positions.append({"claim": str(c["id"]), "stance": "agree" if agree else "disagree", "argument": argument})
    agreed = sum(p["stance"] == "agree" for p in positions)
    return _Judgment(f"I checked {len(positions)} claim(s) against the steps; I agree with {agreed}.",
                     {"positions": positions})

  def _moderator(self, sections, seed):
    del seed  # the moderator's choice is a deterministic rule
    state = _load_state(sections["Consensus State"])
    open_claims = [c for c in state["claims"] if c.get("status") == "open"]
    n = int(state.get("num_jurors", 0))
    todo = {j: [c["id"] for c in open_claims if _stance(c, j) is None] for j in range(n)}
    speaker = max(range(n), key=lambda j: (len(todo[j]), -j), default=None)
    if speaker is None or not todo[speaker]:
      return _Judgment(f"{len(open_claims)} claim(s) open, and no juror has a position left to take.",
                       {"action": "stop"})
    ask = {"action": "ask", "speaker": speaker + 1, "claims": todo[speaker],
           "question": f"Juror {speaker + 1}, do you agree with claim(s) {', '.join(todo[speaker])}? "
                       "Check the steps cited."}
    return _Judgment(f"{len(open_claims)} claim(s) open; juror {speaker + 1} has {len(todo[speaker])} position(s) "
                     "to take.", ask)

  def _synthesis(self, sections, seed):
    del seed
    state = _load_state(sections["Final Consensus State"])
    quorum = int(state.get("quorum", 1))
    flaws = []
    for c in state["claims"]:
      agree = [j + 1 for j in range(int(state.get("num_jurors", 0))) if _stance(c, j) is True]
      if len(agree) >= quorum:
        kept = {k: c.get(k) for k in ("what_went_wrong", "statement_refs", "impact", "evidence")}
        flaws.append({**kept, "jurors": agree})
    return _Judgment(f"{len(flaws)} of {len(state['claims'])} claim(s) reached the quorum of {quorum}.",
                     {"flaws": flaws})


def _load_state(text: str) -> dict:
  try:
    state = json.loads(text)
  except ValueError:
    return {"claims": [], "num_jurors": 0}
  if not isinstance(state, dict) or not isinstance(state.get("claims"), list):
    return {"claims": [], "num_jurors": 0}
  state["claims"] = [c for c in state["claims"] if isinstance(c, dict) and "id" in c]
  return state


def _stance(claim: dict, juror: int):
  stances = claim.get("stances") or {}
  value = stances.get(str(juror + 1)) if isinstance(stances, dict) else None
  return {"agree": True, "disagree": False}.get(value)


def _summary(name: str, s: _Assessment) -> str:
  fmt = lambda idx: ", ".join(f"STEP-{i + 1}" for i in idx) or "none"
  answer = "none" if s.answer is None else s.answer
  verdict = "" if s.answer_correct is None else (" (right)" if s.answer_correct else " (wrong)")
  who = f"Trace {name}" if name else "The trace"
  return (f"{who}: {len(s.steps)} steps; invalid: {fmt(s.invalid)}; irrelevant: {fmt(s.irrelevant)}; "
          f"operations not shown: {s.skipped}; final answer {answer}{verdict}.")


def _flaw_json(f: _StepFlaw, specificity: int) -> dict:
  return {"what_went_wrong": f.what, "statement_refs": [] if f.step is None else [f"STEP-{f.step + 1}"],
          "impact": f.impact, "evidence": f.evidence, "specificity": specificity}


def _false_alarm(step: int, text: str, u: float) -> dict:
  numbers = _NUMBER.findall(text)
  what = (f"the value {numbers[int(u * len(numbers))]} in this step is not justified by the previous steps"
          if numbers else "this step does not follow from the previous ones")
  return {"what_went_wrong": what, "statement_refs": [f"STEP-{step + 1}"], "impact": "major" if u < 0.5 else "minor",
          "evidence": text, "specificity": 4}


# ───────────────────────────────────────── the reasoning style ─────────────────────────────────────────
# What a thinking judge writes around the verdict: its thinking names a verdict it will not give, drafts
# JSON it then corrects and restates the format; its final answer takes one of the forms reasoning
# models use. Only the final answer carries the verdict (`prompts.split_reasoning`).

_FORMATS = {
    "juror": '{"flaws": [{"what_went_wrong": "...", "statement_refs": ["STEP-k"], "impact": "...", '
             '"evidence": "...", "specificity": 5}]}',
    "consolidation": '{"flaws": [{"what_went_wrong": "...", "statement_refs": ["STEP-k"], "impact": "...", '
                     '"evidence": "...", "jurors": [1, 2]}]}',
    "synthesis": '{"flaws": [{"what_went_wrong": "...", "statement_refs": ["STEP-k"], "impact": "...", '
                 '"evidence": "...", "jurors": [1, 3]}]}',
    "debate": '{"positions": [{"claim": "C1", "stance": "agree", "argument": "..."}]}',
    "moderator": '{"action": "ask", "speaker": 2, "claims": ["C1", "C3"], "question": "..."} or {"action": "stop"}',
}
_TIE_WORDS = {"A": ("A", "A"), "B": ("B", "B"), "C": ("tie", "Tie")}


def _pick(options: Sequence, u: float):
  return options[min(int(u * len(options)), len(options) - 1)]


def _decoy(j: _Judgment, u: float):
  """A verdict the judge weighs in its thinking but does not give."""
  others = [o for o in j.options if o != j.final]
  return _pick(others, u) if others else j.final


def _draft(kind: str, final: dict) -> dict:
  """A first draft of a JSON answer that the thinking then corrects (it differs from the final one)."""
  if kind == "debate":
    flip = {"agree": "disagree", "disagree": "agree"}
    return {"positions": [{**p, "stance": flip.get(p.get("stance"), "agree")} for p in final["positions"]]
            or [{"claim": "C1", "stance": "agree", "argument": "at first sight the claim holds"}]}
  if kind == "moderator":
    return ({"action": "ask", "speaker": 1, "claims": ["C1"], "question": "Is C1 right?"}
            if final.get("action") == "stop" else {"action": "stop"})
  if final.get("flaws"):
    return {"flaws": []}
  return {"flaws": [{"what_went_wrong": "the first step looks unjustified", "statement_refs": ["STEP-1"],
                     "impact": "major", "evidence": "", "specificity": 4}]}


def _thinking(kind: str, j: _Judgment, draw: Callable[[str], float]) -> str:
  """The thinking before the final answer (module comment above)."""
  if kind == "pairwise":
    decoy = _decoy(j, draw("decoy"))
    opening = _pick((
        "The verdict goes on the last line as [[A]], [[B]] or [[C]]. Let me check both traces step by step.",
        'Format: "[[A]]" if trace A is better, "[[B]]" if trace B is better, "[[C]]" for a tie. First the steps.',
        "Which is better, A or B, or is it a tie? Let me go through the steps before deciding.",
    ), draw("opening"))
    doubt = _pick((
        f"At first glance [[{decoy}]] looked right, but the step check says otherwise.",
        f"Final verdict: {_TIE_WORDS[decoy][0]}? No, not after counting the flawed steps.",
        f"I almost wrote \\boxed{{{decoy}}}, but that ignores what the checks found.",
    ), draw("doubt"))
    return "\n\n".join((opening, j.notes, j.hidden, doubt, f"So: {j.conclusion}"))
  if kind == "pointwise":
    levels = ", ".join(f"[[{v:g}]]" for v in j.options)
    doubt = f"Rating: [[{_decoy(j, draw('decoy')):g}]] crossed my mind, but it does not fit what I found."
    return "\n\n".join((f"The rubric offers {levels}; the last line must read Rating: [[level]].", j.notes, doubt,
                        f"The level that fits is {j.final:g}."))
  draft = json.dumps(_draft(kind, j.final), ensure_ascii=False)
  return "\n\n".join((f"The answer must end with one JSON object: {_FORMATS[kind]}", j.notes,
                      f"First draft: {draft}", "No — let me check that draft against the steps again."))


def _final_answer(kind: str, j: _Judgment, draw: Callable[[str], float]) -> str:
  """The final answer after the thinking, in a form drawn from the request seed."""
  form = draw("form")
  if kind == "pairwise":
    word, bold = _TIE_WORDS[j.final]
    verdict = _pick((f"[[{j.final}]]", f"\\boxed{{{j.final}}}", f"Final verdict: {word}", f"**{bold}**"), form)
    restated = "As asked, the verdict is one of [[A]], [[B]] or [[C]].\n\n" if draw("restate") < 0.25 else ""
    return f"{restated}{j.conclusion}\n\n{verdict}"
  if kind == "pointwise":
    return _pick((f"Rating: [[{j.final:g}]]", f"\\boxed{{{j.final:g}}}", f"**Rating:** {j.final:g}",
                  f"Final score: {j.final:g}"), form)
  answer = json.dumps(j.final, ensure_ascii=False)
  return f"{j.notes}\n\n```json\n{answer}\n```" if form < 0.5 else answer
