"""launch.testbed's figures: the trainer and the evaluator faked, the report line checked."""

import types

import experiments
from arena_jax import tasks
from experiments import testbed


def test_measure_reports_both_benchmarks_and_the_demonstrations_as_written(monkeypatch, tmp_path):
  config = experiments.load_config("configs/sft.py:smoke")
  config.tasks.data_dir = str(tmp_path / "data")
  trained, evaluated = [], []
  monkeypatch.setattr(testbed, "train_sft", lambda c, d: trained.append(d) or {"cached": False})
  monkeypatch.setattr(
    testbed,
    "load_policy",
    lambda d: types.SimpleNamespace(model="params", config="model", tokenizer="tok", add_bos=True),
  )

  def fake_evaluate(params, model_config, tokenizer, ec, **kw):
    evaluated.append(ec)
    return {
      "arithmetic": {"greedy_accuracy": 0.5, "all_correct_flawed": 0.375, "pass@2": 0.9},
      "arithmetic_shift": {"greedy_accuracy": 0.25},
    }

  monkeypatch.setattr(testbed.watch, "evaluate_params", fake_evaluate)

  out = testbed.measure(config, str(tmp_path / "p"), num_examples=12)
  assert trained == [str(tmp_path / "p")] and not out["sft_cached"]
  ec = evaluated[0]
  assert tuple(ec.benchmarks) == ("arithmetic", "arithmetic_shift") and ec.num_examples == 12
  assert ec.tasks.arithmetic.max_ops == config.tasks.arithmetic.max_ops  # the policy's own problems
  assert out["greedy_accuracy"] == 0.5 and out["all_correct_flawed"] == 0.375 and "pass@2" not in out
  assert out["shift_greedy_accuracy"] == 0.25 and out["group_size"] == ec.num_samples
  assert set(out["demo_kinds"]) == set(tasks.DEMO_KINDS) and abs(sum(out["demo_kinds"].values()) - 1) < 0.01
  # --notrain: the policy as it is, no training.
  testbed.measure(config, str(tmp_path / "q"), num_examples=12, train=False)
  assert trained == [str(tmp_path / "p")]
