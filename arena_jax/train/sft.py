"""SFT warm start: the base policy of the embedded default, trained on #4's demonstrations (issue #6).

    summary = train_sft(get_config())     # get_config of configs/sft.py; or: python -m launch.sft

Pipeline (one call, deterministic given `config.seed`):
  1. a SentencePiece tokenizer trained on `tasks.corpus` (newlines preserved: SPEC §8 steps are
     separated by blank lines, so "\\n" must survive tokenisation);
  2. the demonstrations `tasks.sft_demonstrations`, encoded as BOS + prompt | completion + EOS;
  3. a small decoder (`config.model`, default the `demo` config below) trained with AdamW on the
     completion tokens only (the prompt is context, not target). The loss is the exact token mean
     over the batch,  L = Σ_{b,t} m_{b,t} · (−log p_θ(y_{b,t} | y_{b,<t})) / Σ_{b,t} m_{b,t},
     computed as (sum, denominator) (STYLE §5);
  4. held-out evaluation (`arena_jax.eval.evaluate`) on the test split of `tasks.train_task`;
  5. `save_policy` to `config.output_dir`.

The base policy should be *mixed*: roughly 20–70% held-out accuracy, so that sampled groups of G
come out all-correct, all-wrong and diverse (SPEC §1); the demo config is sized for that and for
≤ ~3 minutes on two CPU cores. The result is cached: when `output_dir` holds a policy whose stored
SFT config equals the requested one, `train_sft` returns its summary without training.
"""
from __future__ import annotations

import itertools
import json
import math
import pathlib
import time
from typing import Iterator

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from arena_jax import tasks
from arena_jax.eval import accuracy
from arena_jax.models import MODEL_CONFIGS, ModelConfig, chunked_logprobs, get_model_config, init_model
from arena_jax.sampling import bucket_length
from arena_jax.tokenizer import SentencePieceTokenizer
from arena_jax.train import policy_io

# Fields that say where things go or how they are shown, not what is trained: a change to them
# keeps the cache valid.
_NON_SEMANTIC = (("output_dir",), ("progress",), ("log_every",), ("tasks", "data_dir"))


def demo_config() -> ModelConfig:
  """The demo policy: 2 layers, d_model 128, 4 heads of 32 (2 KV heads), SwiGLU 384, vocab 256,
  tied embeddings, float32; ≈0.43 M parameters. Smaller than `tiny` so that SFT and the RL demo fit
  two CPU cores: at equal wall time it matched 3- and 4-layer variants on held-out accuracy (it
  takes ~2.3× the steps per second of 4 layers)."""
  return ModelConfig(
      vocab_size=256, d_model=128, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=32, mlp_dim=384,
      rope_theta=10_000.0, rms_norm_eps=1e-6, tie_embeddings=True, max_position_embeddings=512)


if "demo" not in MODEL_CONFIGS:  # (re-imports, e.g. importlib.reload, must not re-register)
  MODEL_CONFIGS["demo"] = demo_config


# ─────────────────────────────────────── config ───────────────────────────────────────


def _fail(field: str, message: str):
  raise ValueError(f"config.{field}: {message}")


def _check_int(field, value, lo):
  if isinstance(value, bool) or not isinstance(value, int) or value < lo:
    _fail(field, f"must be an integer ≥ {lo}, got {value!r}")


def _check_number(field, value, lo, hi=math.inf, lo_open=False):
  ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
  ok = ok and (value > lo if lo_open else value >= lo) and value <= hi
  if not ok:
    _fail(field, f"must be a number in {'(' if lo_open else '['}{lo}, {hi}], got {value!r}")


