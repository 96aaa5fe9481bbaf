"""Experiments: orchestrators that chain the library's rooms into one job, above them all.

  demo      `make demo`: SFT warm start → Reasoning Arena-Live RL → before/after table (`launch/demo.py`)
  study     `make reproduce`: the reward modes and a judge-quality ablation from the same SFT base → docs/results/
            (`launch/compare.py`)
  stats     the study's statistics: mean ± std over seeds, paired bootstrap intervals of differences
  testbed   whether an SFT policy's non-diverse groups differ in process (flawed members, first-error spread): one
            JSON line (`launch/testbed.py`)

They sit outside `arena_jax` so that imports keep flowing one way: an orchestrator may import every
room, no room imports an orchestrator (the evaluator, say, reads what the trainer writes, and the demo
needs both).
Config files are found relative to the repository root, not the working directory.
"""

from __future__ import annotations

import os
import pathlib

import ml_collections

import configs

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = REPO_ROOT / "configs"


def repo_path(path: str | os.PathLike) -> pathlib.Path:
  """`path` itself if absolute, else `path` under the repository root (whatever the working directory)."""
  path = pathlib.Path(path).expanduser()
  return path if path.is_absolute() else REPO_ROOT / path


def load_config(spec: str | os.PathLike) -> ml_collections.ConfigDict:
  """`get_config(arg)` of a config file named as on the command line, `path[:arg]` (e.g.
  "configs/sft.py:smoke"), a relative path read from the repository root."""
  path, arg = os.fspath(spec), None
  head, sep, tail = path.rpartition(":")
  if sep and head and "/" not in tail:
    path, arg = head, tail or None
  return configs.get_config(repo_path(path), arg)
