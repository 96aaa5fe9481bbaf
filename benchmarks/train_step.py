"""Train step throughput: arena_jax's jitted RL update vs the same update written plainly.

    python -m benchmarks.train_step [--repeats 3] [--micro-batches 4] [--smoke]

The update is the one the trainer runs (`arena_jax.train.sharding.train_step_fn`, built as
`train.trainer.Trainer` builds it): CISPO loss (SPEC §2) over teacher-forced log-probs
(`models.token_logprobs`), exact accumulation over `optim.micro_batches` (a scan; `--micro-batches`
M > 1 adds a row for it), AdamW with global-norm clipping, the train state donated, on a mesh over every
local device. The demo's loss and optimizer settings (`train.base_config()`: token-mean CISPO,
ε = (1, 4), lr 1e-4, clip 1.0), warm-up off so that every timed update moves the params.

  ours   `train_step_fn(...)`, micro_batches = 1 (the demo's) and M
  plain  the same loss and optimizer written plainly: full-sequence logits of `Transformer.__call__`,
         log-softmax, CISPO in five lines, one `jax.value_and_grad` over the whole batch, optax
         `clip_by_global_norm` + `adamw`, one `jax.jit` (no shardings, no scan, no donation)

Two policies: the demo's (`models.tiny_config()`: 4 layers, d_model 256, ≈3.3 M params) on the demo's
batch (16 prompts × G = 8 rows, 32-token prompts, 96-token completions), and a wider one (2 layers,
d_model 1024, 16 heads × 64 (4 KV), SwiGLU 4096, same vocab, ≈31 M params) on 16 rows of the same
shape. Every row is full length (no padding), so every FLOP counted is computed by both sides.

Model FLOPs per update: forward + backward = 3 × forward, forward = 2·(matmul params of the layers) per
token + causal attention (q·k and p·v over each position's prefix) + the output projection at the
completion positions only (where a log-prob is needed); the output projection's recomputation in our
backward pass (`chunked_logprobs` is checkpointed) and the plain side's logits at prompt positions are
not counted. Against this machine's float32 matmul peak (`common.matmul_peak_gflops`, a 2048² `jnp.dot`),
sampled before and after each round of a workload's timed updates, so that other processes on a shared
machine weigh on the peak as on the steps: the median of the workload's samples (the run's best is
printed too; on a busy machine a fraction may still come out above 1 when the load changes mid-round).
Two more rows run our update at the real configs' precision: float32 masters under bfloat16 compute
(`ours bf16`) and with FP8 matmuls in the projections and MLP (`ours fp8`, Qwix); the CPU emulates both,
so `fp8_speedup_vs_bf16` in the JSON says what the emulation costs here, not what an FP8 chip gains (the
TPU roofline is `make aot`'s, docs/tpu.md).

Packed rows (`rollout.pack_tokens`, `train.packing`): the RL shape, where the rows are not full. 16 prompts ×
G = 8 rows of the demo's policy, each group's prompt 16-32 tokens (right-padded to P = 32), completions of a
budget N = 224 that stop where RL completions do: at 10-100 % of the budget, most of them short
(`benchmarks.sampler.stop_steps`, seed 1: the sampler benchmark's skewed workload), ≈ 40 % of the slots. The
same update twice, side by side: `padded` (one [P | N] row per completion, the default) and `packed`
(`pack_tokens` = P + N, rows as long as the padded ones, so each token attends over as many slots; the host's
packing is timed with its update). Useful tokens are the completion tokens that carry loss; `packed_speedup`
in the JSON is packed ÷ padded useful tokens/s (the same tokens, so padded time ÷ packed time). "agrees":
the two first updates' loss and gradients, as for plain.
Each side is timed alternately in this one process (median of `--repeats`, compile excluded); the
speed-up is plain time / our time. Before timing, both sides take one update from the same state on the
same batch and their losses and gradients (Adam's first moment) are compared: the "agrees" column.
The last line is JSON.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from arena_jax import models, parallel  # noqa: E402
from arena_jax.sampling import model_from_params  # noqa: E402
from arena_jax.train import base_config  # noqa: E402
from arena_jax.train import packing  # noqa: E402
from arena_jax.train import sharding as train_sharding  # noqa: E402
from arena_jax.train import step as step_lib  # noqa: E402

# (name, model config, rows, prompt length, completion length)
WIDE = models.tiny_config().replace(d_model=1024, num_layers=2, num_heads=16, num_kv_heads=4, head_dim=64, mlp_dim=4096)
WORKLOADS = (("tiny", models.tiny_config(), 128, 32, 96), ("wide", WIDE, 16, 32, 96))
# The smoke size (`--smoke`, the test): the same code paths in seconds. Both workloads are one small shape, so
# that the second one's programs come from the compilation cache (the figures are meaningless at this size).
_SMOKE_CONFIG = models.tiny_config().replace(num_layers=1)
SMOKE = (("tiny", _SMOKE_CONFIG, 16, 8, 8), ("wide", _SMOKE_CONFIG, 16, 8, 8))
# The RL shape with skewed completion lengths (module docstring): (model config, prompts, G, P, N).
RL = (models.tiny_config(), 16, 8, 32, 224)
RL_SMOKE = (_SMOKE_CONFIG, 4, 4, 8, 24)


def run_config():
  """The demo run's loss and optim sections (`train.base_config()`), without warm-up (module docstring)."""
  config = base_config()
  optim = config.optim.copy_and_resolve_references()
  optim.warmup_steps = 0
  return config.loss, optim


