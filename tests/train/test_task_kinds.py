"""The Arena modes on the new task kinds: a smoke run of arena_live on a multiple-choice JSONL."""

import pathlib
import zlib

from arena_jax import tasks
from arena_jax.train import read_metrics, read_transcripts, train
from tests.train.conftest import smoke_config

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "arena_jax" / "tasks" / "samples"


def test_arena_live_trains_on_a_choice_jsonl_against_the_embedded_judge(data_dir, tmp_path, monkeypatch):
  """A random policy answers no letter: every group is all-wrong and routed to the live tournament, whose
  judge reads the choice problems as the task briefs it (lettered options, reference "C) …")."""
  monkeypatch.setattr(tasks.ChoiceTask, "verify", lambda self, e, c: float(zlib.crc32(c.encode()) % 4 == 0))
  c = smoke_config("arena_live", data_dir)
  c.num_steps = 1
  c.judge.transcripts = 1.0
  c.tasks.train_task = "choice"
  c.tasks.choice.train_path = str(SAMPLES / "choice_sample.jsonl")
  c.tasks.corpus_tasks = ("arithmetic", "choice")
  workdir = tmp_path / "run"
  train(c, str(workdir))
  rows = read_metrics(str(workdir))
  assert [r["step"] for r in rows] == [1]
  assert sum(r["judge/calls"] for r in rows) > 0 and all(r["judge/failures"] == 0 for r in rows)
  calls = list(read_transcripts(str(workdir)))
  assert calls and all("A) " in call["problem"] and call["reference"][1] == ")" for call in calls)
