"""What every configs/arith_*.py shares: the arithmetic testbed of configs/arith_arena_live.py (the one
file that spells every field out) and the `:arg` variants of an arith config.

A config file is loaded by path (`--config=configs/x.py`), not imported from a package, so the arith
files reach this one by path too:

    common = load_config_module(pathlib.Path(__file__).with_name("common.py"))
"""
import pathlib

from arena_jax.train.config import load_config_file, smoke

HERE = pathlib.Path(__file__).resolve().parent


def variant(c, arg):
  """`c` as the argument of `--config=configs/arith_<mode>.py:arg` asks: none = the testbed from `make demo`'s
  SFT policy; "smoke" = tiny shapes and a random policy, seconds on a CPU (what the tests run)."""
  if arg == "smoke":
    return smoke(c)
  if arg:
    raise ValueError(f"unknown config argument {arg!r}; use none or 'smoke'")
  return c


def arith_config(mode, arg=None):
  """The testbed of configs/arith_arena_live.py with reward mode `mode` (and the mode's own topology):
  every arith run differs from Reasoning Arena-Live in how it rewards, nothing else (SPEC §7)."""
  c = load_config_file(HERE / "arith_arena_live.py", arg)
  c.reward.mode = mode
  return c
