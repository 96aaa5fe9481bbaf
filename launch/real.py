"""`make real`: the first real run — SmolLM2-135M-Instruct trained with Reasoning Arena-Live against a real LLM judge
behind `transformers serve` (the same model distilled into a judge by `make real-judge`), on the CPU, with a
before/after table (`experiments/real.py`).

    python -m launch.real                                   # everything under runs/ (after make real-judge)
    python -m launch.real --config=configs/real_smollm2.py:llm_judge    # the judge SmolLM2 off the shelf
    python -m launch.real --steps=4                         # a shorter RL phase
    python -m launch.real --config=configs/real_smollm2.py:smoke,llm_judge --examples=8   # the path in minutes
    python -m launch.real --config=configs/real_smollm2.py  # the embedded process checker as the judge

The config defaults to the repository's `configs/real_smollm2.py:distilled_judge`, whatever the working directory. This
file is intentionally short: the steps live in `experiments/real.py`.
"""

from absl import flags
from ml_collections import config_flags

from arena_jax import cli
from experiments import CONFIGS
from experiments import real

_CONFIG = config_flags.DEFINE_config_file(
  "config", f"{CONFIGS / 'real_smollm2.py'}:distilled_judge", "The RL run's config (its judge included)."
)
_ROOT = flags.DEFINE_string("root", "runs", "Where the run is written (<root>/real_arena_live).")
_STEPS = flags.DEFINE_integer("steps", None, "RL optimizer steps (default: the config's num_steps).")
_EXAMPLES = flags.DEFINE_integer("examples", None, "Held-out problems evaluated before and after (default 40).")


def main(argv):
  del argv
  overrides = {"num_examples": _EXAMPLES.value} if _EXAMPLES.value else None
  real.run_real(_CONFIG.value, root=_ROOT.value, steps=_STEPS.value, eval_overrides=overrides)


if __name__ == "__main__":
  cli.run(main)
