"""Scale past one machine (DESIGN "Scale", issue #8): the global mesh, sharded train and sample steps,
multi-host set-up, and ahead-of-time compiles of real-size steps for TPU topologies.

One process per host runs the same program (JAX's multi-controller runtime); together they see one
global mesh of every device with the axes (`data`, `fsdp`, `tensor`):

  data     pure data parallelism: the batch is split, parameters are replicated
  fsdp     the batch is split *and* parameters / gradients / optimizer state are split (ZeRO-3 style:
           XLA all-gathers a weight where it is used and reduce-scatters its gradient)
  tensor   heads, KV heads, MLP and vocabulary are split (Megatron style); the batch is not

Logical axis names (`arena_jax.models.sharding.LOGICAL_AXIS_RULES`) say how every array is laid out:

  parameters       vocab → tensor, embed → fsdp, heads / kv_heads / mlp → tensor, head_dim, norm → ∅
  optimizer state  each moment is laid out like its parameter (`optax.tree_map_params`); counters
                   are replicated; the gradient accumulator of the micro-batch scan likewise
  activations      batch → (data, fsdp); length → ∅ (the inputs and outputs of the jitted steps; XLA
                   propagates the rest)
  KV cache         batch → (data, fsdp), kv_heads → tensor, cache_seq, head_dim → ∅
A dimension a rule would split unevenly is replicated instead, so every config runs on every mesh.

Multi-host (the trainer's per-host flow, docs/tpu.md "One RL step on several hosts"): `initialize`
(jax.distributed); each host draws `process_batch_size(prompts_per_step)` prompts, block `host_block`
of the global batch, and verifies and judges those groups against `host_judge_urls`; `gather` /
`gather_rows` / `gather_json` bring the small per-step arrays to every host, `host_sum` sums counters,
`read_replicated` reads the replicated metrics, `barrier` orders a file write before its readers, and
only `is_main_process()` writes logs and metrics. `local_rows` / `global_array` / `local_groups` map
between host rows and global arrays. Orbax checkpoints are multi-host already
(`arena_jax.train.Checkpointer`: every process writes its own shards); restore into
`abstract_train_state(...)` to get sharded arrays back on any mesh.

AOT (launch/aot_compile.py): `tpu_devices("v5p:2x2x2")` builds compile-only devices from libtpu's
topology description (no TPU needed; only this function loads libtpu), `lower_train_step` /
`lower_sampler` lower the exact jitted programs the trainer runs with abstract inputs, and
`memory_report` reads per-device memory off the compiled executable.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from arena_jax.models import sharding as sharding_lib
from arena_jax.models.config import ModelConfig
from arena_jax.models.transformer import abstract_model

MESH_AXES = sharding_lib.MESH_AXES
LOGICAL_AXIS_RULES = sharding_lib.LOGICAL_AXIS_RULES
GiB = 1 << 30

# ─────────────────────────────────────── mesh from config ───────────────────────────────────────


def mesh_config(data: int = 1, fsdp: int = -1, tensor: int = 1, *, sample: Sequence[int] = (),
                distributed: bool = False, rules: Sequence[tuple[str, Any]] = ()) -> ml_collections.ConfigDict:
  """The `mesh` section of a run config.

  Attributes:
    data, fsdp, tensor: mesh axis sizes; one of them may be −1 (= fill with the remaining devices).
      Their product must equal the number of devices (all hosts together).
    sample: (data, fsdp, tensor) of the sampler's mesh over the same devices; () = the train mesh. The
      two steps want different layouts when memory is tight: training more `tensor` (its activations
      shrink with the heads per device), sampling at most `num_kv_heads`-way `tensor` (beyond it the
      KV cache is replicated). The trainer re-lays the params out for sampling once per step.
    distributed: call `jax.distributed.initialize()` first (multi-host runs: TPU pod slices, GPU clusters).
    rules: overrides of `LOGICAL_AXIS_RULES`, e.g. (("embed", None),) to replicate embed dims.
  """
  return ml_collections.ConfigDict(dict(data=data, fsdp=fsdp, tensor=tensor, sample=tuple(sample),
                                        distributed=distributed, rules=tuple(rules)))


def mesh_shape(data: int, fsdp: int, tensor: int, num_devices: int) -> tuple[int, int, int]:
  """(data, fsdp, tensor) with a −1 filled in; raises ValueError saying what to change."""
  sizes = {"data": data, "fsdp": fsdp, "tensor": tensor}
  for name, size in sizes.items():
    if size != -1 and size < 1:
      raise ValueError(f"config.mesh.{name} must be ≥ 1, or −1 to fill the remaining devices; got {size}")
  fill = [name for name, size in sizes.items() if size == -1]
  if len(fill) > 1:
    raise ValueError(f"config.mesh: at most one axis may be −1 (fill); got {fill} = −1")
  fixed = math.prod(s for s in sizes.values() if s != -1)
  if fill:
    if num_devices % fixed:
      raise ValueError(f"config.mesh: cannot fill {fill[0]}: {num_devices} devices are not a multiple of the "
                       f"other axes' product {fixed} ({sizes})")
    sizes[fill[0]] = num_devices // fixed
  if math.prod(sizes.values()) != num_devices:
    raise ValueError(f"config.mesh: data × fsdp × tensor = {sizes['data']} × {sizes['fsdp']} × {sizes['tensor']} "
                     f"must equal the {num_devices} devices; set one axis to −1 to fill")
  return sizes["data"], sizes["fsdp"], sizes["tensor"]


def make_mesh(config: ml_collections.ConfigDict | None = None, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """The global (`data`, `fsdp`, `tensor`) mesh of `config.mesh`-like `config` over `devices` (all).

  On TPUs, `mesh_utils.create_device_mesh` lays the axes onto the physical torus; elsewhere devices are
  taken in order (process by process), which puts `tensor`, the last axis, within a host.
  """
  config = config if config is not None else mesh_config()
  devices = list(jax.devices() if devices is None else devices)
  shape = mesh_shape(config.data, config.fsdp, config.tensor, len(devices))
  grid = None
  if devices[0].platform == "tpu":
    from jax.experimental import mesh_utils  # pylint: disable=g-import-not-at-top

    try:
      grid = mesh_utils.create_device_mesh(shape, devices, allow_split_physical_axes=True)
    except (ValueError, NotImplementedError, AssertionError):
      grid = None  # a shape the physical layout cannot take: plain order is still correct
  if grid is None:
    grid = np.asarray(devices, dtype=object).reshape(shape)
  return Mesh(grid, MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * len(MESH_AXES))


def make_meshes(config: ml_collections.ConfigDict, devices: Sequence[jax.Device] | None = None) -> tuple[Mesh, Mesh]:
  """(train mesh, sampler mesh) of a `mesh_config` (the same mesh when `config.sample` is ())."""
  train = make_mesh(config, devices)
  if not config.sample:
    return train, train
  if len(config.sample) != 3:
    raise ValueError(f"config.mesh.sample must be () or (data, fsdp, tensor), got {config.sample!r}")
  data, fsdp, tensor = config.sample
  return train, make_mesh(mesh_config(data, fsdp, tensor), devices)


def axis_rules(overrides: Sequence[tuple[str, Any]] = ()) -> tuple[tuple[str, Any], ...]:
  """`LOGICAL_AXIS_RULES` with `overrides` (logical name → mesh axis, tuple of axes, or None)."""
  table = dict(LOGICAL_AXIS_RULES)
  for name, axes in overrides:
    table[name] = tuple(axes) if isinstance(axes, list) else axes
  return tuple(table.items())


def batch_shards(mesh: Mesh, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES) -> int:
  """How many ways a batch is split on `mesh` (data × fsdp under the default rules)."""
  return sharding_lib.num_batch_shards(mesh, rules)


# ─────────────────────────────────────── shardings of the train step ───────────────────────────────────────


def param_shardings(model_config: ModelConfig, mesh: Mesh, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES):
  """Pure dict of `NamedSharding`s for the model's parameters (the layout a trainer holds them in)."""
  return sharding_lib.param_shardings(nnx.state(abstract_model(model_config)), mesh, rules)


