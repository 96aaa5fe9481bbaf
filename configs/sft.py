"""SFT warm start of the embedded policy on the built-in tasks' demonstrations.

    python -m launch.sft --config=configs/sft.py            # the demo policy (cached in output_dir)
    python -m launch.sft --config=configs/sft.py:smoke      # seconds; what the tests run
    python -m launch.sft --config=configs/sft.py --config.num_steps=600 --workdir=/tmp/sft

Variants (`arg`): "demo" (default), "smoke" (everything shrunk for a laptop / CI) and "blind" (the study's
testbed and SFT base: the demo's tasks with demonstrations that mostly carry a flaw a verifier cannot
see, skipped or redundant steps, none with a deliberate error, and twice the steps; measured with `launch.testbed`
in docs/results/testbed.md). The demo variant is
every declared default of `arena_jax.train.sft.SFT` (each field's default, valid values and meaning are
declared there and listed in docs/configuration.md); `validate_config` checks every field once, up front.
"""

from arena_jax.train import sft


def get_config(arg=None):
  arg = arg or "demo"
  if arg not in ("demo", "smoke", "blind"):
    raise ValueError(f"configs/sft.py: unknown variant {arg!r}; use 'demo', 'smoke' or 'blind'")
  c = sft.default_config()
  # One policy directory per variant, so that the smoke run never replaces the demo's cached policy.
  c.output_dir = f"runs/sft_{arg}"

  if arg == "blind":
    # The study's testbed: the verifier's blind spot. A skipped operation or a redundant step leaves every
    # step valid and the answer right, so only a judge of the process can prefer the clean trace. Most
    # demonstrations carry one, none carries a deliberate error, and twice the demo's steps sharpen the policy's
    # arithmetic at T = 1 (its skips and repeats came with slips: the blind-flaw rate was 0.07 at the demo's 3000
    # steps with 30% / 30% and 2% slips; docs/results/testbed.md has every candidate measured).
    c.tasks.sft.fractions.update(
      dict(clean=0.2, slip=0.0, compensating=0.0, skipped=0.4, bare_answer=0.0, redundant=0.4)
    )
    c.num_steps = 6000

  if arg == "smoke":
    # A one-layer model on 1–2-operation problems: a dozen steps in seconds on a CPU.
    c.model.update(dict(d_model=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, mlp_dim=64))
    c.tasks.arithmetic.update(dict(num_train=96, num_test=16, min_ops=1, max_ops=2))
    c.tasks.countdown.update(dict(num_train=16, num_test=4))
    c.num_steps = 12
    c.batch_size = 8
    c.warmup_steps = 2
    c.learning_rate = 3e-3  # few steps: a slightly higher peak
    c.seq_buckets = (32, 48, 64)
    c.eval.update(dict(num_examples=8, num_samples=2, max_new_tokens=24, batch_size=8))
    c.log_every = 4
    c.progress = False
  return c
