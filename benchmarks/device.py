"""Device benchmark: the sampler and the RL train step of a 1B-class policy on one CUDA GPU (issue 28).

    bash benchmarks/device.sh [--budget-s 540] [--dry-run]          (`make device` installs .venv-gpu first)

The policy is Llama-3.2-1B-shaped (d_model 2048, 16 layers, 32 heads × 64 with 8 KV heads, SwiGLU 8192, vocab
128256, tied embeddings: ≈1.24 B parameters), random weights, bfloat16 compute, `ModelConfig.attention = "cudnn"`
(`jax.nn.dot_product_attention`'s cuDNN flash attention, `models.attention`): a GPU where cuDNN cannot run it fails
loudly, it never falls back to another kernel. Through the project's own entry points:

  sampler  `sampling.Sampler` with the policy's bfloat16 copy (`models.sampling_config`, cast once by
           `Sampler.shard_params`): B prompts of P random tokens, N new tokens at T = 1 and no stop token (every
           row decodes the whole budget); timed whole, and with N = 1 (the prefill and one token): the decode
           steps take the difference
  train    the trainer's RL update (`train.sharding.train_step_fn` around `train.step.make_update_fn`: CISPO over
           teacher-forced log-probs, AdamW, float32 masters under bfloat16 compute, the state donated) on
           full-length rows of P + N random tokens (`train.step.rows_to_rollout`, as benchmarks/train_step.py)

Figures: tokens/s; MFU, the model FLOPs per second over the chip's dense bf16 peak, with the model FLOPs counted
as benchmarks/sampler.py and benchmarks/train_step.py count them (2 × the matmul parameters per token forward,
3 × that for forward + backward, causal attention over the real context, the output projection only where a
token is sampled or scored); for the train step also the compiler's own count (`compiled.cost_analysis()`, which
includes the recomputed log-prob chunks) over the peak, the hardware FLOPs utilisation. For decode, the fraction
of HBM bandwidth: the bytes a decode step must read (the bfloat16 weights once, plus each row's KV cache over its
real context, on average P + N/2) per step time, over the chip's HBM bandwidth — a lower bound on the traffic,
so an upper bound on nothing. The peaks come from the device kind (`PEAKS`: H100 / H200 989 TFLOP/s dense bf16
and 3.35 / 4.8 TB/s, A100 312 and 2.0); another kind, or the CPU of `--dry-run`, gets measured ones (a matmul, a
copy), marked `peak_source: measured`.

Each part runs within its share of `--budget-s` (540 s: its compiles count, its timed repeats stop at the
share's end, at least one each), under device.sh's 600 s backstop. `--dry-run` (the CPU, tests/test_device_script.py):
the same code at tiny shapes with xla attention, in seconds. A table, then one JSON line.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

DRY_RUN = "--dry-run" in sys.argv[1:]
os.environ.setdefault("JAX_PLATFORMS", "cpu" if DRY_RUN else "cuda")  # device.sh sets it; `-m` runs agree

from benchmarks import common  # noqa: E402  (after JAX_PLATFORMS: it defaults it to cpu)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from arena_jax import models, parallel, sampling  # noqa: E402
from arena_jax.train import sharding as train_sharding  # noqa: E402
from arena_jax.train import step as step_lib  # noqa: E402
from benchmarks.sampler import sampling_flops  # noqa: E402
from benchmarks.train_step import make_batch, run_config, train_flops  # noqa: E402

# (device kind contains, dense bf16 FLOP/s, HBM bytes/s): the vendors' figures (SXM parts; H100 PCIe is lower).
PEAKS = (("H200", 989e12, 4.8e12), ("H100", 989e12, 3.35e12), ("A100", 312e12, 2.0e12))

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
  max_position_embeddings=8192,
  param_dtype="float32",
  dtype="bfloat16",
  attention="cudnn",
)
# (sampler prompts B, prompt tokens P, new tokens N), (train rows, prompt tokens, completion tokens)
SHAPES = dict(sampler=(128, 512, 256), train=(32, 512, 512))
# --dry-run: the same code at tiny shapes (seconds on a CPU), xla attention.
DRY_POLICY = POLICY.replace(
  vocab_size=256, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, mlp_dim=128, attention="xla"
)
DRY_SHAPES = dict(sampler=(4, 16, 32), train=(4, 8, 8))


def chip_peaks(dry_run: bool) -> tuple[float, float, str, str]:
  """(dense bf16 FLOP/s, HBM bytes/s, device kind, "table" | "measured") of the first device (module docstring)."""
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


def _best(fn, repeats: int = 5) -> float:
  fn()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - start)
  return best


def timed_until(fn, deadline: float, max_repeats: int) -> tuple[float, int]:
  """(median seconds, repeats) of `fn()` after one untimed call (the compile), repeated until `deadline`
  (time.monotonic) or `max_repeats`, at least once."""
  fn()
  times = []
  while not times or (len(times) < max_repeats and time.monotonic() < deadline):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times), len(times)


def check_platform(dry_run: bool) -> None:
  """A GPU run on anything but CUDA stops here, saying why (never a CPU figure under a GPU's name)."""
  backend = jax.default_backend()
  if not dry_run and backend != "gpu":
    raise SystemExit(
      f"benchmarks/device.py: JAX runs on {backend!r}, not a CUDA GPU: install the `gpu` extra (`make device` "
      "does, into .venv-gpu) on a CUDA machine, or pass --dry-run for the CPU"
    )


# ─────────────────────────────────────────── the parts ───────────────────────────────────────────


def bench_sampler(config, params, shape, deadline, max_repeats, peak_flops, peak_bandwidth) -> dict:
  """The sampler's figures (module docstring): whole, its prefill (N = 1) and its decode steps."""
  b, p, n = shape
  sample_config = models.sampling_config(config)
  method = sampling.RandomSampling(temperature=1.0)
  whole = sampling.Sampler(config=sample_config, max_new_tokens=n, method=method)
  first = sampling.Sampler(config=sample_config, max_new_tokens=1, method=method)
  weights = whole.shard_params(params)  # the bfloat16 copy, cast once (as the trainer does once per step)
  rng = np.random.default_rng(0)
  prompts = rng.integers(4, config.vocab_size, (b, p)).astype(np.int32)
  lengths = np.full(b, p, np.int32)
  keys = iter(jax.random.split(jax.random.key(0), 10_000))

  def run(sampler):
    def call():
      out = sampler(weights, (prompts, lengths), next(keys))
      out.tokens.block_until_ready()
      return out

    return call

  start = time.monotonic()
  out = run(whole)()
  compile_s = time.monotonic() - start
  if tuple(out.tokens.shape) != (b, n) or not bool(jnp.all(out.lengths == n)):
    raise RuntimeError(f"the sampler returned tokens {out.tokens.shape}, not {(b, n)} full rows")
  half = start + (deadline - start) / 2
  whole_s, whole_k = timed_until(run(whole), half, max_repeats)
  first_s, first_k = timed_until(run(first), deadline, max_repeats)

  itemsize = jnp.dtype(sample_config.dtype).itemsize
  weight_bytes = config.num_params() * jnp.dtype(sample_config.param_dtype).itemsize
  kv_per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * itemsize
  step_bytes = weight_bytes + b * kv_per_token * (p + n / 2)
  # The decode steps' time is the difference; where it drowns in the noise (tiny dry-run shapes), no figure.
  step_s = (whole_s - first_s) / (n - 1) if n > 1 and whole_s > 1.05 * first_s else None
  flops = sampling_flops(config, b, p, n)
  prefill_flops = sampling_flops(config, b, p, 1)
  return {
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
      "seconds": first_s,
      "repeats": first_k,
      "prompt_tokens_per_s": b * p / first_s,
      "tflops": prefill_flops / first_s / 1e12,
      "mfu": prefill_flops / first_s / peak_flops,
    },
    "decode": {
      "step_ms": step_s and step_s * 1e3,
      "tokens_per_s": step_s and b / step_s,
      "bytes_per_step": step_bytes,
      "hbm_tbps": step_s and step_bytes / step_s / 1e12,
      "hbm_fraction": step_s and step_bytes / step_s / peak_bandwidth,
    },
  }