def abstract_params(model_config: ModelConfig, shardings=None):
  """Pure dict of `jax.ShapeDtypeStruct` parameters (with `shardings`, if given): no memory."""
  params = nnx.to_pure_dict(nnx.state(abstract_model(model_config)))
  if shardings is None:
    return params
  return jax.tree.map(lambda p, s: jax.ShapeDtypeStruct(p.shape, p.dtype, sharding=s), params, shardings)


def opt_state_shardings(optimizer, params, param_sh, mesh: Mesh):
  """Shardings of `optimizer.init(params)`: every moment like its parameter, the rest replicated."""
  abstract = jax.eval_shape(optimizer.init, params)
  replicated = NamedSharding(mesh, PartitionSpec())
  return optax.tree_map_params(optimizer, lambda _, s: s, abstract, param_sh,
                               transform_non_params=lambda _: replicated)


class TrainShardings(NamedTuple):
  """Shardings of the jitted RL update's inputs and outputs (`arena_jax.train.step`)."""

  state: Any           # TrainState(step, params, opt_state) of NamedSharding
  rollout: Any         # Rollout: rows over the batch axes
  micro_batches: Any   # Rollout of the [micro_batches, R / M, …] split: rows of every micro-batch spread
  replicated: NamedSharding


def train_shardings(model_config: ModelConfig, optimizer, mesh: Mesh,
                    rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES) -> TrainShardings:
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top  (keeps the import light)

  psh = param_shardings(model_config, mesh, rules)
  replicated = NamedSharding(mesh, PartitionSpec())
  state = step_lib.TrainState(replicated, psh, opt_state_shardings(optimizer, abstract_params(model_config), psh,
                                                                   mesh))
  batch = sharding_lib.logical_to_spec(("batch",), None, mesh, rules)[0]

  def rows(ndim, lead=()):
    return NamedSharding(mesh, PartitionSpec(*lead, batch, *([None] * (ndim - 1))))

  dims = step_lib.Rollout(prompt_tokens=2, prompt_lengths=1, tokens=2, mask=2, old_logprobs=2, advantages=1,
                          truncated=1)
  return TrainShardings(
      state=state, rollout=jax.tree.map(rows, dims),
      micro_batches=jax.tree.map(lambda n: rows(n, (None,)), dims), replicated=replicated)


