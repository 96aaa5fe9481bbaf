"""Shared fixtures for trainer tests: a data dir built once per worker and a coin-flip verifier."""

import zlib

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


@pytest.fixture(scope="session")
def judged_run(data_dir, tmp_path_factory):
  """A 3-step arena_live smoke run against the embedded judge with every judge call transcribed (shared by
  the transcript, inspector and browser tests): its workdir."""
  from arena_jax.train import train  # pylint: disable=g-import-not-at-top

  workdir = str(tmp_path_factory.mktemp("judged_run"))
  with pytest.MonkeyPatch.context() as m:
    m.setattr(
      tasks.ArithmeticTask, "verify", lambda self, example, completion: float(zlib.crc32(completion.encode()) % 2)
    )
    c = smoke_config("arena_live", data_dir)
    c.num_steps = 3
    c.judge.transcripts = 1.0
    train(c, workdir)
  return workdir
