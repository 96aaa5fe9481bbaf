"""The jitted RL update: CISPO loss (SPEC §2) with exact gradient accumulation, AdamW, clipping.

A batch of R completion rows is split into `micro_batches` equal slices scanned in one jitted call:
each slice returns the gradient of its loss *sum* and its denominator (tokens or sequences), and the
summed gradient is divided by the summed denominator once, so the update equals the one of the whole
batch at once. The train state is donated.

With a reward mode, the update also routes and computes the advantages in the same jitted program:
it takes the step's verifier rewards [B, G], judge rewards [B, G] and judged mask [B] (`StepRewards`),
runs the mode's masked per-group combine (SPEC §3: `rl.route_rewards` for routed modes) and group
advantages (SPEC §1, §5), and trains minibatch k on rows k·R … (k+1)·R − 1 of them.

Packed rows (`rollout.pack_tokens`, `train.packing`): a `Rollout` with `packed` set runs the forward passes on
rows that hold several [prompt | completion] sequences each (segments, restarted positions) and gathers the
log-probs back to the [R, N] layout (`models.packed_token_logprobs`); the CISPO loss, its masks and its
(sum, denominator) aggregation are the padded update's, unchanged.

Precision (maxtext's weight_dtype / dtype): the state holds the master weights and the AdamW moments in
the params' storage dtype (float32 by default, `model.weight_dtype`); the forward and backward passes cast
each weight to the compute dtype where it is used (`ModelConfig.dtype`, bfloat16 in the real configs), and
gradients accumulate in float32. `update_effect`'s metrics say whether the update moved the stored weights;
`check_update_moves` stops the run at the first update at the peak learning rate that did not.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from arena_jax.errors import UserError
from arena_jax.models import LoraSpec, packed_token_logprobs, quantize_for_training, token_logprobs
from arena_jax.rl import cispo_loss, get_mode, metric_values
from arena_jax.sampling import model_from_params


class TrainState(NamedTuple):
  step: jax.Array
  params: Any
  opt_state: Any


class Rollout(NamedTuple):
  """The device inputs of one update, rows = completions: prompts [R, P], completions [R, N].

  `advantages` [R] is an input when the update has no reward mode (tests, SFT-style uses); with one it
  is computed inside the update from `StepRewards` and the field is ignored.

  `packed`: None (the padded layout), or the rows' `train.packing.PackedRows` ([K, Rb, L] packed rows in
  K = micro_batches × batch shards blocks): the forward passes then run on those, and `prompt_tokens` and
  `tokens` are not read.

  `stale`: None, or [R, N] bool: the tokens an older policy than the updated one sampled (the asynchronous
  loop); only reported (`ratio_dev/stale`, `ratio_dev/fresh`).
  """

  prompt_tokens: jax.Array
  prompt_lengths: jax.Array
  tokens: jax.Array
  mask: jax.Array
  old_logprobs: jax.Array
  advantages: jax.Array
  truncated: jax.Array
  packed: Any = None
  stale: Any = None


class StepRewards(NamedTuple):
  """The reward inputs of a routed update (SPEC §3): verifier [B, G], judge [B, G] (anything where not
  judged), judged [B] bool, and optionally scale [B, G], a factor on the computed advantages (1 = as
  computed; `reward.bt_shrinkage` shrinks uncertain judged trajectories toward zero)."""

  verifier: jax.Array
  judge: jax.Array
  judged: jax.Array
  scale: jax.Array | None = None


def _taken(cls, section):
  """`section` (a config section, or already a `cls`) as the frozen `cls`: each of its fields read once, now."""
  if isinstance(section, cls):
    return section
  return cls(**{f.name: getattr(section, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class LossSpec:
  """The CISPO loss's settings (`config.loss`, SPEC §2), taken once (`LossSpec.of`): what the traced update
  reads, never the live ConfigDict, so a config changed after the update was built cannot change its program."""

  eps_low: float
  eps_high: float
  aggregation: str
  mask_truncated: bool
  kl_coef: float

  @classmethod
  def of(cls, loss) -> LossSpec:
    return _taken(cls, loss)


@dataclasses.dataclass(frozen=True)
class OptimSpec:
  """The optimizer's settings (`config.optim`, read by `make_schedule` and `make_optimizer`), taken once."""

  lr: float
  warmup_steps: int
  b1: float
  b2: float
  eps: float
  weight_decay: float
  max_grad_norm: float

  @classmethod
  def of(cls, optim) -> OptimSpec:
    return _taken(cls, optim)


