"""The JAX parts of the device check (benchmarks/device.py runs each in its own process, in its time box).

Each part is `fn(*, dry_run, deadline, context) -> dict` of its figures: `deadline` (time.monotonic) is when
its timed repeats stop (each runs at least once), `context` what the parts before it found (the chip's peaks,
and the attention to run: cudnn, or xla where the chip's check of cudnn failed). The policy is
Llama-3.2-1B-shaped (d_model 2048, 16 layers, 32 heads × 64 with 8 KV heads, SwiGLU 8192, vocab 128256, tied
embeddings: ≈1.24 B parameters), random weights, float32 masters under bfloat16 compute. `dry_run`: the same
code at tiny shapes on the CPU, xla attention.
"""

from __future__ import annotations

import os
import statistics
import time

from benchmarks import common  # noqa: F401  (sets JAX_PLATFORMS before jax is imported; device.py sets it)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from arena_jax import models, parallel, sampling  # noqa: E402
from arena_jax.models import attention as attention_lib  # noqa: E402
from arena_jax.train import sharding as train_sharding  # noqa: E402
from arena_jax.train import step as step_lib  # noqa: E402
from benchmarks.sampler import sampling_flops  # noqa: E402
from benchmarks.train_step import make_batch, run_config, train_flops  # noqa: E402

# (device kind contains, dense bf16 FLOP/s, HBM bytes/s): the vendors' figures, the first that matches (SXM parts
# but for the H100 PCIe).
PEAKS = (
  ("H200", 989e12, 4.8e12),
  ("H100 PCIe", 756e12, 2.0e12),
  ("H100", 989e12, 3.35e12),
  ("A100", 312e12, 2.0e12),
)

POLICY = models.ModelConfig(
  vocab_size=128_256,
  d_model=2048,
  num_layers=16,
  num_heads=32,
  num_kv_heads=8,
  head_dim=64,
  mlp_dim=8192,
  rope_theta=500_000.0,
  rms_norm_eps=1e-5,
  tie_embeddings=True,
  max_position_embeddings=16_384,  # informational: the long decode's prompt + 8k new tokens fit under it
  param_dtype="float32",
  dtype="bfloat16",
  attention="cudnn",
)
# sampler: (prompts B, prompt tokens P, new tokens N), as transformers' side; update: (rows, prompt, completion
# tokens); long_decode: (rows, prompt tokens, new tokens).
SHAPES = dict(sampler=(128, 512, 256), update=(32, 512, 512), long_decode=(8, 512, 8192))
DRY_POLICY = POLICY.replace(
  vocab_size=256, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, mlp_dim=128, attention="xla"
)
DRY_SHAPES = dict(sampler=(4, 16, 32), update=(4, 8, 8), long_decode=(2, 16, 64))
# The update's micro-batches (as the trainer's `micro_batches`): 8 rows of 1024 tokens each, so that the activations
# kept for the backward pass (no rematerialisation), about 1.6 GB per row of 1024 tokens at 16 layers, stay well
# inside an H100's memory next to the float32 masters, AdamW's moments and the gradients (about 20 GB).
UPDATE_MICRO_BATCHES = 4
MAX_REPEATS = 10  # timed repeats of one measurement, at most (2 in the dry run)
# The chip's attention check: the largest error of output and gradient, relative to the reference's largest value,
# that bfloat16 inputs allow (flash attention rounds its probabilities to bfloat16).
ATTENTION_TOLERANCE = 0.1


def policy(dry_run: bool, attention: str | None = None) -> models.ModelConfig:
  """The benchmark's policy (module docstring), with the attention the chip part chose when given."""
  config = DRY_POLICY if dry_run else POLICY
  return config.replace(attention=attention) if attention else config


def shapes(dry_run: bool) -> dict:
  return DRY_SHAPES if dry_run else SHAPES


# ─────────────────────────────────────────── helpers ───────────────────────────────────────────


