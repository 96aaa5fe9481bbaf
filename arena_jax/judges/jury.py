"""The Reasoning Jury: independent jurors, then consolidation or moderated deliberation (SPEC §8).

    jury = Jury([client_1, client_2, client_3], config)        # one client per juror (may be shared)
    verdict = await jury.audit(problem, trace, reference)      # or a list of steps (ProcessBench)
    verdict.flaws        # consensus flaws, SPEC §8 schema + "jurors" (1-based juror numbers)
    verdict.to_json()    # {"flaws": [...], "consensus": {...}}

The trace is cleaned (`hygiene`: neutralised, cut to `token_budget` by the judge's count, `judges.tokens`, and
further when the juror prompt would not fit `context_tokens`), split into steps (SPEC §8 segmentation, unless
given as steps, which then share the budget) and marked `[STEP-1]`, `[STEP-2]`, ….

Phase 1 — every juror independently returns `{"flaws": [...]}` (`juror.txt`). A juror whose answer
cannot be parsed after the client's capped retries is left out (counted); if all are, the verdict
fails. Each juror is asked with its own seed, so jurors served by one model err independently when
sampling (and the embedded server draws its juror errors from the seed).

Phase 2 — `config.jury.mode`:
  consolidation  one judge (the consolidator: `jury.consolidator`, else the first juror) sees the
                 content and all Phase-1 verdicts and merges them (`consolidation.txt`);
  deliberation   a moderator (same default) that never sees the problem or the trace runs a debate:
                 Phase-1 flaws become claims (alike descriptions of one step's flaw merged, different
                 flaws on a step kept apart; flaws about the whole trace by text), a
                 claim's raisers agree with it, the others have no position yet. Each turn the
                 moderator (`moderator.txt`) picks a juror and the unsettled claims it should address,
                 or stops; the juror (`debate.txt`) states agree / disagree with an argument. A claim
                 is accepted when `quorum` jurors agree, rejected when it can no longer get there. The
                 debate ends when every claim is settled (converged), when the moderator stops, after
                 `stall_rounds` turns that change no stance, or after `max_rounds` turns; the moderator
                 then synthesises the consensus from the final state and transcript (`synthesis.txt`);
  vote           (baseline, not in SPEC) no Phase-2 call: claims raised by at least `quorum` jurors.
                 With one juror this is that juror's own verdict.
If the consolidation or synthesis call fails, the verdict falls back to what the jurors' positions
determine (the Phase-1 majority; the accepted claims), marked `consensus.fallback`.
`quorum` 0 means a strict majority of the jurors that answered Phase 1.

`JuryJudge` is the jury as a pointwise judge backend: score = max(0, 1 − Σ severity weight) over the
consensus flaws (`jury.severity_weights`, default minor 0.1, major 0.4, fatal 1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import re
from typing import Any, Sequence

from arena_jax import tasks
from arena_jax.judges import config as config_lib
from arena_jax.judges import hygiene
from arena_jax.judges import prompts
from arena_jax.judges import tokens
from arena_jax.judges.client import Completion, JudgeClient, TokenizeError
from arena_jax.judges.pairwise import BaseJudge, derive_seed, settle, text_key
from arena_jax.judges.pointwise import ScoreResult
from arena_jax.judges.prompts import severity
from arena_jax.judges.usage import Usage

MODES = config_lib.JURY_MODES


# ── Phase-1 flaws into claims ──

_WORD = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_FILLER = frozenset(
  "a an the of in on at to by for from with and or is are was were be it its this that these "
  "those step steps which as than then there here".split()
)
SAME_FLAW_OVERLAP = 0.25  # word-set Jaccard of two descriptions above which they are one flaw (same step)


def _content_words(text: str) -> set[str]:
  return {w for w in _WORD.findall(text.lower()) if w not in _FILLER}


def flaw_overlap(a: dict, b: dict) -> float:
  """Jaccard overlap of two flaws' `what_went_wrong` content words (numbers included), in [0, 1]."""
  x, y = _content_words(a["what_went_wrong"]), _content_words(b["what_went_wrong"])
  return len(x & y) / len(x | y) if x | y else 1.0


