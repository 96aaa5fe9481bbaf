"""The real-scale presets: Reasoning Arena-Live at the paper's size on TPU pod slices (SPEC §9), shared by
configs/real_*.py, which differ only in the policy.

  POD_SLICES             TPU slice → mesh, sampler mesh, micro-batches and `model.remat` (checked by `make aot`)
  pod_config(topology)   the run on one slice; `topology="smoke"` = `real_smoke` of it
  real_smoke(c)          a real-size config at smoke size with every code path kept (tests/train/test_real_smoke.py)
"""

import ml_collections

from arena_jax import parallel
from arena_jax.judges import config as judges_config
from arena_jax.train.config import RUN, base_config


# TPU slice → train mesh (data, fsdp, tensor; −1 = fill), sampler mesh (() = the same), micro-batches of
# the 512-row update of `pod_config`, and the train step's activation rematerialisation (`model.remat`).
# Each line is checked by launch/aot_compile.py (`make aot`; docs/tpu.md).
POD_SLICES = {
  # 8 chips × 95 GiB (v5p-16, 2 hosts): FSDP over 2, heads over the 4 chips of a host; 4 rows per micro-batch.
  # The activations fit: no recomputation.
  "v5p:2x2x2": dict(mesh=(1, -1, 4), sample=(), micro_batches=128, remat="none"),
  # 64 chips × 16 GiB (v5litepod-64, 16 hosts): training splits heads 16 ways (a v5e holds the activations
  # of one 3072-token row only with 2 heads per chip); sampling splits the 8 KV heads 8 ways.
  "v5e:8x8": dict(mesh=(1, -1, 16), sample=(1, -1, 8), micro_batches=128, remat="none"),
  # 16 chips × 16 GiB (v5litepod-16, 4 hosts): holds the train step only by recomputing each block in the
  # backward pass from its input (without remat: 16.75 GiB per chip at best; recomputing only attention,
  # `minimal`: 16.12 GiB); heads over the 4 chips of a host, FSDP over the 4 hosts, one row per chip and
  # micro-batch.
  "v5e:4x4": dict(mesh=(1, -1, 4), sample=(1, -1, 8), micro_batches=128, remat="full"),
  # 8 chips × 32 GiB (v4-16, 2 hosts): heads over all 8 chips, one row per micro-batch. float32 masters and moments
  # (11.9 GiB per chip) leave too little for the activations without recomputation (≈ 34 GiB in all): `full`.
  "v4:2x2x2": dict(mesh=(1, 1, 8), sample=(), micro_batches=512, remat="full"),
}

# Long reasoning traces: "<topology>:16k" / ":32k" = the same run with 16,384 / 32,768 new tokens.
# Splash attention (`model.attention = auto` on TPU) keeps no [T, T] probabilities, so a row's activations grow
# linearly with its length; each block is recomputed from its input (`full`), one 17k or 33k-token row per FSDP
# shard and micro-batch. The sampler decodes `sample_batch` prompts per call (the decode cache grows with rows
# × budget: 64 prompts × 8 × 16k tokens would need 137 GiB per v5p chip), each call in the growing cache.
# Each line is checked by `make aot` (docs/tpu.md "Long traces").
LONG_SLICES = {
  "v5p:2x2x2:16k": dict(mesh=(1, -1, 4), sample=(), micro_batches=256, remat="full", sample_batch=16),
  "v5e:8x8:16k": dict(mesh=(1, -1, 16), sample=(1, -1, 8), micro_batches=128, remat="full", sample_batch=16),
  "v5p:2x2x4:32k": dict(mesh=(1, -1, 4), sample=(), micro_batches=128, remat="full", sample_batch=8),
}
LENGTHS = {"16k": 16_384, "32k": 32_768}


def split_slice(key: str) -> tuple[str, int]:
  """ "v5p:2x2x2:16k" → ("v5p:2x2x2", 16384); a plain topology → (it, 2048)."""
  head, _, tail = key.rpartition(":")
  if tail in LENGTHS and head.count(":") == 1:
    return head, LENGTHS[tail]
  return key, 2048


MATH_SYSTEM_PROMPT = (
  "Solve the problem step by step, concisely. End with the final answer on its own line as 'Answer: <answer>'."
)


