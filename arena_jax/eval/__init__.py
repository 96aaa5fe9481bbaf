"""Evaluation: accuracy of a policy on a task (issue #6; issue #7 adds a checkpoint watcher around it).

  evaluate(model, tokenizer, task, examples, ...)   greedy accuracy, mean pass ratio@n (SPEC §9),
                                                    unbiased pass@k, response length, group composition
  pass_at_k(n, c, k)                                Chen et al. (2021)'s unbiased estimator
  generate(...)                                     batched sampling → decoded completions
  flatten_metrics(result)                           evaluate's scalars as a flat dict (`pass@k` keys)
  watch (module) / evaluate_step / evaluate_params  checkpoint-driven evaluation of RL runs (issue #7)
"""
from arena_jax.eval.accuracy import default_ks, evaluate, flatten_metrics, generate, pass_at_k
from arena_jax.eval import watch
from arena_jax.eval.watch import evaluate_params, evaluate_step, read_results