def group_flaws(verdicts: Sequence[Sequence[dict]]) -> list[tuple[dict, list[int]]]:
  """The distinct flaws of several jurors' verdicts (SPEC §8 consensus), each with the jurors (0-based
  indices into `verdicts`) that raised it, in order of first appearance.

  Flaws about one step are one flaw when different jurors describe it alike: a flaw joins the claim on
  its first referenced step, not yet raised by its juror, whose description overlaps most, if the overlap
  reaches `SAME_FLAW_OVERLAP`. So two different flaws on one step stay two (and one juror's separate
  flaws on a step are never merged). Flaws about the whole trace (no step) match by identical text.
  The kept flaw is the first raiser's, at the most severe impact any raiser gave it.
  """
  claims: list[tuple[dict, list[int]]] = []
  by_key: dict[str, list[int]] = {}  # first step ref (or the whole-trace text) → indices into claims
  for juror, flaws in enumerate(verdicts):
    for flaw in flaws:
      refs = flaw["statement_refs"]
      key = str(refs[0]).strip().upper() if refs else "global:" + flaw["what_went_wrong"].strip().lower()
      open_ = [i for i in by_key.get(key, []) if juror not in claims[i][1]]
      best = max(open_, key=lambda i: flaw_overlap(claims[i][0], flaw), default=None)
      if best is not None and (not refs or flaw_overlap(claims[best][0], flaw) >= SAME_FLAW_OVERLAP):
        kept, raisers = claims[best]
        raisers.append(juror)
        if severity(flaw["impact"]) > severity(kept["impact"]):
          kept["impact"] = flaw["impact"]
      else:
        by_key.setdefault(key, []).append(len(claims))
        claims.append((dict(flaw), [juror]))
  return claims


@dataclasses.dataclass
class Claim:
  """A flaw under deliberation: what the jurors raised about one step (or about the whole trace)."""

  id: str
  flaw: dict
  stances: dict[int, bool | None]  # juror (0-based among the active) → agrees / disagrees / no position
  arguments: list[dict] = dataclasses.field(default_factory=list)

  def status(self, quorum: int) -> str:
    agree = sum(v is True for v in self.stances.values())
    disagree = sum(v is False for v in self.stances.values())
    if agree >= quorum:
      return "accepted"
    if disagree > len(self.stances) - quorum:
      return "rejected"
    return "open"


@dataclasses.dataclass
class JuryVerdict:
  """The outcome of one audit (see module docstring); `ok` is False only when no juror answered.

  usage: every call of the audit (`failed_calls` of them failed); `latency_s` is the audit's wall
    time, less than the calls' sum because the Phase-1 jurors are asked concurrently.
  """

  flaws: list[dict]
  phase1: list[list[dict] | None]
  mode: str
  num_steps: int
  rounds: int = 0
  converged: bool = True
  fallback: bool = False
  failure_reason: str | None = None
  transcript: list[dict] = dataclasses.field(default_factory=list)
  usage: Usage = Usage()
  failed_calls: int = 0

  @property
  def ok(self) -> bool:
    return self.failure_reason is None

  def flagged_steps(self, min_impact: str = "neutral") -> set[int]:
    """0-based steps with a consensus flaw at least as severe as `min_impact`."""
    out = set()
    for f in self.flaws:
      if severity(f["impact"]) >= severity(min_impact):
        out.update(prompts.step_ref_index(r, self.num_steps) for r in f["statement_refs"])
    out.discard(None)
    return out

  def first_error_step(self, min_impact: str = "major") -> int:
    """The earliest step flagged at `min_impact` or worse, −1 if none (the ProcessBench prediction)."""
    flagged = self.flagged_steps(min_impact)
    return min(flagged) if flagged else -1

  def to_json(self) -> dict:
    return {
      "flaws": self.flaws,
      "consensus": {
        "mode": self.mode,
        "jurors_answered": sum(p is not None for p in self.phase1),
        "jurors": len(self.phase1),
        "rounds": self.rounds,
        "converged": self.converged,
        "fallback": self.fallback,
        "calls": self.usage.calls,
        "failed_calls": self.failed_calls,
        "failure_reason": self.failure_reason,
        "phase1": self.phase1,
        "transcript": self.transcript,
      },
    }


