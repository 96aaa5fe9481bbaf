"""Reasoning Arena-Live with the paper's policy, Ministral-3-8B-Instruct-2512 (SPEC §9), on a TPU pod slice.

    # on every worker of the slice at once (docs/tpu.md):
    python -m launch.train --config=configs/real_ministral3_8b.py:v5p:2x2x2 --workdir=/mnt/gcs/runs/arena_live
    # ahead-of-time on a CPU host: does it fit? (the `tpu` extra; `make aot`)
    python -m launch.aot_compile --config=configs/real_ministral3_8b.py:v5p:2x2x2

The argument is the TPU topology; it picks the mesh and the micro-batches from `SLICES`, whose per-device
memory `launch/aot_compile.py` reports (docs/tpu.md). Everything else is the same on every slice: 64
prompts × G = 8 samples of up to 2048 new tokens per step, prompts padded to 1024 tokens.
Paths and URLs below are placeholders of the same shape as the real ones: override them on the command
line (`--config.init.hf_path=…`, `--config.judge.urls='("http://judge-0:8000/v1",)'`).
"""
import ml_collections

from arena_jax import parallel
from arena_jax.train.config import base_config

# topology → train mesh (data, fsdp, tensor; −1 = fill), sampler mesh (() = the same), micro-batches of
# the 512-row update. Each line is checked by launch/aot_compile.py (`make aot`; numbers in docs/tpu.md).
SLICES = {
    # 8 chips × 95 GiB (v5p-16, 2 hosts): FSDP over 2, heads over the 4 chips of a host; 4 rows per micro-batch.
    "v5p:2x2x2": dict(mesh=(1, -1, 4), sample=(), micro_batches=128),
    # 64 chips × 16 GiB (v5litepod-64, 16 hosts): training splits heads 16 ways (a v5e holds the activations
    # of one 3072-token row only with 2 heads per chip); sampling splits the 8 KV heads 8 ways.
    "v5e:8x8": dict(mesh=(1, -1, 16), sample=(1, -1, 8), micro_batches=128),
    # 8 chips × 32 GiB (v4-16, 2 hosts): heads over all 8 chips, one row per micro-batch.
    "v4:2x2x2": dict(mesh=(1, 1, 8), sample=(), micro_batches=512),
}


def get_config(arg=None):
  topology = arg or "v5p:2x2x2"
  if topology not in SLICES:
    raise ValueError(f"configs/real_ministral3_8b.py: no settings for topology {topology!r}; use one of "
                     f"{sorted(SLICES)} (or add a line to SLICES and check it with launch/aot_compile.py)")
  slice_ = SLICES[topology]
  c = base_config()
  c.reward.mode = "arena_live"

  # The HF checkpoint on the workers' local disk (or a gcsfuse mount); every host reads it.
  c.init.hf_path = "/mnt/disks/models/Ministral-3-8B-Instruct-2512"
  c.tasks.train_task = "jsonl"
  c.tasks.eval_tasks = ("jsonl",)
  c.tasks.jsonl.train_path = "/mnt/disks/data/stem_rl_train.jsonl"
  c.tasks.jsonl.test_path = "/mnt/disks/data/aime_2025.jsonl"
  c.tasks.jsonl.num_workers = 16

  # The judge: DeepSeekMath-V2 (SPEC §9) behind vLLM or SGLang, one URL per server (docs/tpu.md).
  c.judge.urls = ("http://judge-0:8000/v1", "http://judge-1:8000/v1")
  c.judge.model = "deepseek-ai/DeepSeek-Math-V2"
  c.judge.token_budget = 16_384       # traces are long: keep 16k tokens of each (with a marker)
  c.judge.max_tokens = 8192
  c.judge.client.concurrency = 128

  c.rollout.update(dict(prompts_per_step=64, group_size=8, max_new_tokens=2048, temperature=1.0))
  c.optim.update(dict(lr=4e-7, warmup_steps=10, micro_batches=slice_["micro_batches"], minibatches=1))  # SPEC §9
  c.num_steps = 500
  c.checkpoint.every = 25
  c.mesh = parallel.mesh_config(*slice_["mesh"], sample=slice_["sample"], distributed=True)
  # What launch/aot_compile.py compiles: the named model of the checkpoint and the prompt bucket.
  c.aot = ml_collections.ConfigDict(dict(model="ministral3_8b", topology=topology, prompt_len=1024))
  return c
