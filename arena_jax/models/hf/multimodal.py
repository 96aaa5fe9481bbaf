"""Multimodal checkpoints whose text decoder is the policy (a registered `Wrapper`, e.g.
`Mistral3ForConditionalGeneration`): the decoder's config is the wrapper's `text_config`, its tensors are
renamed to the causal LM's names, the vision tower and projector are skipped. Causal LMs pass unchanged.
"""

from __future__ import annotations

from typing import Any

from absl import logging

from arena_jax.models.hf.checks import UnsupportedCheckpointError
from arena_jax.models.hf.family import ARCHITECTURES, Wrapper, architecture_of


def text_decoder_config(hf: dict[str, Any]) -> tuple[dict[str, Any], str]:
  """(the decoder's config, its architecture) of a parsed config.json: the config itself for a causal LM,
  the `text_config` of a multimodal wrapper (`Mistral3ForConditionalGeneration`)."""
  arch = architecture_of(hf)
  if arch is None:
    raise UnsupportedCheckpointError(
      f"unsupported architecture {hf.get('architectures') or hf.get('model_type')!r}: load_hf supports "
      f"{', '.join(ARCHITECTURES)}"
    )
  wrapper = ARCHITECTURES[arch]
  if not isinstance(wrapper, Wrapper):
    return hf, arch
  text = hf.get("text_config")
  if not isinstance(text, dict):
    raise UnsupportedCheckpointError(f"{arch}: config.json has no text_config")
  decoders = dict(wrapper.decoders)
  decoder = decoders.get(text.get("model_type"))
  if decoder is None:
    raise UnsupportedCheckpointError(
      f"{arch}: text decoder model_type {text.get('model_type')!r} is not supported ({', '.join(decoders)})"
    )
  # The wrapper's storage dtype applies to the decoder when the text_config does not state its own.
  inherited = {k: hf[k] for k in ("torch_dtype", "dtype", "quantization_config") if k in hf and k not in text}
  return {**text, **inherited}, decoder


def text_decoder_weights(weights: dict[str, Any], architecture: str) -> dict[str, Any]:
  """The causal-LM tensor names of a multimodal checkpoint's text decoder (for Mistral3ForConditionalGeneration,
  `language_model.model.*` and `model.language_model.*` → `model.*`, `language_model.lm_head` → `lm_head`); the
  vision tower and projector are dropped, said in one log line. Other architectures' weights pass unchanged."""
  wrapper = ARCHITECTURES.get(architecture)
  if not isinstance(wrapper, Wrapper):
    return weights
  out, skipped = {}, 0
  for name, value in weights.items():
    if name.startswith(wrapper.skipped):
      skipped += 1
      continue
    for old, new in wrapper.renames:
      if name.startswith(old):
        name = new + name[len(old) :]
        break
    out[name] = value
  logging.info(
    "load_hf: %s: importing the text decoder; the vision tower and projector (%d tensors) are "
    "skipped (the policy reads text only)",
    architecture,
    skipped,
  )
  return out
