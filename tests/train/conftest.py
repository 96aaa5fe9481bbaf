"""Shared fixtures for trainer tests: a data dir built once per worker and a coin-flip verifier."""

import json
import os
import zlib

import filelock

import pytest

from arena_jax import tasks
from configs.common import mode_config


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("datasets"))


@pytest.fixture
def coin_verifier(monkeypatch):
  """A random policy never solves arithmetic; this verifier scores a completion by a hash of its text,
  so groups of random completions are diverse, all-correct and all-wrong in realistic proportions."""
  monkeypatch.setattr(
    tasks.ArithmeticTask, "verify", lambda self, example, completion: float(zlib.crc32(completion.encode()) % 2)
  )


def smoke_config(mode: str, data_dir: str, **reward):
  c = mode_config(mode, "smoke", **reward)
  c.tasks.data_dir = data_dir
  return c


def _coin(self, example, completion):  # coin_verifier's, for the runs trained outside a test
  del self, example
  return float(zlib.crc32(completion.encode()) % 2)


def shared_run(tmp_path_factory, name: str, build) -> tuple[str, dict]:
  """A smoke run that many tests read, trained once per session (with the coin verifier): the xdist workers share a
  folder of the session's base temp and a lock, so the first to ask trains it and the others read it. Its workdir
  and the trainer's summary; a test that changes the run works on a copy."""
  from arena_jax.train import train  # pylint: disable=g-import-not-at-top

  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent  # this session's folder, above each worker's own base temp
  workdir, summary = root / f"shared_{name}", root / f"shared_{name}.json"
  with filelock.FileLock(str(root / f"shared_{name}.lock")):
    if not summary.is_file():
      with pytest.MonkeyPatch.context() as m:
        m.setattr(tasks.ArithmeticTask, "verify", _coin)
        result = train(build(), str(workdir))
      summary.write_text(json.dumps(result, default=str), encoding="utf-8")
  return str(workdir), json.loads(summary.read_text(encoding="utf-8"))


def arena_live_run_config(data_dir: str):
  """The shared Arena-Live run: 3 steps, every judge call transcribed, 5 completions kept per step."""
  c = smoke_config("arena_live", data_dir)
  c.num_steps = 3
  c.judge.transcripts = 1.0
  c.log.samples_per_step = 5
  return c


def rlvr_run_config(data_dir: str):
  """The shared RLVR run: 3 steps, checkpoints at steps 2 and 3."""
  c = smoke_config("rlvr", data_dir)
  c.num_steps, c.checkpoint.every = 3, 2
  return c


@pytest.fixture(scope="session")
def arena_live_run(data_dir, tmp_path_factory):
  """(workdir, summary) of the shared Arena-Live run (`arena_live_run_config`), read by the modes, samples,
  transcript, inspector and browser tests."""
  return shared_run(tmp_path_factory, "arena_live", lambda: arena_live_run_config(data_dir))


@pytest.fixture(scope="session")
def rlvr_run(data_dir, tmp_path_factory):
  """(workdir, summary) of the shared RLVR run (`rlvr_run_config`), read by the modes and resume tests."""
  return shared_run(tmp_path_factory, "rlvr", lambda: rlvr_run_config(data_dir))


@pytest.fixture(scope="session")
def judged_run(arena_live_run):
  """The shared Arena-Live run's workdir: every judge call of its 3 steps transcribed."""
  return arena_live_run[0]
