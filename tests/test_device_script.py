"""The device benchmark (benchmarks/device.sh, `make device`) runs its whole code path at tiny shapes on the CPU
(`--dry-run`) and ends with one JSON line of its figures (no timing is checked)."""

import json
import os
import subprocess
import sys

from tests import cache

REPO = cache.REPO


def test_the_device_script_dry_runs_on_the_cpu_and_ends_with_its_figures():
  env = dict(os.environ, **cache.jax_env(), PYTHON=sys.executable)
  proc = subprocess.run(
    ["bash", "benchmarks/device.sh", "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
  lines = proc.stdout.strip().splitlines()
  figures = json.loads(lines[-1])
  assert figures["dry_run"] is True and figures["platform"] == "cpu" and figures["attention"] == "xla"
  assert figures["peak_source"] == "measured" and figures["peak_tflops"] > 0 and figures["peak_hbm_tbps"] > 0
  for key in ("sampler_tokens_per_s", "sampler_mfu", "train_tokens_per_s", "train_mfu"):
    assert figures[key] > 0, key
  sampler, train = figures["sampler"], figures["train"]
  assert sampler["whole"]["tokens_per_s"] == sampler["prompts"] * sampler["new_tokens"] / sampler["whole"]["seconds"]
  assert sampler["decode"]["bytes_per_step"] > 0 and train["hlo_fraction"] > 0 and train["loss"] == train["loss"]
  table = "\n".join(lines)
  for row in ("sampler", "prefill (N=1)", "decode step", "train step", "(compiler FLOPs)"):
    assert row in table, row
