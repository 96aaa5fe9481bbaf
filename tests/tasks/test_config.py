"""Config validation: the default is valid, and every error names the field to change."""

import pytest

from arena_jax import tasks


def test_default_validates():
  config = tasks.default_config()
  assert tasks.validate_config(config) is config


@pytest.mark.parametrize(
  "field, value, message",
  [
    ("arithmetic.min_ops", 0, r"tasks\.arithmetic\.min_ops: must be an integer ≥ 1, got 0"),
    ("arithmetic.min_ops", 5, r"tasks\.arithmetic\.min_ops: must be ≤ tasks\.arithmetic\.max_ops \(4\), got 5"),
    ("arithmetic.max_operand", -1, r"tasks\.arithmetic\.max_operand: must be an integer ≥ 0"),
    ("arithmetic.operators", "+^", r"tasks\.arithmetic\.operators"),
    ("arithmetic.test_fraction", 1.0, r"tasks\.arithmetic\.test_fraction"),
    ("arithmetic.prompt_template", "no field", r"tasks\.arithmetic\.prompt_template"),
    ("countdown.min_numbers", 1, r"tasks\.countdown\.min_numbers"),
    ("countdown.max_value", 5, r"tasks\.countdown\.max_value"),
    ("jsonl.answer_field", "", r"tasks\.jsonl\.answer_field"),
    ("jsonl.timeout_s", 0, r"tasks\.jsonl\.timeout_s"),
    ("train_task", "chess", r"tasks\.train_task"),
    ("eval_tasks", ("arithmetic", "go"), r"tasks\.eval_tasks"),
    ("sft.tasks", ("jsonl",), r"tasks\.sft\.tasks"),
    ("sft.fractions.slip", -0.1, r"tasks\.sft\.fractions\.slip"),
    ("sft.fractions.clean", 0.6, r"tasks\.sft\.fractions: must sum to 1"),
  ],
)
def test_bad_fields_are_named(field, value, message):
  config = tasks.default_config()
  *parents, leaf = field.split(".")
  node = config
  for p in parents:
    node = node[p]
  node[leaf] = value
  with pytest.raises(ValueError, match=message):
    tasks.validate_config(config)


def test_jsonl_paths_are_checked_when_the_task_is_used(tmp_path):
  config = tasks.default_config()
  config.train_task = "jsonl"
  with pytest.raises(ValueError, match=r"tasks\.jsonl\.train_path"):
    tasks.validate_config(config)
  config.jsonl.train_path = str(tmp_path / "missing.jsonl")
  with pytest.raises(ValueError, match=r"tasks\.jsonl\.train_path: no such file"):
    tasks.validate_config(config)


def test_registry():
  assert set(tasks.task_names()) >= {"arithmetic", "countdown", "jsonl"}
  with pytest.raises(ValueError, match="unknown task"):
    tasks.get_task("chess")
  with pytest.raises(ValueError, match="already registered"):
    tasks.register_task("arithmetic")(type("Again", (tasks.ArithmeticTask,), {}))
  task = tasks.get_task("arithmetic")
  e = next(task.generate("train"))
  assert task.prompt(e) == f"Question: {e.question}\nSolution:\n" and task.reference_answer(e) == e.answer
