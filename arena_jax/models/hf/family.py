"""The registry of Hugging Face architectures that `load_hf` reads: one `Family` per causal LM, one `Wrapper`
per multimodal checkpoint whose text decoder is the policy.

A family module declares its architecture's name, how its config.json becomes a `ModelConfig` and back,
and its key map (the `convert.Rule`s that place each stored tensor), then registers them:

    register(Family("Qwen2ForCausalLM", config_from_hf=config_from_hf, config_to_hf=config_to_hf,
                    key_map=key_map))

Everything else (reading safetensors, validation, FP8, the wrappers, the conversion itself, placement on a
mesh) is shared, so a new architecture is one module and its parity test. `SUPPORTED_ARCHITECTURES` and the
messages that name the supported architectures read this registry.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from arena_jax.models.config import ModelConfig
from arena_jax.registry import Registry


@dataclasses.dataclass(frozen=True)
class Family:
  """One causal-LM architecture.

  Attributes:
    architecture: its name in config.json's `architectures` (the registry key).
    config_from_hf: the parsed config.json (a wrapper's `text_config`) → a `ModelConfig` whose `param_dtype`
      and `dtype` are the checkpoint's; `UnsupportedCheckpointError` for options outside the family.
    config_to_hf: a `ModelConfig` → keyword arguments of the transformers config class (tests, benchmarks);
      ValueError for a config the architecture cannot express.
    key_map: a `ModelConfig` → the rules that place every stored tensor (`convert`): the converter and the
      shape checks both read them.
  """

  architecture: str
  config_from_hf: Callable[[dict[str, Any]], ModelConfig]
  config_to_hf: Callable[[ModelConfig], dict[str, Any]]
  key_map: Callable[[ModelConfig], Sequence[Any]]  # `convert.Rule`s (convert -> checks -> here: no import back)


@dataclasses.dataclass(frozen=True)
class Wrapper:
  """A multimodal architecture whose text decoder is the policy (`multimodal`): the decoder is read from
  config.json's `text_config`, its tensors are renamed to the causal LM's, the rest is skipped.

  Attributes:
    architecture: its name in config.json's `architectures` (the registry key).
    decoders: (text_config's `model_type`, the decoder's registered architecture) pairs.
    renames: (wrapper prefix, causal-LM prefix) pairs of the decoder's tensor names, the first that matches
      applies.
    skipped: prefixes of the tensors the policy does not read (vision tower, projector).
  """

  architecture: str
  decoders: tuple[tuple[str, str], ...]
  renames: tuple[tuple[str, str], ...]
  skipped: tuple[str, ...]


def _check(name: str, entry):
  if not isinstance(entry, (Family, Wrapper)) or entry.architecture != name:
    raise ValueError(f"a Hugging Face architecture entry must be a Family or Wrapper named {name!r}, got {entry!r:.80}")
  return entry


ARCHITECTURES: Registry[Family | Wrapper] = Registry("Hugging Face architecture", check=_check)


def register(entry: Family | Wrapper) -> Family | Wrapper:
  """Adds a family or wrapper under its architecture's name; returns it."""
  return ARCHITECTURES.register(entry.architecture)(entry)


def architecture_of(hf: dict[str, Any]) -> str | None:
  """The first of config.json's `architectures` that is registered, or None."""
  archs = hf.get("architectures") or []
  return next((a for a in archs if isinstance(a, str) and a in ARCHITECTURES), None)
