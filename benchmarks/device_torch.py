"""The transformers side of the device check (benchmarks/device.py runs it in its own process, in its time box).

`generate(*, dry_run, deadline, context)`: transformers' `LlamaForCausalLM.generate` in torch on the same GPU,
with the policy of benchmarks/device_parts.py (the same config through `models.config_to_hf`, random weights,
bfloat16, transformers' default attention) and the sampler part's workload: the same B prompts of P random tokens,
N new tokens each at T = 1 with no top-k / top-p, `min_new_tokens = N` and no end token, so every row decodes the
whole budget as ours does. One untimed call (CUDA's kernels and handles), then timed calls until the deadline.
The process never starts JAX on the GPU (device.py runs it with JAX_PLATFORMS=cpu): the config only is read.
"""

from __future__ import annotations

import time

import numpy as np


def generate(*, dry_run: bool, deadline: float, context: dict) -> dict:
  del context
  try:
    import torch  # pylint: disable=g-import-not-at-top  (the image's, or the `hf` extra: only this part needs it)
    import transformers  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    if dry_run:
      return {"status": "skipped", "reason": f"torch and transformers are not both importable here ({e})"}
    raise
  from arena_jax import models  # pylint: disable=g-import-not-at-top
  from benchmarks import device_parts  # pylint: disable=g-import-not-at-top

  config = device_parts.policy(dry_run)
  b, p, n = device_parts.shapes(dry_run)["sampler"]
  if not dry_run and not torch.cuda.is_available():
    raise RuntimeError(f"torch {torch.__version__} sees no CUDA device")
  device = torch.device("cpu" if dry_run else "cuda")
  sync = (lambda: None) if dry_run else torch.cuda.synchronize

  start = time.monotonic()
  torch.manual_seed(0)
  hf_config = transformers.LlamaConfig(**models.config_to_hf(config, "LlamaForCausalLM"))
  with device:  # the weights are initialised where they run
    model = transformers.LlamaForCausalLM(hf_config)
  model = model.to(torch.bfloat16).eval()
  prompts = np.random.default_rng(0).integers(4, config.vocab_size, (b, p))
  prompts = torch.from_numpy(prompts.astype(np.int64)).to(device)
  mask = torch.ones_like(prompts)
  sync()
  init_s = time.monotonic() - start

  def call():
    with torch.no_grad():
      out = model.generate(
        prompts,
        attention_mask=mask,
        do_sample=True,
        temperature=1.0,
        top_k=None,
        top_p=None,
        max_new_tokens=n,
        min_new_tokens=n,
        eos_token_id=None,
        pad_token_id=0,
      )
    sync()
    return out

  def measure():
    begin = time.perf_counter()
    call()
    return time.perf_counter() - begin

  start = time.monotonic()
  out = call()
  warmup_s = time.monotonic() - start
  if tuple(out.shape) != (b, p + n):
    raise RuntimeError(f"generate returned {tuple(out.shape)}, not {(b, p + n)}: rows stopped early")
  seconds, repeats = device_parts.repeat_until(measure, deadline, 2 if dry_run else 5)
  return {
    "prompts": b,
    "prompt_len": p,
    "new_tokens": n,
    "init_s": init_s,
    "warmup_s": warmup_s,
    "seconds": seconds,
    "repeats": repeats,
    "tokens_per_s": b * n / seconds,
    "attn_implementation": getattr(model.config, "_attn_implementation", None),
    "torch": torch.__version__,
    "transformers": transformers.__version__,
    "device": torch.cuda.get_device_name() if not dry_run else "cpu",
  }
