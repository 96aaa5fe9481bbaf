"""The Reasoning Jury: Phase 1, consolidation, moderated deliberation, the jury backend, metrics (SPEC §8)."""

import asyncio
import json

import pytest

from arena_jax import judges
from arena_jax import tasks

from tests.judges.conftest import fast_config


class Recording:
  """Wraps a client and keeps every prompt it sends (to check who sees what)."""

  def __init__(self, client):
    self.client, self.prompts = client, []

  async def chat(self, messages, **kw):
    self.prompts.append(messages[0]["content"])
    return await self.client.chat(messages, **kw)


def truth(d):
  report = tasks.check_arithmetic(d.example.expression, d.example.answer, d.completion)
  return {s.index for s in report.steps if s.impact}


def audit(urls, demo, mode, config=None, consolidator=None):
  async def main():
    cfg = config or fast_config()
    cfg.jury.mode = mode
    if consolidator:
      cfg.jury.consolidator = consolidator
    jury = judges.make_jury(cfg, urls)
    try:
      return await jury.audit(demo.prompt, demo.completion, demo.example.answer)
    finally:
      for c in {id(c): c for c in [jury.moderator, *jury.jurors]}.values():
        await c.close()

  return asyncio.run(main())


@pytest.mark.parametrize("mode", judges.JURY_MODES)
@pytest.mark.parametrize("kind", ["slip", "compensating", "redundant", "clean"])
def test_accurate_jurors_reach_the_true_flaws(server, demos, mode, kind):
  d = demos[kind]
  v = audit([server.url], d, mode)
  assert v.ok and not v.fallback and v.converged
  assert v.flagged_steps() == truth(d)
  assert all(f["jurors"] == [1, 2, 3] for f in v.flaws)
  assert all(p is not None for p in v.phase1)
  expected_calls = {"vote": 3, "consolidation": 4, "deliberation": 4 if truth(d) else 3}[mode]
  assert v.usage.calls == expected_calls and v.rounds == 0
  out = v.to_json()
  assert out["consensus"]["mode"] == mode and json.loads(json.dumps(out)) == out


def test_deliberation_debates_disagreements_without_showing_the_moderator_the_trace(demos):
  d = demos["slip"]
  knobs = dict(miss_rate=0.6, false_alarm_rate=0.3, seed=2)

  async def main():
    async with judges.serve_in_process(**knobs) as url:
      cfg = fast_config()
      cfg.jury.mode = "deliberation"
      client = judges.JudgeClient.from_config(cfg, [url])
      jurors, moderator = Recording(client), Recording(client)
      jury = judges.Jury([jurors] * 3, cfg, moderator=moderator)
      verdicts = [await jury.audit(d.prompt, d.completion, d.example.answer, key=k) for k in range(6)]
      await client.close()
      return verdicts, jurors, moderator

  verdicts, jurors, moderator = asyncio.run(main())
  debated = [v for v in verdicts if v.rounds > 0]
  assert debated, "the noisy jurors should disagree at least once in six audits"
  for v in debated:
    turns = [t for t in v.transcript if "speaker" in t]
    assert turns and any("claim" in t for t in v.transcript)
    assert v.usage.calls >= 3 + 2 * len(turns) + 1  # Phase 1, moderator + juror per turn, synthesis
  # The moderator is never given the problem or the trace (only claims, stances, arguments).
  assert moderator.prompts and all(
    "[The Start of Problem]" not in p and "[The Start of Step-Marked Trace]" not in p and "Compute" not in p
    for p in moderator.prompts
  )
  assert any(
    "[The Start of Claims Under Discussion]" in p and "[The Start of Step-Marked Trace]" in p for p in jurors.prompts
  )


class Scripted:
  """A juror whose Phase-1 answer is a fixed list of flaws (parsed by the jury's own parser)."""

  def __init__(self, flaws):
    self.answer = json.dumps({"flaws": flaws})

  async def chat(self, messages, *, parse, seed=None, **kw):
    return judges.Completion(content=self.answer, parsed=parse(self.answer))


def _flaw(step, what, impact="major"):
  return {"what_went_wrong": what, "statement_refs": [f"STEP-{step}"], "impact": impact, "evidence": ""}


