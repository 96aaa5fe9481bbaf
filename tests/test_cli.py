"""The launch mains print a user's mistakes in one line with the fix, and keep tracebacks for bugs."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def launch(*args, cwd=ROOT):
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


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
def test_a_user_error_is_one_line_without_traceback(override, message, tmp_path):
  proc = launch("launch.train", "--config=configs/arith_rlvr.py", f"--workdir={tmp_path}", override)
  assert proc.returncode == 2, proc.stderr
  assert "Traceback" not in proc.stderr
  lines = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
  assert len(lines) == 1 and message in lines[0], proc.stderr


def test_a_missing_sft_policy_says_to_run_make_demo_first(tmp_path):
  proc = launch(
    "launch.train",
    "--config=configs/arith_rlvr.py",
    f"--workdir={tmp_path / 'run'}",
    f"--config.init.policy_dir={tmp_path / 'runs' / 'sft_demo'}",
  )
  assert proc.returncode == 2 and "Traceback" not in proc.stderr
  assert "make demo" in proc.stderr, proc.stderr


def test_verbosity_shows_the_traceback(tmp_path):
  proc = launch(
    "launch.train", "--config=configs/arith_rlvr.py", f"--workdir={tmp_path}", "--config.num_steps=0", "--verbosity=1"
  )
  assert proc.returncode != 0 and "Traceback" in proc.stderr and "ConfigError" in proc.stderr