def check_platform(dry_run: bool) -> None:
  """A GPU run on anything but CUDA stops here, saying why (never a CPU figure under a GPU's name)."""
  backend = jax.default_backend()
  if not dry_run and backend != "gpu":
    raise RuntimeError(
      f"JAX runs on {backend!r}, not a CUDA GPU (JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS')!r}): a jax with a "
      "CUDA plugin is needed (the image's jax-cuda13-plugin, or `make device`'s .venv-gpu); --dry-run for the CPU"
    )


def chip_peaks(dry_run: bool) -> tuple[float, float, str, str]:
  """(dense bf16 FLOP/s, HBM bytes/s, device kind, "table" | "measured") of the first device: the vendors'
  figures for a kind `PEAKS` knows; another kind, or the CPU of the dry run, gets measured ones (a matmul,
  a copy)."""
  device = jax.devices()[0]
  kind = getattr(device, "device_kind", device.platform)
  for name, flops, bandwidth in PEAKS:
    if name.lower() in kind.lower():
      return flops, bandwidth, kind, "table"
  n = 512 if dry_run else 8192
  if device.platform == "cpu":
    flops = common.matmul_peak_gflops(n, repeats=3) * 1e9  # float32: the CPU emulates bfloat16 matmuls
  else:
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.bfloat16)
    dot = jax.jit(jnp.dot)
    flops = 2 * n**3 / _best(lambda: dot(a, a).block_until_ready())
  x = jnp.ones(((8 if dry_run else 256) << 20,), jnp.float32)
  scale = jax.jit(lambda v: v * 2.0)
  bandwidth = 2 * x.nbytes / _best(lambda: scale(x).block_until_ready())  # read once, written once
  return flops, bandwidth, kind, "measured"


def _peaks(context: dict, dry_run: bool) -> tuple[float, float]:
  """The chip part's peaks, or this process's own when it found none."""
  if context.get("peaks"):
    return tuple(context["peaks"][:2])
  return chip_peaks(dry_run)[:2]


def _best(fn, repeats: int = 5) -> float:
  fn()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - start)
  return best


def repeat_until(measure, deadline: float, max_repeats: int) -> tuple[float, int]:
  """(median, count) of `measure()` (which returns the seconds it timed), repeated while another repeat as
  long as the last one still ends before `deadline` (time.monotonic), at most `max_repeats`, at least once."""
  times = [measure()]
  while len(times) < max_repeats and time.monotonic() + times[-1] < deadline:
    times.append(measure())
  return statistics.median(times), len(times)


def _timed(fn):
  """`fn` as a measurement: its wall-clock seconds."""

  def measure():
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start

  return measure


def _memory() -> dict | None:
  """The first device's allocator figures (peak and limit, bytes), where the platform reports them (GPUs)."""
  try:
    stats = jax.devices()[0].memory_stats() or {}
  except Exception:  # noqa: BLE001  (a platform without allocator statistics)
    stats = {}
  keep = ("peak_bytes_in_use", "bytes_in_use", "bytes_limit")
  return {k: int(stats[k]) for k in keep if k in stats} or None


def _keys(seed: int, n: int):
  """`n` keys, split before any timing (iterating a key array compiles the unstacking on first use)."""
  return iter(list(jax.random.split(jax.random.key(seed), n)))


def _init(config) -> dict:
  return models.pure_params(models.init_model(config, seed=0))


# ─────────────────────────────────────────── the parts ───────────────────────────────────────────


def chip(*, dry_run: bool, deadline: float, context: dict) -> dict:
  """The device, its peaks, and the attention kernel the other parts will run: cuDNN's flash attention
  through the policy's own path (`models.attention.full_attention`, forward and gradient) against the xla
  reference, at the policy's heads over 1024 tokens. An exception or a result off the reference is the
  check's failure, with its message; the dry run checks the xla path itself (the CPU has no cuDNN)."""
  del deadline, context
  check_platform(dry_run)
  flops, bandwidth, kind, source = chip_peaks(dry_run)
  impl = "xla" if dry_run else "cudnn"
  try:
    check = {"impl": impl, "status": "ok", **attention_check(impl, dry_run)}
    if not check["forward_max_err"] <= ATTENTION_TOLERANCE or not check["grad_max_err"] <= ATTENTION_TOLERANCE:
      check.update(
        status="failed", error=f"{impl} attention is off the xla reference by more than {ATTENTION_TOLERANCE}"
      )
  except Exception as e:  # noqa: BLE001  (the check's result is the message: the other parts then run xla)
    check = {"impl": impl, "status": "failed", "error": f"{type(e).__name__}: {e}"[:2000]}
  return {
    "device_kind": kind,
    "platform": jax.default_backend(),
    "devices": jax.device_count(),
    "jax": jax.__version__,
    "peak_tflops": flops / 1e12,
    "peak_hbm_tbps": bandwidth / 1e12,
    "peak_source": source,
    "attention_check": check,
  }


