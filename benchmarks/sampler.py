"""Sampler throughput: arena_jax's KV-cache sampler vs transformers' PyTorch `generate`.

    python -m benchmarks.sampler [--prompts 256] [--prompt-len 32] [--new-tokens 64] [--repeats 3] [--group 8]
                                 [--compact-every 8]

Workload: the default tiny policy (`arena_jax.models.tiny_config()`: 4 layers, d_model 256, 4 heads of
64 with 2 KV heads, SwiGLU 768, vocab 512, tied embeddings, float32, ≈3.3 M parameters), random
weights saved by transformers as a `LlamaForCausalLM` checkpoint and loaded with `load_hf`, so both
sides run the same weights. `--prompts` random prompts of `--prompt-len` tokens, `--new-tokens` new
tokens each at temperature 1 (no top-k / top-p, no stop token: every row decodes the full budget).

  ours  `Sampler` (jitted prefill, then jitted while_loops over a donated, chunked KV cache),
        compile excluded
  hf    `model.generate(do_sample=True, temperature=1, top_k=None, top_p=None)` under torch.no_grad,
        all torch threads

Both are timed alternately in this one process (median of `--repeats`); speed-up is their ratio.
A second, RL-shaped workload (`--group` G > 0) samples G completions for each of `--prompts`/G prompts
of 4·`--prompt-len` tokens (same number of rows), ours with one shared prefill and prompt cache per
group, transformers with `num_return_sequences=G`; its figures are the JSON's `group_*` keys.

Skewed lengths (`--group` > 0): the RL shape again, but every completion stops where RL completions
do — at lengths spread over 10–100 % of the budget, most of them short (stop step ⌈N·(0.1 + 0.9·x)⌉ − 1,
x ~ Beta(1, 2) drawn with seed 1: identical for both sides). A random policy does not stop by itself, so
each side forces its stop token at the drawn step (and masks it before) with its own generic
logits-processor hook: ours `Sampler(logits_processor=ForcedStops(...))`, transformers a
`LogitsProcessor` passed to `generate(eos_token_id=stop)`. Each side then stops paying for a finished
row only through its own machinery: ours gathers the live rows into smaller batches every
`--compact-every` steps (`Sampler.compact_every`; also shown without), transformers pads finished rows
until the longest ends. Both outputs are checked to stop exactly at the drawn steps. Useful tokens are
the tokens before each stop; their rate is the JSON's `skewed_*` keys.

Decode cache, on the same skewed workload and in the same alternation: ours with the dense cache (every
row's whole budget allocated by the prefill; compacting every `--compact-every` steps, and not) against the
growing cache (`Sampler(decode_cache="growing")`: chunks of ~N/16 slots appended as decoding reaches them,
finished rows regrouped away at each chunk's end). Each side's peak is the most K/V cache bytes (all layers,
prompt part included) its call held at once, from the shapes of the caches it held
(`SampleOutput.peak_cache_bytes`; a compaction's gather counts the cache it copies from as well); per useful
token, and against the dense cache's one allocation (`cache_bytes_ratio`, growing ÷ dense); the useful
tokens/s ratio is growing ÷ the dense cache compacting (the faster dense side; `growing_tokens_per_s_ratio`).
Model FLOP/s counts the useful FLOPs of our run (2·matmul params per token, the output projection
only where a token is sampled, attention over the real context) against this machine's float32
matmul peak, measured here with a 2048² `jnp.dot`. The last line is JSON.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from arena_jax import models, sampling  # noqa: E402
from arena_jax.train.config import base_config  # noqa: E402


def sampling_flops(c: models.ModelConfig, prompts: int, prompt_len: int, new_tokens: int) -> float:
  """Useful forward FLOPs of prefill + decode (see the module docstring)."""
  per_token = (
    2 * c.num_layers * (c.d_model * c.head_dim * (2 * c.num_heads + 2 * c.num_kv_heads) + 3 * c.d_model * c.mlp_dim)
  )
  head = 2 * c.d_model * c.vocab_size
  attention = 4 * c.num_layers * c.num_heads * c.head_dim  # q·k and p·v per attended key
  prefill = prompt_len * per_token + attention * prompt_len * (prompt_len + 1) / 2 + head
  decode = sum(per_token + head + attention * (prompt_len + t + 1) for t in range(new_tokens - 1))
  return prompts * (prefill + decode)


def stop_steps(rows: int, budget: int, seed: int = 1) -> np.ndarray:
  """The skewed workload's stop step of each row (see the module docstring): in [⌈0.1·N⌉ − 1, N − 1]."""
  x = np.random.default_rng(seed).beta(1.0, 2.0, rows)
  return np.clip(np.ceil(budget * (0.1 + 0.9 * x)).astype(np.int32) - 1, int(np.ceil(0.1 * budget)) - 1, budget - 1)


