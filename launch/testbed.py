"""The testbed condition (non-diverse groups that differ in process) of an SFT policy's groups: one JSON line
(`experiments/testbed.py`).

    python -m launch.testbed --workdir=/tmp/sft_demo                     # trains configs/sft.py there (or reuses it)
    python -m launch.testbed --workdir=runs/sft_demo --notrain          # an existing policy, as it is
    python -m launch.testbed --workdir=/tmp/sft_x --config.tasks.sft.fractions.clean=0.6 ...

The policy is trained into --workdir unless that directory holds one of an equal config (the SFT cache).
"""

import json

from absl import flags
from ml_collections import config_flags

from arena_jax import cli
from experiments import CONFIGS
from experiments import testbed

_CONFIG = config_flags.DEFINE_config_file("config", str(CONFIGS / "sft.py"), "The SFT config.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "The policy directory.", required=True)
_TRAIN = flags.DEFINE_boolean(
  "train", True, "Train the policy unless cached; --notrain evaluates --workdir's policy as it is."
)
_NUM = flags.DEFINE_integer("num_examples", 200, "Held-out problems per benchmark (G = 8 samples each).")


def main(argv):
  del argv
  print(json.dumps(testbed.measure(_CONFIG.value, _WORKDIR.value, num_examples=_NUM.value, train=_TRAIN.value)))


if __name__ == "__main__":
  cli.run(main)