def attention_check(impl: str, dry_run: bool) -> dict:
  """Largest |impl − xla| of causal attention's output and of its gradient with respect to q, bfloat16 inputs
  scaled as the model scales them, relative to the reference's largest magnitude."""
  config = policy(dry_run)
  b, t = (2, 64) if dry_run else (2, 1024)
  kh, r, h = config.num_kv_heads, config.num_heads // config.num_kv_heads, config.head_dim
  keys = jax.random.split(jax.random.key(1), 3)
  q = jax.random.normal(keys[0], (b, t, kh, r, h), jnp.bfloat16) * (h**-0.5)
  k = jax.random.normal(keys[1], (b, kh, t, h), jnp.bfloat16)
  v = jax.random.normal(keys[2], (b, kh, t, h), jnp.bfloat16)
  positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
  lengths = jnp.full((b,), t, jnp.int32)

  def attend(impl):
    def loss(q):
      out = attention_lib.full_attention(q, k, v, impl=impl, positions=positions, lengths=lengths)
      return jnp.sum(out.astype(jnp.float32) ** 2), out

    return jax.jit(jax.value_and_grad(loss, has_aux=True))

  (_, out), grad = attend(impl)(q)
  (_, ref), ref_grad = attend("xla")(q)
  err = lambda x, y: float(jnp.max(jnp.abs(x.astype(jnp.float32) - y.astype(jnp.float32))))
  scale = lambda y: max(float(jnp.max(jnp.abs(y.astype(jnp.float32)))), 1e-6)
  return {
    "shape": [b, t, config.num_heads, config.num_kv_heads, h],
    "forward_max_err": err(out, ref) / scale(ref),
    "grad_max_err": err(grad, ref_grad) / scale(ref_grad),
  }