def test_two_different_flaws_on_one_step_stay_two_claims(demos):
  """Jurors 1 and 2 describe one slip on step 1 alike; juror 3 raises a different flaw on step 1, and
  juror 1 a second one of its own there: three claims, and only the shared one reaches the quorum."""
  slip = "3 * 4 is computed as 13 instead of 12"
  other = "the unit conversion from minutes to hours is missing"
  own = "the sign of the remainder is dropped"
  jurors = [
    Scripted([_flaw(1, slip), _flaw(1, own, "minor")]),
    Scripted([_flaw(1, "arithmetic slip: 3 * 4 = 13, should be 12", "fatal")]),
    Scripted([_flaw(1, other)]),
  ]
  cfg = fast_config()
  jury = judges.Jury(jurors, cfg, mode="vote")
  v = asyncio.run(jury.audit("Compute 3 * 4 + 5.", "3 * 4 = 13.\n\n13 + 5 = 18.\n\nThe answer is 18."))
  claims = jury._claims(v, [0, 1, 2])
  assert {c.flaw["what_went_wrong"]: sorted(a for a, s in c.stances.items() if s) for c in claims} == {
    slip: [0, 1],
    other: [2],
    own: [0],
  }
  assert next(c for c in claims if c.flaw["what_went_wrong"] == slip).flaw["impact"] == "fatal"  # the most severe
  assert [(f["what_went_wrong"], f["jurors"]) for f in v.flaws] == [(slip, [1, 2])]


def test_a_failed_consolidation_falls_back_to_the_majority(demos):
  d = demos["slip"]

  async def main():
    async with judges.serve_in_process() as jurors_url, judges.serve_in_process(malformed_rate=1.0) as broken:
      cfg = fast_config(max_parse_retries=0)
      cfg.jury.mode = "consolidation"
      cfg.jury.consolidator = broken
      jury = judges.make_jury(cfg, [jurors_url])
      v = await jury.audit(d.prompt, d.completion, d.example.answer)
      for c in {id(c): c for c in [jury.moderator, *jury.jurors]}.values():
        await c.close()
      return v

  v = asyncio.run(main())
  assert v.ok and v.fallback and v.flagged_steps() == truth(d) and v.failed_calls == 1


def test_a_jury_without_answers_fails_and_scores_none(demos):
  async def main():
    async with judges.serve_in_process(error_rate=1.0, error_statuses=(500,)) as url:
      cfg = fast_config(max_retries=0)
      cfg.backend = "jury"
      judge = judges.make_judge(cfg, [url])
      r = await judge.score(demos["slip"].prompt, demos["slip"].example.answer, demos["slip"].completion)
      await judge.close()
      return r

  r = asyncio.run(main())
  assert r.score is None and not r.ok and "no juror answered" in r.failure_detail


def test_the_jury_backend_scores_by_severity(server, demos):
  config = fast_config()
  config.backend = "jury"

  async def main():
    judge = judges.make_judge(config, [server.url])
    try:
      return {
        k: await judge.score(demos[k].prompt, demos[k].example.answer, demos[k].completion)
        for k in ("clean", "slip", "redundant", "compensating")
      }
    finally:
      await judge.close()

  scores = asyncio.run(main())
  assert scores["clean"].score == 1.0 and scores["slip"].score == 0.0
  assert scores["redundant"].score == pytest.approx(0.9)  # one minor flaw
  assert scores["compensating"].score == pytest.approx(0.2)  # two major flaws
  assert scores["slip"].flaws and scores["slip"].usage.calls == 4


def test_steps_given_as_a_list_are_marked_as_they_are(server):
  async def main():
    jury = judges.make_jury(fast_config(), [server.url], mode="vote")
    v = await jury.audit(
      "Gerald earns $30 a day for 5 days and spends $100.",
      [
        "He earns \\(5 \\times 30 = 150\\) dollars",
        "He has \\(150 - 100 = 40\\) left [STEP-1]",
        "The answer is \\boxed{40}",
      ],
    )
    await jury.jurors[0].close()
    return v

  v = asyncio.run(main())
  assert v.num_steps == 3 and v.flagged_steps() == {1} and v.first_error_step("major") == 1


def test_metrics_follow_the_processbench_and_balanced_f1_conventions():
  assert judges.balanced_f1(1.0, 0.5) == pytest.approx(2 / 3) and judges.balanced_f1(0, 0) == 0
  pb = judges.processbench_scores([1, -1, 2, -1], [1, -1, 0, 2])
  assert pb["acc1"] == pytest.approx(1 / 3) and pb["acc2"] == 1.0 and pb["f1"] == pytest.approx(0.5)
  assert judges.processbench_step_truth(2, 5) == {0: False, 1: False, 2: True}
  assert judges.processbench_step_truth(-1, 2) == {0: False, 1: False}
  det = judges.step_detection([{2}, {0}], [{0: False, 1: False, 2: True}, {0: False, 1: False}])
  assert (det["tp"], det["fn"], det["tn"], det["fp"]) == (1, 0, 3, 1)
  assert det["balanced_f1"] == pytest.approx(judges.balanced_f1(1.0, 0.75))
