"""Users' math data (JSONL or Parquet rows): its config section and `Task`; answers compared by math-verify.

A row is `{"question": str, "answer": str | number}` (field names configurable, an optional worked solution
for SFT; other keys are kept in `Example.extras`). Answers that are plain numbers on both sides are compared
exactly on the host (no worker round trip); everything else goes to `MathVerifyPool` (timeouts, recycled
workers), created on first use (`close()` stops it). Its row kind in a mixture is `math`.
"""

from __future__ import annotations

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import file_task
from arena_jax.tasks import jsonl
from arena_jax.tasks import verifiers
from arena_jax.tasks.task import register_task

JSONL = cs.Section(
  dict(
    **file_task.file_fields("math problems"),
    question_field=field("question", "Field holding the question.", cs.string(nonempty=True, noun="field name")),
    answer_field=field(
      "answer",
      "Field holding the reference answer (compared by math-verify).",
      cs.string(nonempty=True, noun="field name"),
    ),
    solution_field=field(
      "", "Field holding a worked solution (for SFT); \"\" = none.", cs.string(noun="field name or ''"), valid="string"
    ),
    num_workers=field(2, "math-verify worker processes (`tasks.MathVerifyPool`).", cs.integer(1)),
    timeout_s=field(
      10.0,
      "Per-answer verification limit; an answer that exceeds it scores 0.",
      cs.number(0, lo_open=True, why="seconds"),
    ),
    # Workers are recycled because sympy's caches grow with every answer they verify.
    max_items_per_worker=field(
      2000, "Answers a worker verifies before it is recycled (sympy caches grow).", cs.integer(1)
    ),
  ),
  title="your own math data",
)
config_lib.TASKS.rule(file_task.file_rule("jsonl"))


@register_task("jsonl", JSONL)
class JsonlTask(file_task.FileTask):
  """Users' math data; answers compared with math-verify in a worker pool with timeouts."""

  what = "math problems"
  row_kind = "math"
  tfds_name = "arena_jsonl_math"
  # Workers and timeouts do not change the data; the files' contents do.
  not_data = file_task.FileTask.not_data + ("num_workers", "timeout_s", "max_items_per_worker")

  def __init__(self, config):
    super().__init__(config)
    self._pool = None

  def parse_row(self, row, split, line):
    c = self.task_config
    names = {"question": c.question_field, "answer": c.answer_field, "solution": c.solution_field}
    return jsonl.parse_row(row, line, names, split)

  @property
  def pool(self):
    if self._pool is None:
      from arena_jax.tasks.math_verify_pool import MathVerifyPool  # pylint: disable=g-import-not-at-top

      c = self.task_config
      self._pool = MathVerifyPool(
        num_workers=c.num_workers, timeout_s=c.timeout_s, max_items_per_worker=c.max_items_per_worker
      )
    return self._pool

  def verify(self, example, completion):
    return self.verify_batch([example], [completion])[0]

  def score(self, example, completion):
    answer = verifiers.extract_answer(completion, fallback=self.config.get("answer_fallback", "number_line"))
    reward = self.verify(example, completion)
    return {"score": reward, "reason": f"answered {answer!r}" if answer is not None else "no answer"}

  def verify_batch(self, examples, completions):
    if len(examples) != len(completions):
      raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
    rewards = [0.0] * len(examples)
    slow = []
    for i, (e, c) in enumerate(zip(examples, completions)):
      pred = verifiers.extract_answer(c, fallback=self.config.get("answer_fallback", "number_line"))
      if pred is None:
        continue
      gold_num, pred_num = verifiers.parse_number(e.answer), verifiers.parse_number(pred)
      if gold_num is not None and pred_num is not None:
        rewards[i] = float(gold_num == pred_num)
      else:
        slow.append((i, e.answer, pred))
    if slow:
      results = self.pool.verify([g for _, g, _ in slow], [p for _, _, p in slow])
      for (i, _, _), r in zip(slow, results):
        rewards[i] = r
    return rewards

  def close(self):
    if self._pool is not None:
      self._pool.close()
      self._pool = None
