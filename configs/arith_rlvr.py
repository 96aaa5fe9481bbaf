"""Reward mode `rlvr` (SPEC §7) on the arithmetic testbed. `--config=configs/arith_rlvr.py:smoke` for seconds."""
from arena_jax.train.config import mode_config


def get_config(arg=None):
  return mode_config("rlvr", arg)