def sampler(*, dry_run: bool, deadline: float, context: dict) -> dict:
  """The sampler (`sampling.Sampler`, the policy's bfloat16 copy cast once by `shard_params`): B prompts of P
  random tokens, N new tokens at T = 1 and no stop token (every token useful). Its programs are compiled
  first (`Sampler.lower`, timed as `compile_s`); then the whole call, the prefill program alone and the decode
  program alone (after a prefill it does not time) are timed."""
  check_platform(dry_run)
  config = policy(dry_run, context.get("attention"))
  b, p, n = shapes(dry_run)["sampler"]
  peak_flops, peak_bandwidth = _peaks(context, dry_run)
  max_repeats = 2 if dry_run else MAX_REPEATS
  sample_config = models.sampling_config(config)
  whole = sampling.Sampler(config=sample_config, max_new_tokens=n, method=sampling.RandomSampling(temperature=1.0))
  weights = whole.shard_params(_init(config))  # the bfloat16 copy, cast once (as the trainer does once per step)
  rng = np.random.default_rng(0)
  prompts = rng.integers(4, config.vocab_size, (b, p)).astype(np.int32)
  lengths = np.full(b, p, np.int32)
  keys = _keys(0, 100)

  start = time.monotonic()
  prefill_lowered, decode_lowered = whole.lower(b, p)
  prefill_fn, decode_fn = prefill_lowered.compile(), decode_lowered.compile()
  compile_s = time.monotonic() - start

  # The compiled programs take the call's own arguments (`Sampler.lower`): padded prompts (P is a bucket, B needs
  # no padding on one device), every prompt active, the key, the first row's index.
  active, row0 = np.ones(b, bool), np.int32(0)
  prefill = lambda: prefill_fn(weights, prompts, lengths, active, next(keys), row0)

  def call():
    out = whole(weights, (prompts, lengths), next(keys))
    out.tokens.block_until_ready()
    return out

  def decode_only():
    state = jax.block_until_ready(prefill())
    begin = time.perf_counter()
    out, _ = decode_fn(weights, state, prompts)
    out.tokens.block_until_ready()
    return time.perf_counter() - begin

  out = call()  # the first call (places the prompts, compiles the small staging programs)
  if tuple(out.tokens.shape) != (b, n) or not bool(jnp.all(out.lengths == n)):
    raise RuntimeError(f"the sampler returned tokens {out.tokens.shape}, not {(b, n)} full rows")
  third = (deadline - time.monotonic()) / 3
  whole_s, whole_k = repeat_until(_timed(call), time.monotonic() + third, max_repeats)
  prefill_s, prefill_k = repeat_until(_timed(lambda: jax.block_until_ready(prefill())), time.monotonic() + third / 2,
                                      max_repeats)  # fmt: skip
  decode_s, decode_k = repeat_until(decode_only, deadline, max_repeats)

  itemsize = jnp.dtype(sample_config.dtype).itemsize
  weight_bytes = config.num_params() * jnp.dtype(sample_config.param_dtype).itemsize
  kv_per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * itemsize
  step_bytes = weight_bytes + b * kv_per_token * (p + n / 2)  # each row's real context, on average P + N/2
  step_s = decode_s / max(n - 1, 1)  # the prefill chose token 0; the decode program the other N − 1
  flops, prefill_flops = sampling_flops(config, b, p, n), sampling_flops(config, b, p, 1)
  return {
    "attention": config.attention,
    "prompts": b,
    "prompt_len": p,
    "new_tokens": n,
    "compile_s": compile_s,
    "whole": {
      "seconds": whole_s,
      "repeats": whole_k,
      "tokens_per_s": b * n / whole_s,
      "tflops": flops / whole_s / 1e12,
      "mfu": flops / whole_s / peak_flops,
    },
    "prefill": {
      "seconds": prefill_s,
      "repeats": prefill_k,
      "prompt_tokens_per_s": b * p / prefill_s,
      "tflops": prefill_flops / prefill_s / 1e12,
      "mfu": prefill_flops / prefill_s / peak_flops,
    },
    "decode": {
      "seconds": decode_s,
      "repeats": decode_k,
      "step_ms": step_s * 1e3,
      "tokens_per_s": b / step_s,
      "bytes_per_step": step_bytes,
      "hbm_tbps": step_bytes / step_s / 1e12,
      "hbm_fraction": step_bytes / step_s / peak_bandwidth,
    },
  }


