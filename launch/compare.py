"""`make reproduce`: trains every reward mode from the same SFT base and writes docs/results/.

    python -m launch.compare                                   # the full study (≈ 1–2 h on 2 CPU cores)
    python -m launch.compare --study.seeds='(0,)' --study.num_steps=10 --study.root=/tmp/s --study.out_dir=/tmp/r

Finished runs are skipped on a restart. The SFT base's config (`--study.sft_config`) is read from the
repository root, whatever the working directory. This file is intentionally short: see `experiments/study.py`.
"""
from absl import flags
from absl import logging
from ml_collections import config_flags

from arena_jax import cli
from experiments import study

_STUDY = config_flags.DEFINE_config_dict("study", study.study_config(), lock_config=True)


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  runs = study.run_study(_STUDY.value)
  print(study.write_results(_STUDY.value, runs))


if __name__ == "__main__":
  cli.run(main)