def pod_config(
  topology: str | None,
  *,
  model: str,
  hf_path: str,
  source: str,
  slices: dict | None = None,
  chat_template_kwargs: dict | None = None,
) -> ml_collections.ConfigDict:
  """Reasoning Arena-Live at the paper's scale (SPEC §9) on the TPU slice `topology` (a key of `slices`).

  Shared by configs/real_*.py, which differ only in the policy: `model` (the named `ModelConfig` that
  launch/aot_compile.py compiles) and `hf_path` (its checkpoint). 64 prompts × G = 8 samples of up to
  2048 new tokens per step (16,384 or 32,768 on the `LONG_SLICES`), prompts padded to 1024 tokens. Paths
  and URLs are placeholders of the shape of the real ones, overridden on the command line. `source` names
  the config file in errors. Prompts go through the checkpoint's own chat template with a math system
  prompt (`chat_template_kwargs`, e.g.
  Qwen3's `enable_thinking`, reach the template).
  """
  if topology == "smoke":
    return real_smoke(
      pod_config(
        None, model=model, hf_path=hf_path, source=source, slices=slices, chat_template_kwargs=chat_template_kwargs
      )
    )
  topology = topology or "v5p:2x2x2"
  slices = {**POD_SLICES, **LONG_SLICES} if slices is None else slices
  if topology not in slices:
    raise ValueError(
      f"{source}: no settings for topology {topology!r}; use one of {sorted(slices)} "
      "(or add a line to its SLICES and check it with launch/aot_compile.py)"
    )
  slice_ = slices[topology]
  topology, max_new_tokens = split_slice(topology)
  c = base_config()
  c.reward.mode = "arena_live"

  # The HF checkpoint on the workers' local disk (or a gcsfuse mount); every host reads it.
  c.init.hf_path = hf_path
  c.tasks.train_task = "jsonl"
  c.tasks.eval_tasks = ("jsonl",)
  c.tasks.jsonl.train_path = "/mnt/disks/data/stem_rl_train.jsonl"
  c.tasks.jsonl.test_path = "/mnt/disks/data/aime_2025.jsonl"
  c.tasks.jsonl.num_workers = 16
  # Instruct checkpoints are prompted in their own chat format (tokenizer_config.json / chat_template.jinja).
  c.tasks.prompt_format = "chat"
  c.tasks.system_prompt = MATH_SYSTEM_PROMPT
  c.tasks.chat_template_kwargs = chat_template_kwargs

  # The judge: DeepSeekMath-V2 (SPEC §9) behind vLLM or SGLang, one URL per server (docs/tpu.md).
  c.judge.urls = ("http://judge-0:8000/v1", "http://judge-1:8000/v1")
  c.judge.model = "deepseek-ai/DeepSeek-Math-V2"
  c.judge.token_budget = 16_384  # traces are long: keep 16k tokens of each (with a marker)
  c.judge.max_tokens = 8192
  c.judge.client.concurrency = 128

  # compact_every = 0: `make aot` proves the memory of the uncompacted decode program only (a dense cache's
  # compaction briefly holds the old and the new cache). The growing cache regroups its live rows at its
  # chunks' ends anyway, but never holds more than the dense cache of its chunking (at these budgets as
  # large as the dense cache `make aot` compiles): its memory follows the live tokens (SPEC §1: most
  # completions stop early).
  c.rollout.update(
    dict(prompts_per_step=64, group_size=8, max_new_tokens=max_new_tokens, temperature=1.0, compact_every=0)
  )
  c.rollout.decode_cache = "growing"
  c.rollout.sample_batch = slice_.get("sample_batch", 0)
  # The update packs each micro-batch's sequences into rows of one full-length sequence's tokens
  # (`train.packing`): RL completions are skewed, so padded rows would be mostly padding.
  c.rollout.pack_tokens = RUN.entries["aot"].defaults().prompt_len + max_new_tokens
  c.optim.update(dict(lr=4e-7, warmup_steps=10, micro_batches=slice_["micro_batches"], minibatches=1))  # SPEC §9
  c.num_steps = 500
  c.checkpoint.every = 25
  c.mesh = parallel.mesh_config(*slice_["mesh"], sample=slice_["sample"], distributed=True)
  c.model.remat = slice_["remat"]
  # float32 masters and AdamW moments under bfloat16 compute: at lr 4e-7 a bfloat16 weight would not move.
  c.model.update(dict(weight_dtype="float32", dtype="bfloat16"))
  # What launch/aot_compile.py compiles: the named model of the checkpoint and the prompt bucket.
  c.aot = RUN.entries["aot"].defaults()
  c.aot.update(dict(model=model, topology=topology))
  return c


def real_smoke(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A real-size run config (`pod_config`) at smoke size, every code path kept: the HF checkpoint import
  (`init.hf_path`: point it at a tiny checkpoint of the same architecture), its chat template, JSONL math
  data verified by math-verify (`tasks.jsonl.*_path`), the judge client over HTTP (the embedded judge
  server when `judge.urls` is ()), the sharded trainer (tensor 2 × FSDP over the other devices: CPU devices
  with `XLA_FLAGS=--xla_force_host_platform_device_count=4` or more). 2 steps of 4 prompts × 4 samples."""
  c.judge.urls = ()
  c.judge.model = judges_config.DEFAULT_MODEL  # the embedded server serves only this name
  c.judge.token_budget, c.judge.max_tokens, c.judge.client.concurrency = 1024, 1024, 16
  c.tasks.jsonl.num_workers = 1
  # Two sampler calls of 2 prompts each, and packed update rows of 512 tokens: the real run's code paths.
  c.rollout.update(dict(prompts_per_step=4, group_size=4, max_new_tokens=16, sample_batch=2, pack_tokens=512))
  c.optim.update(dict(micro_batches=1, minibatches=1, warmup_steps=1))
  c.num_steps, c.checkpoint.every = 2, 2
  c.mesh = parallel.mesh_config(1, -1, 2)
  c.log.progress = c.log.tensorboard = c.log.plot = False
  return c
