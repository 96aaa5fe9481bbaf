"""Users' own math data as JSONL: loading with errors that name the file and line.

One JSON object per line, `{"question": …, "answer": …}` (field names configurable; an optional
worked-solution field). Blank lines are skipped. Everything is checked when the data is loaded — well
before training starts — and one `DataError` lists every malformed row as `path:line: field: problem`:
bytes that are not UTF-8, a line that is not JSON or not an object (or nested too deeply), a missing or
empty field, a question that is not a string, an answer that is neither a string nor a number, a
non-finite number (`NaN`, `Infinity`, `1e999`: Python's JSON reader accepts them, and two NaN answers
would then compare equal as text), a string with an unpaired surrogate; then a missing file, and a
split with no rows.
"""

from __future__ import annotations

import json
import os
import re

from arena_jax import fileio
from arena_jax.tasks.base import DataError, Example, stable_hash

NAME = "jsonl"


def _answer_text(value) -> str:
  if isinstance(value, bool) or not isinstance(value, (str, int, float)):
    raise ValueError(f"must be a string or a number, got {type(value).__name__}")
  text = value.strip() if isinstance(value, str) else json.dumps(value)
  if not text:
    raise ValueError("is empty")
  return text


def _example(raw: bytes, lineno: int, where: str, names: dict, split: str) -> Example | None:
  """The Example of one line (None for a blank line); ValueError(`field: problem` or `problem`)."""
  try:
    line = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(
      f"not valid UTF-8 (byte {e.start + 1} of the line: {raw[e.start : e.start + 1]!r}); re-encode the file as UTF-8"
    ) from None
  if lineno == 1:
    line = line.lstrip("\ufeff")  # a byte-order mark is harmless
  if not line.strip():
    return None
  row = fileio.parse_json_row(line)
  if not isinstance(row, dict):
    raise ValueError(f"expected a JSON object, got {type(row).__name__}")
  for role in ("question", "answer"):
    if names[role] not in row:
      raise ValueError(
        f"{names[role]}: missing field (fields present: {sorted(row)}); set tasks.jsonl.{role}_field to rename"
      )
  if names["solution"] and names["solution"] not in row:
    raise ValueError(f"{names['solution']}: missing field (tasks.jsonl.solution_field)")
  for name, value in row.items():  # every field, used or not: a NaN anywhere says the file is broken
    problem = fileio.value_problem(value)
    if problem:
      raise ValueError(f"{name}: {problem}")
  question = row[names["question"]]
  if not isinstance(question, str) or not question.strip():
    raise ValueError(f"{names['question']}: must be a non-empty string, got {question!r:.60}")
  solution = row[names["solution"]] if names["solution"] else ""
  if not isinstance(solution, str):
    raise ValueError(f"{names['solution']}: must be a string")
  try:
    answer = _answer_text(row[names["answer"]])
  except ValueError as e:
    raise ValueError(f"{names['answer']}: {e}") from None
  return Example(
    uid=f"{NAME}-{split}-{lineno}-{stable_hash(question, 8)}",
    question=question.strip(),
    answer=answer,
    solution=solution,
  )


def load_jsonl(
  path: str,
  *,
  question_field: str = "question",
  answer_field: str = "answer",
  solution_field: str = "",
  split: str = "train",
) -> list[Example]:
  """Reads and validates a JSONL file of math problems; raises DataError listing every malformed row
  as `path:line: field: problem`."""
  path = os.path.expanduser(path)
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file (the {split} split of the jsonl task)")
  names = {"question": question_field, "answer": answer_field, "solution": solution_field}
  examples, problems = [], []
  with open(path, "rb") as f:
    for lineno, raw in enumerate(f, start=1):
      where = f"{path}:{lineno}"
      try:
        example = _example(raw, lineno, where, names, split)
      except ValueError as e:
        problems.append(f"{where}:{e}" if str(e)[:1].isdigit() else f"{where}: {e}")
        continue
      if example is not None:
        examples.append(example)
  if problems:
    raise DataError(fileio.report_rows(path, problems))
  if not examples:
    raise DataError(f"{path}: the {split} split is empty (no JSON rows)")
  return examples


def normalise_question(question: str) -> str:
  """The form used to de-duplicate train against test: case- and whitespace-insensitive."""
  return re.sub(r"\s+", " ", question).strip().lower()


def load_splits(cfg) -> dict[str, list[Example]]:
  """The configured JSONL splits (`default_config().jsonl`), train de-duplicated against test."""
  fields = dict(question_field=cfg.question_field, answer_field=cfg.answer_field, solution_field=cfg.solution_field)
  out = {}
  if cfg.test_path:
    out["test"] = load_jsonl(cfg.test_path, split="test", **fields)
  if cfg.train_path:
    train = load_jsonl(cfg.train_path, split="train", **fields)
    if cfg.dedup and "test" in out:
      held_out = {normalise_question(e.question) for e in out["test"]}
      train = [e for e in train if normalise_question(e.question) not in held_out]
      if not train:
        raise DataError(f"{cfg.train_path}: every train question also appears in the test split")
    out["train"] = train
  if not out:
    raise DataError("tasks.jsonl: set train_path and/or test_path to local JSONL files")
  return out
