"""RLVR with dynamic sampling (DAPO, SPEC §7): non-diverse groups are discarded and the batch refilled, on
the arithmetic testbed of configs/arith_arena_live.py. `:smoke` for seconds."""

from configs import arith_arena_live


def get_config(arg=None):
  return arith_arena_live.with_mode("rlvr_dapo", arg)
