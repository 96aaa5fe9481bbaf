"""Accuracy of a policy on a task's examples: greedy accuracy, mean pass ratio@k, unbiased pass@k.

For each example x, n = `num_samples` completions are sampled at temperature T and verified,
c(x) = the number that are correct (the task's verifier, SPEC §1). Reported:

    mean_pass_ratio = mean_x c(x) / n          (SPEC §9: "mean pass ratio@16 = mean accuracy over 16 samples")
    pass@k          = mean_x [1 − C(n − c, k) / C(n, k)],   k ≤ n     (Chen et al. 2021, "Evaluating Large
                                                                      Language Models Trained on Code", eq. 1)

and the group composition the router sees at G = n (SPEC §1, §3): the fractions of examples whose n
samples are all correct, all wrong, or diverse (reward variance > 0). Greedy accuracy is one greedy
decode per example. Sampling uses `arena_jax.sampling.Sampler`; samplers are cached by their static
arguments, so calling `evaluate` every few hundred steps (a checkpoint watcher) compiles once. With a
`mesh` the sampler runs sharded (an 8B policy over the devices of a slice): parameters by their logical
axes, prompts over the batch shards; the same key gives the same tokens as on one device.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh
from tqdm import auto as tqdm

from arena_jax import tasks
from arena_jax.models import ModelConfig, Transformer, sampling_config
from arena_jax.models.sharding import LOGICAL_AXIS_RULES, num_batch_shards
from arena_jax.sampling.methods import Greedy, RandomSampling
from arena_jax.sampling.sampler import Sampler


def pass_at_k(n: int | np.ndarray, c: int | np.ndarray, k: int) -> np.ndarray:
  """Unbiased pass@k estimate 1 − C(n−c, k)/C(n, k) per problem (Chen et al. 2021, eq. 1).

  Computed as 1 − Π_{i=n−c+1}^{n} (1 − k/i), the numerically stable product form of their
  reference code. Requires 1 ≤ k ≤ n. Returns float64 with the broadcast shape of n and c.
  """
  n, c = np.broadcast_arrays(np.asarray(n, np.int64), np.asarray(c, np.int64))
  if np.any(c < 0) or np.any(c > n):
    raise ValueError("pass_at_k: need 0 ≤ c ≤ n")
  if k < 1 or np.any(k > n):
    raise ValueError(f"pass_at_k: need 1 ≤ k ≤ n (k={k}, n up to {int(n.max(initial=0))})")
  out = np.empty(n.shape, np.float64)
  for idx in np.ndindex(n.shape):
    ni, ci = int(n[idx]), int(c[idx])
    if ni - ci < k:  # every k-subset holds a correct sample
      out[idx] = 1.0
    else:
      out[idx] = 1.0 - float(np.prod(1.0 - k / np.arange(ni - ci + 1, ni + 1)))
  return out


def default_ks(n: int) -> tuple[int, ...]:
  """1, 2, 4, … up to n, and n itself."""
  ks = [2**i for i in range(int(math.log2(n)) + 1)] if n >= 1 else []
  return tuple(sorted(set(ks + ([n] if n >= 1 else []))))


@functools.lru_cache(maxsize=32)
def _sampler(
  config: ModelConfig, max_new_tokens: int, num_samples: int, method, stop: int, pad: int, mesh: Mesh | None, rules
) -> Sampler:
  return Sampler(
    config=config,
    max_new_tokens=max_new_tokens,
    num_samples=num_samples,
    method=method,
    stop_tokens=(stop,),
    pad_id=pad,
    mesh=mesh,
    rules=rules,
  )


def _rules(rules) -> tuple[tuple[str, Any], ...]:
  """Logical-axis rules as a hashable tuple (a cache key): lists of mesh axes become tuples."""
  if rules is None:
    return LOGICAL_AXIS_RULES
  return tuple((name, tuple(axes) if isinstance(axes, list) else axes) for name, axes in rules)


def round_batch_size(batch_size: int, mesh: Mesh | None = None, rules=None) -> int:
  """`batch_size` rounded up to a multiple of the mesh's batch shards (data × fsdp under the default
  rules; 1 without a mesh): the prompts `generate` and `evaluate` send per sampler call."""
  shards = num_batch_shards(mesh, _rules(rules))
  return -(-int(batch_size) // shards) * shards


def _in_vocab(tokens: np.ndarray, tokenizer) -> np.ndarray:
  """Ids the tokenizer does not have (the model's vocab_size may exceed it) → UNK, so that an
  untrained policy's samples decode (as garbage) instead of failing."""
  unk = getattr(tokenizer, "unk_id", None)
  unk = tokenizer.pad_id if unk is None or unk < 0 else unk
  return np.where(tokens < tokenizer.vocab_size, tokens, unk)


def generate(
  model: Transformer | Any,
  tokenizer,
  prompts: Sequence[Sequence[int]],
  *,
  num_samples: int,
  method,
  max_new_tokens: int,
  batch_size: int,
  rng: jax.Array,
  config: ModelConfig | None = None,
  on_batch=None,
  mesh: Mesh | None = None,
  rules=None,
) -> tuple[list[str], np.ndarray, np.ndarray]:
  """Samples `num_samples` completions per prompt, `batch_size` prompts per sampler call.

  The last batch is padded with copies of its last prompt (their samples are dropped) so every call
  has the same shape. Batch i uses `fold_in(rng, i)`; `on_batch()` is called after each (progress).
  With a `mesh` (logical-axis `rules`, default `LOGICAL_AXIS_RULES`) the sampler runs sharded and
  `batch_size` is rounded up to a multiple of the mesh's batch shards (`round_batch_size`): the
  sampler would pad each call to that multiple with filler rows anyway, so real prompts take those
  slots. A row's tokens depend on the key and its index in its call only, not on the mesh.

  Returns (texts [P·n] decoded up to EOS, lengths int [P·n] in tokens, truncated bool [P·n]); rows
  p·n … p·n + n − 1 are prompt p's samples.
  """
  # Decodes a compute-dtype copy of the weights (float32 masters under bfloat16 compute: cast once here).
  config = sampling_config(config or model.config)
  rules = _rules(rules)
  batch_size = round_batch_size(batch_size, mesh, rules)
  sampler = _sampler(
    config, int(max_new_tokens), int(num_samples), method, tokenizer.eos_id, tokenizer.pad_id, mesh, rules
  )
  params = sampler.shard_params(model)
  texts, lengths, truncated = [], [], []
  for i, start in enumerate(range(0, len(prompts), batch_size)):
    batch = list(prompts[start : start + batch_size])
    real = len(batch)
    batch += [batch[-1]] * (batch_size - real)
    out = sampler(params, batch, jax.random.fold_in(rng, i))
    rows = real * num_samples
    tokens, lens = np.asarray(out.tokens[:rows]), np.asarray(out.lengths[:rows])
    texts += tokenizer.decode_batch(_in_vocab(tokens, tokenizer), lens)
    lengths.append(lens)
    truncated.append(np.asarray(out.truncated[:rows]))
    if on_batch is not None:
      on_batch()
  return texts, np.concatenate(lengths), np.concatenate(truncated)


def sampling_options(section) -> dict:
  """`evaluate`'s sampling arguments from a config section that declares them (the evaluator's config,
  SFT's `eval`): num_samples, temperature, max_new_tokens, batch_size."""
  return {k: section[k] for k in ("num_samples", "temperature", "max_new_tokens", "batch_size")}


def evaluate(
  model: Transformer | Any,
  tokenizer,
  task,
  examples: Sequence[Any],
  *,
  num_samples: int = 8,
  temperature: float = 1.0,
  max_new_tokens: int = 128,
  batch_size: int = 64,
  rng: jax.Array | None = None,
  greedy: bool = True,
  ks: Sequence[int] | None = None,
  add_bos: bool = True,
  config: ModelConfig | None = None,
  return_details: bool = False,
  progress: str | None = None,
  process: bool = True,
  mesh: Mesh | None = None,
  rules=None,
) -> dict:
  """Greedy accuracy, mean pass ratio@n, pass@k and response length of a policy on `examples`.

  Args:
    model: a `Transformer` (or its params / pure dict, with `config`).
    tokenizer: the policy's tokenizer (EOS stops a completion).
    task: an `arena_jax.tasks.Task` (prompt formatting and verifier).
    examples: the examples (e.g. `tasks.load_split(cfg, "arithmetic", "test")[:500]`).
    num_samples: n samples per example at `temperature` (0 = no sampled evaluation).
    temperature: sampling temperature of the n samples.
    max_new_tokens: completion budget; a truncated completion is scored as it is.
    batch_size: prompts per sampler call (the sampled call decodes batch_size · n rows); with a mesh,
      rounded up to a multiple of its batch shards (`round_batch_size`).
    rng: a `jax.random.key` (default key 0).
    greedy: also decode each example greedily.
    ks: the k of pass@k (each ≤ n; default 1, 2, 4, … n).
    add_bos: prompts start with BOS (the policy's convention, `Policy.add_bos`).
    config: the model config when `model` is bare parameters.
    return_details: add per-example `rewards` [E, n], `greedy_rewards` [E] and the completions.
    progress: a progress bar with this description (sampler calls, with an ETA); None = silent.
    process: add the process metrics of tasks with a process checker (`Task.process_metrics`).
    mesh: sample sharded on this mesh (e.g. `parallel.mesh_for_eval`'s), the parameters placed on it by
      their logical axes (`Sampler.shard_params`; already there, e.g. `Checkpointer.restore_params` onto
      `parallel.abstract_params(config, mesh, rules)`: only cast); None = the default device.
    rules: the logical-axis rules of `mesh` (default `LOGICAL_AXIS_RULES`).

  Returns:
    A dict: num_examples; greedy_accuracy, greedy_response_length (if greedy); and with n ≥ 1:
    mean_pass_ratio, pass_at_k {k: value}, mean_response_length, truncated_fraction, and
    frac_all_correct / frac_all_wrong / frac_diverse of the n-sample groups. For a task with a process
    checker (and `process`): the `tasks.process.PROCESS_METRICS` of the n samples (faithful_accuracy,
    compensating_rate, …) with all_correct_flawed / all_wrong_error_spread of their groups, and
    greedy_faithful_accuracy etc. of the greedy completions.
  """
  if len(examples) == 0:
    raise ValueError("evaluate: no examples")
  if not greedy and num_samples < 1:
    raise ValueError("evaluate: nothing to do (greedy=False and num_samples=0)")
  rng = jax.random.key(0) if rng is None else rng
  examples = list(examples)
  prompts = tokenizer.encode(task.prompt_texts(examples, tokenizer), add_bos=add_bos and not task.chat)
  calls = -(-len(examples) // round_batch_size(batch_size, mesh, rules)) * (int(greedy) + int(num_samples >= 1))
  bar = tqdm.tqdm(total=calls, desc=progress, unit="batch", disable=progress is None, dynamic_ncols=True, leave=False)
  common = dict(
    max_new_tokens=max_new_tokens,
    batch_size=batch_size,
    config=config,
    on_batch=bar.update,
    mesh=mesh,
    rules=rules,
  )
  result: dict[str, Any] = {"num_examples": len(examples)}
  details: dict[str, Any] = {}

  if greedy:
    texts, lengths, _ = generate(
      model, tokenizer, prompts, num_samples=1, method=Greedy(), rng=jax.random.fold_in(rng, 0), **common
    )
    rewards = np.asarray(task.verify_batch(examples, texts), np.float64)
    result["greedy_accuracy"] = float(rewards.mean())
    result["greedy_accuracy_lo95"], result["greedy_accuracy_hi95"] = wilson_interval(float(rewards.sum()), len(rewards))
    result["greedy_response_length"] = float(lengths.mean())
    if process and getattr(task, "has_process_checker", False):
      result.update({f"greedy_{k}": v for k, v in task.process_metrics(examples, texts, rewards).items()})
    details.update(greedy_rewards=rewards, greedy_completions=texts)

  if num_samples >= 1:
    n = int(num_samples)
    texts, lengths, truncated = generate(
      model,
      tokenizer,
      prompts,
      num_samples=n,
      method=RandomSampling(temperature=float(temperature)),
      rng=jax.random.fold_in(rng, 1),
      **common,
    )
    repeated = [e for e in examples for _ in range(n)]
    rewards = np.asarray(task.verify_batch(repeated, texts), np.float64).reshape(len(examples), n)
    correct = rewards.sum(axis=1).round().astype(np.int64)
    ks = default_ks(n) if ks is None else tuple(int(k) for k in ks)
    result["mean_pass_ratio"] = float(rewards.mean())
    # Its 95% interval over problems (the problems are the sampled units; each one's n samples are not independent
    # of it): mean ± 1.96 × the standard error of the per-problem pass ratios.
    half = 1.96 * float(rewards.mean(axis=1).std(ddof=1)) / np.sqrt(len(examples)) if len(examples) > 1 else 0.0
    result["mean_pass_ratio_lo95"] = max(0.0, result["mean_pass_ratio"] - half)
    result["mean_pass_ratio_hi95"] = min(1.0, result["mean_pass_ratio"] + half)
    result["pass_at_k"] = {k: float(pass_at_k(n, correct, k).mean()) for k in ks}
    result["mean_response_length"] = float(lengths.mean())
    result["truncated_fraction"] = float(truncated.mean())
    # The router's view of a group of n (SPEC §1): diverse iff the rewards are not all equal.
    result["frac_all_correct"] = float(np.mean(correct == n))
    result["frac_all_wrong"] = float(np.mean(correct == 0))
    result["frac_diverse"] = float(np.mean((correct > 0) & (correct < n)))
    # The judge's room in the groups the router sends it: distinct traces per non-diverse group.
    non_diverse = (correct == 0) | (correct == n)
    if non_diverse.any():
      result["distinct_per_non_diverse_group"] = float(tasks.distinct_traces(texts, n)[non_diverse].mean())
    if process and getattr(task, "has_process_checker", False):
      result.update(task.process_metrics(repeated, texts, rewards.reshape(-1), group_size=n))
    details.update(rewards=rewards, completions=texts)

  bar.close()
  if return_details:
    result.update(details)
  return result


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
  """The Wilson score interval (95% at z = 1.96) of a proportion: honest at small n and at 0 or n successes,
  where the normal approximation collapses to a point."""
  if n <= 0:
    return 0.0, 1.0
  p = successes / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def flatten_metrics(result: dict, prefix: str = "") -> dict[str, float]:
  """`evaluate`'s scalars as one flat dict for a metrics writer: pass_at_k → `pass@k` keys."""
  flat = {}
  for key, value in result.items():
    if key == "pass_at_k":
      flat.update({f"{prefix}pass@{k}": v for k, v in value.items()})
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
      flat[prefix + key] = float(value)
  return flat
