"""KV-cache sampling: one prefill per prompt, G samples per prompt in jitted, donated while_loops.

  Sampler        small frozen object; `sampler(params, prompts, rng)` → SampleOutput
  SampleOutput   tokens, behaviour log-probs, lengths, truncated, completion_step, is_greedy ([B·G, …])
  Greedy, RandomSampling(temperature, top_k, top_p)   sampling methods
  apply_top_k, apply_top_p, sample_categorical, uniforms, mask_after_stop, bucket_length,
  cache_chunking  the pure helpers they are built from
"""
from arena_jax.sampling.methods import (
    Greedy,
    RandomSampling,
    SamplingMethod,
    apply_top_k,
    apply_top_p,
    sample_categorical,
    uniforms,
)
from arena_jax.sampling.sampler import (
    DEFAULT_PROMPT_BUCKETS,
    DecodeState,
    SampleOutput,
    Sampler,
    bucket_length,
    cache_chunking,
    mask_after_stop,
    model_from_params,
)
