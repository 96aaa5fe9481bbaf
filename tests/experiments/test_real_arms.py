"""experiments/real_arms.py's own arithmetic, without training: the arms' configs, the cluster bootstrap, the
judge's measures read from transcripts, and the paired analysis (the runs themselves are `make real-arms`)."""

import json
import os

import numpy as np
import pytest

from arena_jax.train.config import validate_config
from configs import real_smollm2
from experiments import real_arms


def test_each_arm_is_the_real_preset_with_its_judge(real_gguf):
  del real_gguf
  configs = {arm: real_arms.arm_config(arm, 1) for arm in real_arms.ARMS}
  for c in configs.values():
    validate_config(c)
    assert c.seed == 1 and c.data_seed == 0 and c.num_steps == real_arms.SIZES["num_steps"]
  assert configs["rlvr"].reward.mode == "rlvr" and configs["checker"].reward.mode == "arena_live"
  assert configs["reversed"].judge.server.flip_rate == 1.0 and configs["checker"].judge.server.flip_rate == 0.0
  assert configs["llm_judge"].judge.serve == "transformers" and configs["llm_judge"].judge.verdict_format == "letter"
  # The distilled judge (`make real-judge`) in the same format, and its reversal client-side.
  for arm in ("distilled", "distilled_reversed"):
    j = configs[arm].judge
    assert j.serve_model == str(real_smollm2.DISTILLED_JUDGE) and j.verdict_format == "letter" and j.debias == "both"
  assert configs["distilled_reversed"].judge.reverse_verdicts and not configs["distilled"].judge.reverse_verdicts
  with pytest.raises(ValueError, match="unknown arm"):
    real_arms.arm_config("rlhf", 0)


def test_the_cluster_bootstrap_resamples_problems_with_every_seed():
  rng = np.random.default_rng(0)
  diff = rng.normal(0.1, 0.05, size=(3, 200))
  mean, lo, hi = real_arms.cluster_bootstrap(diff)
  assert mean == pytest.approx(diff.mean()) and lo < mean < hi
  # 600 draws of sd 0.05: the interval's half-width is about 1.96 × 0.05 / √600 ≈ 0.004 (float64, no round-off)
  assert 0.002 < (hi - lo) / 2 < 0.008
  assert real_arms.cluster_bootstrap(np.zeros((3, 5))) == (0.0, 0.0, 0.0)


def _group(traces, matches):
  return {
    "kind": "group",
    "form": "pairwise",
    "step": 1,
    "group": 0,
    "problem": "Compute 2 + 3.",
    "reference": "5",
    "traces": traces,
    "shown": {"problem": "Compute 2 + 3.", "reference": "5", "traces": [None] * len(traces)},
    "example": {"expression": "2 + 3", "answer": "5"},
    "matches": matches,
  }


def _call(first, answer, failure=None, latency=1.0):
  return {
    "order_shown": first,
    "verdict_shown": answer,
    "failure_reason": failure,
    "latency_s": latency,
    "cached": False,
  }


def test_judge_measures_read_position_bias_failures_and_agreement(tmp_path, monkeypatch):
  good, bad = "2 + 3 = 5\nAnswer: 5", "2 + 3 = 6\nAnswer: 5"  # the checker prefers the first (no invalid step)
  # A judge that answers A whatever it is shown, in both orders: every pair ½.
  matches = [
    {"i": 0, "j": 1, "outcome": 0.5, "failure_reason": None, "calls": [_call([0, 1], "A"), _call([1, 0], "A")]},
    {"i": 1, "j": 2, "outcome": 0.5, "failure_reason": None, "calls": [_call([1, 2], None, "unparseable", 3.0)]},
  ]
  rows = [_group([good, bad, good], matches)]
  monkeypatch.setattr(real_arms, "read_groups", lambda workdir: iter(rows))
  m = real_arms.judge_measures(str(tmp_path))
  assert m["calls"] == 3 and m["answered"] == 2 and m["first_shown_wins"] == 1.0
  assert m["failures_by_kind"] == {"unparseable": 1} and m["failure_rate"] == pytest.approx(1 / 3)
  assert m["latency_median_s"] == 1.0
  # Both pairs have a checker preference (0 over 1, 2 over 1); the judge's ½ agrees with neither.
  assert m["checker_pairs"] == 2 and m["agreement_with_checker"] == 0.5
  matches[0]["outcome"], matches[1]["outcome"] = 0.9, 0.9  # now 0 beats 1 (right), 1 beats 2 (wrong)
  m = real_arms.judge_measures(str(tmp_path))
  assert m["agreement_with_checker"] == pytest.approx((0.9 + 0.1) / 2)


def test_analyse_pairs_every_arm_with_rlvr_by_seed(tmp_path):
  def result(arm, seed, pass_ratio):
    return {
      "arm": arm,
      "seed": seed,
      "train_s": 60.0,
      "judge": None,
      "judge_run": {"judged_fraction": 0.5, "judge_wait_share": 0.1, "pairs_per_s": 1.0},
      "problems": {
        "pass_ratio": pass_ratio,
        "faithful": pass_ratio,
        "greedy": [0.0] * len(pass_ratio),
        "equations": 10,
        "equations_parsed": 9,
        "traces_with_equation": 1.0,
      },
    }

  runs = [result("rlvr", s, [0.2, 0.4]) for s in (0, 1, 2)]
  runs += [result("checker", s, [0.3, 0.5]) for s in (0, 1)]  # seed 2 missing: paired over 0 and 1 only
  a = real_arms.analyse(result("rlvr", 0, [0.1, 0.1]), runs)
  assert a["before"]["pass_ratio"] == pytest.approx(0.1) and a["arms"]["rlvr"]["seeds"] == [0, 1, 2]
  d = a["arms"]["checker"]["d_pass_ratio"]
  assert d[0] == pytest.approx(0.1) and d[1] == pytest.approx(0.1) and d[2] == pytest.approx(0.1)
  assert a["arms"]["checker"]["d_pass_ratio_per_seed"] == pytest.approx([0.1, 0.1])
  assert a["arms"]["checker"]["checker_parse_share"] == pytest.approx(0.9)
  json.dumps(a)  # the figures are one JSON object
  assert not os.listdir(tmp_path)


def test_a_missing_distilled_judge_names_make_real_judge(monkeypatch, tmp_path):
  monkeypatch.setattr(real_smollm2, "DISTILLED_JUDGE", tmp_path / "export")
  c = real_smollm2.get_config("distilled_judge")
  with pytest.raises(FileNotFoundError, match=r"the distilled judge is not built; run `make real-judge` first"):
    real_smollm2.check_distilled_judge(c.judge)
  (tmp_path / "export").mkdir()
  (tmp_path / "export" / "config.json").write_text("{}")
  real_smollm2.check_distilled_judge(c.judge)  # built: nothing to say
