"""Sampling methods (tiny frozen classes, as gemma's `_sampling.py`) and the logit filters they use.

A method turns float32 logits [B, V] and one uniform number per row, u [B] ∈ (0, 1), into next tokens
[B]. Sampling inverts the CDF of the (filtered, tempered) distribution at u, so a whole decode needs
only [N, B] uniforms, drawn once before the loop (on CPU a threefry call inside the loop costs more
than the sampling itself). Each method also names the temperature of
its **behaviour log-probs**: the sampler records log softmax(logits / T)[token] over the *full*
vocabulary, T = `logprob_temperature`. Top-k / top-p truncation is deliberately not reflected there:
the loss recomputes π_θ with the same T (`token_logprobs(..., temperature=T)`), so the CISPO ratio
(SPEC §2) is exactly 1 on-policy and measures only the policy's change, not the truncation.

`TokenChoice` is the sampling of one token that the prefill (token 0) and every decode step run: the logits
processor, the method, the behaviour log-prob and the greedy anchor. A new method is one class here, added to
`SamplingMethod`; nothing else changes.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

_NEG = -1e30


def apply_top_k(logits: jax.Array, k: int) -> jax.Array:
  """Keeps the k largest logits of each row (ties at the k-th value are kept); the rest → −1e30."""
  if k >= logits.shape[-1]:
    return logits
  kth = jax.lax.top_k(logits, k)[0][..., -1:]
  return jnp.where(logits >= kth, logits, _NEG)


def apply_top_p(logits: jax.Array, p: float) -> jax.Array:
  """Nucleus filter: keeps the smallest set of most likely tokens whose probability reaches p.

  A token is kept when the probability mass strictly above it is < p (so the top token always is).
  """
  sorted_logits = jnp.sort(logits, axis=-1)[..., ::-1]
  probs = jax.nn.softmax(sorted_logits, axis=-1)
  mass_before = jnp.cumsum(probs, axis=-1) - probs
  keep = mass_before < p
  # The smallest kept logit is the threshold; every logit ≥ it survives.
  threshold = jnp.min(jnp.where(keep, sorted_logits, jnp.inf), axis=-1, keepdims=True)
  return jnp.where(logits >= threshold, logits, _NEG)


def uniforms(rng: jax.Array, shape) -> jax.Array:
  """float32 uniforms in [tiny, 1): never 0, so `sample_categorical` never picks a zero-mass token."""
  return jax.random.uniform(rng, shape, jnp.float32, minval=jnp.finfo(jnp.float32).tiny)


def sample_categorical(logits: jax.Array, u: jax.Array) -> jax.Array:
  """One draw per row from softmax(logits) by inverse-CDF: the first index whose CDF reaches u·Z.

  Exact like the Gumbel-max trick (`jax.random.categorical`) but with one random number per row
  instead of one per vocabulary entry (~6× cheaper on CPU). With u ∈ (0, 1) the chosen index always
  has positive mass.
  """
  p = jnp.exp(logits - jnp.max(logits, axis=-1, keepdims=True))
  cdf = jax.lax.cumsum(p, axis=logits.ndim - 1)
  index = jnp.sum(cdf < u[..., None] * cdf[..., -1:], axis=-1)
  return jnp.minimum(index, logits.shape[-1] - 1).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class Greedy:
  """argmax decoding (temperature 0). Behaviour log-probs are taken at temperature 1."""

  @property
  def logprob_temperature(self) -> float:
    return 1.0

  def __call__(self, logits: jax.Array, u: jax.Array) -> jax.Array:
    del u
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class RandomSampling:
  """Ancestral sampling from softmax(logits / temperature), optionally top-k and/or top-p filtered.

  temperature == 0 is greedy decoding.
  """

  temperature: float = 1.0
  top_k: int | None = None
  top_p: float | None = None

  def __post_init__(self):
    if self.temperature < 0:
      raise ValueError(f"temperature must be ≥ 0 (got {self.temperature})")
    if self.top_k is not None and self.top_k < 1:
      raise ValueError(f"top_k must be ≥ 1 or None (got {self.top_k})")
    if self.top_p is not None and not 0 < self.top_p <= 1:
      raise ValueError(f"top_p must be in (0, 1] or None (got {self.top_p})")

  @property
  def logprob_temperature(self) -> float:
    return self.temperature if self.temperature > 0 else 1.0

  def __call__(self, logits: jax.Array, u: jax.Array) -> jax.Array:
    if self.temperature == 0:
      return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    logits = logits / self.temperature
    if self.top_k is not None:
      logits = apply_top_k(logits, self.top_k)
    if self.top_p is not None and self.top_p < 1:
      logits = apply_top_p(logits, self.top_p)
    return sample_categorical(logits, u)


SamplingMethod = Greedy | RandomSampling


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenChoice:
  """The next tokens of a batch of rows and their behaviour log-probs (see `SampleOutput.logprobs`), as the
  sampler chooses them at every step (`Sampler`'s fields of the same names).

  Attributes:
    method: the sampling method.
    num_samples: G: rows b·G … b·G+G−1 are prompt b's group (row b·G is its greedy anchor).
    greedy_first: decode each group's first row greedily (ArenaRL's anchor, SPEC §5).
    logits_processor: `f(logits [R, V], step, rows [R]) → logits`, applied first, or None.
  """

  method: SamplingMethod
  num_samples: int
  greedy_first: bool = False
  logits_processor: Callable[[jax.Array, jax.Array, jax.Array], jax.Array] | None = None

  def __call__(self, logits: jax.Array, u: jax.Array, step, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Next tokens [R] of the rows `rows` (indices b·G + i) at decode step `step`, and their behaviour
    log-probs [R]."""
    if self.logits_processor is not None:
      logits = self.logits_processor(logits, step, rows)
    tokens = self.method(logits, u)
    scaled = logits / self.method.logprob_temperature
    picked = jnp.take_along_axis(scaled, tokens[:, None], axis=-1)[:, 0]
    logprobs = picked - jax.nn.logsumexp(scaled, axis=-1)
    if self.greedy_first:
      # The anchor row was decoded greedily: its behaviour policy chose the argmax with probability 1,
      # so its behaviour log-prob is log 1 = 0, not the tempered policy's (CISPO's ratio for it is then
      # π_θ(o_t) itself, SPEC §2).
      greedy = (rows % self.num_samples) == 0
      tokens = jnp.where(greedy, jnp.argmax(logits, axis=-1).astype(jnp.int32), tokens)
      logprobs = jnp.where(greedy, 0.0, logprobs)
    return tokens, logprobs
