"""The arithmetic testbed's presets, shared by every configs/arith_*.py and by the study and benchmarks:

mode_config(mode, arg)   `base_config()` as the testbed: the SFT policy of `make demo`, its tasks, `mode`
smoke(c)                 any run config shrunk to seconds on a CPU (a random tiny policy): what tests run
variant(c, arg)          `c` as `--config=configs/arith_<mode>.py:arg` asks (none or "smoke")
"""

import ml_collections

from arena_jax.tasks import config as tasks_config
from arena_jax.train.config import base_config

DEFAULT_POLICY_DIR = "runs/sft_demo"  # where `make demo`'s SFT warm start writes its policy


def smoke(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Shrinks a config to seconds on a CPU: random tiny policy, 2 steps of 4 groups × 4 samples."""
  c.init.policy_dir = ""
  c.init.random_model = "tiny"
  c.init.tokenizer_vocab = 256
  c.num_steps = 2
  c.rollout.prompts_per_step = 4
  c.rollout.group_size = 4
  c.rollout.max_new_tokens = 16
  c.checkpoint.every = 2
  c.log.progress = False
  c.log.tensorboard = False
  c.log.plot = False
  c.tasks.arithmetic.num_train = 256
  c.tasks.arithmetic.num_test = 32
  return c


def variant(c: ml_collections.ConfigDict, arg: str | None) -> ml_collections.ConfigDict:
  """`c` as the argument of `--config=configs/arith_<mode>.py:arg` asks: none = the testbed from `make demo`'s
  SFT policy; "smoke" = tiny shapes and a random policy, seconds on a CPU (what the tests run)."""
  if arg == "smoke":
    return smoke(c)
  if arg:
    raise ValueError(f"unknown config argument {arg!r}; use none or 'smoke'")
  return c


def mode_config(mode: str, arg: str | None = None, **reward) -> ml_collections.ConfigDict:
  """`base_config()` with `reward.mode = mode` (and `reward` overrides), starting from the SFT policy.

  `arg` (the config file's argument, e.g. `--config=configs/arith_rlvr.py:smoke`):
    None / ""   the arithmetic testbed from `make demo`'s SFT policy
    "smoke"     tiny shapes and a random policy: seconds on a CPU, for tests
  configs/arith_*.py are the same testbed, spelled out field by field in configs/arith_arena_live.py.
  """
  c = base_config()
  c.reward.mode = mode
  for k, v in reward.items():
    c.reward[k] = v
  c.init.policy_dir = DEFAULT_POLICY_DIR
  c.tasks = tasks_config.demo_config()  # the SFT policy's tasks: its difficulty and its held-out split
  c.judge.max_tokens = 2048  # the embedded judge's verdicts are short (the default budget is a reasoning judge's)
  return variant(c, arg)
