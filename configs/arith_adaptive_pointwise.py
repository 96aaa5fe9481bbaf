"""Reward mode `adaptive_pointwise` (SPEC §7), on the arithmetic testbed of configs/arith_arena_live.py.
`:smoke` for seconds."""

from configs import arith_arena_live


def get_config(arg=None):
  return arith_arena_live.with_mode("adaptive_pointwise", arg)
