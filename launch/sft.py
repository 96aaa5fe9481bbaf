"""SFT warm start of the embedded policy: tokenizer, demonstrations, AdamW, held-out eval.

    python -m launch.sft                                          # configs/sft.py → runs/sft_demo
    python -m launch.sft --config=configs/sft.py:smoke --workdir=/tmp/sft_smoke
    python -m launch.sft --config.num_steps=3000 --workdir=runs/sft_long

A run whose config equals the one stored in the policy directory returns at once (the cache that
`make demo` relies on). This file is intentionally short: the work is in `arena_jax.train.sft`.
"""

import json

from absl import flags
from ml_collections import config_flags

from arena_jax import cli
from arena_jax.train import sft

_CONFIG = config_flags.DEFINE_config_file("config", "configs/sft.py", "SFT config.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "The policy directory (default: --config.output_dir).")


def main(argv):
  del argv
  summary = sft.train_sft(_CONFIG.value, _WORKDIR.value)
  summary.pop("loss_history", None)
  state = "cached policy" if summary["cached"] else "trained policy"
  print(
    f"{state} in {summary['output_dir']} ({summary['wall_time_s']:.0f}s): "
    f"held-out {json.dumps({k: round(v, 3) for k, v in summary.get('eval', {}).items()})}"
  )


if __name__ == "__main__":
  cli.run(main)
