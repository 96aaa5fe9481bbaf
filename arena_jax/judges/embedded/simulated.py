"""The simulated judge behind the embedded server: a rule-based process judge (everything runs on one machine,
with no downloads).

`JudgeLogic.answer(prompt, seed)` reads a prompt rendered from the project's own templates
(`prompts.py`): the `[The Start of X]` sections a prompt has tell it what it is asked (pairwise,
pointwise, juror, consolidation, debate, moderator, synthesis), and `prompts.parse_sections` finds the
problem, the reference answer and the traces (hygiene has neutralised any forged delimiter inside
them). It then checks each trace step by step (`checking`: the task's process checker for the built-in
tasks, a generic check of the written equations otherwise) and judges like a careful but imperfect LLM:

  * pairwise (SPEC §4): d = penalty_B − penalty_A + position_bias + Logistic(0, noise); |d| ≤ tie_band
    is [[C]], else [[A]] when d > 0, [[B]] otherwise; when the penalties differ, a share `flip_rate` of
    these [[A]] / [[B]] verdicts is reversed (a judge of verdict accuracy 1 − flip_rate on pairs that
    differ in process). Unknown problems: final-answer correctness against the reference, then a tie;
  * pointwise (SPEC §7): the rubric level (read from the prompt's rubric) nearest to 1 for a flawless
    trace, the middle for a right answer reached with flaws, 0 for a wrong answer;
  * juror: the check's flaws as Phase-1 JSON (SPEC §8), each flawed step missed with probability
    `miss_rate`, each clean step flagged with `false_alarm_rate`. Errors are drawn from a hash of
    (server seed, request seed, trace, step): jurors asked with different seeds err independently;
  * consolidation keeps a step's flaw that a majority reported, or that fewer reported and its own
    check confirms; in deliberation a juror confirms a claim by its own check (`debate_*` rates),
    the moderator asks the juror with the most open positions about them and stops when every claim
    is settled, and the synthesis reports the accepted claims.

How it writes what it decided is the `style` knob (`JudgeLogic.reply`, written by `replies`): `plain`,
one short answer that ends in the template's format; `reasoning`, the answer of a served reasoning LLM.

The knobs are those of `config.server_config()`; the HTTP layer (`server.py`) adds latency and faults.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Sequence

import ml_collections

from arena_jax import tasks
from arena_jax.judges import formats
from arena_jax.judges import jury
from arena_jax.judges import prompts
from arena_jax.judges.embedded import checking
from arena_jax.judges.embedded import replies
from arena_jax.judges.embedded.checking import Assessment, StepFlaw
from arena_jax.judges.embedded.replies import Judgment, Reply

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
_STEP_MARK = re.compile(r"^\[STEP-(\d+)\][ \t]*", re.MULTILINE)


# ───────────────────────────────────────── deterministic draws ─────────────────────────────────────────


def _unit(*parts) -> float:
  """A uniform draw in [0, 1) that depends only on `parts` (same question → same answer)."""
  digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode("utf-8"), digest_size=8).digest()
  return int.from_bytes(digest, "big") / 2.0**64


def _logistic(u: float, scale: float) -> float:
  u = min(max(u, 1e-12), 1.0 - 1e-12)
  return scale * math.log(u / (1.0 - u))


def _given(text: str | None) -> str | None:
  text = (text or "").strip()
  return None if not text or text == prompts.NOT_GIVEN else text


class JudgeLogic:
  """The judging rules of the embedded server, without HTTP (module docstring)."""

  def __init__(self, cfg: ml_collections.ConfigDict):
    self.cfg = cfg

  # ── checking traces ──

  def assess(self, problem: str, reference: str | None, steps: Sequence[str]) -> Assessment:
    """Checks a trace given as its steps (SPEC §8 segmentation) with the task's process checker (`checking`)."""
    return checking.assess(
      problem, reference, steps, skip_weight=self.cfg.skip_weight, answer_weight=self.cfg.answer_weight
    )

  def _assess_trace(self, problem, reference, trace) -> Assessment:
    return self.assess(problem, reference, tasks.split_steps(trace) or [trace])

  # ── answers by kind ──

  def judge(self, prompt: str, seed: int) -> tuple[str, Judgment | None]:
    """(kind, what the judge decides) for a prompt rendered from one of the project's templates; the
    judgment is None when the prompt is not one of them (kind "unknown")."""
    sections = prompts.parse_sections(prompt)
    kind = next((k for k, need in _KINDS if need <= sections.keys()), None)
    if kind is None:
      return "unknown", None
    if formats.LETTER_CUES.get(f"{kind}_letter", "\0") in prompt:
      kind = f"{kind}_letter"
    return kind, getattr(self, f"_{kind}")(sections, seed)

  def answer(self, prompt: str, seed: int) -> tuple[str, str, str]:
    """(kind, content, reasoning) of the plain style for a prompt rendered from the project's templates."""
    kind, j = self.judge(prompt, seed)
    if j is None:
      return kind, replies.UNKNOWN, ""
    return kind, replies.plain(kind, j, verdict_first=self.cfg.verdict_first), j.hidden

  def reply(self, prompt: str, seed: int, *, malformed: bool = False, max_tokens: int | None = None) -> Reply:
    """The whole answer to one request in the configured `style`: `malformed` replaces the verdict by
    text with nothing to parse; an answer longer than `max_tokens` is cut (finish_reason "length")."""
    kind, j = self.judge(prompt, seed)
    cfg = self.cfg
    if kind.endswith("_letter") and not malformed:  # a letter judge writes its label, whatever the style
      return replies.letter_reply(kind, j, max_tokens)
    if cfg.style == "reasoning" and j is not None:
      # The style's draws are keyed by (server seed, request seed, prompt): the same request, the same answer.
      digest = hashlib.blake2b(prompt.encode("utf-8"), digest_size=8).hexdigest()
      draw = lambda tag: _unit(cfg.seed, seed, digest, "style", tag)
      return replies.reasoned(
        kind, j, draw, malformed=malformed, truncate_rate=cfg.truncate_rate, max_tokens=max_tokens
      )
    return replies.plain_reply(
      kind,
      j,
      malformed=malformed,
      verdict_first=cfg.verdict_first,
      emit_reasoning=cfg.emit_reasoning,
      max_tokens=max_tokens,
    )

  def malformed(self, kind: str) -> str:
    """An answer a flaky judge might give: it looks fine but has nothing to parse."""
    return replies.malformed_answer(kind)

  def _pairwise(self, sections, seed):
    cfg = self.cfg
    problem, reference = sections.get("Problem", ""), _given(sections.get("Reference Answer"))
    a = self._assess_trace(problem, reference, sections["Trace A"])
    b = self._assess_trace(problem, reference, sections["Trace B"])
    d = b.penalty - a.penalty + cfg.position_bias
    if cfg.noise > 0:
      d += _logistic(_unit(cfg.seed, seed, "pair", problem, sections["Trace A"], sections["Trace B"]), cfg.noise)
    verdict = "C" if abs(d) <= cfg.tie_band else ("A" if d > 0 else "B")
    if (
      verdict != "C"
      and a.penalty != b.penalty
      and cfg.flip_rate > 0
      and _unit(cfg.seed, seed, "flip", problem, sections["Trace A"], sections["Trace B"]) < cfg.flip_rate
    ):
      verdict = "B" if verdict == "A" else "A"  # a wrong judge: the verdict on traces that differ is reversed
      d = -d
    lines = [_summary("A", a), _summary("B", b)]
    for name, s in (("A", a), ("B", b)):
      if s.steps:
        lines.append(f'Trace {name} ends with: "{s.steps[-1][:300]}"')
    reason = {
      "A": "Trace A has the sounder process.",
      "B": "Trace B has the sounder process.",
      "C": "Neither trace is clearly better.",
    }[verdict]
    penalties = f"Penalties: A {a.penalty:g}, B {b.penalty:g}; position bias {cfg.position_bias:g}."
    return Judgment("\n".join(lines), verdict, conclusion=reason, hidden=penalties, options=("A", "B", "C"), margin=d)

  def _pairwise_letter(self, sections, seed):
    """The letter format: A or B, never a tie (a judge made to pick); the probability of A is the logistic of
    the same margin the reasoned verdict thresholds."""
    j = self._pairwise(sections, seed)
    d = j.margin
    p_a = 1.0 / (1.0 + math.exp(-4.0 * d))
    label = j.final if j.final != "C" else ("A" if d >= 0 else "B")
    return replies.Judgment(j.notes, label, conclusion=j.conclusion, hidden=j.hidden, options=("A", "B"), p_first=p_a)

  def _pointwise_letter(self, sections, seed):
    """The letter format: Yes for a sound trace with the right answer (the reasoned rubric's top level), else
    No; P(Yes) follows the same quality."""
    j = self._pointwise(sections, seed)
    lo, hi = min(j.options), max(j.options)
    quality = (j.final - lo) / (hi - lo)
    return replies.Judgment(
      j.notes, "Yes" if quality >= 0.75 else "No", hidden=j.hidden, options=("Yes", "No"), p_first=0.1 + 0.8 * quality
    )

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
    return Judgment(_summary("", s), level, options=tuple(levels))

  def _juror_view(self, sections):
    problem, reference = sections.get("Problem", ""), _given(sections.get("Reference Answer"))
    marked = sections["Step-Marked Trace"]
    steps = [s.strip() for s in _STEP_MARK.split(marked)[2::2]] or [marked.strip()]
    return problem, reference, steps, self.assess(problem, reference, steps)

  def _juror(self, sections, seed):
    cfg = self.cfg
    problem, reference, steps, truth = self._juror_view(sections)
    key = (cfg.seed, seed, problem, "\n".join(steps))
    by_step: dict[int | None, list[StepFlaw]] = {}
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
    return Judgment(f"I checked all {len(steps)} steps and found {len(reported)} flaw(s).", {"flaws": reported})

  def _confirms(self, truth: Assessment, step: int | None, key, tag) -> bool:
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
    # The jurors' flaws merged as the jury merges them (`jury.group_flaws`): different flaws on one
    # step stay different claims.
    flaws = [
      [f for f in (prompts.normalise_flaw(f, len(steps)) for f in v["flaws"]) if f is not None] for v in verdicts
    ]
    numbers = [v.get("juror") for v in verdicts]
    key = (self.cfg.seed, seed, problem, "\n".join(steps))
    groups, kept = jury.group_flaws(flaws), []
    for flaw, raisers in groups:
      jurors = sorted({numbers[r] for r in raisers if isinstance(numbers[r], int) and not isinstance(numbers[r], bool)})
      refs = flaw["statement_refs"]
      step = prompts.step_ref_index(refs[0], len(steps)) if refs else None
      if len(jurors) * 2 > n or self._confirms(truth, step, key, "consolidate"):
        kept.append({**flaw, "jurors": jurors})
    return Judgment(f"Merged {len(groups)} claim(s); {len(kept)} kept.", {"flaws": kept})

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
    return Judgment(
      f"I checked {len(positions)} claim(s) against the steps; I agree with {agreed}.", {"positions": positions}
    )

  def _moderator(self, sections, seed):
    del seed  # the moderator's choice is a deterministic rule
    state = _load_state(sections["Consensus State"])
    open_claims = [c for c in state["claims"] if c.get("status") == "open"]
    n = int(state.get("num_jurors", 0))
    todo = {j: [c["id"] for c in open_claims if _stance(c, j) is None] for j in range(n)}
    speaker = max(range(n), key=lambda j: (len(todo[j]), -j), default=None)
    if speaker is None or not todo[speaker]:
      return Judgment(
        f"{len(open_claims)} claim(s) open, and no juror has a position left to take.", {"action": "stop"}
      )
    ask = {
      "action": "ask",
      "speaker": speaker + 1,
      "claims": todo[speaker],
      "question": f"Juror {speaker + 1}, do you agree with claim(s) {', '.join(todo[speaker])}? Check the steps cited.",
    }
    return Judgment(
      f"{len(open_claims)} claim(s) open; juror {speaker + 1} has {len(todo[speaker])} position(s) to take.", ask
    )

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
    return Judgment(
      f"{len(flaws)} of {len(state['claims'])} claim(s) reached the quorum of {quorum}.", {"flaws": flaws}
    )


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


