"""Reward mode `rlaif` (SPEC §7), on the arithmetic testbed of configs/arith_arena_live.py. `:smoke` for seconds."""

from configs import common


def get_config(arg=None):
  return common.arith_config("rlaif", arg)
