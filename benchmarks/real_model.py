"""The real model: SmolLM2-135M-Instruct (the GGUF of `make real-model`) through our sampler and our RL update,
beside transformers and a plain jitted step, in this one process, on the same machine and the same weights.

    python -m benchmarks.real_model [--gguf PATH] [--prompts 8] [--group 8] [--new-tokens 256] [--repeats 1]
    python -m benchmarks.real_model --smoke        # the same code at tiny shapes, in a minute

Workload, the RL shape: `--prompts` arithmetic problems of the demo's task as chat prompts (the GGUF's own
template), G = `--group` samples each, `--new-tokens` new tokens at temperature 1, float32, on the CPU. No stop
token on either side: every row decodes the whole budget, so both sides compute the same tokens.

  sampler  ours: `sampling.Sampler` (jitted prefill, then a jitted while_loop over a donated KV cache; the prompt
           cached once per group), compile excluded; transformers: `generate(do_sample=True,
           num_return_sequences=G)` with its KV cache, prompts left-padded, under torch.no_grad, all torch threads,
           after one short warm-up call (as our compile is excluded).
           `sampler_speedup_vs_hf` = transformers' time ÷ ours.
  update   one CISPO update (SPEC §2) on the 64 rollouts our sampler produced (their tokens and behaviour
           log-probs; advantages drawn at random: the time does not depend on them): ours is the trainer's
           sharded update (`benchmarks.train_step.ours`: chunked log-probs, a scan over `--micro-batches`
           slices, donated state), plain the same loss and AdamW written plainly (`benchmarks.train_step.
           plain_terms`: full-sequence logits), one jitted gradient per slice in a Python loop, summed. Both take
           the rows in 8 slices of 8: the whole batch in one gradient asks for 53 GB here (measured: XLA's
           allocation for our update at M = 1 failed), the machine has 24. `update_speedup_vs_plain` = plain's
           time ÷ ours. Both first take one update from the same state on the same batch, and their losses are
           compared (`update_loss_abs_diff`).

Also measured: `load_s` (the GGUF read, dequantised and placed by `load_policy`, tokenizer included),
`peak_rss_gib` (this process's peak resident memory after our sampler and update, before the plain step and
torch: what our side needs), `logits_max_abs_diff` / `logit_scale` against transformers' own GGUF load on 4 chat
prompts (their prompt positions, float32), and `greedy_match` (the share of 4 × 64 greedy tokens equal to
transformers' greedy `generate`). Each side is timed `--repeats` times, alternating (the median is reported).
The last line is JSON; `--out` (default docs/results/real_model.json, not with --smoke) gets it too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from arena_jax import sampling, tasks  # noqa: E402
from arena_jax import pretrained  # noqa: E402
from arena_jax.train import policy_io  # noqa: E402
from arena_jax.train import step as step_lib  # noqa: E402
from benchmarks import train_step  # noqa: E402

DEFAULT_OUT = os.path.join("docs", "results", "real_model.json")


def chat_prompts(policy, n: int) -> list[list[int]]:
  """`n` problems of the demo's arithmetic task as chat prompts of the policy's template, token ids."""
  config = tasks.demo_config()
  config.prompt_format = "chat"
  task = tasks.get_task("arithmetic", config)
  source = tasks.load_split(config, "arithmetic", "test")
  examples = [source[i] for i in range(n)]
  return policy.tokenizer.encode(task.prompt_texts(examples, policy.tokenizer), add_bos=False)


def right_padded(rows: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
  lengths = np.asarray([len(r) for r in rows], np.int32)
  out = np.full((len(rows), int(lengths.max())), pad, np.int32)
  for i, r in enumerate(rows):
    out[i, : len(r)] = r
  return out, lengths


def peak_rss_gib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def hf_model(path: str):
  """transformers' own GGUF load of the same file, float32."""
  import torch  # pylint: disable=g-import-not-at-top  (the `hf` extra: only the reference side)
  import transformers  # pylint: disable=g-import-not-at-top

  transformers.logging.set_verbosity_error()
  model = transformers.AutoModelForCausalLM.from_pretrained(
    os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32
  )
  return model.eval()


