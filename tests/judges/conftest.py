"""Shared fixtures of the judge tests: an embedded judge server process, demonstrations of each kind."""

import itertools

import pytest

from arena_jax import judges
from arena_jax import tasks


@pytest.fixture(scope="session")
def server():
  """One real embedded judge server (a child process), noise-free, answering with reasoning_content."""
  with judges.EmbeddedJudgeServer(emit_reasoning=True) as s:
    yield s


@pytest.fixture(scope="session")
def demos():
  """{kind: Demonstration} — the first arithmetic test demonstration of every kind."""
  cfg = tasks.default_config()
  for kind in tasks.DEMO_KINDS:
    cfg.sft.fractions[kind] = 1.0 / len(tasks.DEMO_KINDS)
  out = {}
  for d in itertools.islice(tasks.demonstrations(cfg, "arithmetic", "test"), 200):
    out.setdefault(d.kind, d)
    if len(out) == len(tasks.DEMO_KINDS):
      break
  assert set(out) == set(tasks.DEMO_KINDS)
  return out


def fast_config(**client):
  """A judges config whose client retries quickly (tests never wait on real backoff)."""
  config = judges.default_config()
  config.client.backoff_initial_s = 0.001
  config.client.backoff_max_s = 0.005
  config.client.timeout_s = 10.0
  for k, v in client.items():
    config.client[k] = v
  return config
