"""Logical axis names → mesh axes (docs/tpu.md "How it scales": a global mesh (`data`, `fsdp`, `tensor`)).

Every parameter carries logical axis names in its `out_sharding` metadata (flax's convention, so
`nnx.get_partition_spec` under `flax.linen.logical_axis_rules` reads them too). The rules here map them
to mesh axes the way maxtext does: batch over `data` and `fsdp`, heads / MLP / vocabulary over
`tensor`, the embedding dimension over `fsdp`. A dimension that a rule would split unevenly is
replicated instead (e.g. 2 KV heads on a 4-way `tensor` axis), so any config runs on any mesh.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

# (logical name, mesh axis | tuple of mesh axes | None)
LOGICAL_AXIS_RULES: tuple[tuple[str, Any], ...] = (
  ("batch", ("data", "fsdp")),
  ("vocab", "tensor"),
  ("embed", "fsdp"),
  ("heads", "tensor"),
  ("kv_heads", "tensor"),
  ("mlp", "tensor"),
  ("head_dim", None),
  ("norm", None),
  ("length", None),
  ("cache_seq", None),
)


def make_mesh(data: int = 1, fsdp: int = 1, tensor: int = 1, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A (`data`, `fsdp`, `tensor`) mesh with Auto axes (GSPMD propagation) over the first devices."""
  devices = list(jax.devices() if devices is None else devices)
  n = data * fsdp * tensor
  if n > len(devices):
    raise ValueError(f"mesh data={data} × fsdp={fsdp} × tensor={tensor} needs {n} devices; {len(devices)} present")
  grid = np.asarray(devices[:n], dtype=object).reshape(data, fsdp, tensor)
  return Mesh(grid, MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * 3)


def logical_to_spec(
  names: Sequence[str | None],
  shape: Sequence[int] | None = None,
  mesh: Mesh | None = None,
  rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES,
) -> PartitionSpec:
  """PartitionSpec for an array whose dimensions carry logical `names`.

  With `shape` and `mesh`, mesh axes absent from the mesh are dropped and a dimension that the
  remaining axes do not divide is replicated; a mesh axis is used at most once.
  """
  table = dict(rules)
  used: set[str] = set()
  spec = []
  for i, name in enumerate(names):
    axes = table.get(name) if name is not None else None
    if axes is None:
      spec.append(None)
      continue
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    if mesh is not None:
      axes = tuple(a for a in axes if a in mesh.shape and mesh.shape[a] > 1)
    axes = tuple(a for a in axes if a not in used)
    if shape is not None and mesh is not None:
      # Keep the longest prefix of axes that divides the dimension evenly.
      while axes and shape[i] % int(np.prod([mesh.shape[a] for a in axes])):
        axes = axes[:-1]
    used.update(axes)
    spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
  return PartitionSpec(*spec)


def logical_sharding(
  names: Sequence[str | None], shape: Sequence[int], mesh: Mesh, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES
) -> NamedSharding:
  return NamedSharding(mesh, logical_to_spec(names, shape, mesh, rules))


def param_shardings(state: nnx.State, mesh: Mesh, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES):
  """A pure dict (as `nnx.to_pure_dict`) of NamedShardings for a (possibly abstract) parameter state."""

  def one(variable):
    names = variable.get_metadata().get("out_sharding") or (None,) * len(variable.shape)
    return logical_sharding(names, variable.shape, mesh, rules)

  shardings = jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))
  return nnx.to_pure_dict(shardings)


def num_batch_shards(mesh: Mesh | None, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES) -> int:
  """How many ways the `batch` logical axis is split on `mesh` (1 without a mesh)."""
  if mesh is None:
    return 1
  axes = dict(rules).get("batch")
  axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
  return int(np.prod([mesh.shape[a] for a in axes if a in mesh.shape]))