def check_train_batch(rows: int, micro_batches: int, mesh: Mesh,
                      rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES) -> None:
  """Every micro-batch must split evenly over the batch shards (else XLA pads and skews the load)."""
  shards = batch_shards(mesh, rules)
  if rows % micro_batches or (rows // micro_batches) % shards:
    raise ValueError(
        f"{rows} rows in {micro_batches} micro-batches do not split over the mesh's {shards} batch shards "
        f"(data × fsdp = {dict(mesh.shape)}): rows / optim.micro_batches must be a multiple of {shards}; "
        "change optim.micro_batches, rollout.prompts_per_step or config.mesh")


def train_step_fn(model_config: ModelConfig, optimizer, loss_config, mesh: Mesh, *, temperature: float,
                  micro_batches: int, use_reference: bool, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES):
  """`arena_jax.train.step.make_update_fn`'s update, jitted with shardings on `mesh`.

  `update(state, rollout, ref_params) -> (state, metrics)`: `state` laid out by `train_shardings`
  (donated), `rollout` rows over the batch axes, `ref_params` like the params (or None); metrics
  replicated. The same CISPO loss, exact micro-batch accumulation and AdamW update as on one device.
  """
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top

  sh = train_shardings(model_config, optimizer, mesh, rules)
  update = step_lib.make_update_fn(
      model_config, optimizer, loss_config, temperature=temperature, micro_batches=micro_batches,
      use_reference=use_reference, jit=False, micro_batch_sharding=sh.micro_batches,
      grad_sharding=sh.state.params)
  ref = sh.state.params if use_reference else None
  return jax.jit(update, donate_argnums=0, in_shardings=(sh.state, sh.rollout, ref),
                 out_shardings=(sh.state, sh.replicated))


def init_train_state(params, optimizer, shardings: TrainShardings):
  """The `TrainState` of `params` on the mesh, with the optimizer state created in place (jitted with
  out_shardings, so no device ever holds more than its shard of the moments)."""
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top

  params = jax.device_put(params, shardings.state.params)
  return jax.jit(lambda p: step_lib.init_state(p, optimizer), out_shardings=shardings.state)(params)


def abstract_train_state(model_config: ModelConfig, optimizer, shardings: TrainShardings | None = None):
  """`TrainState` of `jax.ShapeDtypeStruct`s (with shardings): the orbax restore target of a sharded
  run (each host reads only its shards) and the AOT compiler's input."""
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top

  params = abstract_params(model_config)
  state = jax.eval_shape(lambda p: step_lib.init_state(p, optimizer), params)
  if shardings is None:
    return state
  return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), state, shardings.state)


