"""The front page and its usage page work as written: the Python blocks of README.md and docs/usage.md run, in order,
in one namespace, and every `python -m launch.…` command of docs/usage.md's "Using it" block runs, with the smoke
settings of `_smoke` substituted:

  docs/usage.md                            run here
  --config=configs/<x>.py                  --config=configs/<x>.py:smoke (random tiny policy, 2 steps: no runs/sft_demo)
  --workdir=runs/<name>                    <tmp>/runs/<name>
  launch.train                             + --config.log.tensorboard=True (checks <workdir>/tensorboard)
  http://judge-host:8000/v1                a `launch.serve_judge` started here, serving --config.judge.model
  launch.eval                              + 4 problems, 2 samples, 8 new tokens per benchmark
  launch.serve_judge --port 8000           a free port, in the background until the end; localhost:8000 → that port
  --input pairs.jsonl                      two trace pairs written here
  --output <file>                          <tmp>/<file>
  --input tests/…                          as written (repository data)
  launch.rescore                           as written (the block's train command wrote the workdir's transcripts)

A command of a module `_smoke` does not know fails the test: add its mapping here. The README's commands are run by
tests/test_launch_commands.py, as every documented command is: each up to its first check.
"""

import json
import os
import pathlib
import re
import shlex
import socket
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

from tests import cache

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
USAGE = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
EVAL_SMOKE = ("--config.num_examples=4", "--config.num_samples=2", "--config.max_new_tokens=8")
KNOWN = ("launch.train", "launch.eval", "launch.serve_judge", "launch.judge_pairs", "launch.jury", "launch.rescore")
PAIRS = [
  {
    "id": "p0",
    "problem": "2 + 3 * 4",
    "reference": "14",
    "trace_a": "3 * 4 = 12\n2 + 12 = 14\nAnswer: 14",
    "trace_b": "2 + 3 = 5\n5 * 4 = 20\nAnswer: 20",
  },
  {
    "id": "p1",
    "problem": "7 - 2",
    "reference": "5",
    "trace_a": "7 - 2 = 4\nAnswer: 4",
    "trace_b": "7 - 2 = 5\nAnswer: 5",
  },
]


def _section(text, title):
  start = text.index(f"\n## {title}\n")
  end = text.find("\n## ", start + 1)
  return text[start : end if end >= 0 else None]


def _blocks(text, lang):
  return re.findall(rf"^```{lang}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def _commands():
  """The `python -m` commands of docs/usage.md's "Using it" bash block, continuation lines joined, comments dropped."""
  block = _blocks(_section(USAGE, "Using it"), "bash")[0].replace("\\\n", " ")
  return [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("python -m ")]


def _env():
  env = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    **cache.jax_env(),
  }
  # A user's process: one CPU device, not the tests' 8 fake ones.
  env["XLA_FLAGS"] = " ".join(
    f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f
  )
  return env


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _serve(args, port, tmp_path):
  """Starts `python -m launch.serve_judge args` and waits until it answers /v1/models."""
  log = open(tmp_path / f"serve_{port}.log", "w", encoding="utf-8")
  proc = subprocess.Popen(
    [sys.executable, "-m", "launch.serve_judge", *args], cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT
  )
  for _ in range(600):
    if proc.poll() is not None:
      break
    try:
      with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1):
        return proc
    except OSError:
      _wait(proc, 0.1)
  proc.kill()
  pytest.fail(
    f"launch.serve_judge {' '.join(args)} did not come up:\n"
    + (tmp_path / f"serve_{port}.log").read_text(encoding="utf-8")
  )


def _wait(proc, seconds):
  try:
    proc.wait(seconds)
  except subprocess.TimeoutExpired:
    pass


def _flag(args, name):
  for i, a in enumerate(args):
    if a.startswith(f"{name}="):
      return a.split("=", 1)[1]
    if a == name:
      return args[i + 1]
  return None


def _smoke(args, tmp_path, urls):
  """The documented command `args` (after `python -m`) with the substitutions of the module docstring."""
  module, out = args[0], []
  if module not in KNOWN:
    pytest.fail(f"docs/usage.md runs `python -m {module}`: add its smoke mapping to tests/docs/test_readme.py")
  for a in args:
    for old, new in urls.items():
      a = a.replace(old, new)
    if a.startswith("--config=configs/") and ":" not in a:
      a += ":smoke"
    elif a.startswith("--workdir=runs/"):
      a = f"--workdir={tmp_path / a.split('=', 1)[1]}"
    out.append(a)
  for name in ("--input", "--output"):
    value = _flag(out, name)
    if value is None or value.startswith("tests/"):
      continue
    k = out.index(name) + 1 if name in out else next(i for i, a in enumerate(out) if a.startswith(name + "="))
    path = tmp_path / value
    out[k] = str(path) if name in out else f"{name}={path}"
    if name == "--input":
      path.write_text("".join(json.dumps(p) + "\n" for p in PAIRS), encoding="utf-8")
  if module == "launch.train":
    out.append("--config.log.tensorboard=True")
  if module == "launch.eval":
    out.extend(EVAL_SMOKE)
  return out