def train_flops(c: models.ModelConfig, rows: int, prompt_len: int, new_tokens: int) -> float:
  """Forward + backward model FLOPs of one update over full-length rows (module docstring)."""
  per_token = (
    2 * c.num_layers * (c.d_model * c.head_dim * (2 * c.num_heads + 2 * c.num_kv_heads) + 3 * c.d_model * c.mlp_dim)
  )
  s = prompt_len + new_tokens
  attention = 4 * c.num_layers * c.num_heads * c.head_dim * s * (s + 1) / 2
  head = 2 * c.d_model * c.vocab_size * new_tokens
  return 3 * rows * (s * per_token + attention + head)


def make_batch(
  c: models.ModelConfig, rows: int, prompt_len: int, new_tokens: int, *, seed: int = 0, ragged: bool = False
) -> step_lib.Rollout:
  """A rollout of random tokens, behaviour log-probs near the policy's and advantages; full-length rows, or
  with `ragged` prompts and completions of random lengths (the equivalence test)."""
  rng = np.random.default_rng(seed)
  prompt_lengths = rng.integers(1, prompt_len + 1, rows) if ragged else np.full(rows, prompt_len)
  lengths = rng.integers(1, new_tokens + 1, rows) if ragged else np.full(rows, new_tokens)
  old = rng.normal(size=(rows, new_tokens)) * 0.3 - np.log(c.vocab_size)
  return step_lib.rows_to_rollout(
    rng.integers(4, c.vocab_size, (rows, prompt_len)),
    prompt_lengths,
    rng.integers(4, c.vocab_size, (rows, new_tokens)),
    lengths,
    old,
    rng.normal(size=rows),
    lengths == new_tokens,
  )


# ─────────────────────────────────────── the two sides ───────────────────────────────────────


def ours(model_config, params, loss_config, optim_config, micro_batches: int):
  """(update, state, place): the trainer's sharded update on a mesh over the local devices, its initial
  state, and `place(batch)` laying a rollout out as the update wants it."""
  mesh = parallel.make_mesh(parallel.mesh_config())
  optimizer = step_lib.make_optimizer(optim_config)
  shardings = train_sharding.train_shardings(model_config, optimizer, mesh)
  update = train_sharding.train_step_fn(
    model_config,
    optimizer,
    loss_config,
    mesh,
    temperature=1.0,
    micro_batches=micro_batches,
    use_reference=False,
    shardings=shardings,
  )
  state = train_sharding.init_train_state(jax.tree.map(jnp.copy, params), optimizer, shardings)
  return (lambda s, b: update(s, b, None)), state, lambda batch: jax.device_put(batch, shardings.rollout)


