"""The policy: a Flax NNX decoder of the Llama / Mistral / Qwen2 / Qwen3 family, HF import, per-token log-probs.

  Transformer          the model; `model(tokens [B, T])` → logits [B, T, V]
  ModelConfig          frozen, hashable config; `RopeScaling` for linear / llama3 / yarn RoPE
  tiny_config()        the embedded demo's policy; `get_model_config(name)` for named real-size configs
  load_hf(path)        a local HF checkpoint directory or `.gguf` file as a `Transformer` (a family of
                       `models.hf`: Llama, Mistral, Qwen2, Qwen3, Ministral-3; GGUF: llama, qwen2, qwen3)
  token_logprobs(...)  teacher-forced log π(completion token | prompt, prefix), memory-aware
                       (`packed_token_logprobs`: the same from packed rows, `train.packing`)
  full_attention(...)  full-sequence attention by kernel: xla (reference), Pallas splash (TPU), cudnn (GPU);
                       `kernel_mesh` / `traced_on_mesh` run the kernels per shard of a mesh
  KVCache              the sampler's cache: the prompt once per group, completions in chunks
  pure_params(m)       a Module / nnx.State → the pure parameter dict (what jit, orbax and the sampler take)
  quantize_for_training(m)  the model as a train step with `config.quantization` (FP8, Qwix) runs it
  LoraSpec, apply_lora, split_adapters, merge_adapters, AdaptedTemplate   LoRA adapters through Qwix (lora.py)
  lora_template, init_adapters, abstract_adapters, adapter_count          the trainer's (abstract, fresh adapters)
  LOGICAL_AXIS_RULES   logical axis names → mesh axes (`make_mesh`, `param_shardings`, `logical_to_spec`)

Importing this room never imports torch or transformers.
"""

from arena_jax.models.attention import (
  ATTENTION_CHOICES,
  ATTENTION_IMPLS,
  full_attention,
  kernel_mesh,
  resolve_attention,
  traced_on_mesh,
)
from arena_jax.models.config import (
  MODEL_CONFIGS,
  MODEL_DTYPES,
  QUANTIZATIONS,
  REMAT_POLICIES,
  ModelConfig,
  RopeScaling,
  get_model_config,
  register_model_config,
  rope_frequencies,
  sampling_config,
  tiny_config,
  with_precision,
)
from arena_jax.models.hf import (
  SUPPORTED_ARCHITECTURES,
  InvalidCheckpointError,
  UnsupportedCheckpointError,
  config_from_hf,
  config_to_hf,
  load_hf,
  read_safetensors,
)
from arena_jax.models.kv_cache import KVCache
from arena_jax.models.logprobs import chunked_logprobs, packed_token_logprobs, token_logprobs
from arena_jax.models.params import pure_params
from arena_jax.models.quantization import quantize_for_training
from arena_jax.models.lora import (
  AdaptedTemplate,
  LoraSpec,
  abstract_adapters,
  adapter_count,
  apply_lora,
  init_adapters,
  lora_template,
  merge_adapters,
  split_adapters,
)
from arena_jax.models.sharding import (
  LOGICAL_AXIS_RULES,
  MESH_AXES,
  logical_sharding,
  logical_to_spec,
  make_mesh,
  num_batch_shards,
  param_shardings,
)
from arena_jax.models.transformer import (
  Transformer,
  abstract_model,
  apply_rope,
  init_model,
  rope_tables,
)