class Jury:
  """A jury of judges (module docstring). `jurors`: one `JudgeClient` per juror (may repeat)."""

  def __init__(
    self, jurors: Sequence[JudgeClient], config, *, moderator: JudgeClient | None = None, mode: str | None = None
  ):
    if not jurors:
      raise ValueError("a jury needs at least one juror (judge.jury.jurors / num_jurors)")
    self.jurors = list(jurors)
    self.moderator = moderator or self.jurors[0]
    self.config = config
    self.mode = mode or config.jury.mode
    if self.mode not in MODES:
      raise ValueError(f"jury mode must be one of {MODES}, got {self.mode!r}")
    self.templates = prompts.load_templates(config.template_dir)
    # The first juror's count (`judge.tokenizer`) cuts the trace to the budget and the juror prompt to the context.
    self.fitter = tokens.TraceFitter(tokens.make_counter(config, self.jurors[0]), config)

  # ── bookkeeping ──

  def _clean(self, text: str, budget: int | None = None) -> str:
    return hygiene.sanitize(
      text or "", budget, tail_fraction=self.config.tail_fraction, delimiters=self.templates.delimiters
    )

  @staticmethod
  def _count(verdict: JuryVerdict, c: Completion) -> Completion:
    c = settle(c)
    verdict.usage += c.usage  # the latency is replaced by the audit's wall time at its end
    verdict.failed_calls += not c.ok
    return c

  def quorum(self, num_active: int) -> int:
    q = self.config.jury.quorum
    return min(q, num_active) if q else num_active // 2 + 1

  # ── the audit ──

  async def audit(
    self, problem: str, trace: str | Sequence[str], reference: str = "", *, key: Any = None
  ) -> JuryVerdict:
    """Phase 1 and the configured Phase 2 for one trace (a string, or its steps)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    budget = self.config.token_budget
    context = dict(problem=self._clean(problem), reference=self._clean(reference) if reference else prompts.NOT_GIVEN)
    if isinstance(trace, str):
      texts = [self._clean(tasks.trace_view(trace, self.config.trace_view))]  # a policy's thinking removed by default

      def split(ts):
        return tasks.split_steps(ts[0]) or [ts[0]]
    else:
      # Given steps (ProcessBench) keep their boundaries; over budget, they share it evenly.
      texts, split = [self._clean(s) for s in trace], list
      try:
        total = sum([await self.fitter.counter.text(s) for s in texts])
      except TokenizeError as e:
        return JuryVerdict([], [], self.mode, len(texts), failure_reason=f"tokenize: {e}")
      if total > budget:
        budget = max(32, budget // max(len(texts), 1))

    def fields_of(ts):
      steps = [s.strip() or "(empty)" for s in split(ts)]
      final = tasks.extract_answer("\n\n".join(steps))
      return steps, dict(context, marked_trace=tasks.mark_steps(steps), final_answer=final or prompts.NOT_GIVEN)

    # Cut to the budget by the judge's count, then further until the juror prompt fits its context (`tokens`).
    fit = await self.fitter.fit_request(
      texts, lambda ts: [self.templates.messages("juror", **fields_of(ts)[1])], budget=budget
    )
    if fit.failure_reason:
      return JuryVerdict([], [], self.mode, 0, failure_reason=f"{fit.failure_reason}: {fit.failure_detail}")
    steps, fields = fields_of(fit.traces)
    if key is None:
      key = text_key(fields["problem"], fields["marked_trace"])
    verdict = JuryVerdict([], [], self.mode, len(steps))
    parse = functools.partial(prompts.parse_flaws, num_steps=len(steps))
    answers = await asyncio.gather(
      *(
        juror.chat(
          self.templates.messages("juror", **fields), parse=parse, seed=derive_seed(self.config.seed, "juror", j, key)
        )
        for j, juror in enumerate(self.jurors)
      )
    )
    answers = [self._count(verdict, c) for c in answers]
    verdict.phase1 = [c.parsed if c.ok else None for c in answers]
    active = [j for j, p in enumerate(verdict.phase1) if p is not None]
    if not active:
      verdict.failure_reason = f"no juror answered: {answers[0].failure_reason}"
    elif self.mode == "consolidation":
      await self._consolidate(verdict, fields, active, key)
    elif self.mode == "deliberation":
      await self._deliberate(verdict, fields, active, key)
    else:
      verdict.flaws = self._vote(verdict, active)
    verdict.usage = dataclasses.replace(verdict.usage, latency_s=loop.time() - start)
    return verdict

  def _claims(self, verdict: JuryVerdict, active: list[int]) -> list[Claim]:
    """Phase-1 flaws grouped into claims (`group_flaws`: jurors describing one flaw of a step
    alike share a claim; different flaws on one step stay apart), their raisers agreeing."""
    claims = []
    for k, (flaw, raisers) in enumerate(group_flaws([verdict.phase1[j] for j in active])):
      claims.append(Claim(f"C{k + 1}", flaw, {b: (True if b in raisers else None) for b in range(len(active))}))
    return sorted(claims, key=lambda c: _step_order(c.flaw))

  def _vote(self, verdict: JuryVerdict, active: list[int]) -> list[dict]:
    quorum = self.quorum(len(active))
    out = []
    for claim in self._claims(verdict, active):
      agree = [active[a] + 1 for a, v in claim.stances.items() if v]
      if len(agree) >= quorum:
        out.append({**claim.flaw, "jurors": agree})
    return out

  async def _consolidate(self, verdict, fields, active, key):
    verdicts = [{"juror": n + 1, "flaws": [_neutralised(f) for f in verdict.phase1[j]]} for n, j in enumerate(active)]
    parse = functools.partial(prompts.parse_flaws, num_steps=verdict.num_steps, num_jurors=len(active))
    c = self._count(
      verdict,
      await self.moderator.chat(
        self.templates.messages("consolidation", verdicts=json.dumps(verdicts, ensure_ascii=False, indent=1), **fields),
        parse=parse,
        seed=derive_seed(self.config.seed, "consolidator", key),
      ),
    )
    if c.ok:
      verdict.flaws = [{**f, "jurors": [active[n - 1] + 1 for n in f.get("jurors", [])]} for f in c.parsed]
    else:
      verdict.flaws, verdict.fallback = self._vote(verdict, active), True

  def _state(self, claims: list[Claim], num_active: int, quorum: int, *, final: bool = False) -> str:
    """The consensus state the moderator sees: claims, stances, arguments — never the problem or trace."""
    rows = []
    for c in claims:
      rows.append(
        {
          "id": c.id,
          "statement_refs": c.flaw["statement_refs"],
          "what_went_wrong": hygiene.neutralise(c.flaw["what_went_wrong"]),
          "impact": c.flaw["impact"],
          "stances": {str(a + 1): _stance_word(v) for a, v in c.stances.items()},
          "status": c.status(quorum),
          "arguments": c.arguments,
        }
      )
    return json.dumps(
      {"num_jurors": num_active, "quorum": quorum, "final": final, "claims": rows}, ensure_ascii=False, indent=1
    )

  async def _deliberate(self, verdict, fields, active, key):
    cfg = self.config.jury
    quorum = self.quorum(len(active))
    claims = self._claims(verdict, active)
    by_id = {c.id: c for c in claims}
    transcript: list[dict] = verdict.transcript
    stalled = 0
    verdict.converged = False
    mod_seed = derive_seed(self.config.seed, "moderator", key)
    for turn in range(cfg.max_rounds):
      if all(c.status(quorum) != "open" for c in claims):
        verdict.converged = True
        break
      parse = functools.partial(prompts.parse_moderator, num_jurors=len(active), claim_ids=list(by_id))
      m = self._count(
        verdict,
        await self.moderator.chat(
          self.templates.messages(
            "moderator",
            state=self._state(claims, len(active), quorum),
            transcript=_transcript_text(transcript),
            num_jurors=len(active),
            quorum=quorum,
          ),
          parse=parse,
          seed=mod_seed + turn,
        ),
      )
      verdict.rounds += 1
      if not m.ok or m.parsed["action"] == "stop":
        transcript.append({"turn": turn + 1, "moderator": "stop" if m.ok else f"failed ({m.failure_reason})"})
        break
      speaker, asked = m.parsed["speaker"], [by_id[i] for i in m.parsed["claims"]]
      transcript.append(
        {
          "turn": turn + 1,
          "moderator": hygiene.neutralise(m.parsed["question"]),
          "speaker": speaker + 1,
          "claims": [c.id for c in asked],
        }
      )
      shown = [{"id": c.id, **_neutralised(c.flaw), "arguments": c.arguments} for c in asked]
      r = self._count(
        verdict,
        await self.jurors[active[speaker]].chat(
          self.templates.messages(
            "debate",
            claims=json.dumps(shown, ensure_ascii=False, indent=1),
            question=hygiene.neutralise(m.parsed["question"]),
            **fields,
          ),
          parse=functools.partial(prompts.parse_positions, claim_ids=[c.id for c in asked]),
          seed=derive_seed(self.config.seed, "juror", active[speaker], key),
        ),
      )
      changed = False
      for c in asked:
        if r.ok and c.id in r.parsed:
          agrees, argument = r.parsed[c.id]
          changed |= c.stances[speaker] is not agrees
          c.stances[speaker] = agrees
          entry = {"juror": speaker + 1, "stance": _stance_word(agrees), "argument": hygiene.neutralise(argument)[:500]}
          c.arguments.append(entry)
          transcript.append({"turn": turn + 1, "claim": c.id, **entry})
      stalled = 0 if changed else stalled + 1
      if stalled >= cfg.stall_rounds:
        break
    else:
      verdict.converged = all(c.status(quorum) != "open" for c in claims)
    if not claims:
      verdict.converged = True
      return
    parse = functools.partial(prompts.parse_flaws, num_steps=verdict.num_steps, num_jurors=len(active))
    s = self._count(
      verdict,
      await self.moderator.chat(
        self.templates.messages(
          "synthesis",
          state=self._state(claims, len(active), quorum, final=True),
          transcript=_transcript_text(transcript),
          num_jurors=len(active),
          quorum=quorum,
        ),
        parse=parse,
        seed=derive_seed(self.config.seed, "synthesis", key),
      ),
    )
    if s.ok:
      evidence = {tuple(c.flaw["statement_refs"]): c.flaw.get("evidence", "") for c in claims}
      verdict.flaws = [
        {
          **f,
          "evidence": f["evidence"] or evidence.get(tuple(f["statement_refs"]), ""),
          "jurors": [active[n - 1] + 1 for n in f.get("jurors", [])],
        }
        for f in s.parsed
      ]
    else:
      verdict.fallback = True
      verdict.flaws = [
        {**c.flaw, "jurors": [active[a] + 1 for a, v in c.stances.items() if v]}
        for c in claims
        if c.status(quorum) == "accepted"
      ]


def _step_order(flaw: dict):
  refs = flaw["statement_refs"]
  return (0, prompts.step_ref_index(refs[0], None)) if refs else (1, 0)


def _stance_word(v: bool | None) -> str | None:
  return None if v is None else ("agree" if v else "disagree")


def _neutralised(flaw: dict) -> dict:
  """A juror's flaw with its free text defused before it is shown to another judge."""
  return {k: hygiene.neutralise(v) if isinstance(v, str) else v for k, v in flaw.items() if k != "jurors"}


