"""Judges compared on a run's stored pairs (`launch.rescore`, `arena_jax.report.rescore`): the run's own
judge agrees with itself, a noisier, position-biased one agrees less, and the command prints a table and
one JSON line."""

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from arena_jax import arena
from arena_jax import judges
from arena_jax import report
from arena_jax.errors import MissingFileError
from arena_jax.train import read_transcripts
from arena_jax.train import transcripts as tr
from tests.train.conftest import smoke_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MILD = {"noise": 0.5}
NOISY = {"noise": 3.0, "position_bias": 2.0}
G = 6


def _traces(a: int, b: int, c: int) -> list[str]:
  """G traces of "Compute a + b * c." from flawless to wrong (in an order that depends on the problem, so
  that the first member of a pair is not always the better one), for the process judge to rank."""
  p, s = b * c, a + b * c
  order = np.random.default_rng(a * 100 + b * 10 + c).permutation(G)
  return [
    [
      f"{b} * {c} = {p}\n{a} + {p} = {s}\nAnswer: {s}",
      f"{a} + {p} = {s}\nAnswer: {s}",  # a skipped operation
      f"{b} * {c} = {p + 1}\n{a} + {p + 1} = {s + 1}\nAnswer: {s}",  # an invalid step, right answer
      f"{b} * {c} = {p}\n{a} + {p} = {s + 2}\nAnswer: {s + 2}",  # a wrong sum, wrong answer
      f"{a} + {b} = {a + b}\n{a + b} * {c} = {(a + b) * c}\nAnswer: {(a + b) * c}",  # wrong order
      f"Answer: {s + 7}",
    ][k]
    for k in order
  ]


@pytest.fixture(scope="module")
def judged_pairs(data_dir, tmp_path_factory):
  """A workdir whose transcripts hold round-robin tournaments of traces of varied quality, judged by the
  embedded judge with the smoke run's settings and written by the run's transcript writer. (The smoke
  run's random policy writes traces the process judge cannot tell apart: every verdict a tie.)"""
  workdir = str(tmp_path_factory.mktemp("judged_pairs"))
  config = smoke_config("arena_live", data_dir).judge
  problems = [(2, 3, 4), (5, 6, 7), (9, 2, 8), (4, 7, 3)]
  with judges.EmbeddedJudgeServer(config.server, model=config.model) as server:
    judge = judges.make_judge(config, [server.url])
    jobs = [
      judges.TournamentJob(
        arena.make_scheduler("round_robin", G),
        f"Compute {a} + {b} * {c}.",
        str(a + b * c),
        _traces(a, b, c),
        group_id=k,
      )
      for k, (a, b, c) in enumerate(problems)
    ]

    async def play():
      try:
        return await judges.run_tournaments(judge, jobs)
      finally:
        await judge.close()

    runs = asyncio.run(play())
  writer = tr.TranscriptWriter(workdir, fraction=1.0)
  for k, (job, run) in enumerate(zip(jobs, runs)):
    group = types.SimpleNamespace(
      index=k, problem=job.problem, reference=job.reference, traces=job.traces, arrival_order=list(range(G))
    )
    writer.put(tr.pairwise_group_row(judge, 1 + k // 2, group, run, "round_robin"))
  writer.close()
  return workdir


def test_cohen_kappa_by_hand():
  # p_o = 3/4; p_e = 1/2 · 1/4 + 1/2 · 3/4 = 1/2; κ = (3/4 − 1/2) / (1 − 1/2) = 1/2
  assert report.cohen_kappa(["x", "x", "y", "y"], ["x", "y", "y", "y"]) == pytest.approx(0.5)
  assert report.cohen_kappa(["x", "y", "x"], ["x", "y", "x"]) == pytest.approx(1.0)
  assert report.cohen_kappa(["x", "x"], ["x", "x"]) is None  # one category each: chance agreement is 1
  assert report.cohen_kappa([], []) is None


@pytest.mark.slow  # two rescoring passes
def test_the_same_judge_agrees_a_noisier_judge_agrees_less(judged_pairs, data_dir):
  config = smoke_config("arena_live", data_dir).judge  # the run's judge settings
  stored = [r for r in read_transcripts(judged_pairs) if r["form"] == "pairwise"]
  results = []
  for knobs in ({}, MILD, NOISY):
    with judges.EmbeddedJudgeServer(config.server, model=config.model, **knobs) as server:
      results.append(report.rescore(judged_pairs, config, [server.url]))
      if not knobs:  # only some steps, only the first calls
        part = report.rescore(judged_pairs, config, [server.url], steps=[stored[0]["step"]], max_calls=3)
  again, mild, other = results
  for r in results:
    assert len(r.calls) == len(stored) and len(r.compared) == len(stored)
    assert r.groups == len({(s["step"], s["group"]) for s in stored}) and r.steps == 2
  # The stored verdicts are varied (the first member of a pair is not always the better one).
  assert min(again.counts("run")[k] for k in ("first", "tie", "second")) >= 5
  # Replayed in the order shown, the run's own (noise-free) judge answers every call as it did.
  assert again.agreement == 1.0 and again.kappa == pytest.approx(1.0) and again.tau == pytest.approx(1.0)
  assert again.first_shown_rate("new") == again.first_shown_rate("run")
  assert [(c.run_shown, c.run_verdict) for c in again.calls] == [(c.new_shown, c.new_verdict) for c in again.calls]
  # Noisier judges agree less: verdicts, κ and the BT rankings, in the order of their noise.
  assert again.agreement > mild.agreement > other.agreement and other.agreement < 0.6
  assert again.kappa > mild.kappa > other.kappa + 0.3 and again.tau > mild.tau > other.tau + 0.3
  # The position-biased judge gives more wins to the trace shown first.
  assert other.first_shown_rate("new") > other.first_shown_rate("run") + 0.08
  s = other.summary()
  assert s["calls"] == len(stored) and s["agreement"] == round(other.agreement, 4)
  assert sum(s["verdicts"]["rescore"].values()) == len(stored)
  assert len(part.calls) == 3 and {c.step for c in part.calls} == {stored[0]["step"]}
  untimed = lambda calls: [dataclasses.replace(c, new_latency_s=None) for c in calls]  # noqa: E731
  assert untimed(part.calls) == untimed(again.calls[:3])
  # Every replayed call is timed; none of these failed.
  assert all(c.new_latency_s > 0 for c in other.calls) and s["rescore_latency_median_s"] > 0
  assert s["rescore_failures_by_kind"] == {}


@pytest.mark.slow  # launch.rescore in a child
def test_the_command_prints_a_table_then_a_json_line(judged_pairs, tmp_path):
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  proc = subprocess.run(
    [
      sys.executable,
      "-m",
      "launch.rescore",
      f"--workdir={judged_pairs}",
      *(f"--judge.server.{k}={v}" for k, v in NOISY.items()),
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.strip().splitlines()
  summary = json.loads(lines[-1])
  assert summary["calls"] > 0 and summary["agreement"] < 0.9 and "Cohen's kappa" in proc.stdout
  assert set(summary["first_shown_rate"]) == {"run", "rescore"}
  # A workdir without transcripts: one line naming the directory, no traceback.
  proc = subprocess.run(
    [sys.executable, "-m", "launch.rescore", f"--workdir={tmp_path}"],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode != 0 and "transcripts" in proc.stderr and "Traceback" not in proc.stderr
  with pytest.raises(MissingFileError, match="transcripts"):
    report.rescore(str(tmp_path), judges.default_config(), ["http://127.0.0.1:9"])
