"""The benchmarks run end to end on tiny sizes and end with one JSON line (no timing is checked)."""
import json

from benchmarks import tournament_fidelity


def test_tournament_fidelity_runs_and_ends_with_json(capsys):
  tournament_fidelity.main(["--groups", "3", "--sizes", "5"])
  lines = capsys.readouterr().out.strip().splitlines()
  figures = json.loads(lines[-1])
  topologies = figures["results"]["5"]["topologies"]
  assert set(topologies) == {"anchor", "double_elimination", "live", "round_robin",
                             "seeded_single_elimination", "swiss"}
  assert topologies["round_robin"]["calls"] == 10 and topologies["live"]["calls"] == 3 * 5 - 6
  for row in topologies.values():
    for agg in ("native", "win_rate", "bt"):
      assert -1.0 <= row[agg]["tau_truth"] <= 1.0
