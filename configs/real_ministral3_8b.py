"""Reasoning Arena-Live with the paper's policy, Ministral-3-8B-Instruct-2512 (SPEC §9), on a TPU pod slice.

    # on every worker of the slice at once (docs/tpu.md):
    python -m launch.train --config=configs/real_ministral3_8b.py:v5p:2x2x2 --workdir=/mnt/gcs/runs/arena_live
    # ahead-of-time on a CPU host: does it fit? (the `tpu` extra; `make aot`)
    python -m launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2

The argument is the TPU topology, with `:16k` or `:32k` for long traces (`pod.LONG_SLICES`); it picks the
mesh and the micro-batches from `SLICES`, whose per-device
memory `launch/aot_compile.py` reports (docs/tpu.md). Everything else is `configs.pod.pod_config`:
the same on every slice and for every policy. Paths and URLs are placeholders of the same shape as the
real ones: override them on the command line (`--config.init.hf_path=…`,
`--config.judge.urls='("http://judge-0:8000/v1",)'`).

`:smoke` keeps every code path of the real run at smoke size (`configs.pod.real_smoke`): HF import
of a tiny checkpoint of the same architecture (`--config.init.hf_path`), its chat template, JSONL data with
math-verify, the judge client over HTTP, the sharded trainer; 2 steps on ≥ 4 CPU devices
(tests/train/test_real_smoke.py builds the checkpoint and runs it).
"""

from configs import pod

SLICES = {**pod.POD_SLICES, **pod.LONG_SLICES}  # add a topology here to try another slice


def get_config(arg=None):
  return pod.pod_config(
    arg,
    model="ministral3_8b",
    hf_path="/mnt/disks/models/Ministral-3-8B-Instruct-2512",
    source="configs/real_ministral3_8b.py",
    slices=SLICES,
  )
