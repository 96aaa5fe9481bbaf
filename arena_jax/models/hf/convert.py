"""The one converter from HF tensors to our parameters, driven by a family's key map.

A key map is a list of `Rule`s, each an HF tensor name pattern → one of our parameter paths, with the
`Layout` that turns the stored array into ours:

    Rule("model.layers.{layer}.self_attn.q_proj.weight", "layers/{layer}/attn/q_proj", HEADS_OUT)

`{layer}` (any `{name}`) matches a decimal index; a pattern compiles to a regular expression on the HF name,
and our path is its template filled with the same indices. Both directions run off the one list:

  convert        each stored tensor → the rule it matches → its path → our array (a tensor that no rule
                 maps, or that maps outside the model, is refused as unused)
  check_shapes   each stored tensor's shape against `layout.hf_shape` of the model's own parameter shape, so
                 the shapes come from the model and the map, never from a second table
  missing        each parameter of the model that no tensor filled → the rule whose path matches it → the
                 HF name it should have had

Layouts are one reshape and one transpose (HF `nn.Linear.weight` is [out, in]):

  KEEP        norms, embedding, o_proj / MLP biases          as stored
  TRANSPOSED  gate/up/down_proj [F, D] ↔ [D, F], lm_head [V, D] → [D, V]
  HEADS_OUT   q/k/v_proj [N·H, D] → [D, N, H]
  HEADS_IN    o_proj [D, N·H] → [N, H, D]
  HEADS       q/k/v biases [N·H] → [N, H]

RoPE needs no permutation: both sides use the rotate_half layout. Names are matched after a wrapper's
renaming (`multimodal`) and FP8 dequantisation (`fp8`, whose lazy tensors take the same views).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any, Iterable, Sequence

import jax

from arena_jax.models.hf.checks import InvalidCheckpointError, UnsupportedCheckpointError

# Buffers some exporters store beside the weights (RoPE's inv_freq): recomputed here, never read.
IGNORED = re.compile(r"rotary_emb")


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a stored tensor becomes one of our parameters: ours = hf.reshape(split).transpose(perm).

  `split` is our shape with the axes put back in the stored order (the inverse of `perm`); the stored tensor
  merges the split axes of each group in `groups` into one (None: no merging). The stored shape is therefore a
  function of ours (`hf_shape`), which is what the shape checks compare against.
  """

  perm: tuple[int, ...] | None = None
  groups: tuple[tuple[int, ...], ...] | None = None

  def split_shape(self, ours: Sequence[int]) -> tuple[int, ...]:
    if self.perm is None:
      return tuple(ours)
    split = [0] * len(ours)
    for axis, source in enumerate(self.perm):
      split[source] = ours[axis]
    return tuple(split)

  def hf_shape(self, ours: Sequence[int]) -> tuple[int, ...]:
    """The stored shape of a parameter of shape `ours`."""
    split = self.split_shape(ours)
    if self.groups is None:
      return split
    return tuple(math.prod(split[i] for i in group) for group in self.groups)

  def to_ours(self, x, ours: Sequence[int]):
    """The stored array `x` (a NumPy view or an `fp8.Lazy`) as a parameter of shape `ours`."""
    if self.groups is not None:
      x = x.reshape(self.split_shape(ours))
    if self.perm is not None:
      x = x.transpose(*self.perm)
    return x


KEEP = Layout()
TRANSPOSED = Layout(perm=(1, 0))
HEADS_OUT = Layout(perm=(2, 0, 1), groups=((0, 1), (2,)))  # [N·H, D] → [N, H, D] → [D, N, H]
HEADS_IN = Layout(perm=(1, 2, 0), groups=((0,), (1, 2)))  # [D, N·H] → [D, N, H] → [N, H, D]
HEADS = Layout(groups=((0, 1),))  # [N·H] → [N, H]


@dataclasses.dataclass(frozen=True)
class Rule:
  """One entry of a key map.

  Attributes:
    hf: the HF tensor name, `{layer}` (any `{name}`) standing for an index.
    ours: our parameter path, "/"-separated as in `nnx.to_pure_dict` (`layers/{layer}/attn/q_proj`).
    layout: how the stored array becomes ours.
    copy: the tensor is a stored copy of a parameter another rule loads (a tied lm_head beside the
      embedding): optional, shape-checked against that parameter, never loaded.
  """

  hf: str
  ours: str
  layout: Layout = KEEP
  copy: bool = False