def _transcript_text(transcript: list[dict]) -> str:
  if not transcript:
    return "(no discussion yet)"
  lines = []
  for t in transcript:
    if "claim" in t:
      lines.append(f"[turn {t['turn']}] Juror {t['juror']} on {t['claim']}: {t['stance']} — {t['argument']}")
    elif "speaker" in t:
      about = ", ".join(t["claims"])
      lines.append(f"[turn {t['turn']}] Moderator to juror {t['speaker']} about {about}: {t['moderator']}")
    else:
      lines.append(f"[turn {t['turn']}] Moderator: {t['moderator']}")
  return "\n".join(lines)


class JuryJudge(BaseJudge):
  """The jury as a pointwise backend: score = max(0, 1 − Σ severity weights of the consensus flaws)."""

  kind = "pointwise"

  def __init__(self, jury: Jury, config):
    super().__init__(jury.moderator, config)
    self.jury = jury
    self.weights = {k: float(config.jury.severity_weights[k]) for k in tasks.IMPACTS}

  def score_flaws(self, flaws: Sequence[dict]) -> float:
    return max(0.0, 1.0 - sum(self.weights[f["impact"]] for f in flaws))

  async def score(self, problem: str, reference: str, trace: str, *, key: Any = None) -> ScoreResult:
    v = await self.jury.audit(problem, trace, reference, key=key)
    common = dict(raw=json.dumps(v.to_json(), ensure_ascii=False), usage=v.usage)
    if not v.ok:
      return ScoreResult(None, "jury_failed", v.failure_reason or "", **common)
    return ScoreResult(self.score_flaws(v.flaws), flaws=tuple(v.flaws), **common)

  async def score_many(self, requests) -> list[ScoreResult]:
    return list(await asyncio.gather(*(self.score(r.problem, r.reference, r.trace, key=r.key) for r in requests)))

  async def close(self) -> None:
    for client in {id(c): c for c in [self.jury.moderator, *self.jury.jurors]}.values():
      await client.close()
