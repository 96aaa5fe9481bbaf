"""The launch mains print a user's mistakes in one line with the fix, and keep tracebacks for bugs."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
  "override, message",
  [
    ("--config.reward.mdoe=arena", "no field 'mdoe'; Did you mean \"mode\""),
    (
      "--config.rollout.push_every=2",
      "--config.rollout.push_every has moved: set --config.async_loop.push_every",
    ),
    ("--config.num_steps=0", "config.num_steps: must be an integer ≥ 1, got 0"),
    ("--config.reward.mode=ppo", "config.reward.mode: unknown reward mode 'ppo'"),
    ("--config.init.hf_path=/nonexistent/hf", "--config.init.policy_dir=''"),
  ],
)
def test_a_user_error_is_one_line_without_traceback(override, message, tmp_path, python_m):
  proc = python_m("launch.train", "--config=configs/arith_rlvr.py", f"--workdir={tmp_path}", override)
  assert proc.returncode == 2, proc.stderr
  assert "Traceback" not in proc.stderr
  lines = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
  assert len(lines) == 1 and message in lines[0], proc.stderr


def test_a_missing_sft_policy_says_to_run_make_demo_first(tmp_path, python_m):
  proc = python_m(
    "launch.train",
    "--config=configs/arith_rlvr.py",
    f"--workdir={tmp_path / 'run'}",
    f"--config.init.policy_dir={tmp_path / 'runs' / 'sft_demo'}",
  )
  assert proc.returncode == 2 and "Traceback" not in proc.stderr
  assert "make demo" in proc.stderr, proc.stderr


def test_verbosity_shows_the_traceback(tmp_path, python_m):
  proc = python_m(
    "launch.train", "--config=configs/arith_rlvr.py", f"--workdir={tmp_path}", "--config.num_steps=0", "--verbosity=1"
  )
  assert proc.returncode != 0 and "Traceback" in proc.stderr and "ConfigError" in proc.stderr


MAIN = """
import jax
from absl import logging
from arena_jax import cli

def main(argv):
  jax.devices()  # JAX looks for its backends: at INFO it names each one it did not find (libtpu on a CPU machine)
  logging.info("an info line")
  logging.warning("a warning line")

cli.run(main)
"""


def test_the_logs_are_quiet_unless_verbosity_is_given(tmp_path):
  script = tmp_path / "main.py"
  script.write_text(MAIN)
  env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}  # JAX chooses its backends as a user's does
  env["PYTHONPATH"] = str(ROOT)

  def stderr(*flags):
    proc = subprocess.run(
      [sys.executable, str(script), *flags], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr

  quiet = stderr()
  assert "a warning line" in quiet and "an info line" not in quiet, quiet
  assert "Unable to initialize backend" not in quiet, quiet
  assert "an info line" in stderr("--verbosity=0")