def plain(model_config, params, loss_config, optim_config):
  """(update, state): the same loss and optimizer written plainly (module docstring). Covers the demo's
  loss settings only (token-mean CISPO, no KL, truncated rows kept)."""
  if loss_config.aggregation != "token_mean" or loss_config.kl_coef or loss_config.mask_truncated:
    raise ValueError("the plain reference implements token-mean CISPO without KL or truncation masking only")
  tx = plain_optimizer(optim_config)
  terms_fn = plain_terms(model_config, loss_config)

  def loss_fn(p, batch: step_lib.Rollout):
    total, count = terms_fn(p, batch)
    return total / jnp.maximum(count, 1)

  @jax.jit
  def update(state, batch):
    p, opt_state = state
    loss, grads = jax.value_and_grad(loss_fn)(p, batch)
    updates, opt_state = tx.update(grads, opt_state, p)
    return (optax.apply_updates(p, updates), opt_state), loss

  return update, (params, tx.init(params))


def plain_optimizer(optim_config) -> optax.GradientTransformation:
  """The plain side's optimizer: optax's global-norm clipping and AdamW, as the module docstring says."""
  o = optim_config
  return optax.chain(
    optax.clip_by_global_norm(o.max_grad_norm),
    optax.adamw(o.lr, b1=o.b1, b2=o.b2, eps=o.eps, weight_decay=o.weight_decay),
  )


def plain_terms(model_config, loss_config):
  """f(params, batch) → (Σ CISPO terms, Σ mask) of a batch, written plainly (full-sequence logits of
  `Transformer.__call__`, log-softmax, CISPO in five lines): the token-mean loss is their ratio, and over
  micro-batches the ratio of their sums."""

  def terms_fn(p, batch: step_lib.Rollout):
    plen, n = batch.prompt_tokens.shape[1], batch.tokens.shape[1]
    seq = jnp.concatenate([batch.prompt_tokens, batch.tokens], axis=1)
    slots = jnp.arange(plen + n)
    # Completions continue right after each row's real prompt; right-padding is never attended to.
    pos = jnp.where(slots < plen, slots, batch.prompt_lengths[:, None] + slots - plen)
    seen = jnp.where(slots < plen, slots < batch.prompt_lengths[:, None], jnp.pad(batch.mask, ((0, 0), (plen, 0))))
    logp = jax.nn.log_softmax(model_from_params(model_config, p)(seq, pos, seen), axis=-1)
    # Token t of the completion is predicted by slot prompt_length − 1 (t = 0) or plen + t − 1.
    at = jnp.where(jnp.arange(n) == 0, batch.prompt_lengths[:, None] - 1, plen + jnp.arange(n) - 1)
    at_slot = jnp.take_along_axis(logp, at[:, :, None], axis=1)
    lp = jnp.take_along_axis(at_slot, batch.tokens[:, :, None], axis=2)[..., 0]
    # CISPO: a clipped, stopped importance weight on the policy-gradient term (SPEC §2).
    ratio = jnp.exp(jnp.where(batch.mask, jax.lax.stop_gradient(lp) - batch.old_logprobs, 0.0))
    weight = jnp.clip(ratio, 1.0 - loss_config.eps_low, 1.0 + loss_config.eps_high)
    terms = jnp.where(batch.mask, -weight * batch.advantages[:, None] * lp, 0.0)
    return terms.sum(), batch.mask.sum()

  return terms_fn


def first_moments(opt_state):
  """Adam's first moment, (1 − b1) × the clipped gradient, from chain(clip, adamw)'s state."""
  return opt_state[1][0].mu


def agreement(ours_state, ours_metrics, plain_state, plain_loss) -> dict:
  """How far the two sides' first update is apart: the loss, the gradient (as Adam's first moment, relative
  to its largest entry per tensor) and the new params (absolute, against lr)."""
  ours_state, plain_state = jax.device_get((ours_state, plain_state))
  grad = max(
    float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
    for a, b in zip(
      jax.tree.leaves(first_moments(ours_state.opt_state)), jax.tree.leaves(first_moments(plain_state[1]))
    )
  )
  params = max(
    float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(ours_state.params), jax.tree.leaves(plain_state[0]))
  )
  loss = abs(float(ours_metrics["loss"]) - float(plain_loss))
  return {"loss": loss, "grad_rel": grad, "params_abs": params}


# ─────────────────────────────────────── the benchmark ───────────────────────────────────────


