"""Where the test suite keeps what it may reuse between runs and between clones (tests/conftest.py)."""

import hashlib
import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parent.parent


def root() -> pathlib.Path:
  """`$ARENA_JAX_TEST_CACHE`, or `~/.cache/arena_jax/tests` (`$XDG_CACHE_HOME` when set); `.test_cache` in the
  clone when the home cache cannot be written (a read-only home)."""
  if os.environ.get("ARENA_JAX_TEST_CACHE"):
    return pathlib.Path(os.environ["ARENA_JAX_TEST_CACHE"])
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  path = pathlib.Path(base) / "arena_jax" / "tests"
  try:
    path.mkdir(parents=True, exist_ok=True)
    if os.access(path, os.W_OK):
      return path
  except OSError:
    pass
  return REPO / ".test_cache"


def source_key(*extra: str) -> str:
  """A hash of every source file a trained artefact can depend on (arena_jax/, configs/, experiments/ and
  setup.py's pins) and of `extra`: any edit there gives a new key, so a cached artefact is never reused across
  a change that could alter it."""
  h = hashlib.sha256()
  files = [REPO / "setup.py"]
  for folder in ("arena_jax", "configs", "experiments"):
    files += sorted((REPO / folder).rglob("*.py"))
  for path in files:
    h.update(str(path.relative_to(REPO)).encode())
    h.update(path.read_bytes())
  for e in extra:
    h.update(e.encode())
  return h.hexdigest()[:16]


def jax_dir() -> pathlib.Path:
  """The persistent compilation cache that the xdist workers and the tests' subprocesses share."""
  return root() / "jax"


TOKENIZER_ENV = "ARENA_JAX_TOKENIZER_CACHE"  # arena_jax.train.policy_io.TOKENIZER_CACHE_ENV


def tokenizer_dir() -> pathlib.Path:
  """The corpus tokenizers of random-init runs (`arena_jax.train.policy_io`), one folder per `source_key`: the
  corpus is a function of the task code."""
  return root() / "tokenizers" / source_key()


def jax_env() -> dict[str, str]:
  """The environment that points a child process (a launch command, a notebook kernel) at `jax_dir()` and
  `tokenizer_dir()`."""
  return {
    TOKENIZER_ENV: os.environ.get(TOKENIZER_ENV) or str(tokenizer_dir()),
    "JAX_COMPILATION_CACHE_DIR": str(jax_dir()),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.2",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
  }


# The suite compiles at XLA's -O0 (tests/conftest.py): its programs are small and many, so compiling dominates.
FAST_COMPILE_FLAG = "--xla_backend_optimization_level=0"


def optimized_env() -> dict[str, str]:
  """The environment of a child whose work is minutes of compute (the testbed's SFT training): the suite's
  caches, XLA's full optimisation."""
  env = dict(os.environ, **jax_env())
  env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if f != FAST_COMPILE_FLAG)
  return env


def testbed_figures(config_spec: str, name: str, data_dir: pathlib.Path, num_examples: int, timeout: int) -> dict:
  """`launch.testbed`'s figures for the SFT policy of `config_spec` (`path[:arg]`), trained once per source key into
  this cache's `name` folder (any edit to the code or configs retrains it) and evaluated every time on the same
  held-out problems. It runs in a child compiled at XLA's full optimisation: training and evaluating are minutes of
  compute, which the suite's -O0 compiles (tests/conftest.py) would slow."""
  import json  # (here, not at the top: the rest of this module is imported by every test)
  import subprocess
  import sys

  import experiments
  from arena_jax.train import sft

  config = experiments.load_config(config_spec)
  config.tasks.data_dir = str(data_dir)
  config.progress = False
  policy_dir = root() / name / source_key(json.dumps(sft.config_fingerprint(config), sort_keys=True, default=str))
  cmd = [
    sys.executable,
    "-m",
    "launch.testbed",
    f"--config={config_spec}",
    f"--workdir={policy_dir}",
    f"--num_examples={num_examples}",
    f"--config.tasks.data_dir={config.tasks.data_dir}",
    "--config.progress=False",
  ]
  proc = subprocess.run(cmd, cwd=REPO, env=optimized_env(), capture_output=True, text=True, timeout=timeout)
  assert proc.returncode == 0, proc.stderr[-3000:]
  figures = json.loads(proc.stdout.strip().splitlines()[-1])
  print(f"testbed {config_spec}: SFT policy in {policy_dir} ({'reused' if figures['sft_cached'] else 'trained'})")
  return figures
