"""Reward mode `arenarl_baseline`, the paper's ArenaRL baseline (seed 000: round robin on every group, win
rates, no routing; SPEC §7), on the arithmetic testbed of configs/arith_arena_live.py. `:smoke` for seconds."""

from configs import arith_arena_live


def get_config(arg=None):
  return arith_arena_live.with_mode("arenarl_baseline", arg)