@dataclasses.dataclass(frozen=True)
class UpdateSpec:
  """Everything of a run's config that the RL update's program is a function of, frozen and hashable:
  both the key the program is shared under (`sharding.shared_train_step_fn`) and the only config its tracing
  reads. A field changed after the spec was taken makes another spec, another key and another program; it
  cannot change the program already keyed under this one. The model config, the mesh and the inputs' layout
  (packed rows, the staleness mask) are the program's other inputs, keyed beside the spec.
  """

  loss: LossSpec
  optim: OptimSpec
  micro_batches: int  # optim.micro_batches
  reward_mode: str  # reward.mode: the router and the advantages computed in the update (SPEC §1, §3, §5)
  reward_aggregation: str  # reward.aggregation: the mode's judge aggregation ("" = its own)
  std_ddof: int  # reward.std_ddof
  temperature: float  # of the behaviour log-probs the loss scores (the sampler's `logprob_temperature`)
  lora: LoraSpec | None = None  # model.lora: the update trains these adapters on frozen weights (None: full)

  @classmethod
  def from_config(cls, config, *, temperature: float) -> UpdateSpec:
    r = config.reward
    return cls(
      LossSpec.of(config.loss),
      OptimSpec.of(config.optim),
      config.optim.micro_batches,
      r.mode,
      r.aggregation,
      r.std_ddof,
      float(temperature),
      lora_spec(config.model.lora),
    )

  @property
  def use_reference(self) -> bool:
    """The KL penalty reads the reference policy's log-probs (`loss.kl_coef` > 0)."""
    return self.loss.kl_coef > 0

  def optimizer(self) -> optax.GradientTransformation:
    return make_optimizer(self.optim)

  def mode(self):
    """The update's `rl.RewardMode` (what the trainer's own is: `rl.get_mode` of the same fields)."""
    return get_mode(self.reward_mode, aggregation=self.reward_aggregation)


NONZERO = 1e-6  # |Â| above this counts as a signal (`adv/nonzero_fraction`, `judge/signal_rows`)


def judged_signal(mode, verifier, judged, advantages) -> dict:
  """The effective judged signal of a step, from the verifier rewards [B, G], the judged mask [B] and
  the advantages [B, G]: `judge/signal_rows`, the share of rows whose advantage comes from the judge
  (`mode.from_judge`) and is non-zero, and `judge/grad_share`, their share of Σ|Â| (the step's gradient weight
  before the token counts and the clip; 0 when every advantage is 0)."""
  rows = jnp.broadcast_to(mode.from_judge(verifier, judged)[..., None], advantages.shape)
  size = jnp.abs(advantages)
  return {
    "judge/signal_rows": (rows & (size > NONZERO)).mean(),
    "judge/grad_share": jnp.where(rows, size, 0.0).sum() / jnp.maximum(size.sum(), 1e-12),
  }


def lora_spec(lora) -> LoraSpec | None:
  """`config.model.lora` as a `models.LoraSpec`, or None at rank 0 (full-parameter training)."""
  if not lora.rank:
    return None
  return LoraSpec(rank=int(lora.rank), alpha=float(lora.alpha), targets=str(lora.targets))


def make_schedule(optim) -> optax.Schedule:
  """Linear warm-up from 0 to `optim.lr` over `optim.warmup_steps` updates, then constant (SPEC §9).
  Update n (0-based) uses schedule(n): the first update of a warm-up has learning rate 0. `optim`: `config.optim`
  or an `OptimSpec`."""
  if optim.warmup_steps:
    return optax.linear_schedule(0.0, optim.lr, optim.warmup_steps)
  return optax.constant_schedule(optim.lr)


