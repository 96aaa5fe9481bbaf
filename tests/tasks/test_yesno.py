"""The yes/no task, added as one module (`arena_jax/tasks/kinds/yesno.py`): rows, prompts, rewards, and what the
registration gives it without another file changed (its config section, its stored dataset, mixtures,
`launch.score`)."""

import json

import pytest

from arena_jax import tasks
from arena_jax.tasks import scoring

ROWS = [
  {"question": "Is 7 a prime number?", "answer": "yes", "source": "hand"},
  {"question": "Is 9 a prime number?", "answer": False},
  {"question": "Is 2 even?", "answer": "True"},
]


def _write(path, rows):
  path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
  return str(path)


def test_rows_prompts_and_rewards(tmp_path):
  c = tasks.default_config()
  c.data_dir = str(tmp_path / "tfds")
  c.yesno.test_path = _write(tmp_path / "yn.jsonl", ROWS)
  c.eval_tasks = ("yesno",)
  tasks.validate_config(c)
  task = tasks.get_task("yesno", c)
  examples = list(task.generate("test"))
  assert [e.answer for e in examples] == ["yes", "no", "yes"] and examples[0].meta == {"row": {"source": "hand"}}
  assert task.prompt(examples[0]) == "Is 7 a prime number?\nAnswer yes or no.\n"
  completions = ["7 has no divisors but 1 and 7.\n\nAnswer: Yes", "**Answer:** yes", "Answer: maybe"]
  assert task.verify_batch(examples, completions) == [1.0, 0.0, 0.0]
  assert task.score(examples[2], completions[2])["reason"] == "answered 'maybe', not yes or no"
  stored = tasks.load_split(c, "yesno", "test")
  assert [stored[i] for i in range(3)] == examples


def test_bad_rows_name_the_field(tmp_path):
  c = tasks.default_config()
  c.yesno.test_path = _write(tmp_path / "yn.jsonl", [{"question": "Is it?", "answer": "perhaps"}])
  with pytest.raises(tasks.DataError, match=r"yn\.jsonl:1: answer: must be yes or no"):
    list(tasks.get_task("yesno", c).generate("test"))


def test_it_mixes_and_scores_with_no_other_change(tmp_path):
  path = _write(tmp_path / "yn.jsonl", [{**r, "kind": "yesno"} for r in ROWS])
  c = tasks.default_config()
  c.train_task, c.mixture.train_files = "mixture", (f"1:{path}",)
  with tasks.get_task("mixture", c) as task:
    train = list(task.generate("train"))
    assert {e.meta["kind"] for e in train} == {"yesno"}
    assert task.verify_batch(train, [f"Answer: {e.answer}" for e in train]) == [1.0] * 3
  rows = [{**r, "completion": "Answer: yes"} for r in ROWS]
  scores = scoring.score_file("yesno", _write(tmp_path / "s.jsonl", rows))
  assert [s["score"] for s in scores] == [1.0, 0.0, 1.0]
