"""The device check (benchmarks/device.sh, docs/device.md): its plan of time-boxed parts fits 8 minutes, a part that
fails or overruns its box is reported while the rest run, the wheels it ships are pinned as the package pins them,
and its whole code runs at tiny shapes on the CPU (`--dry-run`), ending with one JSON line of its figures. No
timing is checked."""

import ast
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import time

import pytest

from benchmarks import device
from tests import cache

REPO = cache.REPO


def test_the_plan_names_every_part_once_and_fits_eight_minutes_with_the_backstop_above_it():
  names = [name for name, _ in device.PLAN]
  assert names == list(device.PARTS) == ["chip", "sampler", "transformers", "update", "long_decode"]
  assert all(box > 0 for _, box in device.PLAN)
  assert sum(box for _, box in device.PLAN) <= device.BUDGET_S == 480
  backstop = int(re.search(r"timeout --kill-after=(\d+) (\d+)", (REPO / "benchmarks/device.sh").read_text())[2])
  assert device.BUDGET_S < backstop < 600  # inside the device machine's 10 minutes a command
  assert 0 < device.REPEATS_UNTIL < 1
  for part in ("sampler_vs_transformers", "update_mfu", "decode_hbm_fraction", "long_decode_tokens_per_s"):
    assert part in device.FIGURES
  # docs/device.md's plan is this plan.
  documented = re.findall(r"^\| `(\w+)` \| (\d+) s \|", (REPO / "docs/device.md").read_text(), re.M)
  assert [(name, int(box)) for name, box in documented] == list(device.PLAN)


def test_a_part_reports_its_result_its_failure_or_its_overrun_and_an_overrun_is_killed():
  py = sys.executable
  ok = device.run_part(
    "a", [py, "-c", "print('noise'); print('{\"status\": \"ok\", \"x\": 1}')"], 30, echo=io.StringIO()
  )
  assert ok["status"] == "ok" and ok["x"] == 1 and ok["box_s"] == 30 and ok["part_s"] >= 0
  echo = io.StringIO()
  failed = device.run_part("b", [py, "-c", "import sys; print('why', file=sys.stderr); sys.exit(3)"], 30, echo=echo)
  assert failed["status"] == "failed" and "exit status 3" in failed["error"] and "why" in failed["log_tail"]
  assert "[b] why" in echo.getvalue()
  # A part that outlives its box, with a child of its own: both are killed (its process group).
  sleeper = (
    "import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
    "print('child', child.pid, file=sys.stderr, flush=True); time.sleep(120)"
  )
  late = device.run_part("c", [py, "-c", sleeper], 2, echo=io.StringIO())
  assert late["status"] == "timed_out" and "2 s box" in late["error"]
  child = int(next(line.split()[1] for line in late["log_tail"] if line.startswith("child ")))
  deadline = time.monotonic() + 60  # SIGKILL is delivered at once; on a loaded machine the exit takes its turn
  while _alive(child) and time.monotonic() < deadline:
    time.sleep(0.1)
  assert not _alive(child)


def _alive(pid: int) -> bool:
  """Whether process `pid` runs (a zombie, killed and not yet reaped, does not)."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


@pytest.mark.slow  # a part's JAX child, twice
def test_a_part_that_fails_with_cudnn_attention_runs_once_more_with_xla_and_says_why():
  # The CPU has no cuDNN: a part told to run it fails, then runs xla attention in what is left of its box.
  env = dict(os.environ, **cache.jax_env(), JAX_PLATFORMS="cpu")
  context = json.dumps({"attention": "cudnn", "peaks": [1e12, 1e11]})
  command = [sys.executable, "-m", "benchmarks.device", "--part", "long_decode", "--box-s", "120", "--dry-run"]
  proc = subprocess.run(
    command + ["--context", context], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["status"] == "ok" and result["attention"] == "xla" and result["tokens_per_s"] > 0
  assert "cudnn_error" in result and "once more with xla attention" in proc.stderr


def test_the_wheels_for_the_device_image_are_pinned_as_the_package_pins_them_with_their_hashes():
  tree = ast.parse((REPO / "setup.py").read_text())
  values = {
    n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
  }
  pins = set(ast.literal_eval(values["INSTALL_REQUIRES"]))
  devices = ast.literal_eval(values["DEVICE"])
  assert devices["wheels"]
  for line in devices["wheels"]:
    pin, hash_ = line.split(" --hash=sha256:")
    assert pin in pins and re.fullmatch(r"[0-9a-f]{64}", hash_), line
  assert {"jax==0.11.2", "jaxlib==0.11.2", "numpy==2.5.2"} <= set(devices["image"])


@pytest.mark.slow  # five parts in children at tiny shapes, torch among them
def test_the_device_check_dry_runs_on_the_cpu_and_ends_with_its_figures():
  env = dict(os.environ, **cache.jax_env(), PYTHON=sys.executable)
  env.pop("OUT", None)
  proc = subprocess.run(
    ["bash", "benchmarks/device.sh", "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True, timeout=400
  )
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
  lines = proc.stdout.strip().splitlines()
  figures = json.loads(lines[-1])
  assert figures["plan"] == [[name, box] for name, box in device.PLAN] and figures["budget_s"] == device.BUDGET_S
  assert figures["dry_run"] is True and figures["platform"] == "cpu" and figures["attention"] == "xla"
  assert figures["cudnn_attention"]["status"] == "skipped"
  assert figures["peak_source"] == "measured" and figures["peak_tflops"] > 0 and figures["peak_hbm_tbps"] > 0
  has_torch = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
  parts = figures["parts"]
  assert figures["statuses"] == {name: parts[name]["status"] for name, _ in device.PLAN}
  for name, _ in device.PLAN:
    expected = "skipped" if name == "transformers" and not has_torch else "ok"
    assert parts[name]["status"] == expected, (name, parts[name])
  for key in device.FIGURES:
    assert key in figures, key
  for key in ("sampler_tokens_per_s", "sampler_mfu", "decode_hbm_fraction", "update_tokens_per_s", "update_mfu",
              "update_hlo_fraction", "long_decode_tokens_per_s"):  # fmt: skip
    assert figures[key] > 0, key
  assert figures["long_decode_fits"] is True
  if has_torch:
    assert figures["transformers_tokens_per_s"] > 0
    assert figures["sampler_vs_transformers"] == figures["sampler_tokens_per_s"] / figures["transformers_tokens_per_s"]
  else:
    assert figures["sampler_vs_transformers"] is None
  sampler = parts["sampler"]
  whole = sampler["whole"]
  assert whole["tokens_per_s"] == sampler["prompts"] * sampler["new_tokens"] / whole["seconds"]
  assert sampler["decode"]["bytes_per_step"] > 0 and parts["update"]["loss"] == parts["update"]["loss"]
  assert parts["long_decode"]["peak_cache_bytes"] > 0
  table = "\n".join(lines)
  for row in ("sampler (ours)", "transformers generate", "update (CISPO)", "long decode", "chip"):
    assert row in table, row