def abstract_rollout(rows: int, prompt_len: int, new_tokens: int, shardings: TrainShardings | None = None):
  """`Rollout` of `jax.ShapeDtypeStruct`s: rows [R], prompts [R, P], completions [R, N]."""
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top

  sds = jax.ShapeDtypeStruct
  out = step_lib.Rollout(
      prompt_tokens=sds((rows, prompt_len), jnp.int32), prompt_lengths=sds((rows,), jnp.int32),
      tokens=sds((rows, new_tokens), jnp.int32), mask=sds((rows, new_tokens), jnp.bool_),
      old_logprobs=sds((rows, new_tokens), jnp.float32), advantages=sds((rows,), jnp.float32),
      truncated=sds((rows,), jnp.bool_))
  if shardings is None:
    return out
  return jax.tree.map(lambda a, s: sds(a.shape, a.dtype, sharding=s), out, shardings.rollout)


# ─────────────────────────────────────── multi-host ───────────────────────────────────────


def initialize(distributed: bool) -> bool:
  """`jax.distributed.initialize()` once per process when `distributed` (before any other JAX call).

  On Cloud TPU VMs, GKE, SLURM and Open MPI, JAX finds the coordinator, process count and id by
  itself; elsewhere set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID. Returns
  whether the process is part of a multi-process run.
  """
  if distributed and not jax.distributed.is_initialized():
    kwargs = {}
    if os.environ.get("JAX_COORDINATOR_ADDRESS"):  # explicit cluster (e.g. several CPU or GPU processes)
      kwargs = dict(coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
                    num_processes=int(os.environ["JAX_NUM_PROCESSES"]), process_id=int(os.environ["JAX_PROCESS_ID"]))
    jax.distributed.initialize(**kwargs)
  return jax.distributed.is_initialized()


def is_main_process() -> bool:
  """Process 0 alone writes logs, metrics, plots and progress bars (orbax coordinates checkpoints)."""
  return jax.process_index() == 0


def process_batch_size(global_size: int, process_count: int | None = None) -> int:
  """Prompts this host draws per step (`tasks.PromptIterator(batch_size=…)` shards by process)."""
  process_count = jax.process_count() if process_count is None else process_count
  if global_size % process_count:
    raise ValueError(f"rollout.prompts_per_step = {global_size} must be a multiple of the {process_count} processes")
  return global_size // process_count


def host_block(num_items: int, process_index: int | None = None, process_count: int | None = None) -> slice:
  """This host's contiguous share of `num_items` in process order: its own prompts, hence its groups."""
  p = jax.process_index() if process_index is None else process_index
  n = jax.process_count() if process_count is None else process_count
  per = process_batch_size(num_items, n)
  return slice(p * per, (p + 1) * per)


