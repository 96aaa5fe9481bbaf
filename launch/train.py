"""RL training: Reasoning Arena and its baselines (SPEC §7) from an absl command line.

    python -m launch.train --config=configs/arith_arena_live.py --workdir=runs/arena_live
    python -m launch.train --config=configs/arith_rlvr.py --workdir=runs/rlvr --config.num_steps=100
    python -m launch.train --config=configs/arith_arenarl.py:smoke --workdir=/tmp/smoke \
        --config.reward.topology=swiss --config.judge.urls='("http://judge:8000",)'
    python -m launch.train ... --config.resume=True        # continue from the last checkpoint

This file is intentionally short: the loop lives in `arena_jax.train`.
"""

from absl import flags
from ml_collections import config_flags

from arena_jax import cli
from arena_jax import train

_CONFIG = config_flags.DEFINE_config_file("config", "configs/arith_arena_live.py", "Run config.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints, metrics.jsonl, TensorBoard, curves.png.", required=True)


def main(argv):
  del argv
  summary = train.train(_CONFIG.value, _WORKDIR.value)
  if summary["interrupted"]:
    print(
      f"interrupted after step {summary['steps']} (checkpoint saved); resume with the same command and "
      "--config.resume=True"
    )
  else:
    print(f"done: {summary['steps']} steps in {summary['workdir']}")


if __name__ == "__main__":
  cli.run(main)
