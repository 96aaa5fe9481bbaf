"""LoRA adapters on the policy, through Qwix (tunix's LoRA is Qwix's too).

    spec = LoraSpec(rank=16, alpha=32.0, targets=r".*(attn|mlp)")
    adapted = apply_lora(model, spec)              # the model with adapters: its forward is W x + (α/r) B A x
    base, adapters = split_adapters(adapted)       # pure dicts: the frozen weights, and the adapters alone
    merged = merge_adapters(base, adapters, spec)  # the plain model's weights with the adapters folded in
    export_peft_adapters(adapters, spec, config, "out/")   # PEFT's layout: `PeftModel.from_pretrained` loads it

Qwix's `LoraProvider` intercepts the `dot_general` of every module whose path matches `targets` (the decoder's are
`layers/<i>/attn` and `layers/<i>/mlp`), finds the weight it multiplies and adds a low-rank path beside it: for a
weight used as a [K, N] matrix, A [K, r] (He-uniform) and B [r, N] (zeros), so the adapted model starts as the base
model exactly. Our projections reshape their weights to 2-D before the matmul (q_proj [D, N, H] → [D, N·H],
o_proj [N, H, D] → [N·H, D]); Qwix sees through that reshape only while tracing, so `apply_lora` runs its
initialising forward pass under `nnx.jit` (run eagerly, only the MLP's weights, whose 2-D view is the weight
itself, got adapters).

Merging is the same algebra outside the model: W + (α/r) · (A B) reshaped to W's shape, exact up to float round-off
(the adapted forward computes x W + (α/r)(x A) B, the merged one x (W + (α/r) A B)).

PEFT's layout (`export_peft_adapters`): adapter_model.safetensors with `base_model.model.<HF module>.lora_A.weight`
[r, in] and `.lora_B.weight` [out, r] (A and B transposed, their rows and columns placed where the HF checkpoint
puts the weight's: the same key map and layouts as `launch.export`'s weights), and adapter_config.json (r,
lora_alpha, the adapted modules as one exact regex). PEFT scales by lora_alpha / r as Qwix does.

Qwix is imported only here, on use: `import arena_jax` never loads it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arena_jax import fileio

DEFAULT_TARGETS = r".*(attn|mlp)"  # every projection of every block: PEFT's "all-linear" but the output head
_SUFFIX_A, _SUFFIX_B = "_lora_a", "_lora_b"


@dataclasses.dataclass(frozen=True)
class LoraSpec:
  """rank r, alpha α (the adapters' output is scaled by α / r) and `targets`, a regex over module paths
  (`layers/3/attn`, `layers/3/mlp`: every projection of the matched modules gets an adapter)."""

  rank: int = 16
  alpha: float = 32.0
  targets: str = DEFAULT_TARGETS

  def __post_init__(self):
    if self.rank < 1:
      raise ValueError(f"LoRA rank must be ≥ 1 (got {self.rank})")
    if self.alpha <= 0:
      raise ValueError(f"LoRA alpha must be > 0 (got {self.alpha})")
    try:
      re.compile(self.targets)
    except re.error as e:
      raise ValueError(f"LoRA targets {self.targets!r} is not a regular expression: {e}") from None

  @property
  def scale(self) -> float:
    return self.alpha / self.rank


def apply_lora(model, spec: LoraSpec, *, seed: int = 0):
  """`model` (a `Transformer`) with Qwix LoRA adapters on the projections of the modules `spec.targets` matches;
  its logits equal the base model's until the adapters are trained (B starts at zero).

  Raises:
    ValueError: `spec.targets` matches no projection.
  """
  import qwix  # pylint: disable=g-import-not-at-top  (optional: only LoRA runs load it)

  provider = qwix.LoraProvider(module_path=spec.targets, rank=spec.rank, alpha=spec.alpha)
  tokens = jnp.zeros((1, 1), jnp.int32)

  @nnx.jit
  def init(m):  # traced: Qwix finds a weight behind our reshapes only through the tracer (module docstring)
    # `hidden`, the full-sequence forward: `__call__` and the log-prob passes (`models.token_logprobs`) both run
    # it, and Qwix intercepts one method of an NNX model (its default, `__call__`, the log-prob passes bypass:
    # adapters that the loss never sees, with zero gradients).
    return qwix.apply_lora_to_model(m, provider, tokens, rngs=nnx.Rngs(seed), methods=("hidden",))

  adapted = init(model)
  if not jax.tree.leaves(nnx.state(adapted, nnx.LoRAParam)):
    raise ValueError(
      f"LoRA targets {spec.targets!r} match no module with a projection (the decoder's are layers/<i>/attn and "
      "layers/<i>/mlp)"
    )
  return adapted


@functools.lru_cache(maxsize=16)
def lora_template(config, spec: LoraSpec) -> "AdaptedTemplate":
  """The adapted model's structure for a model config and spec, built abstractly (`nnx.eval_shape`: no weight is
  allocated, as a trainer of an 8B model needs) and cached, so that every caller of the same (config, spec) gets
  the same template (the jitted programs that take it are keyed by its identity).

  Raises:
    ValueError: `spec.targets` matches no projection (`apply_lora`).
  """
  from arena_jax.models.transformer import init_model  # pylint: disable=g-import-not-at-top

  return AdaptedTemplate.of(nnx.eval_shape(lambda: apply_lora(init_model(config, seed=0), spec)))


def abstract_adapters(template: "AdaptedTemplate") -> dict:
  """The adapters' `jax.ShapeDtypeStruct`s (a pure dict) of a template."""
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), nnx.to_pure_dict(template.lora))


