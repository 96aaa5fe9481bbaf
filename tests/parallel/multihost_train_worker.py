"""One of two CPU processes of `test_multihost_train.py`: the RL trainer over two hosts (4 fake devices
each, one global mesh of 8), with a stop after step 2 and a resume.

Run as `python -m tests.parallel.multihost_train_worker OUT_JSON WORKDIR DATA_DIR [MAX_STALENESS]` with
JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID set; writes this host's view of the run as JSON.
"""

import json
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402


def main(out_path: str, workdir: str, data_dir: str, max_staleness: str = "0"):
  from tests.parallel.multihost_train_config import config, patch_verifier  # pylint: disable=g-import-not-at-top
  from arena_jax.train import train  # pylint: disable=g-import-not-at-top

  patch_verifier()
  k = int(max_staleness)
  first = train(config(data_dir, steps=2, max_staleness=k), workdir)  # jax.distributed.initialize() happens here
  second = train(config(data_dir, steps=3, resume=True, max_staleness=k), workdir)
  out = {
    "process": jax.process_index(),
    "processes": jax.process_count(),
    "devices": jax.device_count(),
    "steps": [first["steps"], second["steps"]],
    "last": second["last"],
  }
  with open(out_path, "w", encoding="utf-8") as f:
    json.dump(out, f, default=float)
  jax.distributed.shutdown()


if __name__ == "__main__":
  main(*sys.argv[1:5])
