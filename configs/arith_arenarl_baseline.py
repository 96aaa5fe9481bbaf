"""Reward mode `arenarl_baseline`, the paper's ArenaRL baseline (seed 000: round robin on every group, win
rates, no routing; SPEC §7), on the arithmetic testbed of configs/arith_arena_live.py. `:smoke` for seconds."""
import pathlib

from arena_jax.train.config import load_config_module

common = load_config_module(pathlib.Path(__file__).with_name("common.py"))


def get_config(arg=None):
  return common.arith_config("arenarl_baseline", arg)
