"""Weights & Biases tracking (`config.wandb`), offline, with no network: a smoke run's metrics, config,
curves and the inspector's tables land in the offline run directory, and a missing `wandb` is a one-line error."""

import glob
import json
import math
import os
import sys

import pytest

from arena_jax.errors import ConfigError
from arena_jax.train import read_metrics, read_steps, read_transcripts, train
from tests.train.conftest import smoke_config

pytestmark = pytest.mark.heavy  # a whole (tiny) run of the trainer


def _log_records(path):
  """The protobuf records of a W&B transaction log (`run-<id>.wandb`): a 7-byte header (":W&B", magic, version),
  then LevelDB's log format, which wandb-core writes: 32 KiB blocks of records, each with a 7-byte header
  (checksum, length, type: 1 full, 2 first, 3 middle, 4 last), a block's tail under 7 bytes zero-padded."""
  data = open(path, "rb").read()
  assert data[:4] == b":W&B", data[:8]
  pos, pending = 7, b""
  while pos + 7 <= len(data):
    if 32768 - pos % 32768 < 7:
      pos += 32768 - pos % 32768
      continue
    length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
    chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
    if kind == 0 and length == 0:
      continue
    pending = chunk if kind in (1, 2) else pending + chunk
    if kind in (1, 4):
      yield pending


def _records(run_dir):
  """(history rows, the run config) read back from the offline run's transaction log."""
  from wandb.proto import wandb_internal_pb2  # pylint: disable=g-import-not-at-top

  (log,) = glob.glob(os.path.join(run_dir, "*.wandb"))
  history, config = [], {}
  for data in _log_records(log):
    record = wandb_internal_pb2.Record()
    record.ParseFromString(data)
    kind = record.WhichOneof("record_type")
    if kind == "history":
      history.append(
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
      )
    elif kind == "config":
      config.update({item.key: json.loads(item.value_json) for item in record.config.update})
    elif kind == "run":
      config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
  return history, config


def test_an_offline_run_holds_the_metrics_config_curves_and_tables(data_dir, coin_verifier, tmp_path, monkeypatch):
  pytest.importorskip("wandb", reason="the `wandb` extra: pip install -e '.[wandb]'")
  monkeypatch.setenv("WANDB_SILENT", "true")
  c = smoke_config("arena_live", data_dir)
  c.num_steps = 2
  c.judge.transcripts = 1.0
  c.wandb.project = "arena-test"
  c.wandb.mode = "offline"
  c.log.plot = True
  workdir = str(tmp_path / "run")
  train(c, workdir)

  (run_dir,) = glob.glob(os.path.join(workdir, "wandb", "offline-run-*"))
  history, config = _records(run_dir)
  steps = [r for r in history if "loss" in r]
  metrics = read_metrics(workdir)
  assert [r["_step"] for r in steps] == [m["step"] for m in metrics] == [1, 2]
  for logged, row in zip(steps, metrics):
    numbers = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float)) and math.isfinite(v)}
    assert len(numbers) > 20
    for key, value in numbers.items():
      assert logged[key] == value, key  # the same float64, written as JSON by both
  config = {k: v.get("value", v) if isinstance(v, dict) else v for k, v in config.items()}
  assert config["reward"]["mode"] == "arena_live" and config["wandb"]["project"] == "arena-test"
  last = history[-1]
  assert last["curves/_type"] == "image-file"
  # The inspector's tables, as W&B table files in the run directory: one row per member of every group, one per
  # judge call, one per logged sample.
  tables = {}
  for name in ("groups", "judge_calls", "samples"):
    with open(os.path.join(run_dir, "files", last[f"tables/{name}/path"])) as f:
      tables[name] = json.load(f)
  groups = [g for s in read_steps(workdir) for g in s["groups"]]
  assert len(tables["groups"]["data"]) == sum(len(g["verifier"]) for g in groups)
  assert len(tables["judge_calls"]["data"]) == len(list(read_transcripts(workdir))) > 0
  assert len(tables["samples"]["data"]) == len(open(os.path.join(workdir, "samples.jsonl")).readlines())
  assert open(os.path.join(workdir, "wandb_run_id")).read().strip() in run_dir


def test_a_missing_wandb_is_one_line_naming_the_extra(data_dir, tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb → ImportError
  c = smoke_config("rlvr", data_dir)
  c.wandb.project = "p"
  with pytest.raises(ConfigError, match=r"config\.wandb\.project = 'p'.*not installed: pip install -e '\.\[wandb\]'"):
    train(c, str(tmp_path))
  assert not os.path.exists(os.path.join(tmp_path, "checkpoints"))  # failed before anything was built
