"""Countdown, the out-of-distribution task: its config section and `Task` (the problems: `tasks/countdown.py`).

The reward requires a valid derivation of the target, not just the number (`process.check_countdown`).
"""

from __future__ import annotations

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import countdown
from arena_jax.tasks import process
from arena_jax.tasks.task import Task, register_task

COUNTDOWN = cs.Section(
  dict(
    min_numbers=field(3, "Fewest numbers given.", cs.integer(2), valid="int ≥ 2, ≤ max_numbers"),
    max_numbers=field(4, "Most numbers given.", cs.integer(2)),
    min_number=field(1, "Smallest given number.", cs.integer(1), valid="int ≥ 1, ≤ max_number"),
    max_number=field(20, "Largest given number.", cs.integer(1)),
    min_target=field(10, "Smallest target.", cs.integer(1), valid="int ≥ 1, ≤ max_target"),
    max_target=field(200, "Largest target.", cs.integer(1)),
    max_value=field(500, "Every intermediate result lies in [1, max_value].", cs.integer(1), valid="int ≥ max_target"),
    operators=config_lib.operators_field("+-*/", "Operators allowed; intermediate results stay positive integers."),
    num_train=field(2000, "Problems in the train split.", cs.integer(0)),
    num_test=field(500, "Problems in the test split.", cs.integer(0)),
    test_fraction=field(
      0.1, "Share of the problem space hashed into the test split.", cs.number(0, 1, lo_open=True, hi_open=True)
    ),
    prompt_template=config_lib.template_field(),
  ),
  title="reach a target with given numbers, the out-of-distribution task",
)


@COUNTDOWN.rule
def _countdown_ranges(c, report):
  """min_numbers ≤ max_numbers, min_number ≤ max_number, min_target ≤ max_target ≤ max_value."""
  for lo, hi in (("min_numbers", "max_numbers"), ("min_number", "max_number"), ("min_target", "max_target")):
    config_lib.ordered(c, report, lo, hi)
  if c.max_value < c.max_target:
    report("max_value", f"must be ≥ max_target ({c.max_target}), got {c.max_value}")


@register_task("countdown", COUNTDOWN)
class CountdownTask(Task):
  """Countdown; the reward requires a valid derivation of the target (see `countdown.py`)."""

  has_process_checker = True

  def verify(self, example, completion):
    return float(self.check_process(example, completion).answer_correct)

  def check_process(self, example, completion):
    return process.check_countdown(example.numbers, example.answer, completion)

  def generate(self, split):
    return countdown.generate(self.task_config, split, self.config.seed)

  def problem_tree(self, example):
    return countdown.problem_tree(example)