def validate_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Checks the SFT config once, up front; ValueError names the field and what to change."""
  if not isinstance(config.output_dir, str) or not config.output_dir:
    _fail("output_dir", f"must be a directory path, got {config.output_dir!r}")
  _check_int("seed", config.seed, 0)
  if config.model.name not in MODEL_CONFIGS:
    _fail("model.name", f"unknown model config {config.model.name!r}; registered: {sorted(MODEL_CONFIGS)}")
  try:
    model_config(config)
  except ValueError as e:
    _fail("model", str(e))
  _check_int("tokenizer.vocab_size", config.tokenizer.vocab_size, 16)
  if config.tokenizer.max_corpus_examples is not None:
    _check_int("tokenizer.max_corpus_examples", config.tokenizer.max_corpus_examples, 1)
  if config.tokenizer.model_type not in ("bpe", "unigram"):
    _fail("tokenizer.model_type", f"must be 'bpe' or 'unigram', got {config.tokenizer.model_type!r}")
  tasks.validate_config(config.tasks, prefix="config.tasks")
  if config.tasks.train_task not in config.tasks.sft.tasks:
    _fail("tasks.train_task", f"{config.tasks.train_task!r} is evaluated after SFT but is not among "
          f"tasks.sft.tasks {tuple(config.tasks.sft.tasks)}")
  if config.num_demonstrations is not None:
    _check_int("num_demonstrations", config.num_demonstrations, 1)
  _check_int("num_steps", config.num_steps, 1)
  _check_int("batch_size", config.batch_size, 1)
  _check_int("warmup_steps", config.warmup_steps, 0)
  if config.warmup_steps >= config.num_steps:
    _fail("warmup_steps", f"must be < num_steps ({config.num_steps}), got {config.warmup_steps}")
  _check_number("learning_rate", config.learning_rate, 0.0, 1.0, lo_open=True)
  _check_number("min_lr_ratio", config.min_lr_ratio, 0.0, 1.0)
  _check_number("weight_decay", config.weight_decay, 0.0)
  _check_number("b1", config.b1, 0.0, 1.0)
  _check_number("b2", config.b2, 0.0, 1.0)
  _check_number("grad_clip", config.grad_clip, 0.0)
  buckets = tuple(config.seq_buckets)
  if not buckets or any(isinstance(b, bool) or not isinstance(b, int) or b < 8 for b in buckets):
    _fail("seq_buckets", f"must be a non-empty tuple of integers ≥ 8, got {buckets!r}")
  e = config.eval
  _check_int("eval.num_examples", e.num_examples, 0)
  _check_int("eval.num_samples", e.num_samples, 0)
  _check_number("eval.temperature", e.temperature, 0.0, lo_open=True)
  _check_int("eval.max_new_tokens", e.max_new_tokens, 1)
  _check_int("eval.batch_size", e.batch_size, 1)
  _check_int("log_every", config.log_every, 1)
  return config


def model_config(config: ml_collections.ConfigDict) -> ModelConfig:
  """The named model config with the non-None overrides of `config.model`; vocab = the tokenizer's."""
  overrides = {k: v for k, v in config.model.items() if k != "name" and v is not None}
  return get_model_config(config.model.name, vocab_size=config.tokenizer.vocab_size, **overrides)


def config_fingerprint(config: ml_collections.ConfigDict) -> dict:
  """The config as plain JSON data, without the fields that do not change the trained policy, plus
  the resolved model config (so that editing a named model config invalidates the cache too)."""
  d = json.loads(config.to_json_best_effort(sort_keys=True))
  for path in _NON_SEMANTIC:
    node = d
    for key in path[:-1]:
      node = node.get(key, {})
    node.pop(path[-1], None)
  d["resolved_model"] = json.loads(policy_io.config_to_json(model_config(config)))
  return d


def _diff(a, b, prefix=""):
  if isinstance(a, dict) and isinstance(b, dict):
    return [k for key in sorted(set(a) | set(b)) for k in _diff(a.get(key), b.get(key), f"{prefix}{key}.")]
  return [] if a == b else [prefix.rstrip(".")]


# ─────────────────────────────────────── data ───────────────────────────────────────


class SftData:
  """Encoded demonstrations: BOS + prompt (context) and completion + EOS (targets)."""

  def __init__(self, tokenizer, demos):
    prompts = tokenizer.encode([d.prompt for d in demos], add_bos=True)
    completions = tokenizer.encode([d.completion for d in demos], add_eos=True)
    self.sequences = [np.asarray(p + c, np.int32) for p, c in zip(prompts, completions)]
    self.prompt_lengths = np.asarray([len(p) for p in prompts], np.int32)
    # A sequence of L tokens gives L − 1 (input, target) pairs.
    self.lengths = np.asarray([len(s) - 1 for s in self.sequences], np.int32)
    self.num_completion_tokens = int(sum(len(c) for c in completions))

  def __len__(self):
    return len(self.sequences)

  def batch(self, indices: np.ndarray, buckets: tuple[int, ...], pad_id: int):
    """(inputs, targets int32 [B, T], loss mask bool [B, T]), T = the smallest bucket ≥ the longest.

    Target t is token t + 1; it is a completion token (masked in) iff t + 1 ≥ the prompt length.
    """
    t = bucket_length(int(self.lengths[indices].max()), buckets)
    b = len(indices)
    inputs = np.full((b, t), pad_id, np.int32)
    targets = np.full((b, t), pad_id, np.int32)
    mask = np.zeros((b, t), bool)
    for row, i in enumerate(indices):
      s, n = self.sequences[i], self.lengths[i]
      inputs[row, :n], targets[row, :n] = s[:-1], s[1:]
      mask[row, self.prompt_lengths[i] - 1:n] = True
    return inputs, targets, mask


