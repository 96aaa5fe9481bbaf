"""Multi-step arithmetic, the in-distribution task of the embedded default: its config section and `Task`.

The problems, their canonical solutions and the split rule are `tasks/arithmetic.py`'s; the reward is the final
answer only (SPEC §1), the process is the judge's (`process.check_arithmetic`).
"""

from __future__ import annotations

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import arithmetic
from arena_jax.tasks import process
from arena_jax.tasks import verifiers
from arena_jax.tasks.task import Task, register_task

ARITHMETIC = cs.Section(
  dict(
    min_ops=field(2, "Fewest operations per problem.", cs.integer(1), valid="int ≥ 1, ≤ max_ops"),
    max_ops=field(4, "Most operations per problem.", cs.integer(1)),
    min_operand=field(1, "Smallest operand.", cs.integer(0), valid="int ≥ 0, ≤ max_operand"),
    max_operand=field(20, "Largest operand.", cs.integer(0)),
    max_value=field(
      400, "Every intermediate result lies in [0, max_value].", cs.integer(1), valid="int ≥ max(1, max_operand)"
    ),
    operators=config_lib.operators_field("+-*", "Operators used; division only when exact."),
    num_train=field(20000, "Problems in the train split.", cs.integer(0)),
    num_test=field(500, "Problems in the test split.", cs.integer(0)),
    test_fraction=field(
      0.1,
      "Share of the problem space hashed into the test split: train and test never share a problem.",
      cs.number(0, 1, lo_open=True, hi_open=True),
    ),
    prompt_template=config_lib.template_field(),
  ),
  title="multi-step arithmetic, the in-distribution task",
)


@ARITHMETIC.rule
def _arithmetic_ranges(c, report):
  """min_ops ≤ max_ops, min_operand ≤ max_operand, and max_value ≥ max_operand (an operand is a value)."""
  config_lib.ordered(c, report, "min_ops", "max_ops")
  config_lib.ordered(c, report, "min_operand", "max_operand")
  if c.max_value < c.max_operand:
    report("max_value", f"must be ≥ max_operand ({c.max_operand}), got {c.max_value}")


@register_task("arithmetic", ARITHMETIC)
class ArithmeticTask(Task):
  """Multi-step arithmetic; the reward is the final answer only (SPEC §1), the process is the judge's."""

  has_process_checker = True

  def verify(self, example, completion):
    return verifiers.verify_numeric(
      completion, example.answer, fallback=self.config.get("answer_fallback", "number_line")
    )

  def score(self, example, completion):
    answer = verifiers.extract_answer(completion, fallback=self.config.get("answer_fallback", "number_line"))
    return {"score": self.verify(example, completion), "reason": f"answered {answer!r}" if answer else "no answer"}

  def check_process(self, example, completion):
    return process.check_arithmetic(example.expression, example.answer, completion)

  def generate(self, split):
    return arithmetic.generate(self.task_config, split, self.config.seed)

  def problem_tree(self, example):
    return arithmetic.problem_tree(example)