@functools.cache
def _pattern(template: str) -> re.Pattern:
  parts = re.split(r"\{(\w+)\}", template)  # literal, name, literal, name, ..., literal
  return re.compile("".join(re.escape(p) if i % 2 == 0 else rf"(?P<{p}>\d+)" for i, p in enumerate(parts)))


def _fill(template: str, match: re.Match) -> str:
  return template.format(**match.groupdict())


def param_key(path) -> str:
  """A JAX tree path (`tree_map_with_path`) of the pure parameter dict as our "/"-separated parameter path."""
  return "/".join(str(getattr(p, "key", getattr(p, "idx", p))) for p in path)


def flat_params(pure: dict[str, Any]) -> dict[str, Any]:
  """{our parameter path: leaf} of a pure parameter dict (of the abstract model: the shapes)."""
  leaves, _ = jax.tree_util.tree_flatten_with_path(pure)
  return {param_key(path): leaf for path, leaf in leaves}


def _placements(rules: Sequence[Rule], weights: Iterable[str], params: dict[str, Any]):
  """(name, rule, our path) for each stored tensor; rule and path None where no rule maps it into the model."""
  for name in weights:
    for rule in rules:
      match = _pattern(rule.hf).fullmatch(name)
      if match is not None:
        path = _fill(rule.ours, match)
        if path in params:
          yield name, rule, path
          break
    else:
      yield name, None, None


def expected_shapes(rules: Sequence[Rule], params: dict[str, Any]) -> dict[str, tuple[int, ...]]:
  """{HF name: stored shape} of every tensor the key map reads for the parameters `params` (copies included)."""
  out = {}
  for rule in rules:
    for path, spec in params.items():
      match = _pattern(rule.ours).fullmatch(path)
      if match is not None:
        out[_fill(rule.hf, match)] = rule.layout.hf_shape(spec.shape)
  return out


def check_shapes(rules: Sequence[Rule], weights: dict[str, Any], params: dict[str, Any], where: str) -> None:
  """Every stored tensor that the key map reads has exactly the shape of its parameter in the stored layout (a
  transposed [in, out] projection with the right element count would otherwise reshape silently). A transpose
  of a truly square matrix keeps its shape and cannot be told from it."""
  for name, rule, path in _placements(rules, weights, params):
    if rule is None:
      continue
    want = rule.layout.hf_shape(params[path].shape)
    if tuple(weights[name].shape) != want:
      raise InvalidCheckpointError(
        f"{where}: tensor {name!r} has shape {tuple(weights[name].shape)}, the config "
        f"needs {want} ([out, in] as nn.Linear stores it)"
      )


def convert(rules: Sequence[Rule], weights: dict[str, Any], params: dict[str, Any], where: str) -> dict[str, Any]:
  """{our parameter path: array} for every parameter of `params` (the abstract model's), from the stored tensors
  by the key map; shapes checked first (`check_shapes`). The arrays are views (or `fp8.Lazy`): nothing is read
  before it is placed.

  Raises:
    InvalidCheckpointError: a tensor of the wrong shape.
    UnsupportedCheckpointError: a parameter without its tensor, or a tensor the model does not use.
  """
  check_shapes(rules, weights, params, where)
  out, unused = {}, []
  for name, rule, path in _placements(rules, weights, params):
    if rule is None:
      if not IGNORED.search(name):
        unused.append(name)
    elif not rule.copy:
      out[path] = rule.layout.to_ours(weights[name], params[path].shape)
  for path in params:
    if path not in out:
      rule = next((r for r in rules if not r.copy and _pattern(r.ours).fullmatch(path)), None)
      if rule is None:  # the family's key map does not cover its own config
        raise UnsupportedCheckpointError(f"no rule of the key map places parameter {path!r}")
      name = _fill(rule.hf, _pattern(rule.ours).fullmatch(path))
      raise UnsupportedCheckpointError(f"checkpoint lacks tensor {name!r}")
  if unused:
    raise UnsupportedCheckpointError(f"checkpoint has tensors this model does not use: {sorted(unused)[:8]}")
  return out
