"""Arithmetic outside the training distribution (`arithmetic.generate_shift`): the live out-of-distribution benchmark.

The same prompt, verifier and process checker as `arithmetic`, on problems no training problem could be; a
test split only.
"""

from __future__ import annotations

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import arithmetic
from arena_jax.tasks.kinds.arithmetic import ArithmeticTask
from arena_jax.tasks.task import register_task

ARITHMETIC_SHIFT = cs.Section(
  dict(
    operators=config_lib.operators_field("+-*", "Operators of the shifted problems (division only when exact)."),
    extra_ops=field(0, "Most operations = `tasks.arithmetic.max_ops` + this.", cs.integer(0)),
    extra_operand=field(5, "Largest operand = `tasks.arithmetic.max_operand` + this.", cs.integer(0)),
    extra_value=field(0, "Largest intermediate value = `tasks.arithmetic.max_value` + this.", cs.integer(0)),
    num_test=field(500, "Problems in its test split (it has no train split).", cs.integer(0)),
  ),
  title="arithmetic outside the training distribution, the live out-of-distribution benchmark: problems drawn "
  "from `tasks.arithmetic`'s ranges widened by these fields and kept only when no training problem could "
  "be them (an operator, an operand, a value or an operation count the training problems never have). "
  "The default, operands up to 5 above the training's largest (16–20 for the demo's 1–15), leaves the demo's SFT "
  "policy partly able (between 10% and 60%, the study's starting point, checked by "
  "tests/experiments/test_testbed_policy.py). "
  "Exact division (operators `+-*/`) or more operations are further out: the earlier demo policy (operands "
  "1–10) scored under 10% on them. The prompt is `tasks.arithmetic.prompt_template`",
)


@register_task("arithmetic_shift", ARITHMETIC_SHIFT)
class ArithmeticShiftTask(ArithmeticTask):
  """Arithmetic outside the training distribution: `tasks.arithmetic`'s prompt, verifier and process checker."""

  has_train_split = False
  depends_on = ("arithmetic",)  # drawn relative to the arithmetic task's ranges

  def prompt(self, example):
    return self.config.arithmetic.prompt_template.format(question=example.question)  # the policy's own convention

  def generate(self, split):
    return arithmetic.generate_shift(self.config.arithmetic, self.task_config, split, self.config.seed)
