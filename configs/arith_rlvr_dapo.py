"""RLVR with dynamic sampling (DAPO, SPEC §7): non-diverse groups are discarded and the batch refilled, on
the arithmetic testbed of configs/arith_arena_live.py. `:smoke` for seconds."""

from configs import common


def get_config(arg=None):
  return common.arith_config("rlvr_dapo", arg)