def hf_generate(model, rows: list[list[int]], pad: int, **kw):
  """A `generate` call over `rows` left-padded (transformers' convention for batched decoding)."""
  import torch  # pylint: disable=g-import-not-at-top

  width = max(len(r) for r in rows)
  ids = torch.full((len(rows), width), pad, dtype=torch.long)
  mask = torch.zeros_like(ids)
  for i, r in enumerate(rows):
    ids[i, width - len(r) :] = torch.tensor(r)
    mask[i, width - len(r) :] = 1

  def run():
    with torch.no_grad():
      return model.generate(ids, attention_mask=mask, pad_token_id=pad, eos_token_id=None, **kw)[:, width:]

  return run


def parity(policy, model, rows: list[list[int]], new_tokens: int) -> dict:
  """Logits at every prompt position and greedy continuations, ours against transformers (module docstring)."""
  import torch  # pylint: disable=g-import-not-at-top

  diff, scale = 0.0, 0.0
  for r in rows:
    ours = np.asarray(policy.model(jnp.asarray([r], jnp.int32)))[0]
    with torch.no_grad():
      ref = model(torch.tensor([r])).logits[0].numpy()
    diff, scale = max(diff, float(np.abs(ours - ref).max())), max(scale, float(np.abs(ref).max()))
  greedy = sampling.Sampler(config=policy.config, max_new_tokens=new_tokens, method=sampling.Greedy())
  ours_tokens = np.asarray(greedy(policy.model, rows, jax.random.key(0)).tokens)
  ref_tokens = np.stack(
    [hf_generate(model, [r], 0, do_sample=False, max_new_tokens=new_tokens)()[0].numpy() for r in rows]
  )
  return {
    "logits_max_abs_diff": diff,
    "logit_scale": scale,
    "greedy_match": float((ours_tokens == ref_tokens).mean()),
    "greedy_rows_identical": int((ours_tokens == ref_tokens).all(axis=1).sum()),
  }