def hf_sampling(hf_model, prompts: np.ndarray, new_tokens: int, **generate_kw):
  """A call of `hf_model.generate` that samples as ours does (T = 1, no top-k / top-p, right after the prompts
  of equal length), returning its output; `generate_kw` adds the rest (stops, group size, processors)."""
  import torch  # pylint: disable=g-import-not-at-top  (the `hf` extra: only this benchmark's reference needs it)

  torch_prompts = torch.from_numpy(np.asarray(prompts).astype(np.int64))

  def run():
    with torch.no_grad():
      return hf_model.generate(
        torch_prompts,
        attention_mask=torch.ones_like(torch_prompts),
        do_sample=True,
        temperature=1.0,
        top_k=None,
        top_p=None,
        max_new_tokens=new_tokens,
        pad_token_id=0,
        **generate_kw,
      )

  return run


def skewed_lengths(args, config, model, hf_model, prompts: np.ndarray, g: int, keys) -> tuple[list, float, list, dict]:
  """The skewed-lengths workload: (table rows: ours compacting, ours not, transformers; useful / budget;
  the decode-cache table's rows: dense compacting, dense not, growing; their figures for the JSON)."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  b, p = prompts.shape
  n, stop = args.new_tokens, 3
  steps = stop_steps(b * g, n)
  useful = int(steps.sum())  # tokens before each stop
  forced = sampling.ForcedStops(tuple(int(t) for t in steps), stop)
  kw = dict(
    config=config,
    max_new_tokens=n,
    num_samples=g,
    method=sampling.RandomSampling(temperature=1.0),
    stop_tokens=(stop,),
    logits_processor=forced,
  )
  lengths = np.full(b, p, np.int32)

  def ours(sampler):
    def run():
      out = sampler(model, (prompts, lengths), next(keys))
      out.tokens.block_until_ready()
      return out

    return run

  class ForceStop(transformers.LogitsProcessor):
    """The same stops for `generate`: row r (rows b·G + i, as ours) emits `stop` at step steps[r] only."""

    def __init__(self):
      self.at = torch.from_numpy(steps.astype(np.int64))

    def __call__(self, input_ids, scores):
      step = input_ids.shape[1] - p
      is_stop = torch.arange(scores.shape[-1]) == stop
      now = (self.at == step)[:, None]
      forced = torch.where(is_stop, 0.0, -float("inf")).expand_as(scores)
      return torch.where(now, forced, scores.masked_fill(is_stop, -float("inf")))

  hf = hf_sampling(
    hf_model,
    prompts,
    n,
    eos_token_id=stop,
    num_return_sequences=g,
    logits_processor=transformers.LogitsProcessorList([ForceStop()]),
  )

  runs = {
    "compact": ours(sampling.Sampler(**kw, compact_every=args.compact_every)),
    "plain": ours(sampling.Sampler(**kw)),
    "growing": ours(sampling.Sampler(**kw, compact_every=args.compact_every, decode_cache="growing")),
    "hf": hf,
  }
  # Both sides stop exactly at the drawn steps (and compile before timing); our calls' peak cache bytes.
  peaks = {}
  for name in ("compact", "plain", "growing"):
    out = runs[name]()
    np.testing.assert_array_equal(np.asarray(out.lengths), steps + 1, err_msg=name)
    peaks[name] = out.peak_cache_bytes
  completions = hf()[:, p:].numpy()
  first_stop = np.where((completions == stop).any(1), (completions == stop).argmax(1), n)
  np.testing.assert_array_equal(first_stop, steps)
  times = {name: [] for name in runs}
  for _ in range(args.repeats):  # alternate, so that load on a shared machine hits all alike
    for name, fn in runs.items():
      times[name].append(common.timed(fn, repeats=1, warmup=0))
  med = {name: statistics.median(t) for name, t in times.items()}
  rows = [
    [
      f"arena_jax Sampler, compact_every={args.compact_every}",
      med["compact"],
      useful / med["compact"],
      med["hf"] / med["compact"],
    ],
    ["arena_jax Sampler, no compaction", med["plain"], useful / med["plain"], med["hf"] / med["plain"]],
    ["transformers generate, eos + LogitsProcessor", med["hf"], useful / med["hf"], 1.0],
  ]
  names = {
    "compact": f"dense, compact_every={args.compact_every}",
    "plain": "dense, no compaction (one allocation)",
    "growing": f"growing, compact_every={args.compact_every} + chunk ends",
  }
  cache_rows = [
    [names[k], peaks[k] / 2**20, peaks[k] / useful, peaks[k] / peaks["plain"], useful / med[k]]
    for k in ("compact", "plain", "growing")
  ]
  cache = {
    "cache_bytes_ratio": peaks["growing"] / peaks["plain"],
    "growing_tokens_per_s_ratio": med["compact"] / med["growing"],
    "skewed_growing_tokens_per_s": useful / med["growing"],
    "growing_peak_cache_bytes": peaks["growing"],
    "dense_peak_cache_bytes": peaks["plain"],
    "dense_compact_peak_cache_bytes": peaks["compact"],
    "growing_cache_bytes_per_useful_token": peaks["growing"] / useful,
    "dense_cache_bytes_per_useful_token": peaks["plain"] / useful,
  }
  return rows, useful / (b * g * n), cache_rows, cache


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--prompts", type=int, default=256)
  parser.add_argument("--prompt-len", type=int, default=32)
  parser.add_argument("--new-tokens", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--group", type=int, default=8, help="G of the RL-shaped workloads (0: skip them)")
  parser.add_argument(
    "--compact-every",
    type=int,
    default=base_config().rollout.compact_every,
    help="Sampler.compact_every of the skewed-lengths workload (decode steps between "
    "compactions); default: the trainer's `rollout.compact_every`",
  )
  parser.add_argument(
    "--set",
    action="append",
    default=[],
    metavar="FIELD=VALUE",
    help="override a field of the tiny config, e.g. --set d_model=128 (for exploration)",
  )
  args = parser.parse_args(argv)

  import torch  # pylint: disable=g-import-not-at-top  (hf extra: only this benchmark needs it)
  import transformers  # pylint: disable=g-import-not-at-top

  config = models.tiny_config()
  for item in args.set:
    field, value = item.split("=", 1)
    config = config.replace(**{field: type(getattr(config, field) or 0)(value)})
  torch.manual_seed(0)
  hf_model = transformers.LlamaForCausalLM(
    transformers.LlamaConfig(**models.config_to_hf(config, "LlamaForCausalLM"))
  ).eval()
  with tempfile.TemporaryDirectory() as path:
    hf_model.save_pretrained(path)
    model = models.load_hf(path)

  rng = np.random.default_rng(0)
  prompts = rng.integers(4, config.vocab_size, (args.prompts, args.prompt_len)).astype(np.int32)
  lengths = np.full(args.prompts, args.prompt_len, np.int32)
  sampler = sampling.Sampler(
    config=config, max_new_tokens=args.new_tokens, method=sampling.RandomSampling(temperature=1.0)
  )
  keys = iter(jax.random.split(jax.random.key(0), 1000))

  def ours():
    out = sampler(model, (prompts, lengths), next(keys))
    out.tokens.block_until_ready()
    return out

  hf = hf_sampling(hf_model, prompts, args.new_tokens, min_new_tokens=args.new_tokens, eos_token_id=None)

  start = time.perf_counter()
  out = ours()  # compiles prefill and decode
  compile_s = time.perf_counter() - start
  assert out.tokens.shape == (args.prompts, args.new_tokens) and bool(jnp.all(out.lengths == args.new_tokens))
  assert hf().shape == (args.prompts, args.prompt_len + args.new_tokens)
  ours_t, hf_t = [], []
  for _ in range(args.repeats):  # alternate, so that load on a shared machine hits both alike
    ours_t.append(common.timed(ours, repeats=1, warmup=0))
    hf_t.append(common.timed(hf, repeats=1, warmup=0))
  ours_s, hf_s = statistics.median(ours_t), statistics.median(hf_t)

  group_rows = []
  if args.group:
    g, b, p = args.group, max(1, args.prompts // args.group), 4 * args.prompt_len
    group_prompts = rng.integers(4, config.vocab_size, (b, p)).astype(np.int32)
    group_sampler = sampling.Sampler(
      config=config, max_new_tokens=args.new_tokens, num_samples=g, method=sampling.RandomSampling(temperature=1.0)
    )
    hf_group = hf_sampling(
      hf_model,
      group_prompts,
      args.new_tokens,
      min_new_tokens=args.new_tokens,
      eos_token_id=None,
      num_return_sequences=g,
    )

    def ours_group():
      group_sampler(model, (group_prompts, np.full(b, p, np.int32)), next(keys)).tokens.block_until_ready()

    ours_group()  # compile
    og, hg = [], []
    for _ in range(args.repeats):
      og.append(common.timed(ours_group, repeats=1, warmup=0))
      hg.append(common.timed(hf_group, repeats=1, warmup=0))
    og_s, hg_s = statistics.median(og), statistics.median(hg)
    group_tokens = b * g * args.new_tokens
    group_rows = [
      [f"arena_jax Sampler, {b} prompts × G={g}, {p}-token prompts", og_s, group_tokens / og_s, hg_s / og_s],
      [f"transformers generate, num_return_sequences={g}", hg_s, group_tokens / hg_s, 1.0],
    ]
    skewed_rows, useful_fraction, cache_rows, cache_figures = skewed_lengths(
      args, config, model, hf_model, group_prompts, g, keys
    )

  generated = args.prompts * args.new_tokens
  peak = common.matmul_peak_gflops()
  model_gflops = sampling_flops(config, args.prompts, args.prompt_len, args.new_tokens) / ours_s / 1e9
  figures = {
    "tokens_per_s": generated / ours_s,
    "hf_tokens_per_s": generated / hf_s,
    "speedup_vs_hf": hf_s / ours_s,
    "peak_gflops": peak,
    "model_gflops": model_gflops,
    "fraction_of_peak": model_gflops / peak,
  }
  print(
    f"tiny policy: {config.num_layers} layers, d_model {config.d_model}, {config.num_heads} heads × "
    f"{config.head_dim} ({config.num_kv_heads} KV), SwiGLU {config.mlp_dim}, vocab {config.vocab_size}, "
    f"{config.num_params() / 1e6:.2f} M params, float32; {args.prompts} prompts × {args.prompt_len} tokens, "
    f"{args.new_tokens} new tokens at T=1; {jax.device_count()} JAX device(s), torch threads "
    f"{torch.get_num_threads()}, {os.cpu_count()} CPUs; our compile {compile_s:.1f}s"
  )
  common.print_table(
    ["sampler", "median s", "tokens/s", "speed-up"],
    [
      ["arena_jax Sampler", ours_s, figures["tokens_per_s"], figures["speedup_vs_hf"]],
      ["transformers generate", hf_s, figures["hf_tokens_per_s"], 1.0],
    ],
  )
  if group_rows:
    print()
    common.print_table(["RL-shaped workload", "median s", "tokens/s", "speed-up"], group_rows)
    figures["group_tokens_per_s"] = group_rows[0][2]
    figures["group_hf_tokens_per_s"] = group_rows[1][2]
    figures["group_speedup_vs_hf"] = group_rows[0][3]
    print()
    common.print_table(["skewed lengths (useful tokens)", "median s", "useful tokens/s", "speed-up"], skewed_rows)
    figures["skewed_tokens_per_s"] = skewed_rows[0][2]
    figures["skewed_no_compaction_tokens_per_s"] = skewed_rows[1][2]
    figures["skewed_hf_tokens_per_s"] = skewed_rows[2][2]
    figures["skewed_speedup_vs_hf"] = skewed_rows[0][3]
    figures["skewed_useful_fraction"] = useful_fraction
    print()
    common.print_table(
      ["decode cache (skewed lengths)", "peak cache MiB", "bytes/useful token", "÷ dense", "useful tokens/s"],
      cache_rows,
    )
    figures.update(cache_figures)
  print()
  common.print_table(
    ["f32 matmul peak GFLOP/s", "model GFLOP/s", "fraction of peak"],
    [[peak, model_gflops, figures["fraction_of_peak"]]],
  )
  common.emit_json(figures)
  return figures


if __name__ == "__main__":
  main()
