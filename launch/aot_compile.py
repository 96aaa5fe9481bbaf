"""Ahead-of-time compiles of the real-size RL train step and the sampler's prefill and decode for a TPU
topology, on this CPU host, with their per-device memory (DESIGN "Scale"; docs/tpu.md).

    make aot                                                    # what docs/tpu.md recommends
    .venv-tpu/bin/python -m launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2
    .venv-tpu/bin/python -m launch.aot_compile --config=configs/real_qwen3_8b.py:v5e:8x8 --programs=train
    .venv-tpu/bin/python -m launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2 \
        --topology=v5p:2x2x4 --config.optim.micro_batches=32      # try another slice or batch

The topology defaults to the config's (`config.aot.topology`). Needs libtpu (the `tpu` extra, which
`make aot` installs into .venv-tpu); no TPU. Exits 1 when a program does not fit the chip's HBM.
This file is intentionally short: the work is `arena_jax.aot.aot_compile`.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # compile for TPUs; run nothing (before JAX starts)

from absl import flags  # noqa: E402
from absl import logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from arena_jax import aot  # noqa: E402
from arena_jax import cli  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", "configs/real_ministral3_8b.py", "Real-size run config.",
                                          lock_config=True)
_TOPOLOGY = flags.DEFINE_string("topology", None, "TPU topology, e.g. v5p:2x2x2, v5e:4x4, v4:2x2x2 "
                                "(default: config.aot.topology).")
_PROGRAMS = flags.DEFINE_list("programs", ["train", "prefill", "decode"], "Programs to compile.")


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  config = _CONFIG.value
  topology = _TOPOLOGY.value or config.aot.topology
  reports = aot.aot_compile(config, topology, _PROGRAMS.value, log=lambda s: print(s, flush=True))
  print(aot.format_reports(topology, reports), flush=True)
  if not all(m.fits for _, m in reports):
    print(f"does not fit: {[n.split()[0] for n, m in reports if not m.fits]} exceed the HBM of {topology}",
          file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)
