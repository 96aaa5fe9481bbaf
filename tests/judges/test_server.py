"""The embedded judge server: a real process, its protocol, and its judging rules."""

import asyncio
import json
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

from arena_jax import judges
from arena_jax import tasks
from arena_jax.arena import Verdict
from arena_jax.judges.embedded import checking
from arena_jax.judges.embedded import server as server_lib

T = judges.load_templates()
ARITH = "Question: Compute (7 + 5) * 3 - 4.\nSolution:\n"
CLEAN = "7 + 5 = 12.\n\n12 * 3 = 36.\n\n36 - 4 = 32.\n\nAnswer: 32"
SLIP = "7 + 5 = 13.\n\n13 * 3 = 39.\n\n39 - 4 = 35.\n\nAnswer: 35"


def get(url):
  with urllib.request.urlopen(url, timeout=10) as r:
    return json.loads(r.read())


def test_the_server_process_binds_loopback_and_stops():
  s = judges.EmbeddedJudgeServer(model="judge-x")
  with s:
    assert s.url.startswith("http://127.0.0.1:") and s.base_url == s.url + "/v1"
    assert get(s.url + "/health") == {"status": "ok"}
    assert get(s.url + "/v1/models")["data"][0]["id"] == "judge-x"
    proc = s._proc  # pylint: disable=protected-access
  assert proc.poll() is not None  # terminated on exit