def measure(config, rows, prompt_len, new_tokens, micro_batches, repeats, loss_config, optim_config):
  """Times ours (M = 1 and `micro_batches`) and plain alternately on one workload, with matmul peak samples
  before and after each round; returns the figures (per side, and the samples)."""
  params = models.pure_params(models.init_model(config, seed=0))
  batch = make_batch(config, rows, prompt_len, new_tokens)
  plain_update, plain_state = plain(config, params, loss_config, optim_config)
  sides = {}
  for m in sorted({1, micro_batches}):
    update, state, place = ours(config, params, loss_config, optim_config, m)
    sides[f"ours_m{m}"] = [update, state, place(batch)]
  # The real configs' precision: float32 masters under bfloat16 compute, and with FP8 matmuls (Qwix; on a
  # CPU both bf16 and FP8 are emulated: the figures say what emulation costs here, not what a TPU gains).
  for label, quantization in (("bf16", ""), ("fp8", "fp8")):
    low = models.with_precision(config, dtype="bfloat16").replace(quantization=quantization)
    update, state, place = ours(low, params, loss_config, optim_config, 1)
    sides[f"ours_{label}"] = [update, state, place(batch)]
  sides["plain"] = [plain_update, plain_state, batch]

  compile_s, agree, first_plain = {}, {}, None
  for label, side in reversed(sides.items()):  # plain first: the others are compared with its first update
    update, state, b = side
    start = time.perf_counter()
    side[1], out = jax.block_until_ready(update(state, b))  # compiles (ours: donates the initial state)
    compile_s[label] = time.perf_counter() - start
    if label == "plain":
      first_plain = (side[1], out)
    else:
      agree[label] = agreement(side[1], out, *first_plain)

  def step(side):
    side[1], out = side[0](side[1], side[2])
    jax.block_until_ready(out)

  times, peaks = {label: [] for label in sides}, [common.matmul_peak_gflops(repeats=3)]
  for _ in range(repeats):  # alternate, so that load on a shared machine hits every side (and the peak) alike
    for label, side in sides.items():
      times[label].append(common.timed(lambda side=side: step(side), repeats=1, warmup=0))
    peaks.append(common.matmul_peak_gflops(repeats=3))
  seconds = {label: statistics.median(t) for label, t in times.items()}

  flops = train_flops(config, rows, prompt_len, new_tokens)
  tokens = rows * (prompt_len + new_tokens)
  peak = statistics.median(peaks)  # under the load the steps of this workload ran under
  figures = {
    "params": config.num_params(),
    "rows": rows,
    "tokens": tokens,
    "gflop_per_update": flops / 1e9,
    "peak_gflops": peak,
    "peak_samples": peaks,
  }
  for label, s in seconds.items():
    figures[label] = {
      "seconds": s,
      "tokens_per_s": tokens / s,
      "gflops": flops / s / 1e9,
      "fraction_of_peak": flops / s / 1e9 / peak,
      "speedup_vs_plain": seconds["plain"] / s,
      "compile_s": compile_s[label],
    }
    if label in agree:
      figures[label]["agreement"] = agree[label]
  return figures


