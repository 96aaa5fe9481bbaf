"""The run configs and their presets: Python files whose `get_config(arg)` returns an `ml_collections.ConfigDict`
(big_vision's convention), importable as a package from the repository root (as `launch/` is).

  arith_<mode>.py       the arithmetic testbed of `make demo` with one reward mode each (SPEC §7);
                        arith_arena_live.py spells every field out, the others change the mode (common.py)
  sft.py                the SFT warm start of the embedded policy
  real_<policy>.py      Reasoning Arena-Live at the paper's scale on a TPU slice (pod.py)
  common.py             the testbed presets: `mode_config(mode, arg)`, `smoke(c)`, `variant(c, arg)`
  pod.py                the real-scale presets: `pod_config(topology, ...)`, `POD_SLICES`, `real_smoke(c)`

The library (`arena_jax.train.config`) holds only the declarations (`RUN`: every field's default, valid values
and meaning), `base_config()` and `validate_config()`; every preset lives here. `get_config(spec)` loads a
config as `--config=spec` does: `configs.get_config("configs/arith_rlvr.py:smoke")` or
`configs.get_config("arith_rlvr", "smoke")`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib

import ml_collections

from arena_jax.errors import MissingFileError

HERE = pathlib.Path(__file__).resolve().parent


def split_spec(spec: str | os.PathLike) -> tuple[str, str | None]:
  """ "configs/sft.py:smoke" → ("configs/sft.py", "smoke"); the argument is what follows the last ':' after
  the file name (a topology such as "v5e:4x4" keeps its own ':')."""
  text = os.fspath(spec)
  stem_at = text.find(".py:")
  if stem_at >= 0:
    return text[: stem_at + 3], text[stem_at + 4 :] or None
  return text, None


def get_config(spec: str | os.PathLike, arg: str | None = None) -> ml_collections.ConfigDict:
  """`get_config(arg)` of a config: a module of this package by name ("arith_rlvr"), or a file by path
  ("configs/arith_rlvr.py[:arg]", or any other path, loaded as absl's `--config` flag loads it)."""
  path, spec_arg = split_spec(spec)
  arg = arg if arg is not None else spec_arg
  candidate = pathlib.Path(path)
  if candidate.suffix != ".py":  # a name of this package
    return importlib.import_module(f"{__name__}.{path}").get_config(arg)
  resolved = candidate.expanduser().resolve()
  if resolved.parent == HERE:
    return importlib.import_module(f"{__name__}.{resolved.stem}").get_config(arg)
  module_spec = importlib.util.spec_from_file_location(f"_config_{resolved.stem}", resolved)
  if module_spec is None or not resolved.is_file():
    raise MissingFileError(f"no config file at {str(candidate)!r}")
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(arg)