def gather(tree):
  """On every host: host-local numpy arrays → their concatenation over processes (process order, axis 0);
  global `jax.Array`s → their full value. For the small per-step arrays (prompt tokens, samples,
  rewards); one process: `jax.device_get`."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

  return jax.tree.map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


def process_rows(sharding: jax.sharding.Sharding, shape: int | Sequence[int]) -> np.ndarray:
  """Sorted indices of the rows (dimension 0) of an array of `shape` (or [shape]) laid out by `sharding`
  that this process's devices hold."""
  shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
  rows: set[int] = set()
  for index in sharding.addressable_devices_indices_map(shape).values():
    rows.update(range(shape[0])[index[0]])
  return np.asarray(sorted(rows), dtype=np.int64)


def local_rows(x: jax.Array) -> tuple[np.ndarray, np.ndarray]:
  """(row indices, host array) of the rows of global `x` that live on this process."""
  rows = process_rows(x.sharding, x.shape)
  out = np.empty((len(rows),) + x.shape[1:], x.dtype)
  where = {r: i for i, r in enumerate(rows)}
  for shard in x.addressable_shards:
    sl = range(x.shape[0])[shard.index[0]]
    rest = shard.index[1:]
    out[(slice(where[sl[0]], where[sl[0]] + len(sl)),) + tuple(rest)] = np.asarray(shard.data)
  return rows, out


def global_array(local: np.ndarray, sharding: jax.sharding.Sharding, num_rows: int) -> jax.Array:
  """The global [num_rows, …] array whose rows `process_rows(sharding, num_rows)` are `local` on this
  host (`jax.make_array_from_process_local_data`); single-process: just placed on the mesh."""
  return jax.make_array_from_process_local_data(sharding, np.asarray(local), (num_rows,) + np.shape(local)[1:])