def update(*, dry_run: bool, deadline: float, context: dict) -> dict:
  """The trainer's RL update (`train.sharding.train_step_fn` around `train.step.make_update_fn`: CISPO over
  teacher-forced log-probs, AdamW, float32 masters under bfloat16 compute, the state donated) in
  `UPDATE_MICRO_BATCHES` micro-batches, on full-length rows of P + N random tokens (`train.step.rows_to_rollout`,
  as benchmarks/train_step.py): the model's FLOPs and the compiler's per second, over the peak. The compiler's
  count is XLA's cost analysis of the same update lowered as one micro-batch (the recomputed log-prob chunks
  included): the analysis counts a loop's body once, so the micro-batches' scan would count a quarter."""
  check_platform(dry_run)
  config = policy(dry_run, context.get("attention"))
  rows, p, n = shapes(dry_run)["update"]
  peak_flops, _ = _peaks(context, dry_run)
  loss_config, optim_config = run_config()
  mesh = parallel.make_mesh(parallel.mesh_config(), jax.devices()[:1])
  optimizer = step_lib.make_optimizer(optim_config)
  shardings = train_sharding.train_shardings(config, optimizer, mesh)
  step_fn = lambda micro_batches: train_sharding.train_step_fn(
    config,
    optimizer,
    loss_config,
    mesh,
    temperature=1.0,
    micro_batches=micro_batches,
    use_reference=False,
    shardings=shardings,
  )
  state = train_sharding.init_train_state(_init(config), optimizer, shardings)
  batch = jax.device_put(make_batch(config, rows, p, n), shardings.rollout)
  start = time.monotonic()
  compiled = step_fn(UPDATE_MICRO_BATCHES).lower(state, batch, None).compile()
  compile_s = time.monotonic() - start
  cost = step_fn(1).lower(state, batch, None).cost_analysis()  # lowered only: no second compile
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  hlo_flops = float(cost.get("flops", 0.0)) if cost else 0.0
  box = {"state": state, "loss": None}

  def step():
    box["state"], metrics = compiled(box["state"], batch, None)
    box["loss"] = float(jax.block_until_ready(metrics)["loss"])

  step()  # the first step (allocations)
  seconds, repeats = repeat_until(_timed(step), deadline, 2 if dry_run else MAX_REPEATS)
  if not np.isfinite(box["loss"]):
    raise RuntimeError(f"the update's loss is {box['loss']}")
  flops = train_flops(config, rows, p, n)
  return {
    "attention": config.attention,
    "rows": rows,
    "prompt_len": p,
    "new_tokens": n,
    "micro_batches": UPDATE_MICRO_BATCHES,
    "compile_s": compile_s,
    "seconds": seconds,
    "repeats": repeats,
    "tokens_per_s": rows * (p + n) / seconds,
    "tflops": flops / seconds / 1e12,
    "mfu": flops / seconds / peak_flops,
    "hlo_tflops": hlo_flops / seconds / 1e12,
    "hlo_fraction": hlo_flops / seconds / peak_flops,
    "loss": box["loss"],
    "memory": _memory(),
  }


def long_decode(*, dry_run: bool, deadline: float, context: dict) -> dict:
  """A long trace: a few rows decoding 8k new tokens each (the dense cache for the whole budget, allocated by the
  prefill), compiled first (`compile_s`), then whole calls timed. That it fits: the call ran, with the cache it
  held (`peak_cache_bytes`), the decode program's own memory (`memory_analysis`) and the allocator's peak."""
  check_platform(dry_run)
  config = policy(dry_run, context.get("attention"))
  rows, p, n = shapes(dry_run)["long_decode"]
  sample_config = models.sampling_config(config)
  whole = sampling.Sampler(config=sample_config, max_new_tokens=n, method=sampling.RandomSampling(temperature=1.0))
  weights = whole.shard_params(_init(config))
  rng = np.random.default_rng(1)
  prompts = rng.integers(4, config.vocab_size, (rows, p)).astype(np.int32)
  lengths = np.full(rows, p, np.int32)
  keys = _keys(2, 10)
  start = time.monotonic()
  prefill_lowered, decode_lowered = whole.lower(rows, p)
  prefill_lowered.compile()
  decode_fn = decode_lowered.compile()
  compile_s = time.monotonic() - start
  analysis = decode_fn.memory_analysis()
  program_bytes = None
  if analysis is not None:
    sizes = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")
    program_bytes = int(
      sum(getattr(analysis, f, 0) or 0 for f in sizes) - (getattr(analysis, "alias_size_in_bytes", 0) or 0)
    )
  box = {}

  def call():
    out = whole(weights, (prompts, lengths), next(keys))
    out.tokens.block_until_ready()
    box["out"] = out

  seconds, repeats = repeat_until(_timed(call), deadline, 1 if dry_run else 3)
  out = box["out"]
  if tuple(out.tokens.shape) != (rows, n) or not bool(jnp.all(out.lengths == n)):
    raise RuntimeError(f"the long decode returned tokens {out.tokens.shape}, not {(rows, n)} full rows")
  return {
    "attention": config.attention,
    "rows": rows,
    "prompt_len": p,
    "new_tokens": n,
    "compile_s": compile_s,
    "seconds": seconds,
    "repeats": repeats,
    "tokens_per_s": rows * n / seconds,
    "step_ms": seconds / n * 1e3,
    "fits": True,
    "peak_cache_bytes": int(out.peak_cache_bytes),
    "program_bytes": program_bytes,
    "memory": _memory(),
  }
