"""Reward mode `arenarl_baseline`, the paper's ArenaRL baseline (seed 000: round robin on every group, win
rates, no routing; SPEC §7), on the arithmetic testbed of configs/arith_arena_live.py. `:smoke` for seconds."""

from configs import common


def get_config(arg=None):
  return common.arith_config("arenarl_baseline", arg)