def bench_train(config, params, shape, deadline, max_repeats, peak_flops) -> dict:
  """The RL update's figures (module docstring): model FLOPs and the compiler's FLOPs per second."""
  rows, p, n = shape
  loss_config, optim_config = run_config()
  mesh = parallel.make_mesh(parallel.mesh_config(), jax.devices()[:1])  # one chip, as the sampler's default device
  optimizer = step_lib.make_optimizer(optim_config)
  shardings = train_sharding.train_shardings(config, optimizer, mesh)
  update = train_sharding.train_step_fn(
    config, optimizer, loss_config, mesh, temperature=1.0, micro_batches=1, use_reference=False, shardings=shardings
  )
  state = train_sharding.init_train_state(params, optimizer, shardings)
  batch = jax.device_put(make_batch(config, rows, p, n), shardings.rollout)
  start = time.monotonic()
  compiled = update.lower(state, batch, None).compile()
  compile_s = time.monotonic() - start
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  hlo_flops = float(cost.get("flops", 0.0)) if cost else 0.0
  box = {"state": state, "loss": None}

  def step():
    box["state"], metrics = compiled(box["state"], batch, None)
    box["loss"] = float(jax.block_until_ready(metrics)["loss"])

  seconds, repeats = timed_until(step, deadline, max_repeats)
  if not np.isfinite(box["loss"]):
    raise RuntimeError(f"the train step's loss is {box['loss']}")
  flops = train_flops(config, rows, p, n)
  return {
    "rows": rows,
    "prompt_len": p,
    "new_tokens": n,
    "compile_s": compile_s,
    "seconds": seconds,
    "repeats": repeats,
    "tokens_per_s": rows * (p + n) / seconds,
    "tflops": flops / seconds / 1e12,
    "mfu": flops / seconds / peak_flops,
    "hlo_tflops": hlo_flops / seconds / 1e12,
    "hlo_fraction": hlo_flops / seconds / peak_flops,
    "loss": box["loss"],
  }


