"""The RL update on a mesh: shardings of the train state and rollout, and the sharded, donated step.

`arena_jax.parallel` builds the mesh and maps logical axes to it; this module lays the trainer's own
arrays out on that mesh (docs/tpu.md "How it scales"):

  params           by their logical axes (`parallel.param_shardings`); with LoRA the state's params are the
                   adapters, replicated (r·(K + N) per weight: small), and the frozen base keeps the layout
  optimizer state  each moment like its parameter (`optax.tree_map_params`); counters replicated
  rollout          rows over the batch axes (data, fsdp); every micro-batch of the [M, R / M, …]
                   split spread over them too, so no micro-batch runs on a subset of the devices;
                   packed rows (`train.packing`, [M·S, Rb, L]) one block per batch shard of each micro-batch
  metrics          replicated

`train_step_fn` jits `step.make_update_fn`'s update with these shardings: the same CISPO loss, exact
micro-batch accumulation and AdamW update as on one device (tests/parallel/test_equivalence.py).
`shared_train_step_fn` is the trainer's: one program per `step.UpdateSpec` (and model, mesh, layout) per process.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from arena_jax import parallel
from arena_jax import program_cache
from arena_jax.models import LoraSpec
from arena_jax.models import lora as lora_lib
from arena_jax.models import sharding as sharding_lib
from arena_jax.models.attention import traced_on_mesh
from arena_jax.models.config import ModelConfig
from arena_jax.train import packing
from arena_jax.train import step as step_lib

LOGICAL_AXIS_RULES = sharding_lib.LOGICAL_AXIS_RULES


class TrainShardings(NamedTuple):
  """Shardings of the jitted RL update's inputs and outputs (`arena_jax.train.step`)."""

  state: Any  # TrainState(step, params, opt_state) of NamedSharding
  rollout: Any  # Rollout: rows over the batch axes
  micro_batches: Any  # Rollout of the [micro_batches, R / M, …] split: rows of every micro-batch spread
  replicated: NamedSharding
  base: Any = None  # the model's weights by their logical axes: with LoRA, the frozen base (the update's ref_params)


def opt_state_shardings(optimizer, params, param_sh, mesh: Mesh):
  """Shardings of `optimizer.init(params)`: every moment like its parameter, the rest replicated."""
  abstract = jax.eval_shape(optimizer.init, params)
  replicated = NamedSharding(mesh, PartitionSpec())
  return optax.tree_map_params(optimizer, lambda _, s: s, abstract, param_sh, transform_non_params=lambda _: replicated)


def train_shardings(
  model_config: ModelConfig,
  optimizer,
  mesh: Mesh,
  rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES,
  *,
  packed: bool = False,
  stale: bool = False,
  lora: LoraSpec | None = None,
) -> TrainShardings:
  """Where every input and output of the RL update lives on `mesh` (see the module docstring); `packed`:
  for a rollout with packed rows (`rollout.pack_tokens` > 0); `stale`: with the per-token staleness mask of
  the asynchronous loop (`Rollout.stale`); `lora`: the state's params are these adapters (`trained_abstract`)."""
  psh = parallel.param_shardings(model_config, mesh, rules)
  replicated = NamedSharding(mesh, PartitionSpec())
  trained, trained_sh = parallel.abstract_params(model_config), psh
  if lora is not None:
    trained = trained_abstract(model_config, lora)
    trained_sh = jax.tree.map(lambda _: replicated, trained)
  opt = opt_state_shardings(optimizer, trained, trained_sh, mesh)
  state = step_lib.TrainState(replicated, trained_sh, opt)
  batch = sharding_lib.logical_to_spec(("batch",), None, mesh, rules)[0]

  def rows(ndim, lead=()):
    return NamedSharding(mesh, PartitionSpec(*lead, batch, *([None] * (ndim - 1))))

  # Packed rows' blocks split over the batch axes like rows do: block m·S + s of a micro-batch lands on shard s.
  blocks = packing.PackedRows(tokens=3, positions=3, segment_ids=3, row=2, start=2) if packed else None
  dims = step_lib.Rollout(
    prompt_tokens=2,
    prompt_lengths=1,
    tokens=2,
    mask=2,
    old_logprobs=2,
    advantages=1,
    truncated=1,
    packed=blocks,
    stale=2 if stale else None,
  )
  return TrainShardings(
    state=state,
    rollout=jax.tree.map(rows, dims),
    micro_batches=jax.tree.map(lambda n: rows(n, (None,)), dims),
    replicated=replicated,
    base=psh,
  )


