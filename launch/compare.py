"""`make reproduce`: trains the reward modes and the judge-quality ablation from one SFT base, writes docs/results/.

    python -m launch.compare                           # the full study: 3 modes + 2 reversed judges × 5 seeds
    python -m launch.compare --study.preset=quick      # `make reproduce-quick`: minutes, into runs/study_quick
    python -m launch.compare --study.preset=hard       # docs/results/hard_regime.md: where groups are all wrong
    python -m launch.compare --study.seeds='(0,)' --study.num_steps=10 --study.root=/tmp/s --study.out_dir=/tmp/r

Finished runs are skipped on a restart. A preset's values replace the defaults, never a field set on the
command line. The SFT base's config (`--study.sft_config`) is read from the repository root, whatever the
working directory. This file is intentionally short: see `experiments/study/`.
"""

import sys

from arena_jax import cli
from experiments import study

_STUDY = cli.config_dict_flag("study", study.study_config())


def main(argv):
  del argv
  overrides = cli.overridden_fields("study")
  config = study.name_command(study.apply_preset(_STUDY.value, keep=overrides), overrides, sys.argv[1:])
  runs = study.run_study(config)
  print(study.write_page(config, runs))


if __name__ == "__main__":
  cli.run(main)
