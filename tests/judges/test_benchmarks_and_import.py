"""The judge benchmarks run end to end on tiny sizes (nothing is timed here); the package imports quietly."""

import json
import subprocess
import sys

from benchmarks import judge_throughput, jury_f1


def test_judge_throughput_runs_and_ends_with_json(capsys):
  judge_throughput.main(["--latency_ms", "5", "--concurrency", "1,4", "--rounds", "2", "--repeats", "1"])
  figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert {"pairs_per_s", "bound", "efficiency"} <= set(figures) and figures["bound"] == 4 / 0.005
  by = figures["by_concurrency"]
  assert set(by) == {"1", "4"} and all(v["failed"] == 0 for v in by.values())


def test_jury_f1_runs_and_ends_with_json(capsys):
  jury_f1.main(["--traces", "12"])
  figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert set(figures["balanced_f1"]) == {"vote_1", "vote_3", "consolidation_3", "deliberation_3"}
  assert figures["calls_per_trace"]["vote_1"] == 1 and figures["calls_per_trace"]["consolidation_3"] == 4


def test_importing_the_judges_starts_nothing_and_prints_nothing():
  code = (
    "import threading, multiprocessing, asyncio; import arena_jax.judges; "
    "print(threading.active_count(), len(multiprocessing.active_children()))"
  )
  proc = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""}
  )
  assert proc.stdout.split() == ["1", "0"] and proc.stderr == ""
