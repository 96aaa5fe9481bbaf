"""Tasks from users' files: one module per task, JSONL and Parquet rows, bad rows,
extras, multiple-choice shuffling and prompts, mixtures of files and kinds."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_jax import tasks
from arena_jax.tasks import choice_format
from arena_jax.tasks import tfds_builders
from arena_jax.tasks.kinds import mixture

CHOICE_ROWS = [
  {"question": "What is 2 + 2?", "options": ["3", "4", "5", "22"], "answer": 1, "source": "hand"},
  {"question": "Which is a noble gas?", "options": ["Argon", "Oxygen", "Iron", "Sodium"], "answer": "A"},
  {"question": "Which is largest?", "options": ["a mouse", "a whale", "a cat"], "answer": "a whale"},
]
MATH_ROWS = [{"question": f"What is {i} + {i}?", "answer": 2 * i} for i in range(1, 7)]


def write(path, rows):
  path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
  return str(path)


def test_every_task_is_a_module_that_brings_its_config_section_and_its_dataset_builder():
  c = tasks.default_config()
  for name in ("arithmetic", "arithmetic_shift", "countdown", "jsonl", "choice", "code", "mixture"):
    assert name in tasks.task_names() and name in c, name
    cls = tasks.task_class(name)
    assert cls.__module__ == f"arena_jax.tasks.kinds.{name}"
    builder = tfds_builders.builder_class(name)
    assert builder.TASK == name and builder.name == (cls.tfds_name or f"arena_{name}")
  assert tfds_builders.builder_class("jsonl").name == "arena_jsonl_math"  # the stored math datasets keep their name
  c.train_task = "no_such_task"
  with pytest.raises(ValueError, match="tasks.train_task.*no_such_task"):
    tasks.validate_config(c)


def test_extras_keep_what_a_kind_needs_and_survive_the_stored_dataset(tmp_path):
  c = tasks.default_config()
  c.data_dir = str(tmp_path / "tfds")
  c.choice.test_path = write(tmp_path / "c.jsonl", CHOICE_ROWS)
  generated = list(tasks.get_task("choice", c).generate("test"))
  stored = tasks.load_split(c, "choice", "test")
  assert [stored[i] for i in range(len(stored))] == generated
  first = stored[0]
  assert sorted(first.meta["options"]) == ["22", "3", "4", "5"] and first.meta["row"] == {"source": "hand"}
  assert first.meta["options"][first.meta["correct"]] == "4" and first.answer == "ABCD"[first.meta["correct"]]


def test_choice_options_are_shuffled_by_seed_and_question_and_the_letter_follows_its_option(tmp_path):
  path = write(tmp_path / "c.jsonl", CHOICE_ROWS)
  orders = set()
  for seed in range(8):
    c = tasks.default_config()
    c.seed, c.choice.test_path = seed, path
    task = tasks.get_task("choice", c)
    examples = list(task.generate("test"))
    again = list(tasks.get_task("choice", c).generate("test"))
    assert examples == again  # the same (seed, question): the same order
    for e, row in zip(examples, CHOICE_ROWS):
      correct = row["options"][choice_format.normalise_answer(row["options"], row["answer"])]
      assert e.meta["options"][e.meta["correct"]] == correct
      assert task.score(e, f"Reasoning…\nAnswer: {e.answer}")["score"] == 1.0
    orders.add(tuple(examples[0].meta["options"]))
    prompt = task.prompt(examples[0])
    assert all(f"{letter}) " in prompt for letter in "ABCD") and "Answer: X" in prompt
    assert task.reference_answer(examples[0]) == f"{examples[0].answer}) 4"
  assert len(orders) > 1
  c.choice.shuffle = False
  e = next(tasks.get_task("choice", c).generate("test"))
  assert e.meta["options"] == CHOICE_ROWS[0]["options"] and e.answer == "B"


def test_parquet_rows_read_as_jsonl_rows_do(tmp_path):
  jsonl = write(tmp_path / "m.jsonl", MATH_ROWS)
  parquet = str(tmp_path / "m.parquet")
  pq.write_table(pa.Table.from_pylist([{**r, "answer": str(r["answer"])} for r in MATH_ROWS]), parquet)
  a = tasks.load_jsonl(jsonl)
  b = tasks.load_jsonl(parquet)
  assert [(e.question, e.answer) for e in a] == [(e.question, e.answer) for e in b]
  bad = str(tmp_path / "bad.parquet")
  pq.write_table(pa.Table.from_pylist([{"question": "q", "answer": float("nan")}]), bad)
  with pytest.raises(tasks.DataError, match=r"bad\.parquet:1: answer: non-finite number"):
    tasks.load_jsonl(bad)
  (tmp_path / "broken.parquet").write_bytes(b"not parquet")
  with pytest.raises(tasks.DataError, match="not a readable Parquet file"):
    tasks.load_jsonl(str(tmp_path / "broken.parquet"))


def test_bad_rows_stop_the_run_or_are_skipped_and_reported_with_file_and_line(tmp_path, caplog):
  rows = list(CHOICE_ROWS) + [
    {"question": "One option?", "options": ["x"], "answer": 0},
    {"question": "Out of range", "options": ["x", "y"], "answer": 5},
    "not json",
  ]
  c = tasks.default_config()
  c.choice.test_path = write(tmp_path / "c.jsonl", rows)
  with pytest.raises(tasks.DataError) as e:
    list(tasks.get_task("choice", c).generate("test"))
  message = str(e.value)
  assert "3 malformed rows" in message and "c.jsonl:4: options" in message and "c.jsonl:5: answer" in message
  assert "c.jsonl:6:" in message and "on_bad_row = 'skip'" in message
  c.choice.on_bad_row = "skip"
  task = tasks.get_task("choice", c)
  with caplog.at_level("WARNING"):
    kept = list(task.generate("test"))
  assert len(kept) == 3 and task.reports["test"].skipped == 3
  assert "skipped 3 bad row(s) of 6" in caplog.text and "c.jsonl:4:" in caplog.text
  c.choice.test_path = write(tmp_path / "all_bad.jsonl", rows[3:])
  with pytest.raises(tasks.DataError, match="every row of the test split is bad"):
    list(tasks.get_task("choice", c).generate("test"))


def test_extra_keys_of_a_math_row_are_kept(tmp_path):
  c = tasks.default_config()
  c.jsonl.test_path = write(tmp_path / "m.jsonl", [{"question": "1 + 1?", "answer": 2, "year": 2024, "tags": ["x"]}])
  e = next(tasks.get_task("jsonl", c).generate("test"))
  assert e.meta == {"row": {"year": 2024, "tags": ["x"]}}


def test_mix_counts_follow_the_weights():
  assert mixture.mix_counts([100, 10], [1.0, 1.0], 0) == [10, 10]  # the small file is used once
  assert mixture.mix_counts([100, 10], [3.0, 1.0], 0) == [30, 10]
  assert mixture.mix_counts([100, 10], [1.0, 1.0], 50) == [25, 25]  # size > 0: the small file repeats


def test_a_mixture_trains_on_several_files_and_kinds_each_row_with_its_own_verifier(tmp_path):
  math_file = write(tmp_path / "math.jsonl", MATH_ROWS)
  mixed = write(
    tmp_path / "mixed.jsonl",
    [{**r, "kind": "choice"} for r in CHOICE_ROWS] + [{"question": "What is 10 + 1?", "answer": 11}],
  )
  c = tasks.default_config()
  c.data_dir = str(tmp_path / "tfds")
  c.train_task = "mixture"
  c.mixture.train_files = (f"3:{math_file}", f"1:{mixed}")
  tasks.validate_config(c)
  with tasks.get_task("mixture", c) as task:
    train = list(task.generate("train"))
    kinds = [e.meta["kind"] for e in train]
    # Shares 3:1 of the longest split that repeats no row: 4 rows of mixed.jsonl, 12 wanted of math.jsonl's 6.
    assert len(train) == 6 + 2 and kinds.count("choice") + kinds.count("math") == len(train)
    assert len({e.uid for e in train}) == len(train)
    right = [f"Answer: {e.answer}" for e in train]
    assert task.verify_batch(train, right) == [1.0] * len(train)
    wrong = ["Answer: Z" if e.meta["kind"] == "choice" else "Answer: -1" for e in train]
    assert task.verify_batch(train, wrong) == [0.0] * len(train)
    choice = next(e for e in train if e.meta["kind"] == "choice")
    assert "A) " in task.prompt(choice) and "A) " in task.judge_question(choice)
  c.mixture.size = 40
  stored = tasks.load_split(c, "mixture", "train")
  assert len(stored) == 40 and len({stored[i].uid for i in range(40)}) == 40
  assert (
    sum(stored[i].meta["kind"] == "math" for i in range(40)) >= 29
  )  # 30 of 40 drawn from math.jsonl (+ 1/4 of mixed)


def test_mixture_config_errors_name_the_field(tmp_path):
  c = tasks.default_config()
  c.train_task = "mixture"
  with pytest.raises(ValueError, match="tasks.mixture.train_files: must list at least one"):
    tasks.validate_config(c)
  c.mixture.train_files = ("heavy:x.jsonl",)
  with pytest.raises(ValueError, match="tasks.mixture.train_files: the weight of 'heavy:x.jsonl' is not a number"):
    tasks.validate_config(c)
  c.mixture.train_files = (f"1:{tmp_path / 'missing.jsonl'}",)
  with pytest.raises(ValueError, match="tasks.mixture.train_files: no such file"):
    tasks.validate_config(c)
  path = write(tmp_path / "k.jsonl", [{"question": "q", "answer": 1, "kind": "poetry"}])
  c.mixture.train_files = (f"1:{path}",)
  with pytest.raises(tasks.DataError, match=r"k\.jsonl:1: kind: unknown row kind 'poetry'"):
    list(tasks.get_task("mixture", c).generate("train"))
