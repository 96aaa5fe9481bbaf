"""The benchmarks run end to end on tiny sizes and end with one JSON line (no timing is checked)."""

import json

import numpy as np
import pytest

from benchmarks import tournament_fidelity


def test_tournament_fidelity_runs_and_ends_with_json(capsys):
  tournament_fidelity.main(["--groups", "3", "--sizes", "5", "--curve_size", "5", "--budgets", "4,7"])
  lines = capsys.readouterr().out.strip().splitlines()
  figures = json.loads(lines[-1])
  assert set(figures["judges"]) == {"0.5", "1.0"}  # two simulated judges
  topologies = figures["judges"]["1.0"]["sizes"]["5"]["topologies"]
  assert set(topologies) == {
    "anchor",
    "double_elimination",
    "live",
    "round_robin",
    "seeded_single_elimination",
    "swiss",
    "live_info",
    "info_budget",
    "random_pairs",
  }
  assert topologies["round_robin"]["calls"] == 10 and topologies["live"]["calls"] == 3 * 5 - 6
  assert (
    topologies["info_budget"]["calls"] == topologies["live_info"]["calls"] == topologies["random_pairs"]["calls"] == 9
  )
  for row in topologies.values():
    for agg in ("native", "win_rate", "bt", "bt_shrinkage"):
      assert -1.0 <= row[agg]["tau_truth"] <= 1.0 and -1.0 <= row[agg]["tau_round_robin"] <= 1.0
  # The headline: {name: {calls, tau_truth, tau_round_robin}} of the BT aggregation.
  assert figures["topologies"]["live"] == {
    "calls": 9.0,
    "tau_truth": topologies["live"]["bt"]["tau_truth"],
    "tau_round_robin": topologies["live"]["bt"]["tau_round_robin"],
  }
  curve = figures["judges"]["1.0"]["budget_curve"]
  assert set(curve) == {"live", "live_info", "info_budget", "random_pairs"}
  assert all([p["calls"] for p in points.values()] == [4.0, 7.0] for points in curve.values())


@pytest.mark.slow  # the sampler benchmark's programs
def test_sampler_benchmark_runs_and_ends_with_json(capsys):
  """Both sides decode, the skewed workload's stops are honoured by both (the benchmark asserts it)."""
  pytest.importorskip("transformers")
  from benchmarks import sampler  # pylint: disable=g-import-not-at-top  (imports torch lazily)

  sampler.main(
    [
      "--prompts",
      "4",
      "--prompt-len",
      "4",
      "--new-tokens",
      "8",
      "--repeats",
      "1",
      "--group",
      "2",
      "--compact-every",
      "2",
    ]
  )
  figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert {
    "speedup_vs_hf",
    "fraction_of_peak",
    "group_speedup_vs_hf",
    "skewed_speedup_vs_hf",
    "skewed_no_compaction_tokens_per_s",
  } <= set(figures)
  assert 0.1 <= figures["skewed_useful_fraction"] < 1  # stops spread over 10–100 % of the budget
  assert all(v > 0 for v in figures.values())


def test_skewed_stop_steps_span_the_budget():
  from benchmarks import sampler  # pylint: disable=g-import-not-at-top

  steps = sampler.stop_steps(4096, 64)
  assert steps.min() == 6 and steps.max() == 63  # ⌈0.1·64⌉ − 1 … N − 1
  np.testing.assert_array_equal(steps, sampler.stop_steps(4096, 64))  # fixed by the seed
  assert np.median(steps) < 0.5 * 64  # skewed: most completions are short