def trained_abstract(model_config: ModelConfig, lora: LoraSpec | None = None):
  """The `jax.ShapeDtypeStruct`s of what the update trains: the model's parameters, or with `lora` its adapters."""
  if lora is None:
    return parallel.abstract_params(model_config)
  return lora_lib.abstract_adapters(lora_lib.lora_template(model_config, lora))


def check_train_batch(
  rows: int, micro_batches: int, mesh: Mesh, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES
) -> None:
  """Every micro-batch must split evenly over the batch shards (else XLA pads and skews the load)."""
  shards = parallel.batch_shards(mesh, rules)
  if rows % micro_batches or (rows // micro_batches) % shards:
    raise ValueError(
      f"{rows} rows in {micro_batches} micro-batches do not split over the mesh's {shards} batch shards "
      f"(data × fsdp = {dict(mesh.shape)}): rows / optim.micro_batches must be a multiple of {shards}; "
      "change optim.micro_batches, rollout.prompts_per_step or config.mesh"
    )


def train_step_fn(
  model_config: ModelConfig,
  optimizer,
  loss_config,
  mesh: Mesh,
  *,
  temperature: float,
  micro_batches: int,
  use_reference: bool,
  rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES,
  mode=None,
  std_ddof: int = 0,
  shardings: TrainShardings | None = None,
  packed: bool = False,
  lora: LoraSpec | None = None,
):
  """`arena_jax.train.step.make_update_fn`'s update, jitted with shardings on `mesh`.

  `update(state, rollout, ref_params) -> (state, metrics)`: `state` laid out by `train_shardings`
  (donated), `rollout` rows over the batch axes, `ref_params` like the params (or None); metrics
  replicated. The same CISPO loss, exact micro-batch accumulation and AdamW update as on one device.
  With a reward `mode`: `update(state, rollout, ref_params, rewards, minibatch)`, the step's
  `StepRewards` and the minibatch index replicated (they are small), routed inside the jit (SPEC §3).
  `shardings`: `train_shardings(...)` when the caller has them already. `packed`: the rollouts carry packed
  rows (`train.packing.pack_rollout` with `shards = parallel.batch_shards(mesh, rules)`; one program per
  bucket of packed rows). `lora`: the state trains these adapters; `ref_params` is then always the frozen base,
  laid out like the model's weights (`make_update_fn`).
  """
  sh = shardings or train_shardings(model_config, optimizer, mesh, rules, packed=packed, lora=lora)
  if (sh.rollout.packed is not None) != packed:
    raise ValueError(f"train_step_fn(packed={packed}) needs train_shardings(..., packed={packed})")
  update = step_lib.make_update_fn(
    model_config,
    optimizer,
    loss_config,
    temperature=temperature,
    micro_batches=micro_batches,
    use_reference=use_reference,
    mode=mode,
    std_ddof=std_ddof,
    jit=False,
    micro_batch_sharding=sh.micro_batches,
    grad_sharding=sh.state.params,
    lora=None if lora is None else lora_lib.lora_template(model_config, lora),
  )
  ref = sh.base if lora is not None else sh.state.params if use_reference else None
  in_shardings = (sh.state, sh.rollout, ref)
  if mode is not None:
    rep = sh.replicated
    in_shardings += (step_lib.StepRewards(rep, rep, rep, rep), rep)
  # Traced inside `kernel_mesh`: attention kernels (splash, cudnn) run per shard (`models.attention`).
  update = traced_on_mesh(update, mesh, rules)
  return jax.jit(update, donate_argnums=0, in_shardings=in_shardings, out_shardings=(sh.state, sh.replicated))


def shared_train_step_fn(
  spec: step_lib.UpdateSpec,
  model_config: ModelConfig,
  mesh: Mesh,
  rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES,
  *,
  shardings: TrainShardings | None = None,
  packed: bool = False,
  stale: bool = False,
):
  """`train_step_fn` of `spec`, shared by every caller in the process with the same inputs (`program_cache`:
  a notebook's next run, a resume, the test suite's many runs compile it once).

  The key is the frozen spec with the program's other inputs (the model config, the mesh and its rules, packed
  rows, the staleness mask), and the program is built from that spec alone: what it traces, whenever it
  traces, is what it is keyed under, whatever happens to the config the spec was taken from.
  `shardings`: `train_shardings(...)` of the same inputs, when the caller has them already.
  """
  key = ("update", spec, model_config, mesh, repr(rules), packed, stale)

  def build():
    optimizer = spec.optimizer()
    sh = shardings or train_shardings(model_config, optimizer, mesh, rules, packed=packed, stale=stale, lora=spec.lora)
    return train_step_fn(
      model_config,
      optimizer,
      spec.loss,
      mesh,
      temperature=spec.temperature,
      micro_batches=spec.micro_batches,
      use_reference=spec.use_reference,
      rules=rules,
      mode=spec.mode(),
      std_ddof=spec.std_ddof,
      shardings=sh,
      packed=packed,
      lora=spec.lora,
    )

  return program_cache.shared(key, build)


def init_train_state(params, optimizer, shardings: TrainShardings):
  """The `TrainState` of `params` on the mesh, with the optimizer state created in place (jitted with
  out_shardings, so no device ever holds more than its shard of the moments)."""
  params = jax.device_put(params, shardings.state.params)
  return jax.jit(lambda p: step_lib.init_state(p, optimizer), out_shardings=shardings.state)(params)


def abstract_train_state(
  model_config: ModelConfig, optimizer, shardings: TrainShardings | None = None, *, lora: LoraSpec | None = None
):
  """`TrainState` of `jax.ShapeDtypeStruct`s (with shardings): the orbax restore target of a sharded
  run (each host reads only its shards) and the AOT compiler's input. `lora`: the state of a LoRA run (its
  params are the adapters)."""
  params = trained_abstract(model_config, lora)
  state = jax.eval_shape(lambda p: step_lib.init_state(p, optimizer), params)
  if shardings is None:
    return state
  return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), state, shardings.state)


