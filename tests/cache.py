"""Where the test suite keeps what it may reuse between runs and between clones (tests/conftest.py)."""

import ast
import contextlib
import fcntl
import hashlib
import os
import pathlib
import sys

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


# What the suite's trained artefacts are a function of: the SFT policy of `sft.train_sft` (the model, task, tokenizer,
# sampling and SFT code, found by following imports from here) and the corpus tokenizers of random-init runs (the task
# code and the SentencePiece trainer). An edit elsewhere (a judge, the RL trainer) reuses them.
SFT_ROOTS = ("arena_jax/train/sft.py",)
CORPUS_ROOTS = ("arena_jax/tasks/__init__.py", "arena_jax/tokenizer.py")
_FIRST_PARTY = ("arena_jax", "configs", "experiments")


def _module_file(name: str) -> pathlib.Path | None:
  path = REPO.joinpath(*name.split("."))
  if (path / "__init__.py").is_file():
    return path / "__init__.py"
  return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _imports(path: pathlib.Path) -> set[pathlib.Path]:
  """The first-party modules `path` imports anywhere in its body (a function's lazy import counts too). `from a.b
  import c` is the module a/b/c.py when there is one, else a/b's `__init__.py` (a name it defines or re-exports)."""
  package = path.relative_to(REPO).with_suffix("").parts[:-1]
  names = set()
  for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = list(package[: len(package) - node.level + 1]) if node.level else []
      base = ".".join(base + ([node.module] if node.module else []))
      names.update(f"{base}.{a.name}" if _module_file(f"{base}.{a.name}") else base for a in node.names)
  files = {_module_file(n) for n in names if n.split(".")[0] in _FIRST_PARTY}
  return {f for f in files if f is not None}


def module_closure(*roots: str) -> list[pathlib.Path]:
  """Every first-party file that `roots` (paths relative to the clone) import, transitively: the code an artefact
  built from them can depend on. A package's `__init__.py` is followed only where a name is imported from it."""
  seen: set[pathlib.Path] = set()
  todo = [REPO / r for r in roots]
  while todo:
    path = todo.pop()
    if path not in seen:
      seen.add(path)
      todo.extend(_imports(path) - seen)
  return sorted(seen)


def source_key(*extra: str, roots: tuple[str, ...] = SFT_ROOTS) -> str:
  """A hash of the source files that a trained artefact can depend on (`module_closure(*roots)` and setup.py's pins)
  and of `extra`: an edit to any of them gives a new key, so a cached artefact is never reused across a change that
  could alter it, and an edit anywhere else keeps it."""
  h = hashlib.sha256()
  for path in [REPO / "setup.py", *module_closure(*roots)]:
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
  """The corpus tokenizers of random-init runs (`arena_jax.train.policy_io`), one folder per key of the task code
  and the SentencePiece trainer (`CORPUS_ROOTS`): the corpus is a function of them."""
  return root() / "tokenizers" / source_key(roots=CORPUS_ROOTS)


def jax_env() -> dict[str, str]:
  """The environment that points a child process (a launch command, a notebook kernel) at `jax_dir()` and
  `tokenizer_dir()`."""
  return {
    TOKENIZER_ENV: os.environ.get(TOKENIZER_ENV) or str(tokenizer_dir()),
    "JAX_COMPILATION_CACHE_DIR": str(jax_dir()),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.2",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
  }


# How the suite compiles (tests/conftest.py): its programs are small and many, so compiling dominates. XLA's -O0;
# XLA:CPU's older elemental emitters instead of its MLIR fusion emitters; LLVM without its expensive passes. On
# test_modes + test_sampler + test_packing in one process (cold cache, 568 programs): compiles 57-59 s and the files
# 127-130 s at -O0 alone; 25 s and 93 s with all three (30 s and 88-96 s with the emitters' flag alone). Each flag is
# added only when XLA_FLAGS does not set it already. The flags are those of the pinned jaxlib (setup.py): XLA aborts
# at start-up on a flag it does not know, so a jaxlib upgrade checks them here first.
FAST_COMPILE_FLAGS = (
  "--xla_backend_optimization_level=0",
  "--xla_cpu_use_fusion_emitters=false",
  "--xla_llvm_disable_expensive_passes=true",
)


def add_fast_compile_flags(xla_flags: str) -> str:
  """`xla_flags` with each of FAST_COMPILE_FLAGS that it does not set already (by name) appended."""
  named = {f.split("=", 1)[0] for f in xla_flags.split()}
  return " ".join([*xla_flags.split(), *(f for f in FAST_COMPILE_FLAGS if f.split("=", 1)[0] not in named)])


def optimized_env() -> dict[str, str]:
  """The environment of a child whose work is minutes of compute (the testbed's SFT training): the suite's
  caches, XLA's full optimisation."""
  env = dict(os.environ, **jax_env())
  env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if f not in FAST_COMPILE_FLAGS)
  return env


def testbed_figures(config_spec: str, name: str, data_dir: pathlib.Path, num_examples: int, timeout: int) -> dict:
  """`launch.testbed`'s figures for the SFT policy of `config_spec` (`path[:arg]`), trained once per source key into
  this cache's `name` folder (an edit to the SFT code it imports, or to the config's values, retrains it) and
  evaluated every time on the same held-out problems. It runs in a child compiled at XLA's full optimisation:
  training and evaluating are minutes of compute, which the suite's -O0 compiles (tests/conftest.py) would slow."""
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


@contextlib.contextmanager
def real_model_lock():
  """The machine-wide lock of the tests that keep a real model's training or serving in memory (several GB each: the
  real model's compiled update and sampler, and a `transformers serve` child). The suite's two workers run them one
  at a time: on CI (2 cores, 24 GiB) the notebook's real run beside the real-judge test OOM-killed a worker. A
  worker that waits says so, and the other worker goes on meanwhile."""
  path = root() / "one_real_model_run.lock"
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "a+", encoding="utf-8") as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      print(f"waiting for another real-model test to finish ({path})", file=sys.stderr, flush=True)
      fcntl.flock(f, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)
