"""RLVR with dynamic sampling (DAPO, SPEC §7): non-diverse groups are discarded and refilled."""
from arena_jax.train.config import mode_config


def get_config(arg=None):
  return mode_config("rlvr", arg, dynamic_sampling=True)
