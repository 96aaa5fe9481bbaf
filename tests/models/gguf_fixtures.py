"""GGUF files for the tests, written with llama.cpp's own writer (`gguf.GGUFWriter`) the way its converter
(convert_hf_to_gguf.py) lays out a HF checkpoint: llama.cpp's tensor names, Llama's q/k rows permuted for its
interleaved RoPE, 2-D weights quantised, norms in F32."""

from __future__ import annotations

import numpy as np

# (HF name suffix, llama.cpp name) of a decoder layer's tensors, and the model-level ones.
LAYER_NAMES = (
  ("input_layernorm.weight", "attn_norm.weight"),
  ("post_attention_layernorm.weight", "ffn_norm.weight"),
  ("self_attn.q_proj.weight", "attn_q.weight"),
  ("self_attn.k_proj.weight", "attn_k.weight"),
  ("self_attn.v_proj.weight", "attn_v.weight"),
  ("self_attn.o_proj.weight", "attn_output.weight"),
  ("self_attn.q_proj.bias", "attn_q.bias"),
  ("self_attn.k_proj.bias", "attn_k.bias"),
  ("self_attn.v_proj.bias", "attn_v.bias"),
  ("self_attn.q_norm.weight", "attn_q_norm.weight"),
  ("self_attn.k_norm.weight", "attn_k_norm.weight"),
  ("mlp.gate_proj.weight", "ffn_gate.weight"),
  ("mlp.up_proj.weight", "ffn_up.weight"),
  ("mlp.down_proj.weight", "ffn_down.weight"),
)
MODEL_NAMES = (
  ("model.embed_tokens.weight", "token_embd.weight"),
  ("model.norm.weight", "output_norm.weight"),
  ("lm_head.weight", "output.weight"),
)
# Where the float16 scales sit in a block of each K-quant (ggml-common.h's block_q*_K), which `gguf` can
# dequantise but not quantise: random blocks get small finite scales there.
K_QUANT_SCALES = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def permute(w: np.ndarray, heads: int) -> np.ndarray:
  """llama.cpp's converter's permutation of Llama's q/k rows (rotate-half → interleaved pairs)."""
  return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantized(x: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
  """`x` in `kind`'s bytes ([rows, bytes]); for a K-quant, random blocks with small scales instead (what is
  compared is the loader's plumbing, against transformers reading the same bytes)."""
  from gguf import GGML_QUANT_SIZES, GGMLQuantizationType  # pylint: disable=g-import-not-at-top
  from gguf import quants  # pylint: disable=g-import-not-at-top

  q = GGMLQuantizationType[kind]
  if kind in K_QUANT_SCALES:
    block, size = GGML_QUANT_SIZES[q]
    out = rng.integers(0, 256, (x.shape[0], x.shape[1] // block * size), dtype=np.uint8)
    blocks = out.reshape(x.shape[0], -1, size)
    for offset in K_QUANT_SCALES[kind]:
      blocks[..., offset : offset + 2] = np.frombuffer(np.float16(4e-4).tobytes(), np.uint8)
    return out
  return quants.quantize(x.astype(np.float32), q)


def write_gguf(
  path,
  weights: dict[str, np.ndarray],
  hf: dict,
  *,
  arch: str = "llama",
  kind: str = "F32",
  permute_qk: bool | None = None,
  metadata: dict | None = None,
  tokenizer: dict | None = None,
  seed: int = 0,
) -> str:
  """Writes the HF `weights` (numpy, HF names) of a checkpoint with config.json `hf` as a GGUF of `arch` with
  every 2-D weight in `kind`. `metadata` adds or replaces key-value pairs ({key: (value, GGUFValueType name)});
  `tokenizer` ({"tokens", "merges", "token_types", "bos", "eos", "chat_template"}) writes a GPT-2 BPE."""
  import gguf  # pylint: disable=g-import-not-at-top

  permute_qk = arch == "llama" if permute_qk is None else permute_qk
  rng = np.random.default_rng(seed)
  writer = gguf.GGUFWriter(str(path), arch)
  heads, kv = hf["num_attention_heads"], hf.get("num_key_value_heads", hf["num_attention_heads"])
  writer.add_block_count(hf["num_hidden_layers"])
  writer.add_context_length(hf.get("max_position_embeddings", 2048))
  writer.add_embedding_length(hf["hidden_size"])
  writer.add_feed_forward_length(hf["intermediate_size"])
  writer.add_head_count(heads)
  writer.add_head_count_kv(kv)
  rope = hf.get("rope_parameters") or {}  # transformers 5 keeps θ there
  writer.add_rope_freq_base(float(hf.get("rope_theta") or rope.get("rope_theta", 10000.0)))
  writer.add_layer_norm_rms_eps(float(hf.get("rms_norm_eps", 1e-6)))
  head_dim = hf.get("head_dim") or hf["hidden_size"] // heads
  writer.add_key_length(head_dim)
  writer.add_value_length(head_dim)
  writer.add_rope_dimension_count(head_dim)
  writer.add_vocab_size(hf["vocab_size"])
  writer.add_file_type(0)
  if tokenizer:
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(tokenizer.get("pre", "default"))
    writer.add_token_list(tokenizer["tokens"])
    writer.add_token_types(tokenizer["token_types"])
    writer.add_token_merges(tokenizer["merges"])
    writer.add_bos_token_id(tokenizer["bos"])
    writer.add_eos_token_id(tokenizer["eos"])
    if tokenizer.get("chat_template"):
      writer.add_chat_template(tokenizer["chat_template"])
  for key, (value, kind_name) in (metadata or {}).items():
    writer.add_key_value(key, value, gguf.GGUFValueType[kind_name])
  names = dict(MODEL_NAMES)
  for i in range(hf["num_hidden_layers"]):
    names.update({f"model.layers.{i}.{h}": f"blk.{i}.{g}" for h, g in LAYER_NAMES})
  for name, value in weights.items():
    value = np.asarray(value, np.float32)
    if permute_qk and name.endswith(("q_proj.weight", "k_proj.weight")):
      value = permute(value, heads if "q_proj" in name else kv)
    if value.ndim == 2 and kind != "F32":
      writer.add_tensor(names[name], quantized(value, kind, rng), raw_dtype=gguf.GGMLQuantizationType[kind])
    else:
      writer.add_tensor(names[name], value)
  writer.write_header_to_file()
  writer.write_kv_data_to_file()
  writer.write_tensors_to_file()
  writer.close()
  return str(path)
