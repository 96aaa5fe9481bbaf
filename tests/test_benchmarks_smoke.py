"""The benchmarks run end to end on tiny sizes and end with one JSON line (no timing is checked)."""
import json

from benchmarks import tournament_fidelity


def test_tournament_fidelity_runs_and_ends_with_json(capsys):
  tournament_fidelity.main(["--groups", "3", "--sizes", "5", "--curve_size", "5", "--budgets", "4,7"])
  lines = capsys.readouterr().out.strip().splitlines()
  figures = json.loads(lines[-1])
  assert set(figures["judges"]) == {"0.5", "1.0"}  # two simulated judges
  topologies = figures["judges"]["1.0"]["sizes"]["5"]["topologies"]
  assert set(topologies) == {"anchor", "double_elimination", "live", "round_robin", "seeded_single_elimination",
                             "swiss", "live_info", "info_budget", "random_pairs"}
  assert topologies["round_robin"]["calls"] == 10 and topologies["live"]["calls"] == 3 * 5 - 6
  assert topologies["info_budget"]["calls"] == topologies["live_info"]["calls"] == topologies["random_pairs"]["calls"] == 9
  for row in topologies.values():
    for agg in ("native", "win_rate", "bt", "bt_shrinkage"):
      assert -1.0 <= row[agg]["tau_truth"] <= 1.0 and -1.0 <= row[agg]["tau_round_robin"] <= 1.0
  # The headline: {name: {calls, tau_truth, tau_round_robin}} of the BT aggregation.
  assert figures["topologies"]["live"] == {"calls": 9.0, "tau_truth": topologies["live"]["bt"]["tau_truth"],
                                           "tau_round_robin": topologies["live"]["bt"]["tau_round_robin"]}
  curve = figures["judges"]["1.0"]["budget_curve"]
  assert set(curve) == {"live", "live_info", "info_budget", "random_pairs"}
  assert all([p["calls"] for p in points.values()] == [4.0, 7.0] for points in curve.values())
