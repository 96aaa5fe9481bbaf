"""The default evaluator: greedy accuracy, mean pass ratio@n (the paper's pass ratio@16, SPEC §9), unbiased
pass@k (pass@1 and pass@5 for code), response lengths and, for tasks with a process checker, process metrics."""

from __future__ import annotations

from arena_jax.eval.evaluators.base import EVALUATORS, Evaluator
from arena_jax.sampling import accuracy


@EVALUATORS.register("accuracy")
class Accuracy(Evaluator):
  def run(self, policy, task, examples, rng):
    b = self.bench
    res = accuracy.evaluate(
      policy.params,
      policy.tokenizer,
      task,
      examples,
      num_samples=b.num_samples,
      temperature=b.temperature,
      max_new_tokens=b.max_new_tokens,
      batch_size=self.config.batch_size,
      rng=rng,
      greedy=b.greedy,
      ks=b.ks,
      add_bos=policy.add_bos,
      config=policy.model_config,
      progress=f"eval {b.name}" if self.progress else None,
      return_details=True,
      **({"mesh": policy.mesh, "rules": policy.rules} if policy.mesh is not None else {}),
    )
    out = accuracy.flatten_metrics(res)
    out["_details"] = res
    return out