def plain_accumulated(config, params, loss_config, optim_config, micro_batches: int):
  """(update, state): the plain update (`train_step.plain_terms`, optax clipping + AdamW) over `micro_batches`
  equal slices of the batch, as a plain loop would write it: one jitted gradient of Σ terms per slice, the sums
  added, divided by the batch's Σ mask, one optimizer step. (The whole batch in one gradient needs more memory than
  this machine has: the full-sequence logits and activations of 64 rows of a 135 M model.)"""
  import optax  # pylint: disable=g-import-not-at-top

  tx = train_step.plain_optimizer(optim_config)
  terms_fn = train_step.plain_terms(config, loss_config)
  grad_fn = jax.jit(jax.value_and_grad(lambda p, b: terms_fn(p, b), has_aux=True))
  add = jax.jit(lambda a, b: jax.tree.map(jnp.add, a, b))

  @jax.jit
  def apply(state, grads, count):
    p, opt_state = state
    grads = jax.tree.map(lambda g: g / jnp.maximum(count, 1), grads)
    updates, opt_state = tx.update(grads, opt_state, p)
    return optax.apply_updates(p, updates), opt_state

  def update(state, batch):
    rows = batch.tokens.shape[0]
    size = rows // micro_batches
    total, count, grads = 0.0, 0, None
    for k in range(micro_batches):
      part = jax.tree.map(lambda x, k=k: x[k * size : (k + 1) * size], batch)
      (s, c), g = grad_fn(state[0], part)
      total, count = total + s, count + c
      grads = g if grads is None else add(grads, g)
    return apply(state, grads, count), total / jnp.maximum(count, 1)

  return update, (params, tx.init(params))


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--gguf", default="", help="a .gguf file (default: the real model of `make real-model`)")
  parser.add_argument("--prompts", type=int, default=8)
  parser.add_argument("--group", type=int, default=8)
  parser.add_argument("--new-tokens", type=int, default=256)
  parser.add_argument("--repeats", type=int, default=1)
  parser.add_argument("--parity-tokens", type=int, default=64)
  parser.add_argument(
    "--micro-batches", type=int, default=8, help="both updates in this many slices of the rows (memory: module doc)"
  )
  parser.add_argument("--smoke", action="store_true", help="2 prompts × G=2, 8 new tokens: the code path only")
  parser.add_argument("--out", default=None, help=f"also write the JSON line here (default {DEFAULT_OUT})")
  args = parser.parse_args(argv)
  if args.smoke:
    args.prompts, args.group, args.new_tokens, args.parity_tokens, args.micro_batches = 2, 2, 8, 8, 2
  out_path = args.out if args.out is not None else ("" if args.smoke else DEFAULT_OUT)
  path = args.gguf or pretrained.smollm2_gguf()

  # ── ours: load, sample, update ──
  start = time.perf_counter()
  policy = policy_io.load_policy(path, weight_dtype="float32", dtype="float32")
  load_s = time.perf_counter() - start
  config, pad = policy.config, policy.tokenizer.pad_id
  rows = chat_prompts(policy, args.prompts)
  prompts, lengths = right_padded(rows, pad)
  g, n = args.group, args.new_tokens
  sampler = sampling.Sampler(
    config=config, max_new_tokens=n, num_samples=g, method=sampling.RandomSampling(temperature=1.0), pad_id=pad
  )
  keys = iter(jax.random.split(jax.random.key(0), 100))

  def ours_sample():
    out = sampler(policy.model, (prompts, lengths), next(keys))
    out.tokens.block_until_ready()
    return out

  start = time.perf_counter()
  sample = ours_sample()
  sampler_compile_s = time.perf_counter() - start
  assert bool(jnp.all(sample.lengths == n)), "every row decodes the whole budget (no stop token)"
  sample_times = [common.timed(ours_sample, repeats=1, warmup=0)]

  params = policy_io.pure_params(policy.model)
  loss_config, optim_config = train_step.run_config()
  rng = np.random.default_rng(0)
  batch = step_lib.rows_to_rollout(
    np.repeat(np.asarray(sample.prompt_tokens), g, axis=0),
    np.repeat(np.asarray(sample.prompt_lengths), g),
    np.asarray(sample.tokens),
    np.asarray(sample.lengths),
    np.asarray(sample.logprobs),
    rng.normal(size=args.prompts * g),
    np.asarray(sample.truncated),
  )
  del sample
  update, state, place = train_step.ours(config, params, loss_config, optim_config, args.micro_batches)
  placed = place(batch)
  start = time.perf_counter()
  state, ours_metrics = jax.block_until_ready(update(state, placed))
  update_compile_s = time.perf_counter() - start
  ours_loss = float(ours_metrics["loss"])

  def ours_update():
    nonlocal state
    state, m = update(state, placed)
    jax.block_until_ready(m)

  update_times = {"ours": [common.timed(ours_update, repeats=1, warmup=0)]}
  rss = peak_rss_gib()

  # ── plain: the same update from the same initial params, written plainly ──
  plain_update, plain_state = plain_accumulated(config, params, loss_config, optim_config, args.micro_batches)
  del params
  plain_state, plain_loss = jax.block_until_ready(plain_update(plain_state, batch))
  loss_diff = abs(ours_loss - float(plain_loss))

  def plain_step():
    nonlocal plain_state
    plain_state, loss = plain_update(plain_state, batch)
    jax.block_until_ready(loss)

  update_times["plain"] = [common.timed(plain_step, repeats=1, warmup=0)]
  for _ in range(args.repeats - 1):  # alternate, so that load on a shared machine hits both alike
    update_times["ours"].append(common.timed(ours_update, repeats=1, warmup=0))
    update_times["plain"].append(common.timed(plain_step, repeats=1, warmup=0))
  del plain_state, state

  # ── transformers: the same file, parity, then generate at the RL shape ──
  import torch  # pylint: disable=g-import-not-at-top

  model = hf_model(path)
  checks = parity(policy, model, rows[:4], args.parity_tokens)
  hf = hf_generate(
    model,
    rows,
    pad,
    do_sample=True,
    temperature=1.0,
    top_k=None,
    top_p=None,
    max_new_tokens=n,
    min_new_tokens=n,
    num_return_sequences=g,
  )
  hf_generate(model, rows, pad, do_sample=True, max_new_tokens=2, num_return_sequences=g)()  # warm-up, as our compile
  hf_times = []
  for _ in range(args.repeats):  # alternating with ours
    hf_times.append(common.timed(hf, repeats=1, warmup=0))
    if len(hf_times) > 1:
      sample_times.append(common.timed(ours_sample, repeats=1, warmup=0))

  tokens = args.prompts * g * n
  ours_s, hf_s = statistics.median(sample_times), statistics.median(hf_times)
  ours_u, plain_u = statistics.median(update_times["ours"]), statistics.median(update_times["plain"])
  figures = {
    "model": os.path.basename(path),
    "params": config.num_params(),
    "prompts": args.prompts,
    "group": g,
    "new_tokens": n,
    "prompt_tokens_max": int(lengths.max()),
    "sampler_tokens_per_s": tokens / ours_s,
    "hf_generate_tokens_per_s": tokens / hf_s,
    "sampler_speedup_vs_hf": hf_s / ours_s,
    "sampler_s": ours_s,
    "hf_generate_s": hf_s,
    "sampler_compile_s": sampler_compile_s,
    "train_step_s": ours_u,
    "plain_step_s": plain_u,
    "update_speedup_vs_plain": plain_u / ours_u,
    "update_compile_s": update_compile_s,
    "update_loss_abs_diff": loss_diff,
    "micro_batches": args.micro_batches,
    "peak_rss_gib": rss,
    "load_s": load_s,
    **checks,
    "repeats": args.repeats,
    "torch_threads": torch.get_num_threads(),
    "cpus": os.cpu_count(),
  }
  print(
    f"{figures['model']}: {config.num_layers} layers, d_model {config.d_model}, {config.num_heads} heads "
    f"({config.num_kv_heads} KV), vocab {config.vocab_size}, {config.num_params() / 1e6:.1f} M params, float32; "
    f"{args.prompts} chat prompts (≤ {int(lengths.max())} tokens) × G={g}, {n} new tokens at T=1; "
    f"{jax.device_count()} JAX device(s), torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs"
  )
  common.print_table(
    ["side", "median s", "tokens/s", "speed-up"],
    [
      ["arena_jax Sampler", ours_s, figures["sampler_tokens_per_s"], figures["sampler_speedup_vs_hf"]],
      ["transformers generate", hf_s, figures["hf_generate_tokens_per_s"], 1.0],
      [
        "arena_jax CISPO update",
        ours_u,
        args.prompts * g * (int(lengths.max()) + n) / ours_u,
        figures["update_speedup_vs_plain"],
      ],
      ["plain jitted update", plain_u, args.prompts * g * (int(lengths.max()) + n) / plain_u, 1.0],
    ],
  )
  print(
    f"load {load_s:.1f}s, peak RSS {rss:.2f} GiB; logits max |Δ| {checks['logits_max_abs_diff']:.2e} on a scale "
    f"of {checks['logit_scale']:.1f}; greedy tokens equal {checks['greedy_match']:.3f}"
  )
  if out_path:
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
      f.write(json.dumps(figures) + "\n")
  common.emit_json(figures)
  return figures


if __name__ == "__main__":
  main()