def _summary(name: str, s: Assessment) -> str:
  fmt = lambda idx: ", ".join(f"STEP-{i + 1}" for i in idx) or "none"
  answer = "none" if s.answer is None else s.answer
  verdict = "" if s.answer_correct is None else (" (right)" if s.answer_correct else " (wrong)")
  who = f"Trace {name}" if name else "The trace"
  return (
    f"{who}: {len(s.steps)} steps; invalid: {fmt(s.invalid)}; irrelevant: {fmt(s.irrelevant)}; "
    f"operations not shown: {s.skipped}; final answer {answer}{verdict}."
  )


def _flaw_json(f: StepFlaw, specificity: int) -> dict:
  return {
    "what_went_wrong": f.what,
    "statement_refs": [] if f.step is None else [f"STEP-{f.step + 1}"],
    "impact": f.impact,
    "evidence": f.evidence,
    "specificity": specificity,
  }


def _false_alarm(step: int, text: str, u: float) -> dict:
  numbers = checking.NUMBER.findall(text)
  what = (
    f"the value {numbers[int(u * len(numbers))]} in this step is not justified by the previous steps"
    if numbers
    else "this step does not follow from the previous ones"
  )
  return {
    "what_went_wrong": what,
    "statement_refs": [f"STEP-{step + 1}"],
    "impact": "major" if u < 0.5 else "minor",
    "evidence": text,
    "specificity": 4,
  }
