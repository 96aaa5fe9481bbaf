"""Import of local Hugging Face checkpoints (config.json + safetensors, single or sharded).

Supported architectures (`SUPPORTED_ARCHITECTURES`, read from the registry `ARCHITECTURES`): `LlamaForCausalLM`
(Llama 3.1 RoPE scaling, Llama 3.2 tied embeddings), `MistralForCausalLM`, `Qwen3ForCausalLM`,
`Ministral3ForCausalLM` (YaRN RoPE and Llama-4 attention scaling, `ModelConfig.query_scale_beta`),
`Mistral3ForConditionalGeneration` (Ministral-3 Instruct, the paper's policy: its text decoder is imported from
`text_config`, the vision tower and projector are skipped with one log line) and `Qwen2ForCausalLM` (q/k/v
biases without an o bias). FP8 checkpoints (`quantization_config.quant_method = "fp8"`: e4m3 weights with
`weight_scale_inv`, per-tensor, per-row or block-wise) are dequantised tensor by tensor as they are placed. The
reader neither imports torch nor transformers: config.json is parsed here and safetensors files are memory-
mapped (bfloat16 and float8 via ml_dtypes), so a checkpoint larger than RAM loads tensor by tensor onto a mesh.

A `.gguf` file (llama.cpp's format) is read as a checkpoint of the same families (`gguf`: its metadata as
config.json, its tensors renamed to the HF names and dequantised from F32/F16/BF16, the legacy, K- and i-quants
with llama.cpp's own `gguf` reader); `GGUF_ARCHITECTURES` lists llama (Llama and Mistral GGUFs), qwen2 and qwen3.

A new architecture is one module that declares its name, `config_from_hf`, `config_to_hf` and its key map, and
registers a `Family` (see `family`; `qwen2` is the smallest example), plus its parity test against transformers;
its GGUF form is one `register_gguf(GGUFArchitecture(...))` line there.

  family       `Family`, `Wrapper`, the registry `ARCHITECTURES`, `register`
  convert      key maps (`Rule`, `Layout`), the one converter and the shape checks that read them
  common       the config.json fields every family reads alike; what an architecture cannot express
  checks       the errors; config.json's types and values; finite weights
  reader       the safetensors reader (memory-mapped, tensor by tensor) and the index of a sharded checkpoint
  fp8          FP8 dequantisation at placement
  gguf         GGUF files as checkpoints of the families (`read_gguf`, `GGUF_ARCHITECTURES`, `register_gguf`)
  multimodal   a wrapper's text decoder: its config and tensor names
  loader       `load_hf`, `config_from_hf`, `config_to_hf`, `expected_hf_shapes`, `check_shapes`
  llama, mistral, qwen3, ministral3, qwen2   the families
"""

from arena_jax.models.hf.checks import (
  InvalidCheckpointError,
  UnsupportedCheckpointError,
  check_finite,
  check_hf_config,
)
from arena_jax.models.hf.convert import HEADS, HEADS_IN, HEADS_OUT, KEEP, TRANSPOSED, Layout, Rule
from arena_jax.models.hf.family import ARCHITECTURES, Family, Wrapper, register
from arena_jax.models.hf.fp8 import dequantize_fp8
from arena_jax.models.hf.gguf import GGUF_ARCHITECTURES, GGUFArchitecture, read_gguf, register_gguf
from arena_jax.models.hf.loader import (
  check_shapes,
  check_weights,
  config_from_hf,
  config_to_hf,
  expected_hf_shapes,
  load_hf,
)
from arena_jax.models.hf.multimodal import text_decoder_config, text_decoder_weights
from arena_jax.models.hf.reader import MAX_HEADER_BYTES, confined_file, read_safetensors

# The families: importing them registers them in ARCHITECTURES, in this order (the order the messages list them).
from arena_jax.models.hf import llama, mistral, qwen3, ministral3, qwen2  # noqa: F401

SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)