def test_readme_shows_the_two_commands_first_then_the_first_five_minutes():
  first = _blocks(README, "bash")[0]
  assert first.startswith("make demo") and "\nmake test" in first
  assert "source .venv/bin/activate" in README and "docs/usage.md" in README
  assert "colab.research.google.com/github/" in README
  five = _section(USAGE, "First five minutes")
  assert "source .venv/bin/activate" in five and "runs/sft_demo" in five and ":smoke" in five
  assert USAGE.index("## First five minutes") < USAGE.index("## Using it")
  for path in ("<workdir>/tensorboard", "<workdir>/eval/tensorboard", "tensorboard --logdir"):
    assert path in five, path


def test_readme_python_blocks_run_as_written(capsys):
  blocks = _blocks(README, "python") + _blocks(USAGE, "python")
  assert blocks
  namespace = {"__name__": "__readme__"}
  for block in blocks:  # later blocks may build on earlier ones
    exec(compile(block, "README.md + docs/usage.md", "exec"), namespace)  # pylint: disable=exec-used
  advantages = np.asarray(namespace["advantages"])
  assert advantages.shape == (1, 8) and np.abs(advantages).max() > 0  # the judged group now carries signal
  assert capsys.readouterr().out.strip()


def test_the_package_does_not_import_the_tensorboard_viewer():
  code = (
    "import sys, arena_jax, arena_jax.train, arena_jax.eval; "
    "assert 'tensorboard' not in sys.modules, sorted(m for m in sys.modules if 'tensorboard' in m)"
  )
  proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr


@pytest.mark.slow  # the slow tier: every "Using it" command in a child, training runs among them, minutes of training
def test_readme_using_it_commands_run(tmp_path):
  commands = _commands()
  assert {c[2] for c in commands} >= {
    "launch.train",
    "launch.eval",
    "launch.serve_judge",
    "launch.judge_pairs",
    "launch.jury",
  }, commands
  servers, urls = [], {}
  try:
    for command in commands:
      assert command[:2] == ["python", "-m"]
      args = command[2:]
      if any("judge-host" in a for a in args):  # a real judge's host: the embedded server, under the model name asked
        host = re.search(r"http://judge-host:\d+", " ".join(args)).group(0)
        if host not in urls:
          port = _free_port()
          model = _flag(args, "--config.judge.model") or "arena-judge"
          servers.append(_serve(["--port", str(port), f"--server.model={model}"], port, tmp_path))
          urls[host] = f"http://127.0.0.1:{port}"
      if args[0] == "launch.serve_judge":
        readme_port = _flag(args, "--port")
        port = _free_port()
        servers.append(_serve([a if a != readme_port else str(port) for a in args[1:]], port, tmp_path))
        urls[f"http://localhost:{readme_port}"] = f"http://localhost:{port}"
        continue
      run = _smoke(args, tmp_path, urls)
      proc = subprocess.run(
        [sys.executable, "-m", *run], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600
      )
      assert proc.returncode == 0, (
        f"docs/usage.md: python -m {shlex.join(args)}\nran: {shlex.join(run)}\n{proc.stderr[-3000:]}"
      )
      if args[0] == "launch.train":
        workdir = pathlib.Path(_flag(run, "--workdir"))
        assert (workdir / "metrics.jsonl").is_file() and (workdir / "tensorboard").is_dir()
      elif args[0] == "launch.eval":
        assert (pathlib.Path(_flag(run, "--workdir")) / "eval" / "tensorboard").is_dir()
      elif args[0] == "launch.judge_pairs":
        rows = [json.loads(l) for l in pathlib.Path(_flag(run, "--output")).read_text(encoding="utf-8").splitlines()]
        assert len(rows) == len(PAIRS) and all(r["verdict"] in ("A", "B", "tie") for r in rows), rows
      elif args[0] == "launch.jury":
        assert pathlib.Path(_flag(run, "--output")).read_text(encoding="utf-8").strip()
      elif args[0] == "launch.rescore":  # the same embedded judge as the run's: it agrees with itself
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        assert summary["calls"] > 0 and summary["agreement"] == 1.0, summary
  finally:
    for proc in servers:
      proc.terminate()
      _wait(proc, 10)
      if proc.poll() is None:
        proc.kill()