def abstract_rollout(
  rows: int,
  prompt_len: int,
  new_tokens: int,
  shardings: TrainShardings | None = None,
  *,
  pack_tokens: int = 0,
  packed_rows: int = 0,
  blocks: int = 1,
):
  """`Rollout` of `jax.ShapeDtypeStruct`s: rows [R], prompts [R, P], completions [R, N]; with `pack_tokens`
  L > 0, also packed rows (`train.packing`): `packed_rows` Rp rows of L tokens in `blocks` K blocks (micro-batches
  × batch shards), [K, Rp / K, L]."""
  sds = jax.ShapeDtypeStruct
  packed = None
  if pack_tokens:
    if packed_rows % blocks or rows % blocks:
      raise ValueError(f"{packed_rows} packed rows and {rows} rows must split into {blocks} blocks")
    grid = (blocks, packed_rows // blocks, pack_tokens)
    index = sds((blocks, rows // blocks), jnp.int32)
    packed = packing.PackedRows(sds(grid, jnp.int32), sds(grid, jnp.int32), sds(grid, jnp.int32), index, index)
  out = step_lib.Rollout(
    prompt_tokens=sds((rows, prompt_len), jnp.int32),
    prompt_lengths=sds((rows,), jnp.int32),
    tokens=sds((rows, new_tokens), jnp.int32),
    mask=sds((rows, new_tokens), jnp.bool_),
    old_logprobs=sds((rows, new_tokens), jnp.float32),
    advantages=sds((rows,), jnp.float32),
    truncated=sds((rows,), jnp.bool_),
    packed=packed,
  )
  if shardings is None:
    return out
  return jax.tree.map(lambda a, s: sds(a.shape, a.dtype, sharding=s), out, shardings.rollout)
