"""The real model's four arms (`experiments/real_arms.py`): RLVR, Arena-Live judged by the embedded process checker,
the same checker reversed, and Arena-Live judged by SmolLM2 behind `transformers serve`, ≥ 3 seeds each, with paired
95% intervals against RLVR and the judges' own measures (docs/results/real.md).

    python -m launch.real_arms                                  # 4 arms × seeds 0, 1, 2 under runs/real_arms
    python -m launch.real_arms --arms=rlvr,checker --seeds=0,1,2,3,4
    python -m launch.real_arms --steps=1 --examples=4 --samples=2   # the path in minutes

A finished (arm, seed) is read back, not trained again: a stopped run continues where it stopped.
"""

from absl import flags

from arena_jax import cli
from experiments import real_arms

_ARMS = flags.DEFINE_list("arms", list(real_arms.ARMS), f"Arms to run, of {', '.join(real_arms.ARMS)} (rlvr required).")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds: each arm runs once per seed, paired by seed.")
_ROOT = flags.DEFINE_string("root", "runs/real_arms", "Where the runs and arms.json are written.")
_STEPS = flags.DEFINE_integer("steps", None, f"RL steps per run (default {real_arms.SIZES['num_steps']}).")
_PROMPTS = flags.DEFINE_integer("prompts", None, f"Prompts per step (default {real_arms.SIZES['prompts_per_step']}).")
_GROUP = flags.DEFINE_integer("group_size", None, f"G (default {real_arms.SIZES['group_size']}).")
_TOKENS = flags.DEFINE_integer("max_new_tokens", None, f"Sampled tokens (default {real_arms.SIZES['max_new_tokens']}).")
_EXAMPLES = flags.DEFINE_integer("examples", None, f"Held-out problems (default {real_arms.EVAL['num_examples']}).")
_FORMATS = flags.DEFINE_bool(
  "formats", True, "Also replay the first seed's checker pairs to the real judge in each verdict format."
)
_SAMPLES = flags.DEFINE_integer("samples", None, f"Samples per problem (default {real_arms.EVAL['num_samples']}).")


def main(argv):
  del argv
  sizes = {
    k: v
    for k, v in dict(
      num_steps=_STEPS.value, prompts_per_step=_PROMPTS.value, group_size=_GROUP.value, max_new_tokens=_TOKENS.value
    ).items()
    if v is not None
  }
  evals = {k: v for k, v in dict(num_examples=_EXAMPLES.value, num_samples=_SAMPLES.value).items() if v is not None}
  try:
    seeds = [int(s) for s in _SEEDS.value]
  except ValueError as e:
    raise flags.ValidationError(f"--seeds must be integers, got {_SEEDS.value}") from e
  real_arms.run_arms(
    arms=_ARMS.value, seeds=seeds, root=_ROOT.value, sizes=sizes, eval_overrides=evals, formats=_FORMATS.value
  )


if __name__ == "__main__":
  cli.run(main)
