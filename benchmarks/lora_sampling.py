"""LoRA in the sampler: merge the adapters once per RL step, or apply them on the fly at every decode step?

    python -m benchmarks.lora_sampling [--rows 64] [--decode-steps 128] [--rank 16] [--prompt-len 128]
    python -m benchmarks.lora_sampling --smoke        # the tiny model, the same code

Workload: SmolLM2-135M-Instruct (the GGUF of `make real-model`), float32 on the CPU, adapters of rank `--rank` on
every projection (`model.lora`'s default targets), with trained-looking values (B ≠ 0). One RL step's sampling is
a prefill of `--rows` rows of `--prompt-len` tokens, then `--decode-steps` steps of one token per row. Both forms
run the same jitted full-sequence forward (`Transformer.hidden`, plus the output head), side by side in this
process:

  merged      W' = W + (α/r)·A·B for every adapted weight, once per RL step (`models.merge_adapters`, jitted:
              what `train.Trainer.policy_params` does), then the plain model on W'
  on the fly  the Qwix-adapted model (`models.lora_template`): x·W + (α/r)·(x·A)·B at every projection

A decode step is timed as the forward of [rows, 1] tokens: every projection and MLP of a decode step at its shape,
without the KV-cache attention, which is the same in both forms (the adapters touch only the projections). The
sampler itself decodes merged weights: Qwix intercepts one method of an NNX model, the trainer's full-sequence
`hidden`, and the sampler's cached prefill and decode are other methods, so on-the-fly adapters in the sampler
would need their own interception; this measures whether building it would pay.

  per_step_s_merged     merge + prefill + decode_steps × decode step, merged weights
  per_step_s_on_the_fly prefill + decode_steps × decode step, adapters applied
  speedup_merged        per_step_s_on_the_fly ÷ per_step_s_merged (> 1: merging is faster)

The last line is JSON.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from arena_jax import models  # noqa: E402
from arena_jax.models import lora  # noqa: E402
from arena_jax.sampling import model_from_params  # noqa: E402


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rows", type=int, default=64)
  parser.add_argument("--prompt-len", type=int, default=128)
  parser.add_argument("--decode-steps", type=int, default=128)
  parser.add_argument("--rank", type=int, default=16)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--smoke", action="store_true", help="the tiny random model instead of the real one")
  args = parser.parse_args(argv)

  if args.smoke:
    config = models.get_model_config("tiny")
    base = models.pure_params(models.init_model(config, 0))
    name = "tiny (random)"
  else:
    from arena_jax import pretrained  # pylint: disable=g-import-not-at-top
    from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top

    policy = policy_io.load_policy(pretrained.smollm2_gguf(), weight_dtype="float32", dtype="float32")
    config, base, name = policy.config, models.pure_params(policy.model), "SmolLM2-135M-Instruct"
  spec = lora.LoraSpec(rank=args.rank, alpha=2.0 * args.rank)
  template = lora.lora_template(config, spec)
  rng = np.random.default_rng(0)
  adapters = jax.tree.map(  # trained-looking: B ≠ 0, so the on-the-fly form cannot skip a zero product
    lambda x: jnp.asarray(rng.normal(0, 0.02, x.shape), x.dtype), lora.init_adapters(template, 0)
  )

  merge = jax.jit(lora.merge_adapters, static_argnums=2)

  @jax.jit
  def plain_forward(params, tokens):
    return model_from_params(config, params)(tokens)

  @jax.jit
  def adapted_forward(base, adapters, tokens):
    return template.model(base, adapters)(tokens)

  prompt = jnp.asarray(rng.integers(3, config.vocab_size, (args.rows, args.prompt_len)), jnp.int32)
  one = prompt[:, :1]
  merged = merge(base, adapters, spec)
  # The same model: the two forms agree to float32 round-off (a sanity check, not a timing).
  diff = float(jnp.abs(plain_forward(merged, one) - adapted_forward(base, adapters, one)).max())

  block = jax.block_until_ready
  t_merge = common.timed(lambda: block(merge(base, adapters, spec)), repeats=args.repeats)
  t_prefill_m = common.timed(lambda: block(plain_forward(merged, prompt)), repeats=args.repeats)
  t_prefill_f = common.timed(lambda: block(adapted_forward(base, adapters, prompt)), repeats=args.repeats)
  t_step_m = common.timed(lambda: block(plain_forward(merged, one)), repeats=args.repeats * 4)
  t_step_f = common.timed(lambda: block(adapted_forward(base, adapters, one)), repeats=args.repeats * 4)

  per_step_m = t_merge + t_prefill_m + args.decode_steps * t_step_m
  per_step_f = t_prefill_f + args.decode_steps * t_step_f
  print(
    f"{name}, float32, {jax.devices()[0].platform}; LoRA rank {args.rank} on every projection "
    f"({lora.adapter_count(adapters):,} adapter parameters); {args.rows} rows, prompt {args.prompt_len}, "
    f"{args.decode_steps} decode steps; max |logit difference| of the two forms {diff:.2e}\n"
  )
  common.print_table(
    ["form", "merge s", "prefill s", "decode step ms", "per RL step s"],
    [
      ["merged", t_merge, t_prefill_m, t_step_m * 1e3, per_step_m],
      ["on the fly", 0.0, t_prefill_f, t_step_f * 1e3, per_step_f],
    ],
  )
  figures = {
    "model": name,
    "rank": args.rank,
    "rows": args.rows,
    "prompt_len": args.prompt_len,
    "decode_steps": args.decode_steps,
    "merge_s": round(t_merge, 5),
    "prefill_s_merged": round(t_prefill_m, 5),
    "prefill_s_on_the_fly": round(t_prefill_f, 5),
    "decode_step_ms_merged": round(t_step_m * 1e3, 4),
    "decode_step_ms_on_the_fly": round(t_step_f * 1e3, 4),
    "per_step_s_merged": round(per_step_m, 4),
    "per_step_s_on_the_fly": round(per_step_f, 4),
    "speedup_merged": round(per_step_f / per_step_m, 3),
    "max_logit_diff": diff,
  }
  print()
  common.emit_json(figures)
  return figures


if __name__ == "__main__":
  main(sys.argv[1:])
