"""Ahead-of-time compiles of the real-size RL train step and the sampler's prefill and decode for a TPU
topology, on this CPU host, with their per-device memory and the roofline lower bound on their time
(docs/tpu.md, "Ahead-of-time compiles").

    make aot                                                    # what docs/tpu.md recommends
    .venv-tpu/bin/python -m launch.aot_compile --jobs=2 \
        --runs=configs/real_qwen3_8b.py:v5e:4x4,configs/real_qwen3_8b.py:v5p:2x2x2   # in parallel processes
    .venv-tpu/bin/python -m launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2
    .venv-tpu/bin/python -m launch.aot_compile --config=configs/real_qwen3_8b.py:v5e:8x8 --programs=train
    .venv-tpu/bin/python -m launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2 \
        --topology=v5p:2x2x4 --config.optim.micro_batches=32      # try another slice or batch

The topology defaults to the config's (`config.aot.topology`). Needs libtpu (the `tpu` extra, which
`make aot` installs into .venv-tpu); no TPU. Exits 1 when a program does not fit the chip's HBM. Reports
are cached in `--cache_dir` by the lowered program and the compiler's version: a rerun with unchanged code
recompiles nothing (`--cache_dir=` to always compile).
This file is intentionally short: the work is `arena_jax.aot.aot_compile`.
"""

import importlib.util
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # compile for TPUs; run nothing (before JAX starts)

from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from arena_jax import aot  # noqa: E402
from arena_jax import cli  # noqa: E402
from arena_jax.errors import ConfigError  # noqa: E402
from arena_jax.errors import UserError  # noqa: E402

PROGRAMS = ("train", "prefill", "decode")

_CONFIG = config_flags.DEFINE_config_file(
  "config", "configs/real_ministral3_8b.py", "Real-size run config.", lock_config=True
)
_TOPOLOGY = flags.DEFINE_string(
  "topology", None, "TPU topology, e.g. v5p:2x2x2, v5e:4x4, v4:2x2x2 (default: config.aot.topology)."
)
_PROGRAMS = flags.DEFINE_list("programs", list(PROGRAMS), "Programs to compile.")
_RUNS = flags.DEFINE_list(
  "runs",
  [],
  "Instead of --config: several `config file:topology`, each compiled by its "
  "own process (`aot.compile_many`), --jobs at a time.",
)
_JOBS = flags.DEFINE_integer("jobs", 2, "Processes compiling at once with --runs.")
_CACHE_DIR = flags.DEFINE_string("cache_dir", ".aot_cache", "Reports of programs already compiled ('' = none).")


def _check_flags(topology: str | None) -> None:
  """The flags' mistakes and a missing libtpu, in one line, before anything is compiled or started."""
  unknown = sorted(set(_PROGRAMS.value) - set(PROGRAMS))
  if unknown:
    raise ConfigError(f"--programs: unknown {unknown}; choose from {', '.join(PROGRAMS)}")
  if topology is not None:
    try:
      aot.parse_topology(topology)
    except ValueError as e:
      raise ConfigError(f"--topology: {e}") from e
  if importlib.util.find_spec("libtpu") is None:
    raise UserError(
      f"libtpu is not installed in {sys.prefix}: `make aot` installs it (the `tpu` extra) into .venv-tpu; "
      "run .venv-tpu/bin/python -m launch.aot_compile"
    )


def main(argv):
  del argv
  log = lambda s: print(s, flush=True)
  _check_flags(None if _RUNS.value else (_TOPOLOGY.value or _CONFIG.value.aot.topology))
  if _RUNS.value:
    extra = [f"--programs={','.join(_PROGRAMS.value)}", f"--cache_dir={_CACHE_DIR.value}"]
    sys.exit(0 if aot.compile_many(_RUNS.value, _JOBS.value, extra, log=log) else 1)
  config = _CONFIG.value
  topology = _TOPOLOGY.value or config.aot.topology
  reports = aot.aot_compile(config, topology, _PROGRAMS.value, log=log, cache_dir=_CACHE_DIR.value or None)
  log(aot.format_reports(topology, [(r.name, r.memory) for r in reports]))
  log(aot.format_roofline(topology, [(r.name.split()[0], r.cost) for r in reports]))
  if not all(r.memory.fits for r in reports):
    print(
      f"does not fit: {[r.name.split()[0] for r in reports if not r.memory.fits]} exceed the HBM of {topology}",
      file=sys.stderr,
    )
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)
