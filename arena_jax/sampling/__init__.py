"""KV-cache sampling: one prefill per prompt, G samples per prompt in jitted, donated while_loops.

Sampler        small frozen object; `sampler(params, prompts, rng)` → SampleOutput;
               `sampler.stream(...)` yields a StreamChunk (the rows that finished) after each chunk
SampleOutput   tokens, behaviour log-probs, lengths, truncated, completion_step, is_greedy ([B·G, …]);
               `concat_outputs` joins several calls' (a rollout split into calls)
Greedy, RandomSampling(temperature, top_k, top_p)   sampling methods
TokenChoice    the sampling of one token at every step: logits processor, method, behaviour log-prob, greedy anchor
apply_top_k, apply_top_p, sample_categorical, uniforms, mask_after_stop, bucket_length,
cache_chunking  the pure helpers they are built from
ForcedStops    a logits processor that fixes each row's completion length (benchmarks, tests)
evaluate, pass_at_k, flatten_metrics, generate, sampling_options   accuracy of a policy on a task's examples: greedy
               accuracy, mean pass ratio@n, unbiased pass@k (sampling scored by the task's verifier;
               what SFT reports and `arena_jax.eval`'s checkpoint watcher runs)
"""

from arena_jax.sampling.methods import (
  Greedy,
  RandomSampling,
  SamplingMethod,
  TokenChoice,
  apply_top_k,
  apply_top_p,
  sample_categorical,
  uniforms,
)
from arena_jax.sampling.decode_state import (
  DECODE_CACHES,
  DEFAULT_PROMPT_BUCKETS,
  DecodeState,
  ForcedStops,
  SampleOutput,
  StreamChunk,
  bucket_length,
  concat_outputs,
  cache_chunking,
  mask_after_stop,
  model_from_params,
)
from arena_jax.sampling.sampler import Sampler
from arena_jax.sampling.accuracy import default_ks, evaluate, flatten_metrics, generate, pass_at_k, sampling_options
