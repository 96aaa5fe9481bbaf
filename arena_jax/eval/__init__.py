"""Evaluation: accuracy of a policy on a task, and a checkpoint watcher around it (SPEC §9).

The accuracy functions live in `arena_jax.sampling.accuracy` (the SFT trainer reports them, and the
train room may not import this one, which reads what train writes); they are exported here too.

  evaluate(model, tokenizer, task, examples, ...)   greedy accuracy, mean pass ratio@n (SPEC §9),
                                                    unbiased pass@k, response length, group composition
  pass_at_k(n, c, k)                                Chen et al. (2021)'s unbiased estimator
  generate(...)                                     batched sampling → decoded completions
  flatten_metrics(result)                           evaluate's scalars as a flat dict (`pass@k` keys)
  watch (module) / evaluate_step / evaluate_params  checkpoint-driven evaluation of RL runs
  pop_samples(results)                              the completions evaluate_params keeps, out of its metrics

The watcher reads what `arena_jax.train` writes (checkpoints, the run's policy spec).
"""

from arena_jax.sampling.accuracy import default_ks, evaluate, flatten_metrics, generate, pass_at_k
from arena_jax.eval import watch
from arena_jax.eval.watch import evaluate_params, evaluate_step, pop_samples, read_results