def batch_indices(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                  group_batches: int = 16) -> Iterator[np.ndarray]:
  """Endless shuffled batches, grouped by length to cut padding.

  Each epoch: a random permutation, cut into windows of `group_batches` batches; each window is
  sorted by length and cut into batches; the batches of the epoch are shuffled. A batch is thus
  a random draw among examples of similar length (the bucketing of gemma's `_prefill.py`, applied
  to training). An epoch's last partial batch is dropped, so every batch has `batch_size` rows.
  """
  n = len(lengths)
  if n < batch_size:
    raise ValueError(f"only {n} demonstrations for batch_size {batch_size}: raise tasks.*.num_train "
                     "or lower batch_size")
  while True:
    perm = rng.permutation(n)
    batches = []
    window = batch_size * group_batches
    for start in range(0, n, window):
      chunk = perm[start:start + window]
      chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
      batches += [chunk[i:i + batch_size] for i in range(0, len(chunk) - batch_size + 1, batch_size)]
    for j in rng.permutation(len(batches)):
      yield batches[j]


# ─────────────────────────────────────── loss & step ───────────────────────────────────────


def sft_loss(model, inputs: jax.Array, targets: jax.Array, loss_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(Σ masked −log p_θ(target), Σ mask): negative log-likelihood of the completion tokens.

  inputs, targets int [B, T] (targets = inputs shifted by one), loss_mask bool [B, T]. Right padding
  needs no attention mask: under causal attention no real position sees a later pad.
  """
  h = model.hidden(inputs)
  lp, _ = chunked_logprobs(h, model.output_projection(), targets)
  m = loss_mask.astype(jnp.float32)
  return -jnp.sum(lp * m), jnp.sum(m)


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """AdamW with linear warm-up and cosine decay, global-norm clipping, no decay on vectors (norms)."""
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=config.learning_rate, warmup_steps=config.warmup_steps,
      decay_steps=config.num_steps, end_value=config.learning_rate * config.min_lr_ratio)
  decay_mask = lambda params: jax.tree.map(lambda x: x.ndim >= 2, params)
  adamw = optax.adamw(schedule, b1=config.b1, b2=config.b2, weight_decay=config.weight_decay, mask=decay_mask)
  return optax.chain(optax.clip_by_global_norm(config.grad_clip), adamw) if config.grad_clip > 0 else adamw


def make_train_step(graphdef, optimizer: optax.GradientTransformation):
  """The jitted step (params, opt_state, inputs, targets, mask) → (params, opt_state, metrics);
  params and optimizer state are donated (updated in place)."""

  def step(params, opt_state, inputs, targets, mask):
    def loss_fn(p):
      total, count = sft_loss(nnx.merge(graphdef, p), inputs, targets, mask)
      return total / jnp.maximum(count, 1.0), count

    (loss, count), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, {"loss": loss, "tokens": count, "grad_norm": optax.tree.norm(grads)}

  return jax.jit(step, donate_argnums=(0, 1))


# ─────────────────────────────────────── the run ───────────────────────────────────────


def train_sft(config: ml_collections.ConfigDict, workdir: str | None = None) -> dict:
  """Trains (or finds cached) the SFT policy; returns its summary (see module docstring).

  Args:
    config: an SFT config (`configs/sft.py`).
    workdir: the policy directory, overriding `config.output_dir`.

  Returns:
    A JSON-able dict: cached, output_dir, wall_time_s (this call) and, from the training run,
    run_time_s (data + training + evaluation), data_time_s, train_time_s, eval_time_s, num_params,
    tokenizer_vocab_size, num_demonstrations, epochs, loss_first, loss_final, loss_history
    [(step, mean loss)], eval {greedy_accuracy, mean_pass_ratio, pass@k, frac_all_correct,
    frac_all_wrong, frac_diverse, …} (`flatten_metrics` keys).

  Raises:
    ValueError: an invalid config (naming the field).
    FloatingPointError: a non-finite loss.
  """
  start = time.time()
  validate_config(config)
  out = pathlib.Path(workdir or config.output_dir).expanduser().absolute()
  fingerprint = config_fingerprint(config)

  # ── cache ──
  if policy_io.is_policy_dir(out):
    meta = policy_io.read_meta(out)
    stored = meta.get("sft_config")
    if stored == fingerprint:
      logging.info("SFT: %s already holds the policy of this config; not training (delete it to retrain)", out)
      return dict(meta.get("sft_summary", {}), cached=True, output_dir=str(out), wall_time_s=time.time() - start)
    differs = _diff(stored, fingerprint) if isinstance(stored, dict) else ["(no stored SFT config)"]
    logging.warning("SFT: %s holds a policy of another config (differs in %s); retraining", out, ", ".join(differs))

  # ── data & tokenizer ──
  t0 = time.time()
  tokenizer = SentencePieceTokenizer.train(
      tasks.corpus(config.tasks, config.tokenizer.max_corpus_examples), config.tokenizer.vocab_size,
      model_type=config.tokenizer.model_type, seed=config.seed)
  mconfig = model_config(config)
  tokenizer.check_vocab(mconfig.vocab_size)
  demos = list(itertools.islice(tasks.sft_demonstrations(config.tasks), config.num_demonstrations))
  data = SftData(tokenizer, demos)
  buckets = tuple(sorted(set(config.seq_buckets)))
  if data.lengths.max() > buckets[-1]:
    longest = int(-(-data.lengths.max() // 16) * 16)
    logging.warning("SFT: the longest demonstration has %d tokens > the largest of seq_buckets %s; adding "
                    "a bucket of %d", data.lengths.max(), buckets, longest)
    buckets += (longest,)
  data_time = time.time() - t0
  logging.info("SFT: %d demonstrations (%d completion tokens), tokenizer of %d pieces, %.1fs",
               len(data), data.num_completion_tokens, tokenizer.vocab_size, data_time)

  # ── model & optimizer ──
  model = init_model(mconfig, seed=config.seed)
  graphdef = nnx.graphdef(model)
  params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  del model
  optimizer = make_optimizer(config)
  opt_state = optimizer.init(params)
  train_step = make_train_step(graphdef, optimizer)
  num_params = int(sum(x.size for x in jax.tree.leaves(params)))
  logging.info("SFT: model %s (%d parameters), %d steps of %d", config.model.name, num_params, config.num_steps,
               config.batch_size)

  # ── loop ──
  t0 = time.time()
  batches = batch_indices(data.lengths, config.batch_size, np.random.default_rng(config.seed))
  history, window, pending = [], [], None
  from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top  (display only)

  bar = tqdm.tqdm(total=config.num_steps, desc="sft", unit="step", disable=not config.progress, dynamic_ncols=True)

  def record(step, metrics):
    loss = float(metrics["loss"])
    if not math.isfinite(loss):
      raise FloatingPointError(
          f"SFT loss is {loss} at step {step} (grad norm {float(metrics['grad_norm']):.3g}): lower "
          f"config.learning_rate (now {config.learning_rate}) or raise config.warmup_steps")
    window.append(loss)
    if step % config.log_every == 0 or step == config.num_steps:
      history.append((step, float(np.mean(window))))
      bar.set_postfix(loss=f"{history[-1][1]:.4f}")
      window.clear()
    bar.update(1)

  try:
    for step in range(1, config.num_steps + 1):
      inputs, targets, mask = data.batch(next(batches), buckets, tokenizer.pad_id)
      params, opt_state, metrics = train_step(params, opt_state, inputs, targets, mask)
      if pending is not None:  # read step t − 1's metrics while step t runs
        record(*pending)
      pending = (step, metrics)
    record(*pending)
  finally:
    bar.close()
  train_time = time.time() - t0
  model = nnx.merge(graphdef, params)

  # ── evaluate ──
  t0 = time.time()
  eval_metrics = {}
  if config.eval.num_examples > 0:
    with tasks.get_task(config.tasks.train_task, config.tasks) as task:
      examples = list(itertools.islice(task.generate("test"), config.eval.num_examples))
      e = config.eval
      eval_metrics = accuracy.flatten_metrics(accuracy.evaluate(
          model, tokenizer, task, examples, num_samples=e.num_samples, temperature=e.temperature,
          max_new_tokens=e.max_new_tokens, batch_size=e.batch_size, rng=jax.random.key(config.seed)))
  eval_time = time.time() - t0

  summary = {
      "output_dir": str(out), "num_params": num_params, "model": config.model.name,
      "tokenizer_vocab_size": tokenizer.vocab_size, "num_demonstrations": len(data),
      "num_steps": config.num_steps, "epochs": config.num_steps * config.batch_size / len(data),
      "loss_first": history[0][1], "loss_final": history[-1][1], "loss_history": history,
      "data_time_s": data_time, "train_time_s": train_time, "eval_time_s": eval_time,
      "eval": eval_metrics, "run_time_s": time.time() - start,
  }
  # ── save ──
  policy_io.save_policy(out, params, mconfig, tokenizer, add_bos=True,
                        extra={"sft_config": fingerprint, "sft_summary": summary})
  summary.update(cached=False, wall_time_s=time.time() - start)
  logging.info("SFT: done in %.0fs, loss %.4f → %.4f, held-out %s", summary["wall_time_s"], summary["loss_first"],
               summary["loss_final"], {k: round(v, 3) for k, v in eval_metrics.items()})
  return summary
