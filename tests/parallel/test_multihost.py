"""Two CPU processes × 4 fake devices = one global mesh of 8 (jax.distributed over gloo): per-host rows,
the sharded RL update, a multi-process orbax checkpoint restored onto another mesh, and the sampler's
programs give what one process on one device gives."""

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

from arena_jax import models, sampling
from tests import cache
from tests.parallel.conftest import CONFIG, FORCED_STOPS, NEEDS_8
from tests.parallel.test_equivalence import single_device_update

pytestmark = [NEEDS_8, pytest.mark.heavy]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def run_two_processes(module: str, *args: str, timeout: int = 600) -> list[str]:
  """Runs `python -m module OUT_JSON *args` as processes 0 and 1 of one jax.distributed cluster on this
  machine (OUT_JSON = the first of `args` with {i} filled in); returns their logs, asserting exit 0."""
  port = free_port()
  procs = []
  for i in range(2):
    env = dict(
      os.environ,
      JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
      JAX_NUM_PROCESSES="2",
      JAX_PROCESS_ID=str(i),
      PYTHONPATH=ROOT,
      **cache.jax_env(),  # the suite's compilation cache: a later run reuses what these processes compile
    )
    procs.append(
      subprocess.Popen(
        [sys.executable, "-m", module, args[0].format(i=i), *args[1:]],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
    )
  logs = [p.communicate(timeout=timeout)[0] for p in procs]
  for p, log in zip(procs, logs):
    assert p.returncode == 0, log[-4000:]
  return logs


@pytest.mark.slow  # two jax.distributed processes compiling the same programs
def test_two_processes_one_mesh(tmp_path):
  run_two_processes("tests.parallel.multihost_worker", str(tmp_path / "out{i}.json"), str(tmp_path / "ckpt"))
  outs = [json.loads((tmp_path / f"out{i}.json").read_text()) for i in range(2)]

  # Each host holds its own block of rows and owns the groups in it; the global array is whole.
  assert [o["process"] for o in outs] == [0, 1] and all(o["devices"] == 8 and o["local_devices"] == 4 for o in outs)
  assert outs[0]["rows"] == list(range(8)) and outs[1]["rows"] == list(range(8, 16))
  assert outs[0]["groups"] == [0, 1] and outs[1]["groups"] == [2, 3]
  assert all(o["gathered"] == list(range(0, 160, 10)) and o["local_rows_ok"] and o["host_sum"] == 3 for o in outs)
  assert outs[0]["sample_groups"] == [0, 1] and outs[1]["sample_groups"] == [2, 3]
  assert outs[0]["block"] == [0, 4] and outs[1]["block"] == [4, 8]
  assert all(o["gather"] == list(range(100, 108)) for o in outs)

  # The update equals the single-device one.
  *_, want_metrics = single_device_update()
  for o in outs:
    for name, value in want_metrics.items():
      np.testing.assert_allclose(o["metrics"][name], value, rtol=2e-5, atol=1e-7, err_msg=name)
    assert o["restored_equal"]

  # The sampler's tokens equal the single-device sampler's for the same key.
  rng = np.random.default_rng(2)
  prompts = [list(rng.integers(4, 128, n)) for n in (5, 9, 3, 7)]
  want = sampling.Sampler(
    config=CONFIG,
    max_new_tokens=12,
    num_samples=2,
    stop_tokens=(3,),
    greedy_first=True,
    method=sampling.RandomSampling(temperature=1.0, top_p=0.95),
  )(models.init_model(CONFIG, seed=1), prompts, jax.random.key(7))
  for o in outs:
    np.testing.assert_array_equal(np.asarray(o["tokens"]), np.asarray(want.tokens))
  # ... and with compaction (8 rows → 4 on 4 batch shards), the uncompacted single-device ones.
  want = sampling.Sampler(
    config=CONFIG,
    max_new_tokens=12,
    num_samples=2,
    stop_tokens=(3,),
    greedy_first=True,
    method=sampling.RandomSampling(temperature=1.0, top_p=0.95),
    logits_processor=sampling.ForcedStops(FORCED_STOPS, 3),
  )(models.init_model(CONFIG, seed=1), prompts, jax.random.key(7))
  for o in outs:
    assert o["compactions"] >= 1
    np.testing.assert_array_equal(o["compact_lengths"], np.asarray(FORCED_STOPS) + 1)
    np.testing.assert_array_equal(np.asarray(o["compact_tokens"]), np.asarray(want.tokens))
    # ... and in the growing cache (regrouped at its first chunk's end), in one call or two.
    assert o["regroups"] >= 1
    np.testing.assert_array_equal(np.asarray(o["growing_tokens"]), np.asarray(want.tokens))
    np.testing.assert_array_equal(np.asarray(o["split_tokens"]), np.asarray(want.tokens))