# ─────────────────────────────────────────── the benchmark ───────────────────────────────────────────


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--dry-run", action="store_true", help="tiny shapes, xla attention, the CPU (the test)")
  parser.add_argument("--budget-s", type=float, default=540.0, help="all parts' time boxes together, compiles too")
  parser.add_argument("--max-repeats", type=int, default=10, help="timed repeats of each measurement, at most")
  args = parser.parse_args(argv)
  t0 = time.monotonic()
  check_platform(args.dry_run)
  config, shapes = (DRY_POLICY, DRY_SHAPES) if args.dry_run else (POLICY, SHAPES)
  max_repeats = 2 if args.dry_run else args.max_repeats
  peak_flops, peak_bandwidth, kind, source = chip_peaks(args.dry_run)
  print(
    f"{kind} ({jax.default_backend()}, {jax.device_count()} device(s)); peaks ({source}): "
    f"{peak_flops / 1e12:.4g} TFLOP/s dense bf16, {peak_bandwidth / 1e12:.4g} TB/s HBM"
  )
  print(
    f"policy: {config.num_layers} layers, d_model {config.d_model}, {config.num_heads} heads × {config.head_dim} "
    f"({config.num_kv_heads} KV), SwiGLU {config.mlp_dim}, vocab {config.vocab_size}, "
    f"{config.num_params() / 1e9:.3g} B params, random weights, {config.dtype} compute, attention "
    f"{config.attention!r}{' (dry run)' if args.dry_run else ''}"
  )
  params = models.pure_params(models.init_model(config, seed=0))
  left = args.budget_s - (time.monotonic() - t0)
  sampler = bench_sampler(
    config, params, shapes["sampler"], time.monotonic() + 0.45 * left, max_repeats, peak_flops, peak_bandwidth
  )
  train = bench_train(config, params, shapes["train"], t0 + args.budget_s, max_repeats, peak_flops)

  b, p, n = shapes["sampler"]
  rows, tp, tn = shapes["train"]
  whole, prefill, decode = sampler["whole"], sampler["prefill"], sampler["decode"]
  print()
  na = lambda v: "n/a" if v is None else v  # noqa: E731  (a figure the noise drowned: dry-run shapes)
  table = [
    ("sampler", f"{b}×({p}+{n})", whole["seconds"], whole["tokens_per_s"], whole["tflops"], whole["mfu"], "", ""),
    ("  prefill (N=1)", f"{b}×{p}", prefill["seconds"], prefill["prompt_tokens_per_s"], prefill["tflops"],
     prefill["mfu"], "", ""),
    ("  decode step", f"{b} rows", na(decode["step_ms"] and decode["step_ms"] / 1e3), na(decode["tokens_per_s"]),
     "", "", na(decode["hbm_tbps"]), na(decode["hbm_fraction"])),
    ("train step", f"{rows}×({tp}+{tn})", train["seconds"], train["tokens_per_s"], train["tflops"], train["mfu"],
     "", ""),
    ("  (compiler FLOPs)", "", "", "", train["hlo_tflops"], train["hlo_fraction"], "", ""),
  ]  # fmt: skip
  common.print_table(["part", "shape", "median s", "tokens/s", "TFLOP/s", "MFU", "HBM TB/s", "of HBM"], table)
  print(
    f"compiles: sampler {sampler['compile_s']:.1f} s, train step {train['compile_s']:.1f} s; "
    f"train loss {train['loss']:.4g}; {time.monotonic() - t0:.1f} s in all"
  )
  figures = {
    "device_kind": kind,
    "platform": jax.default_backend(),
    "dry_run": args.dry_run,
    "attention": config.attention,
    "params": config.num_params(),
    "peak_tflops": peak_flops / 1e12,
    "peak_hbm_tbps": peak_bandwidth / 1e12,
    "peak_source": source,
    "sampler_tokens_per_s": whole["tokens_per_s"],
    "sampler_mfu": whole["mfu"],
    "decode_tokens_per_s": decode["tokens_per_s"],
    "decode_hbm_fraction": decode["hbm_fraction"],
    "train_tokens_per_s": train["tokens_per_s"],
    "train_mfu": train["mfu"],
    "sampler": sampler,
    "train": train,
    "elapsed_s": time.monotonic() - t0,
  }
  common.emit_json(figures)
  return figures


if __name__ == "__main__":
  main()