def init_adapters(template: "AdaptedTemplate", seed: int = 0) -> dict:
  """Fresh adapters for a template, initialised as Qwix's `LoraProvider` does: A He-uniform over its fan-in K,
  B zeros, so the adapted model starts as the base model exactly. One key per adapted weight, folded from
  `seed` by the weight's position in the tree (the same adapters on every host)."""
  he_uniform = jax.nn.initializers.he_uniform()
  flat, treedef = jax.tree_util.tree_flatten_with_path(abstract_adapters(template))
  key = jax.random.key(seed)
  values = []
  for i, (path, sds) in enumerate(flat):
    name = str(path[-1].key)
    if name.endswith(_SUFFIX_A):
      values.append(he_uniform(jax.random.fold_in(key, i), sds.shape, sds.dtype))
    else:
      values.append(jnp.zeros(sds.shape, sds.dtype))
  return jax.tree_util.tree_unflatten(treedef, values)


def split_adapters(adapted) -> tuple[dict, dict]:
  """(the frozen weights, the adapters) of an adapted model, as pure dicts."""
  lora, params = nnx.state(adapted, nnx.LoRAParam, nnx.Param)  # LoRAParam is a Param: taken out first
  return nnx.to_pure_dict(params), nnx.to_pure_dict(lora)


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: a static argument of `logits`' jit
class AdaptedTemplate:
  """An adapted model's structure without its values: `model(base, adapters)` rebuilds the model from the two
  pure dicts (inside a jitted loss: the adapters differentiated, the base frozen)."""

  graphdef: Any
  params: Any  # nnx.State of the base weights (values replaced on each call)
  lora: Any  # nnx.State of the adapters
  rest: Any  # whatever else the model holds

  @classmethod
  def of(cls, adapted) -> "AdaptedTemplate":
    graphdef, lora, params, rest = nnx.split(adapted, nnx.LoRAParam, nnx.Param, ...)  # LoRAParam ⊂ Param: first
    return cls(graphdef, params, lora, rest)

  def model(self, base: dict, adapters: dict):
    """The adapted model with these values. Run it under tracing only (inside `jax.jit` or `jax.grad`): run eagerly,
    Qwix cannot see the attention weights behind their reshapes and silently skips their adapters (the MLP's
    still apply), so an eager forward is neither the base model nor the adapted one. `logits` is the jitted one."""
    params, lora = jax.tree.map(lambda x: x, self.params), jax.tree.map(lambda x: x, self.lora)
    nnx.replace_by_pure_dict(params, base)
    nnx.replace_by_pure_dict(lora, adapters)
    return nnx.merge(self.graphdef, lora, params, self.rest)

  def logits(self, base: dict, adapters: dict, tokens) -> jax.Array:
    """The adapted model's logits [B, T, V] of `tokens` [B, T] (jitted: every adapter applies)."""
    return _adapted_logits(self, base, adapters, tokens)


@functools.partial(jax.jit, static_argnums=0)
def _adapted_logits(template: AdaptedTemplate, base, adapters, tokens):
  return template.model(base, adapters)(tokens)


def adapter_paths(adapters: dict) -> list[tuple[tuple, str]]:
  """(module path, weight name) of every adapted weight, e.g. (("layers", 0, "attn"), "q_proj")."""
  out = []

  def walk(node, path):
    for key, value in node.items():
      if isinstance(value, dict):
        walk(value, path + (key,))
      elif isinstance(key, str) and key.endswith(_SUFFIX_A):
        out.append((path, key[: -len(_SUFFIX_A)]))

  walk(adapters, ())
  return out


def _at(tree: dict, path: tuple) -> Any:
  for key in path:
    tree = tree[key]
  return tree