def test_launch_serve_judge_main_serves_on_the_given_port():
  proc = subprocess.Popen(
    [sys.executable, "-m", "launch.serve_judge", "--port", "0", "--server.latency_ms=1"],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    line = proc.stdout.readline()
    m = server_lib.READY_PATTERN.search(line)
    assert m, line
    assert get(m.group(1) + "/health")["status"] == "ok"
  finally:
    proc.terminate()
    proc.wait(timeout=10)


def test_bad_knobs_are_refused_before_starting():
  with pytest.raises(ValueError, match="unknown judge server knob"):
    judges.EmbeddedJudgeServer(latency=3)
  with pytest.raises(ValueError, match=r"judge\.server\.hang_rate"):
    judges.EmbeddedJudgeServer(hang_rate=2.0)


def test_the_latency_model_has_the_configured_median_tail_and_token_growth():
  cfg = judges.server_config()
  cfg.update(
    latency_ms=100.0, latency_p99_ms=1000.0, latency_ms_per_prompt_token=0.5, latency_ms_per_completion_token=20.0
  )
  s = server_lib._Server(cfg)  # pylint: disable=protected-access
  draws = sorted(s._latency() for _ in range(20000))  # pylint: disable=protected-access
  assert draws[10000] == pytest.approx(0.1, rel=0.05) and draws[19800] == pytest.approx(1.0, rel=0.15)
  assert s._token_latency(1000, 50) == pytest.approx(0.5 + 1.0)  # pylint: disable=protected-access
  with pytest.raises(ValueError, match=r"judge\.server\.latency_p99_ms"):
    judges.EmbeddedJudgeServer(latency_ms=100.0, latency_p99_ms=50.0)


# ── judging rules (no HTTP) ──


def logic(**knobs):
  cfg = judges.server_config()
  cfg.update(knobs)
  return judges.JudgeLogic(cfg)


def verdict(text):
  return judges.parse_pairwise(text)


def pair(problem, reference, a, b, **knobs):
  kind, content, _ = logic(**knobs).answer(
    T.render("pairwise", problem=problem, reference=reference, trace_a=a, trace_b=b), seed=0
  )
  assert kind == "pairwise"
  return verdict(content)


def test_each_template_is_recognised():
  fields = dict(
    problem=ARITH,
    reference="32",
    trace_a=CLEAN,
    trace_b=SLIP,
    trace=CLEAN,
    rubric=judges.prompts.rubric_text((0, 1)),
    marked_trace="[STEP-1] Answer: 32",
    final_answer="32",
    verdicts="[]",
    claims="[]",
    question="?",
    state='{"num_jurors": 3, "quorum": 2, "claims": []}',
    transcript="",
    num_jurors=3,
    quorum=2,
  )
  for name in judges.prompts.TEMPLATE_NAMES:
    kind, content, _ = judges.JudgeLogic(judges.server_config()).answer(T.render(name, **fields), seed=0)
    assert kind == name, (name, content)


def test_built_in_tasks_are_judged_by_their_process_checker():
  assert pair(ARITH, "32", CLEAN, SLIP) == Verdict.FIRST_WINS
  assert pair(ARITH, "32", SLIP, CLEAN) == Verdict.SECOND_WINS
  assert pair(ARITH, "32", CLEAN, CLEAN) == Verdict.TIE
  redundant = "7 + 5 = 12.\n\n12 + 0 = 12.\n\n12 * 3 = 36.\n\n36 - 4 = 32.\n\nAnswer: 32"
  assert pair(ARITH, "32", CLEAN, redundant) == Verdict.FIRST_WINS  # fewer irrelevant steps
  countdown = "Question: Use 3, 7, 25, 2 to make 46 with + - * /, each number at most once.\nSolution:\n"
  good = "25 - 3 = 22.\n\n22 * 2 = 44.\n\nAnswer: 46"  # does not reach the target
  better = "25 - 3 = 22.\n\n22 * 2 = 44.\n\n44 + 2 = 46.\n\nAnswer: 46"  # uses 2 twice: invalid
  best = "25 * 2 = 50.\n\n7 - 3 = 4.\n\n50 - 4 = 46.\n\nAnswer: 46"
  assert pair(countdown, "46", best, good) == Verdict.FIRST_WINS
  assert pair(countdown, "46", better, best) == Verdict.SECOND_WINS


def test_unknown_problems_fall_back_to_the_final_answer_then_a_tie():
  problem = "How many legs do 3 spiders have?"
  assert pair(problem, "24", "Each has 8 legs.\n\nAnswer: 24", "Answer: 21") == Verdict.FIRST_WINS
  assert pair(problem, "24", "Answer: 24", "So \\boxed{24}.") == Verdict.TIE


def test_position_bias_and_noise_are_applied():
  assert pair(ARITH, "32", CLEAN, CLEAN, position_bias=1.0) == Verdict.FIRST_WINS
  assert pair(ARITH, "32", SLIP, CLEAN, position_bias=5.0) == Verdict.FIRST_WINS
  noisy = logic(noise=3.0)
  prompt = T.render("pairwise", problem=ARITH, reference="32", trace_a=CLEAN, trace_b=CLEAN)
  verdicts = [verdict(noisy.answer(prompt, seed=s)[1]) for s in range(60)]
  assert len(set(verdicts)) == 3  # noise makes all three verdicts possible ...
  assert verdicts == [verdict(noisy.answer(prompt, seed=s)[1]) for s in range(60)]  # ... reproducibly per seed


def test_the_generic_check_reads_latex_arithmetic():
  wrong = checking._wrong_equations  # pylint: disable=protected-access
  assert wrong("so \\(18 - 6 = 11\\) flamingos") == ["18 - 6 = 11"]
  assert wrong("\\(1/3 \\times 18 = 6\\) and \\[ \\frac{300}{10} = 30 \\]") == []
  assert wrong("each gets 100/3 = 33.33 dollars, total 1,200 + 34 = 1,234") == []
  assert wrong("step 3: 4 = 4") == []


def test_juror_errors_depend_on_the_juror_seed():
  marked = "[STEP-1] 7 + 5 = 13.\n\n[STEP-2] 13 * 3 = 39.\n\n[STEP-3] 39 - 4 = 35.\n\n[STEP-4] Answer: 35"
  prompt = T.render("juror", problem=ARITH, reference="32", marked_trace=marked, final_answer="35")
  perfect = judges.parse_flaws(logic().answer(prompt, 0)[1], 4)
  assert [f["statement_refs"] for f in perfect] == [["STEP-1"]]
  noisy = logic(miss_rate=0.5, false_alarm_rate=0.5)
  reports = [
    tuple(sorted(r for f in judges.parse_flaws(noisy.answer(prompt, s)[1], 4) for r in f["statement_refs"]))
    for s in range(20)
  ]
  assert len(set(reports)) > 3
  assert reports == [
    tuple(sorted(r for f in judges.parse_flaws(noisy.answer(prompt, s)[1], 4) for r in f["statement_refs"]))
    for s in range(20)
  ]


def test_long_answers_are_cut_at_max_tokens():
  async def main():
    async with judges.serve_in_process() as url:
      async with judges.JudgeClient([url], model="arena-judge", max_tokens=3, max_parse_retries=0) as c:
        return await c.chat(T.messages("pairwise", problem=ARITH, reference="32", trace_a=CLEAN, trace_b=SLIP))

  c = asyncio.run(main())
  assert c.finish_reason == "length" and c.failure_reason == "truncated" and judges.count_tokens(c.content) == 3


def _pairs_that_differ(n):
  """`n` (prompt, reference, better trace, worse trace) of arithmetic test problems: a clean demonstration
  against a slipped or compensating one of the same problem (their penalties differ by a whole step)."""

  def demos(kind):
    cfg = tasks.default_config()
    cfg.sft.fractions = {k: float(k == kind) for k in tasks.DEMO_KINDS}
    return tasks.demonstrations(cfg, "arithmetic", "test", examples=examples)

  examples = tasks.load_split(tasks.default_config(), "arithmetic", "test")[:n]
  flawed = [d for kind in ("slip", "compensating") for d in demos(kind)][::2][:n]
  clean = {d.example.uid: d for d in demos("clean")}
  return [
    (d.prompt, d.example.answer, clean[d.example.uid].completion, d.completion) for d in flawed if d.kind != "clean"
  ]


def test_flip_rate_sets_the_verdict_accuracy_on_pairs_that_differ():
  pairs = _pairs_that_differ(300)
  assert len(pairs) >= 250
  prompts = [
    (T.render("pairwise", problem=p, reference=r, trace_a=a, trace_b=b), "A")
    if i % 2
    else (T.render("pairwise", problem=p, reference=r, trace_a=b, trace_b=a), "B")
    for i, (p, r, a, b) in enumerate(pairs)
  ]  # the better trace shown first in half of them

  def accuracy(seed=0, **knobs):
    judge = logic(**knobs)
    verdicts = [verdict(judge.answer(prompt, seed=seed + i)[1]) for i, (prompt, _) in enumerate(prompts)]
    want = [Verdict.FIRST_WINS if better == "A" else Verdict.SECOND_WINS for _, better in prompts]
    assert Verdict.TIE not in verdicts  # a reversed verdict is never a tie
    return float(np.mean([v == w for v, w in zip(verdicts, want)])), verdicts

  assert accuracy()[0] == 1.0
  for flip in (0.2, 0.35):
    realised, verdicts = accuracy(flip_rate=flip)
    assert realised == pytest.approx(1 - flip, abs=0.06)  # binomial std ≈ 0.03 on ~280 pairs
    assert accuracy(flip_rate=flip)[1] == verdicts  # deterministic per (seed, request seed, content) ...
    assert accuracy(seed=1000, flip_rate=flip)[1] != verdicts  # ... and drawn anew with the request seed
  assert pair(ARITH, "32", CLEAN, CLEAN, flip_rate=1.0) == Verdict.TIE  # equal penalties: nothing to reverse
  assert pair(ARITH, "32", CLEAN, SLIP, flip_rate=1.0) == Verdict.SECOND_WINS
  with pytest.raises(ValueError, match=r"judge\.server\.flip_rate"):
    judges.EmbeddedJudgeServer(flip_rate=1.5)