def make_optimizer(optim) -> optax.GradientTransformation:
  """AdamW on `make_schedule`'s learning rate, with global-norm clipping."""
  # Without warm-up a plain float: the optimizer state then carries no schedule counter.
  schedule = make_schedule(optim) if optim.warmup_steps else optim.lr
  chain = []
  if optim.max_grad_norm > 0:
    chain.append(optax.clip_by_global_norm(optim.max_grad_norm))
  chain.append(optax.adamw(schedule, b1=optim.b1, b2=optim.b2, eps=optim.eps, weight_decay=optim.weight_decay))
  return optax.chain(*chain)


def init_state(params, optimizer) -> TrainState:
  return TrainState(jnp.asarray(0, jnp.int32), params, optimizer.init(params))


def make_update_fn(
  model_config,
  optimizer,
  loss_config,
  *,
  temperature: float,
  micro_batches: int,
  use_reference: bool,
  mode=None,
  std_ddof: int = 0,
  jit: bool = True,
  micro_batch_sharding=None,
  grad_sharding=None,
  lora=None,
):
  """Returns jitted `update(state, rollout, ref_params, rewards=None, minibatch=0) -> (state, metrics)`
  (state donated).

  LoRA (`lora`, a `models.AdaptedTemplate` of `model_config`): the state's params are the adapters alone, the
  optimizer's moments theirs, and `ref_params` is always the frozen base: the policy is the adapted model
  (the base and the adapters through Qwix, differentiated in the adapters only), and the KL reference
  (`use_reference`) is the base model, the policy the run started from.

  `loss_config` (`config.loss` or a `LossSpec`) is read once, here (`LossSpec.of`): tracing, which happens at
  the first call and again at each new input shape, reads that copy, not a config that may have changed since.

  With `mode` (an `rl.RewardMode`) and `rewards` (`StepRewards` of the whole step), the advantages of
  the rollout's rows are `mode.advantages(...)` rows [minibatch·R, (minibatch + 1)·R) (module docstring),
  and the metrics add `reward/trained`, `adv/nonzero_fraction` and `adv/l1` over the whole step.

  For a mesh (`arena_jax.train.sharding.train_step_fn`): `jit=False` returns the traceable function, to be
  jitted with shardings; `micro_batch_sharding` (a `Rollout` of shardings of the [micro_batches,
  R / micro_batches, …] split) keeps every micro-batch spread over the batch shards, and
  `grad_sharding` lays the gradient accumulator out like the parameters.
  """
  loss_config = LossSpec.of(loss_config)

  def logprobs(model, mb: Rollout, entropy: bool):
    """log π of the micro-batch's completion tokens [R / M, N] (and their entropy), padded or packed."""
    if mb.packed is None:
      return token_logprobs(
        model, mb.prompt_tokens, mb.prompt_lengths, mb.tokens, mb.mask, temperature=temperature, return_entropy=entropy
      )
    p = mb.packed
    # The micro-batch's blocks (one per batch shard): its rows [R / M] are blocks × rows per block.
    mask = mb.mask.reshape(p.row.shape + mb.mask.shape[1:])
    out = packed_token_logprobs(
      model, p.tokens, p.positions, p.segment_ids, p.row, p.start, mask, temperature=temperature, return_entropy=entropy
    )
    return jax.tree.map(lambda x: x.reshape(mb.mask.shape), out)

  def loss_fn(params, ref_params, mb: Rollout):
    if lora is not None:  # Qwix adds (α/r)·(x A) B beside each adapted projection of the frozen base
      model = lora.model(jax.lax.stop_gradient(ref_params), params)
    else:
      # With `model_config.quantization`, the projections and the MLP run as FP8 matmuls (the masters as they are).
      model = quantize_for_training(model_from_params(model_config, params))
    lp, entropy = logprobs(model, mb, True)
    ref_lp = None
    if use_reference:
      ref_model = quantize_for_training(model_from_params(model_config, ref_params))
      ref_lp = jax.lax.stop_gradient(logprobs(ref_model, mb, False))
    out = cispo_loss(
      lp,
      mb.old_logprobs,
      mb.advantages,
      mb.mask,
      eps_low=loss_config.eps_low,
      eps_high=loss_config.eps_high,
      aggregation=loss_config.aggregation,
      truncated=mb.truncated,
      mask_truncated=loss_config.mask_truncated,
      ref_logprobs=ref_lp,
      kl_coef=loss_config.kl_coef,
      entropy=entropy,
      stale=mb.stale,
    )
    return out.loss_sum, out

  grad_fn = jax.grad(loss_fn, has_aux=True)

  def route(rollout: Rollout, rewards: StepRewards, minibatch):
    """The masked per-group router and the advantages of this minibatch's rows (SPEC §1, §3, §5)."""
    r, adv = mode.advantages(rewards.verifier, rewards.judge, rewards.judged, ddof=std_ddof)
    if rewards.scale is not None:
      adv = adv * rewards.scale
    adv = adv.reshape(-1)
    rows = rollout.tokens.shape[0]
    mine = jax.lax.dynamic_slice_in_dim(adv, minibatch * rows, rows)
    values = {
      "reward/trained": r.mean(),
      "adv/nonzero_fraction": (jnp.abs(adv) > NONZERO).mean(),
      "adv/l1": jnp.abs(adv).mean(),
      **judged_signal(mode, rewards.verifier, rewards.judged, adv.reshape(r.shape)),
      # [B, G], for the trainer's sample of completions (not averaged as the scalars are)
      "rows/rewards": r,
      "rows/advantages": adv.reshape(r.shape),
    }
    return rollout._replace(advantages=mine.astype(rollout.old_logprobs.dtype)), values

  def update(state: TrainState, rollout: Rollout, ref_params, rewards: StepRewards | None = None, minibatch=0):
    routed = {}
    if rewards is not None:
      rollout, routed = route(rollout, rewards, minibatch)
    split = jax.tree.map(lambda x: x.reshape((micro_batches, -1) + x.shape[1:]), rollout)
    if micro_batch_sharding is not None:
      split = jax.lax.with_sharding_constraint(split, micro_batch_sharding)

    def body(carry, mb):
      grads, loss_sum, denom, metrics = carry
      g, out = grad_fn(state.params, ref_params, mb)
      grads = jax.tree.map(jnp.add, grads, g)
      metrics = jax.tree.map(jnp.add, metrics, out.metrics)
      return (grads, loss_sum + out.loss_sum, denom + out.denominator, metrics), None

    # Accumulate in float32 whatever the parameter dtype (bf16 sums of many micro-batches lose bits).
    zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.promote_types(p.dtype, jnp.float32)), state.params)
    if grad_sharding is not None:
      zeros = jax.lax.with_sharding_constraint(zeros, grad_sharding)
    first = jax.tree.map(lambda x: x[0], split)
    _, out0 = jax.eval_shape(lambda: grad_fn(state.params, ref_params, first))
    metrics0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out0.metrics)
    (grads, loss_sum, denom, metrics), _ = jax.lax.scan(body, (zeros, 0.0, 0.0, metrics0), split)
    denom = jnp.maximum(denom, 1.0)
    # In the masters' dtype (float32 by default, `model.weight_dtype`), so that the optimizer state keeps
    # its dtype from step to step (a float32 gradient would turn bf16 moments into float32 ones).
    grads = jax.tree.map(lambda g, p: (g / denom).astype(p.dtype), grads, state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    values = metric_values(metrics)
    values["loss"] = loss_sum / denom
    values["grad_norm"] = optax.tree.norm(grads)
    values["update_norm"] = optax.tree.norm(updates)
    values.update(update_effect(state.params, params, updates))
    values.update(routed)
    return TrainState(state.step + 1, params, opt_state), values

  return jax.jit(update, donate_argnums=0) if jit else update


def update_effect(old, new, updates) -> dict:
  """What an update did to the stored weights, so that an update that changes nothing cannot pass unnoticed:

    update/rel_rms   RMS(update) / RMS(weight), over every element: the relative size of the step
    update/moved     share of weight elements whose proposed update is non-zero
    update/changed   share of weight elements whose stored value changed

  changed < moved means steps rounded away in the weights' dtype: bfloat16 keeps 8 significant bits, so a
  step below half the spacing (2⁻⁹ … 2⁻⁸ of |w|) leaves w as it was. float32 masters keep 24.
  """

  def total(fn, *trees):
    return sum(jnp.sum(fn(*leaves).astype(jnp.float32)) for leaves in zip(*(jax.tree.leaves(t) for t in trees)))

  count = float(sum(np.prod(x.shape) for x in jax.tree.leaves(old)))
  sq = lambda x: jnp.square(x.astype(jnp.float32))
  return {
    "update/rel_rms": jnp.sqrt(total(sq, updates) / jnp.maximum(total(sq, old), 1e-30)),
    "update/moved": total(lambda u: u != 0, updates) / count,
    "update/changed": total(lambda a, b: a != b, old, new) / count,
  }


class NoOpUpdateError(UserError, FloatingPointError):
  """The first update at the peak learning rate left (almost) every weight it moved unchanged: its steps
  round away in `model.weight_dtype` (`optim.min_changed_share`)."""


def check_update_moves(values: dict, *, lr: float, optim, weight_dtype: str, step: int) -> bool:
  """Raises `NoOpUpdateError` when an update with a non-zero gradient changed less than
  `optim.min_changed_share` of the weight elements it moved (`step.update_effect`'s metrics). Returns
  whether the update could be judged: False for one that moved nothing (a zero gradient)."""
  moved, changed = values["update/moved"], values["update/changed"]
  if values["grad_norm"] <= 0 or moved <= 0:
    return False
  if optim.min_changed_share <= 0 or changed >= optim.min_changed_share * moved:
    return True
  # Half the spacing of the dtype's numbers, relative to |w|: 2⁻ᵖ at a power of two, 2⁻⁽ᵖ⁺¹⁾ just below the next.
  resolution = float(np.finfo(jnp.dtype(weight_dtype)).eps) / 2
  rel = values["update/rel_rms"]
  raise NoOpUpdateError(
    f"step {step}: the first update at the peak learning rate changed {changed / moved:.2%} of the weight "
    f"elements it moved (optim.min_changed_share={optim.min_changed_share}): its relative size RMS(update) / "
    f"RMS(weight) = {rel:.2e} at optim.lr={lr:g} is {resolution / max(rel, 1e-30):.0f}× below "
    f"model.weight_dtype={weight_dtype}'s resolution ({resolution:.1e} of |w|), so the steps round away and the "
    "policy never leaves its checkpoint. Train float32 masters (--config.model.weight_dtype=float32, the "
    "default) or raise optim.lr; optim.min_changed_share=0 turns this check off"
  )


def rows_to_rollout(prompt_tokens, prompt_lengths, tokens, lengths, old_logprobs, advantages, truncated) -> Rollout:
  """Host arrays → a `Rollout` (mask from the completion lengths: tokens after EOS carry no loss).

  `advantages=None`: zeros, for an update that computes them from `StepRewards`.
  """
  n = tokens.shape[1]
  if advantages is None:
    advantages = np.zeros(tokens.shape[0], np.float32)
  mask = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
  return Rollout(
    jnp.asarray(prompt_tokens, jnp.int32),
    jnp.asarray(prompt_lengths, jnp.int32),
    jnp.asarray(tokens, jnp.int32),
    jnp.asarray(mask),
    jnp.asarray(old_logprobs, jnp.float32),
    jnp.asarray(advantages, jnp.float32),
    jnp.asarray(truncated, bool),
  )