def merge_adapters(base: dict, adapters: dict, spec: LoraSpec) -> dict:
  """The base weights with the adapters folded in: W + (α/r) · (A B) reshaped to W's shape, in W's dtype (the
  product in float32). Traceable (one jit merges every layer's). Returns a new dict; `base` is unchanged."""
  merged = jax.tree.map(lambda x: x, base)
  for path, name in adapter_paths(adapters):
    module, weights = _at(adapters, path), _at(merged, path)
    w = weights[name]
    a, b = module[name + _SUFFIX_A], module[name + _SUFFIX_B]
    delta = jnp.matmul(a.astype(jnp.float32), b.astype(jnp.float32)).reshape(w.shape)
    weights[name] = (w.astype(jnp.float32) + spec.scale * delta).astype(w.dtype)
  return merged


def adapter_count(adapters: dict) -> int:
  """The number of adapter parameters (what the optimizer holds moments for)."""
  return int(sum(x.size for x in jax.tree.leaves(adapters)))


def export_peft_adapters(
  adapters: dict,
  spec: LoraSpec,
  config,
  out_dir: str | os.PathLike,
  *,
  architecture: str | None = None,
  base_model: str = "",
) -> list[str]:
  """Writes the adapters in PEFT's layout (module docstring) into `out_dir`; returns the file names.

  `config`: the model's `ModelConfig`; `architecture`: the HF architecture the base checkpoint has (default: the
  config's own, as `launch.export` writes it); `base_model`: adapter_config.json's `base_model_name_or_path`.

  Raises:
    ValueError: an adapted weight is not a plain matrix in the HF checkpoint (its layout mixes the matmul's input
      and output axes), or the adapters do not fit `config`.
  """
  from arena_jax.models.hf import export as hf_export  # pylint: disable=g-import-not-at-top

  architecture = architecture or hf_export.default_architecture(config)
  placed = hf_export.hf_placement(config, architecture)
  from arena_jax.models.hf import convert  # pylint: disable=g-import-not-at-top
  from arena_jax.models.transformer import abstract_model  # pylint: disable=g-import-not-at-top

  shapes = {k: v.shape for k, v in convert.flat_params(nnx.to_pure_dict(nnx.state(abstract_model(config)))).items()}
  tensors, modules = [], []
  for path, name in adapter_paths(adapters):
    ours = "/".join(str(p) for p in path + (name,))
    if ours not in placed:
      raise ValueError(f"adapter of {ours}: the model config has no such weight")
    hf_name, layout = placed[ours]
    module = _at(adapters, path)
    a = np.asarray(module[name + _SUFFIX_A], np.float32)  # [K, r]
    b = np.asarray(module[name + _SUFFIX_B], np.float32)  # [r, N]
    k, n = a.shape[0], b.shape[1]
    # Where each entry of the [K, N] matrix the model multiplies lands in the HF weight [out, in]: the adapters'
    # rows and columns follow, when each HF column is one K index and each HF row one N index.
    index = hf_export._to_hf(layout, np.arange(k * n).reshape(shapes[ours]))
    if index.ndim != 2 or not hf_name.endswith(".weight"):
      raise ValueError(f"{hf_name}: not a matrix in the HF checkpoint; PEFT cannot adapt it")
    rows, cols = index % n, index // n
    if not ((cols == cols[:1]).all() and (rows == rows[:, :1]).all()):
      raise ValueError(f"{hf_name}: its HF layout mixes the matmul's input and output axes")
    prefix = "base_model.model." + hf_name[: -len(".weight")]
    tensors.append((prefix + ".lora_A.weight", a[cols[0], :].T.copy(), hf_export.convert.KEEP))  # [r, in]
    tensors.append((prefix + ".lora_B.weight", b[:, rows[:, 0]].T.copy(), hf_export.convert.KEEP))  # [out, r]
    modules.append(hf_name[: -len(".weight")])
  out = pathlib.Path(out_dir).expanduser().absolute()
  out.mkdir(parents=True, exist_ok=True)
  hf_export._write_shard(out / "adapter_model.safetensors", tensors, np.dtype(np.float32))
  adapter_config = {
    "peft_type": "LORA",
    "task_type": "CAUSAL_LM",
    "r": spec.rank,
    "lora_alpha": spec.alpha,
    "lora_dropout": 0.0,
    "bias": "none",
    "fan_in_fan_out": False,
    "use_rslora": False,
    "init_lora_weights": True,
    "inference_mode": True,
    # One exact regex over PEFT's module names: the adapted modules and no other (a name list would reach every
    # layer's module of that name).
    "target_modules": "^(" + "|".join(re.escape(m) for m in modules) + ")$",
    "base_model_name_or_path": base_model,
  }
  fileio.atomic_write(out / "adapter_config.json", json.dumps(adapter_config, indent=2))
  return ["adapter_model.safetensors", "adapter_config.json"]