def rl_batch(c: models.ModelConfig, prompts: int, g: int, prompt_len: int, new_tokens: int, *, seed: int = 0):
  """The RL shape's host rollout (module docstring): groups of G rows sharing a prompt of P/2-P tokens,
  completions stopping at the sampler benchmark's skewed steps (the stop token included)."""
  from benchmarks.sampler import stop_steps  # pylint: disable=g-import-not-at-top  (its lengths, not its imports)

  rng = np.random.default_rng(seed)
  rows = prompts * g
  plen = np.repeat(rng.integers(prompt_len // 2, prompt_len + 1, prompts), g)
  prompt_tokens = np.repeat(rng.integers(4, c.vocab_size, (prompts, prompt_len)), g, axis=0)
  prompt_tokens = np.where(np.arange(prompt_len)[None] < plen[:, None], prompt_tokens, 0)
  lengths = stop_steps(rows, new_tokens) + 1
  old = rng.normal(size=(rows, new_tokens)) * 0.3 - np.log(c.vocab_size)
  completions = rng.integers(4, c.vocab_size, (rows, new_tokens))
  batch = step_lib.rows_to_rollout(
    prompt_tokens, plen, completions, lengths, old, rng.normal(size=rows), lengths == new_tokens
  )
  return jax.tree.map(np.asarray, batch)


def measure_packed(config, prompts, g, prompt_len, new_tokens, repeats, loss_config, optim_config) -> dict:
  """Times the padded and the packed update (pack_tokens = P + N) alternately on the RL shape; returns the
  figures of each side and `packed_speedup`."""
  params = models.pure_params(models.init_model(config, seed=0))
  batch = rl_batch(config, prompts, g, prompt_len, new_tokens)
  pack_tokens = prompt_len + new_tokens
  mesh = parallel.make_mesh(parallel.mesh_config())
  shards = parallel.batch_shards(mesh)
  optimizer = step_lib.make_optimizer(optim_config)
  sides = {}
  for label, packed in (("padded", False), ("packed", True)):
    sh = train_sharding.train_shardings(config, optimizer, mesh, packed=packed)
    update = train_sharding.train_step_fn(
      config,
      optimizer,
      loss_config,
      mesh,
      temperature=1.0,
      micro_batches=1,
      use_reference=False,
      shardings=sh,
      packed=packed,
    )

    # From the host's rollout to the new state: the packed side packs it first (as the trainer does per update).
    def run(state, update=update, sh=sh, packed=packed):
      rollout = packing.pack_rollout(batch, pack_tokens=pack_tokens, shards=shards) if packed else batch
      return update(state, jax.device_put(rollout, sh.rollout), None)

    sides[label] = [run, train_sharding.init_train_state(jax.tree.map(jnp.copy, params), optimizer, sh)]

  compile_s, first = {}, {}
  for label, side in sides.items():
    start = time.perf_counter()
    side[1], out = jax.block_until_ready(side[0](side[1]))  # compiles (and donates the initial state)
    compile_s[label], first[label] = time.perf_counter() - start, (side[1], out)
  padded_state, padded_metrics = first["padded"]
  agree = agreement(*first["packed"], (padded_state.params, padded_state.opt_state), padded_metrics["loss"])

  def step(side):
    side[1], out = side[0](side[1])
    jax.block_until_ready(out)

  times = {label: [] for label in sides}
  for _ in range(repeats):  # alternate, so that load on a shared machine hits both sides alike
    for label, side in sides.items():
      times[label].append(common.timed(lambda side=side: step(side), repeats=1, warmup=0))
  seconds = {label: statistics.median(t) for label, t in times.items()}

  useful = int(batch.mask.sum())
  grid = np.asarray(packing.pack_rollout(batch, pack_tokens=pack_tokens, shards=shards).packed.tokens).shape
  slots = {"padded": batch.mask.shape[0] * (prompt_len + new_tokens), "packed": int(np.prod(grid))}
  real = int(batch.prompt_lengths.sum()) + useful  # the sequences' own tokens
  figures = {
    "rows": int(batch.mask.shape[0]),
    "prompt_len": prompt_len,
    "new_tokens": new_tokens,
    "pack_tokens": pack_tokens,
    "packed_rows": grid[0] * grid[1],
    "useful_tokens": useful,
    "useful_fraction": useful / batch.mask.size,
  }
  for label, sec in seconds.items():
    figures[label] = {
      "seconds": sec,
      "useful_tokens_per_s": useful / sec,
      "slots": slots[label],
      "fill": real / slots[label],
      "speedup_vs_padded": seconds["padded"] / sec,
      "compile_s": compile_s[label],
    }
  figures["packed"]["agreement"] = agree
  figures["packed_speedup"] = figures["packed"]["useful_tokens_per_s"] / figures["padded"]["useful_tokens_per_s"]
  return figures


def agrees(label: str, side: dict) -> str:
  """The table's "agrees" column: our float32 update is the plain one up to float rounding (bf16 and FP8
  compute differ from it by their own rounding: their figures are in the JSON line)."""
  if "agreement" not in side:
    return ""
  if label in ("ours_bf16", "ours_fp8"):
    return "(rounding)"
  a = side["agreement"]
  return "yes" if a["grad_rel"] < 1e-3 and a["loss"] < 1e-5 else "NO"


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--micro-batches", type=int, default=4, help="M of the accumulating row (1: only M = 1)")
  parser.add_argument("--smoke", action="store_true", help="tiny shapes, one repeat (the test; figures meaningless)")
  args = parser.parse_args(argv)
  repeats = 1 if args.smoke else args.repeats
  loss_config, optim_config = run_config()

  best = common.matmul_peak_gflops()
  figures = {}
  for name, config, rows, prompt_len, new_tokens in SMOKE if args.smoke else WORKLOADS:
    figures[name] = figs = measure(
      config, rows, prompt_len, new_tokens, args.micro_batches, repeats, loss_config, optim_config
    )
    c = config
    print(
      f"{name}: {c.num_layers} layers, d_model {c.d_model}, {c.num_heads} heads × {c.head_dim} "
      f"({c.num_kv_heads} KV), SwiGLU {c.mlp_dim}, vocab {c.vocab_size}, {c.num_params() / 1e6:.2f} M params, "
      f"float32; {rows} rows × ({prompt_len} prompt + {new_tokens} completion) tokens, "
      f"{figs['gflop_per_update']:.1f} GFLOP per update; matmul peak {figs['peak_gflops']:.1f} GFLOP/s; compile s: "
      + ", ".join(f"{k} {v['compile_s']:.1f}" for k, v in figs.items() if isinstance(v, dict))
    )
  best = max([best] + [p for figs in figures.values() for p in figs["peak_samples"]])
  print(
    f"{jax.device_count()} JAX device(s), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
    f"float32 matmul peak per workload: the median of samples before and after its timed rounds "
    f"(best of the run {best:.1f} GFLOP/s)"
  )
  print()
  table = []
  for name, figs in figures.items():
    for label, side in figs.items():
      if isinstance(side, dict):
        shown = label.replace("ours_m", "ours M=").replace("ours_bf16", "ours bf16").replace("ours_fp8", "ours fp8")
        table.append(
          [
            f"{name}: {shown}",
            side["seconds"],
            side["tokens_per_s"],
            side["gflops"],
            side["fraction_of_peak"],
            side["speedup_vs_plain"],
            agrees(label, side),
          ]
        )
  common.print_table(["train step", "median s", "tokens/s", "GFLOP/s", "of peak", "vs plain", "agrees"], table)

  rl_config, prompts, g, prompt_len, new_tokens = RL_SMOKE if args.smoke else RL
  rl = measure_packed(rl_config, prompts, g, prompt_len, new_tokens, repeats, loss_config, optim_config)
  print()
  print(
    f"RL shape, skewed lengths: {prompts} prompts × G = {g}, prompts {prompt_len // 2}-{prompt_len} tokens "
    f"(P = {prompt_len}), completions {rl['useful_fraction']:.0%} of N = {new_tokens} on average "
    f"(benchmarks.sampler.stop_steps); packed into {rl['packed_rows']} rows of {rl['pack_tokens']} tokens; "
    f"{rl_config.num_layers} layers, d_model {rl_config.d_model}, float32, M = 1; compile s: "
    + ", ".join(f"{k} {rl[k]['compile_s']:.1f}" for k in ("padded", "packed"))
  )
  common.print_table(
    ["RL update (useful tokens)", "median s", "useful tokens/s", "slots", "fill", "vs padded", "agrees"],
    [
      [
        f"rl: {label}",
        rl[label]["seconds"],
        rl[label]["useful_tokens_per_s"],
        rl[label]["slots"],
        rl[label]["fill"],
        rl[label]["speedup_vs_padded"],
        agrees(label, rl[label]),
      ]
      for label in ("padded", "packed")
    ],
  )
  wide = figures["wide"]
  out = {
    "fraction_of_peak": wide["ours_m1"]["fraction_of_peak"],
    "speedup_vs_plain": wide["ours_m1"]["speedup_vs_plain"],
    "plain_fraction_of_peak": wide["plain"]["fraction_of_peak"],
    "peak_gflops": wide["peak_gflops"],
    "peak_gflops_best": best,
    "micro_batches": args.micro_batches,
    # FP8 against bf16 compute (both float32 masters), emulated on a CPU: no target (module docstring).
    "fp8_speedup_vs_bf16": wide["ours_bf16"]["seconds"] / wide["ours_fp8"]["seconds"],
    # The packed update against the padded one on the RL shape (module docstring): useful tokens/s ratio.
    "packed_speedup": rl["packed_speedup"],
    **figures,
    "rl": rl,
  }
  common.emit_json(out)
  return out


if __name__ == "__main__":
  main()
