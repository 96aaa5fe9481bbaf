"""FP8 matmuls in the train step (SPEC §9: the paper trains in FP8), through Qwix's quantized training.

`quantize_for_training(model)` returns the model whose full-sequence forward (`Transformer.hidden`, what
the RL loss and SFT differentiate) runs the decoder blocks' projections and MLP as FP8 matmuls when
`model.config.quantization == "fp8"`:

  forward    both operands quantized to float8_e4m3fn with per-channel absmax scales (weights cast from the
             float32 masters to the compute dtype first, then to e4m3 inside the matmul)
  backward   the incoming gradients quantized to float8_e5m2 (wider range, as gradients need), residuals
             reused from the forward pass

This is Qwix's `QtProvider` with the rule maxtext calls `fp8_full` (`QtRule(weight_qtype=e4m3,
act_qtype=e4m3, bwd_qtype=e5m2, op_names=("dot_general",))`), restricted to the `attn` and `mlp` modules:
attention's score and value einsums and the output projection stay in the compute dtype. The master
weights, the optimizer state and the sampler's copy are untouched: quantization exists only inside the
differentiated forward pass, recomputed from the masters at every step (dynamic scaling, no state).

Why Qwix and not AQT (both were measured; docs/tpu.md "Precision"): on a SwiGLU block's forward + backward
on this CPU, Qwix's gradients were closer to float32's (relative error 0.072 against AQT's 0.088 with the
same e4m3/e5m2 recipe) at the same speed (both emulated), Qwix intercepts the model's own
`jax.lax.dot_general` calls (`models.transformer.matmul`) where AQT needs its dot_general threaded through
every layer, and maxtext's current FP8 path is Qwix (`use_qwix_quantization`).

Qwix is imported only when a model is quantized: `import arena_jax` never loads it.
"""

from __future__ import annotations

import jax.numpy as jnp

# The decoder modules whose matmuls are quantized (their nnx paths end in these names); the rest of a block
# (attention's einsums, norms) and the embedding / output projection keep the compute dtype.
QUANTIZED_MODULES = r".*(attn|mlp)"


def fp8_rule():
  """Qwix's rule of FP8 training: e4m3 forward operands, e5m2 backward gradients, on `QUANTIZED_MODULES`."""
  import qwix  # pylint: disable=g-import-not-at-top  (optional: only FP8 runs load it)

  return qwix.QtRule(
    module_path=QUANTIZED_MODULES,
    op_names=("dot_general",),
    weight_qtype=jnp.float8_e4m3fn,
    act_qtype=jnp.float8_e4m3fn,
    bwd_qtype=jnp.float8_e5m2,
  )


def quantize_for_training(model):
  """`model` as the train step runs it: unchanged without `config.quantization`, else a copy whose
  `hidden` (the full-sequence forward) is intercepted by Qwix (module docstring). Traceable: the train
  step calls it inside its jitted loss on every trace, and nothing is run or allocated here."""
  kind = model.config.quantization
  if not kind:
    return model
  if kind != "fp8":
    raise ValueError(f"ModelConfig.quantization {kind!r} has no implementation here (use '' or 'fp8')")
  import qwix  # pylint: disable=g-import-not-at-top

  # `skip_nnx_init`: dynamic scales need no initialising forward pass (Qwix wants some input all the same).
  return qwix.quantize_model(
    model, qwix.QtProvider([fp8_rule()]), jnp.zeros((1, 1), jnp.int32), methods=("hidden",), skip_nnx_init=True
  )