def local_groups(sharding: jax.sharding.Sharding, shape: int | Sequence[int], group_size: int) -> np.ndarray:
  """Groups (rows g·G … g·G+G−1) of a global array of `shape` whose rows this process's devices hold.

  The sampler pads the prompts to a multiple of the batch shards, so a group never straddles two
  devices; with `tensor` inside a host, every group has exactly one owner among the hosts.
  """
  rows = process_rows(sharding, shape)
  groups = np.unique(rows // group_size)
  owned = np.asarray([np.isin(np.arange(g * group_size, (g + 1) * group_size), rows).all() for g in groups], bool)
  if not owned.all():
    raise ValueError(f"groups of {group_size} rows straddle processes; the batch sharding must keep groups whole")
  return groups


def host_judge_urls(urls: Sequence[str], process_index: int | None = None,
                    process_count: int | None = None) -> tuple[str, ...]:
  """The judge endpoints this host sends its groups to.

  With at least as many URLs as hosts, host h takes every P-th URL from h (disjoint sets: no two hosts
  queue on one server); with fewer, every host uses all of them, starting from a different one (the
  client spreads requests over its endpoints and cools down failing ones).
  """
  urls = tuple(urls)
  p = jax.process_index() if process_index is None else process_index
  n = jax.process_count() if process_count is None else process_count
  if not urls:
    return urls
  if len(urls) >= n:
    return urls[p::n]
  k = p % len(urls)
  return urls[k:] + urls[:k]


def read_replicated(tree):
  """Host values of fully replicated global arrays (e.g. the train step's metrics) on every process;
  one process: `jax.device_get`."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  return jax.tree.map(lambda x: np.asarray(x.addressable_data(0)) if isinstance(x, jax.Array) else x, tree)


def gather_rows(local: np.ndarray, pad_value=0) -> np.ndarray:
  """`gather` for host-local arrays whose trailing dimensions may differ between hosts (e.g. prompts
  padded to each host's own bucket): padded with `pad_value` to the largest host's shape first."""
  local = np.asarray(local)
  if jax.process_count() == 1:
    return local
  shapes = gather(np.asarray(local.shape[1:], np.int64)[None])
  target = tuple(int(n) for n in shapes.max(0))
  pad = [(0, 0)] + [(0, t - n) for t, n in zip(target, local.shape[1:])]
  return gather(np.pad(local, pad, constant_values=pad_value))


def gather_json(obj) -> list:
  """Every host's JSON-serialisable `obj`, in process order, on every host (one process: [obj])."""
  if jax.process_count() == 1:
    return [obj]
  data = np.frombuffer(json.dumps(obj).encode(), np.uint8)
  sizes = gather(np.asarray([len(data)], np.int64))
  padded = gather(np.pad(data, (0, int(sizes.max()) - len(data)))[None])
  return [json.loads(bytes(row[:n]).decode()) for row, n in zip(padded, sizes)]


def barrier(name: str) -> None:
  """Waits for every process (e.g. until process 0 has written a file the others read); one process: no-op."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    multihost_utils.sync_global_devices(name)


def host_sum(tree):
  """Sums host-local numbers over all processes (e.g. judge calls, failures) for process 0's metrics."""
  if jax.process_count() == 1:
    return jax.tree.map(np.asarray, tree)
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

  return jax.tree.map(lambda x: np.asarray(multihost_utils.process_allgather(np.asarray(x))).sum(0), tree)


# ─────────────────────────────────────── ahead-of-time compiles for TPUs ───────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class TpuChip:
  """One TPU generation: HBM per JAX device and libtpu's chip config (megacore: one device per chip)."""

  hbm_bytes: int
  chip_config: str | None = None
  accelerator_prefix: str = ""


TPU_CHIPS: dict[str, TpuChip] = {
    "v4": TpuChip(32 * GiB, "megacore", "v4"),
    "v5p": TpuChip(95 * GiB, "megacore", "v5p"),
    "v5e": TpuChip(16 * GiB, None, "v5litepod"),
    "v6e": TpuChip(32 * GiB, None, "v6e"),
}


def parse_topology(name: str) -> tuple[str, tuple[int, ...]]:
  """"v5p:2x2x2" → ("v5p", (2, 2, 2)); raises ValueError naming the accepted forms."""
  chip, _, dims = name.partition(":")
  try:
    shape = tuple(int(d) for d in dims.split("x"))
  except ValueError:
    shape = ()
  if chip not in TPU_CHIPS or not shape or min(shape) < 1:
    raise ValueError(f"TPU topology {name!r}: use '<chip>:<A>x<B>[x<C>]' with chip in {sorted(TPU_CHIPS)}, "
                     "e.g. v5p:2x2x2, v5e:4x4, v4:2x2x2")
  return chip, shape


def tpu_devices(topology: str) -> list:
  """Compile-only devices of a TPU slice from libtpu's topology description: no TPU, no hosts needed.

  Loads libtpu (the `tpu` extra); nothing else in arena_jax does. Run with JAX_PLATFORMS=cpu.
  """
  chip, shape = parse_topology(topology)
  spec = TPU_CHIPS[chip]
  # libtpu reads these at load time; on a machine that is not a TPU VM it would otherwise query the
  # GCE metadata server and print warnings. Values only silence the look-up; the topology is `topology`.
  os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
  cores = math.prod(shape) * (2 if spec.chip_config == "megacore" else 1)  # accelerator types count cores
  os.environ.setdefault("TPU_ACCELERATOR_TYPE", f"{spec.accelerator_prefix}-{cores}")
  os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  kwargs = {"chip_config_name": spec.chip_config} if spec.chip_config else {}
  return list(topologies.get_topology_desc(topology, "tpu", **kwargs).devices)


@dataclasses.dataclass(frozen=True)
class MemoryReport:
  """Per-device memory of a compiled program (`Compiled.memory_analysis()`), in bytes.

  total = arguments + outputs − aliased (donated inputs reused as outputs) + temporaries + code.
  """

  arguments: int
  outputs: int
  aliased: int
  temporaries: int
  code: int
  hbm: int
  error: str = ""  # the compiler's refusal (e.g. out of HBM): the program has no executable

  @property
  def total(self) -> int:
    return self.arguments + self.outputs - self.aliased + self.temporaries + self.code

  @property
  def fits(self) -> bool:
    return not self.error and self.total <= self.hbm


def memory_report(compiled, hbm_bytes: int) -> MemoryReport:
  m = compiled.memory_analysis()
  return MemoryReport(arguments=int(m.argument_size_in_bytes), outputs=int(m.output_size_in_bytes),
                      aliased=int(m.alias_size_in_bytes), temporaries=int(m.temp_size_in_bytes),
                      code=int(m.generated_code_size_in_bytes), hbm=int(hbm_bytes))


def lower_train_step(model_config: ModelConfig, optimizer, loss_config, mesh: Mesh, *, rows: int, prompt_len: int,
                     new_tokens: int, micro_batches: int, temperature: float = 1.0, use_reference: bool = False,
                     rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES):
  """`jax.stages.Lowered` of the RL update (`train_step_fn`) for R = `rows` rows of P + N tokens."""
  check_train_batch(rows, micro_batches, mesh, rules)
  fn = train_step_fn(model_config, optimizer, loss_config, mesh, temperature=temperature,
                     micro_batches=micro_batches, use_reference=use_reference, rules=rules)
  sh = train_shardings(model_config, optimizer, mesh, rules)
  ref = abstract_params(model_config, sh.state.params) if use_reference else None
  return fn.lower(abstract_train_state(model_config, optimizer, sh), abstract_rollout(rows, prompt_len, new_tokens, sh),
                  ref)


def lower_sampler(sampler, num_prompts: int, prompt_len: int):
  """(prefill, decode) `jax.stages.Lowered` of a meshed `Sampler`'s two programs for B = `num_prompts`
  prompts of bucket P = `prompt_len` (the programs `Sampler.__call__` runs)."""
  if sampler.mesh is None:
    raise ValueError("lower_sampler needs a Sampler with a mesh")
  shards = batch_shards(sampler.mesh, sampler.rules)
  if num_prompts % shards:
    raise ValueError(f"{num_prompts} prompts must be a multiple of the {shards} batch shards (the sampler pads to it)")
  sds = jax.ShapeDtypeStruct
  # The programs are the sampler's own jits (with their shardings); they are private to it, so this is
  # the one place outside arena_jax.sampling that reaches for them.
  params = abstract_params(sampler.config, sampler._param_shardings)  # pylint: disable=protected-access
  tokens = sds((num_prompts, prompt_len), jnp.int32)
  lengths, active = sds((num_prompts,), jnp.int32), sds((num_prompts,), jnp.bool_)
  rng = jax.eval_shape(lambda: jax.random.key(0))
  prefill = sampler._prefill_fn.lower(params, tokens, lengths, active, rng)  # pylint: disable=protected-access
  state = jax.eval_shape(sampler._prefill, params, tokens, lengths, active, rng)  # pylint: disable=protected-access
  decode = sampler._decode_fn.lower(params, state, tokens)  # pylint: disable=protected-access
  return prefill, decode


def aot_compile(config: ml_collections.ConfigDict, topology: str, programs: Sequence[str] = ("train", "prefill", "decode"),
                log=print) -> list[tuple[str, MemoryReport]]:
  """Compiles a real-size run config's programs for a TPU `topology` on this host; per-device memory.

  `config` is a run config (configs/real_*.py) with `aot.model` (a named `ModelConfig`) and
  `aot.prompt_len` (the prompt bucket P). Programs: "train" = the RL update on prompts_per_step ×
  group_size / minibatches rows of P + max_new_tokens tokens; "prefill" / "decode" = the sampler's
  programs for prompts_per_step prompts × group_size samples of max_new_tokens tokens.
  """
  import time  # pylint: disable=g-import-not-at-top

  from arena_jax.models.config import get_model_config  # pylint: disable=g-import-not-at-top
  from arena_jax.sampling import RandomSampling, Sampler  # pylint: disable=g-import-not-at-top
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top

  unknown = set(programs) - {"train", "prefill", "decode"}
  if unknown:
    raise ValueError(f"unknown programs {sorted(unknown)}; choose from train, prefill, decode")
  chip, _ = parse_topology(topology)
  devices = tpu_devices(topology)
  mesh, sample_mesh = make_meshes(config.mesh, devices)
  rules = axis_rules(config.mesh.rules)
  model_config = get_model_config(config.aot.model)
  r, o = config.rollout, config.optim
  hbm = TPU_CHIPS[chip].hbm_bytes
  log(f"{topology}: {len(devices)} devices on {len({d.process_index for d in devices})} hosts; "
      f"train mesh {dict(mesh.shape)}, sampler mesh {dict(sample_mesh.shape)}; {config.aot.model} "
      f"({model_config.num_params() / 1e9:.2f} B params, {model_config.param_dtype})")
  lowered = []
  if "train" in programs:
    rows = r.prompts_per_step * r.group_size // o.minibatches
    optimizer = step_lib.make_optimizer(o)
    lowered.append((f"train   {rows}×{config.aot.prompt_len + r.max_new_tokens} tok, {o.micro_batches} micro-batches",
                    lambda: lower_train_step(
                        model_config, optimizer, config.loss, mesh, rows=rows, prompt_len=config.aot.prompt_len,
                        new_tokens=r.max_new_tokens, micro_batches=o.micro_batches, temperature=r.temperature,
                        use_reference=config.loss.kl_coef > 0, rules=rules)))
  if "prefill" in programs or "decode" in programs:
    sampler = Sampler(config=model_config, max_new_tokens=r.max_new_tokens, num_samples=r.group_size,
                      method=RandomSampling(temperature=r.temperature, top_k=r.top_k or None, top_p=r.top_p),
                      stop_tokens=(2,), pad_id=0, mesh=sample_mesh, rules=rules)
    both = {}

    def sampler_program(name):
      if not both:
        both["prefill"], both["decode"] = lower_sampler(sampler, r.prompts_per_step, config.aot.prompt_len)
      return both[name]

    shape = f"{r.prompts_per_step}×{r.group_size} × ({config.aot.prompt_len} + {r.max_new_tokens}) tok"
    for name in ("prefill", "decode"):
      if name in programs:
        lowered.append((f"{name:8s}{shape}", functools.partial(sampler_program, name)))
  reports = []
  for name, lower in lowered:
    t0 = time.perf_counter()
    try:
      report = memory_report(lower().compile(), hbm)
    except jax.errors.JaxRuntimeError as e:  # XLA refuses a program that cannot fit: report how far off
      if "RESOURCE_EXHAUSTED" not in str(e):
        raise
      report = _oom_report(str(e), hbm)
    reports.append((name, report))
    log(f"  compiled {name.split()[0]} in {time.perf_counter() - t0:.0f} s"
        + (f": {report.error}" if report.error else ""))
  return reports


def _oom_report(message: str, hbm: int) -> MemoryReport:
  """A `MemoryReport` from XLA's out-of-memory error, e.g. "… the total memory required for HLO
  temporaries (117.69G) exceeds available HBM (95.74G)": the temporaries it names, the rest unknown (0)."""
  import re  # pylint: disable=g-import-not-at-top

  units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
  found = re.search(r"required for HLO temporaries \(([\d.]+)([KMGT])", message)
  temps = int(float(found.group(1)) * units[found.group(2)]) if found else 0
  first = message.strip().splitlines()[0]
  return MemoryReport(0, 0, 0, temps, 0, hbm, error=first[:200])


def format_reports(topology: str, reports: Sequence[tuple[str, MemoryReport]]) -> str:
  """The per-device memory table `launch/aot_compile.py` prints (GiB)."""
  g = lambda b: f"{b / GiB:8.2f}"
  head = f"{'program':52s} {'args':>8s} {'outputs':>8s} {'aliased':>8s} {'temps':>8s} {'code':>8s} {'total':>8s} {'HBM':>8s}  fits"
  lines = [f"per-device memory on {topology} (GiB)", head]
  for name, m in reports:
    if m.error:
      lines.append(f"{name:52s} {'':8s} {'':8s} {'':8s} {g(m.temporaries)} {'':8s} {'':8s} {g(m.hbm)}  NO: {m.error}")
      continue
    lines.append(f"{name:52s} {g(m.arguments)} {g(m.outputs)} {g(m.aliased)} {g(m.temporaries)} {g(m.code)} "
                 f"{g(m.total)} {g(m.hbm)}  {'yes' if m.fits else 'NO'}")
  return "\n".join(lines)
