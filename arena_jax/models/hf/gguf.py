"""GGUF checkpoints as a family's checkpoint: a `.gguf` file read into the config.json and the tensor names that
the family's key map already reads, so that everything after (the checks, the converter, placement on a mesh) is
the safetensors path's own.

    general.architecture ─ GGUF_ARCHITECTURES ─→ the HF family (LlamaForCausalLM, Qwen2ForCausalLM, …)
    {arch}.block_count, …  ─ config_json ─→ config.json's fields ─ family.config_from_hf ─→ ModelConfig
    blk.{layer}.attn_q.weight ─ TENSOR_NAMES ─→ model.layers.{layer}.self_attn.q_proj.weight (dequantised on
                                 placement, one tensor at a time; Llama's q/k rows un-permuted)

A new GGUF architecture is one `register_gguf(GGUFArchitecture(...))` in its family's module: its llama.cpp name,
the HF architecture whose key map it shares, and whether llama.cpp permuted its q/k rows. transformers' GGUF
loader (`transformers.integrations.ggml`, `modeling_gguf_pytorch_utils`) is the reference that the parity tests
compare against. The tokenizer and the chat template are read from the same file by `arena_jax.tokenizer`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterator, Mapping

import numpy as np

from arena_jax.gguf_file import GGUFError, GGUFFile, open_gguf
from arena_jax.models.hf.fp8 import Lazy
from arena_jax.registry import Registry


@dataclasses.dataclass(frozen=True)
class GGUFArchitecture:
  """One GGUF architecture (`general.architecture`).

  Attributes:
    name: llama.cpp's name of the architecture ("llama", "qwen2", …): the registry key and the prefix of its
      metadata keys.
    architecture: the registered HF architecture it imports as; its key map reads the renamed tensors.
    permute_qk: llama.cpp's converter permuted the rows of q_proj and k_proj (for its interleaved RoPE); they
      are put back into the rotate-half order that the HF checkpoint and this model use.
  """

  name: str
  architecture: str
  permute_qk: bool = False


def _check(name: str, entry):
  if not isinstance(entry, GGUFArchitecture) or entry.name != name:
    raise ValueError(f"a GGUF architecture entry must be a GGUFArchitecture named {name!r}, got {entry!r:.80}")
  return entry


GGUF_ARCHITECTURES: Registry[GGUFArchitecture] = Registry("GGUF architecture", check=_check)


def register_gguf(entry: GGUFArchitecture) -> GGUFArchitecture:
  """Adds a GGUF architecture under its llama.cpp name; returns it."""
  return GGUF_ARCHITECTURES.register(entry.name)(entry)


# llama.cpp's tensor names (gguf's TENSOR_NAMES / tensor_mapping) → the HF names the decoder families store.
TENSOR_NAMES = (
  ("token_embd.weight", "model.embed_tokens.weight"),
  ("output_norm.weight", "model.norm.weight"),
  ("output.weight", "lm_head.weight"),
  ("blk.{layer}.attn_norm.weight", "model.layers.{layer}.input_layernorm.weight"),
  ("blk.{layer}.ffn_norm.weight", "model.layers.{layer}.post_attention_layernorm.weight"),
  ("blk.{layer}.attn_q.{kind}", "model.layers.{layer}.self_attn.q_proj.{kind}"),
  ("blk.{layer}.attn_k.{kind}", "model.layers.{layer}.self_attn.k_proj.{kind}"),
  ("blk.{layer}.attn_v.{kind}", "model.layers.{layer}.self_attn.v_proj.{kind}"),
  ("blk.{layer}.attn_output.{kind}", "model.layers.{layer}.self_attn.o_proj.{kind}"),
  ("blk.{layer}.attn_q_norm.weight", "model.layers.{layer}.self_attn.q_norm.weight"),
  ("blk.{layer}.attn_k_norm.weight", "model.layers.{layer}.self_attn.k_norm.weight"),
  ("blk.{layer}.ffn_gate.{kind}", "model.layers.{layer}.mlp.gate_proj.{kind}"),
  ("blk.{layer}.ffn_up.{kind}", "model.layers.{layer}.mlp.up_proj.{kind}"),
  ("blk.{layer}.ffn_down.{kind}", "model.layers.{layer}.mlp.down_proj.{kind}"),
)
_NAME_PATTERNS = tuple(
  (re.compile(re.escape(g).replace(r"\{layer\}", r"(?P<layer>\d+)").replace(r"\{kind\}", r"(?P<kind>weight|bias)")), h)
  for g, h in TENSOR_NAMES
)


def hf_name(gguf_name: str) -> str | None:
  """The HF name of a llama.cpp tensor name, or None for a name outside `TENSOR_NAMES`."""
  for pattern, template in _NAME_PATTERNS:
    m = pattern.fullmatch(gguf_name)
    if m is not None:
      return template.format(**m.groupdict())
  return None


def architecture_of(f: GGUFFile) -> GGUFArchitecture:
  name = f.metadata.get("general.architecture")
  if name is None:
    raise GGUFError(f"{f.path}: no general.architecture in its metadata")
  entry = GGUF_ARCHITECTURES.get(name) if isinstance(name, str) else None
  if entry is None:
    raise GGUFError(
      f"{f.path}: GGUF architecture {name!r} is not supported; supported are {', '.join(GGUF_ARCHITECTURES)}"
    )
  return entry


def _field(f: GGUFFile, key: str, default: Any = None, *, required: bool = False) -> Any:
  value = f.metadata.get(key, default)
  if required and value is None:
    raise GGUFError(f"{f.path}: metadata key {key!r} is missing")
  if isinstance(value, list):  # per-layer values (llama.cpp writes an array when layers differ)
    if len(set(value)) != 1:
      raise GGUFError(f"{f.path}: {key} differs between layers ({value[:6]}…), which is not supported")
    value = value[0]
  return value


def config_json(f: GGUFFile) -> dict[str, Any]:
  """The config.json (the HF fields every family reads) of a GGUF file, from its metadata: layers, heads, KV
  heads, sizes, RoPE base, norm epsilon, context length, tied embeddings (no `output.weight` stored)."""
  entry = architecture_of(f)
  a = entry.name
  names = set(f.tensor_names())
  if "rope_freqs.weight" in names:
    raise GGUFError(
      f"{f.path}: rope_freqs.weight (llama.cpp's per-frequency RoPE factors, Llama 3.1 scaling) is not "
      "supported from GGUF; import the Hugging Face checkpoint instead"
    )
  embedding = "token_embd.weight"
  if embedding not in names:
    raise GGUFError(f"{f.path}: no tensor {embedding!r}")
  d_model = int(_field(f, f"{a}.embedding_length", required=True))
  heads = int(_field(f, f"{a}.attention.head_count", required=True))
  head_dim = int(_field(f, f"{a}.attention.key_length", d_model // max(heads, 1)))
  rope_dims = _field(f, f"{a}.rope.dimension_count")
  if rope_dims is not None and int(rope_dims) != head_dim:
    raise GGUFError(
      f"{f.path}: {a}.rope.dimension_count={rope_dims} < head_dim={head_dim} (partial RoPE) is not supported"
    )
  hf: dict[str, Any] = {
    "architectures": [entry.architecture],
    "vocab_size": int(_field(f, f"{a}.vocab_size", f.tensor_shape(embedding)[0])),
    "hidden_size": d_model,
    "num_hidden_layers": int(_field(f, f"{a}.block_count", required=True)),
    "num_attention_heads": heads,
    "num_key_value_heads": int(_field(f, f"{a}.attention.head_count_kv", heads)),
    "head_dim": head_dim,
    "intermediate_size": int(_field(f, f"{a}.feed_forward_length", required=True)),
    "rope_theta": float(_field(f, f"{a}.rope.freq_base", 10_000.0)),
    "rms_norm_eps": float(_field(f, f"{a}.attention.layer_norm_rms_epsilon", 1e-5)),
    "max_position_embeddings": int(_field(f, f"{a}.context_length", 8192)),
    "tie_word_embeddings": "output.weight" not in names,
    "attention_bias": "blk.0.attn_q.bias" in names,
    "hidden_act": "silu",
    "torch_dtype": "float32",  # every tensor is dequantised to float32 before the configured param dtype
  }
  scaling = _field(f, f"{a}.rope.scaling.type")
  if scaling not in (None, "none"):
    factor = _field(f, f"{a}.rope.scaling.factor", required=True)
    hf["rope_scaling"] = {"rope_type": scaling, "factor": float(factor)}
    original = _field(f, f"{a}.rope.scaling.original_context_length")
    if original is not None:
      hf["rope_scaling"]["original_max_position_embeddings"] = int(original)
  return hf


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
  """llama.cpp's converter stores each head's q/k rows as [pair, half] (interleaved RoPE: the two rows that rotate
  together are adjacent); the HF order is [half, pair] (rotate-half). The inverse of its permutation, as
  transformers' `reverse_permute_weights`."""
  rows = w.shape[0]
  return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class _Tensors(Mapping):
  """{HF name: lazy float32 tensor} of a GGUF file: each is read, dequantised, un-permuted and checked for
  finite values only when it is placed, so one full-precision tensor exists at a time."""

  def __init__(self, f: GGUFFile, entry: GGUFArchitecture, hf: dict[str, Any]):
    self._f = f
    self._names: dict[str, str] = {}
    unknown = []
    for name in f.tensor_names():
      mapped = hf_name(name)
      if mapped is None:
        unknown.append(name)
      else:
        self._names[mapped] = name
    if unknown:
      raise GGUFError(f"{f.path}: tensors this importer does not map: {sorted(unknown)[:8]}")
    self._permute = {}
    if entry.permute_qk:
      for hf_key, heads in (("q_proj", hf["num_attention_heads"]), ("k_proj", hf["num_key_value_heads"])):
        for mapped in self._names:
          if f".self_attn.{hf_key}." in mapped:
            self._permute[mapped] = heads

  def __getitem__(self, key: str):
    name = self._names[key]
    return Lazy(lambda: self._load(key, name), self._f.tensor_shape(name))

  def _load(self, key: str, name: str) -> np.ndarray:
    from arena_jax.models.hf.checks import InvalidCheckpointError  # pylint: disable=g-import-not-at-top

    value = self._f.tensor(name)
    if not np.isfinite(value).all():
      raise InvalidCheckpointError(f"{self._f.path}: tensor {name!r} holds NaN or infinite values")
    if key in self._permute:
      value = _unpermute(value, self._permute[key])
    return value

  def __iter__(self) -> Iterator[str]:
    return iter(self._names)

  def __len__(self) -> int:
    return len(self._names)


def read_gguf(path) -> tuple[dict[str, Any], Mapping[str, Any]]:
  """(config.json's fields, {HF tensor name: lazy float32 tensor}) of a GGUF file; `GGUFError` for a file that
  is not GGUF, of another version, cut short, with a tensor type that cannot be dequantised, or of an
  unsupported architecture."""
  f = open_gguf(path)
  hf = config_json(f)
  return hf, _Tensors(f, architecture_of(f), hf)
