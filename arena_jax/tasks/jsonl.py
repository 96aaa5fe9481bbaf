"""Users' own math data as JSONL: loading with errors that name the file and line.

One JSON object per line, `{"question": …, "answer": …}` (field names configurable; an optional
worked-solution field). Blank lines are skipped. Everything is checked when the data is loaded — well
before training starts — and the first problem raises `DataError` with `path:line`:
bytes that are not UTF-8, a line that is not JSON or not an object, a missing or empty field, a
question that is not a string, an answer that is neither a string nor a number, a missing file, and a
split with no rows.
"""
from __future__ import annotations

import json
import os
import re

from arena_jax.tasks.base import DataError, Example, stable_hash

NAME = "jsonl"


def _answer_text(value, where: str, field: str) -> str:
  if isinstance(value, bool) or not isinstance(value, (str, int, float)):
    raise DataError(f"{where}: field {field!r} must be a string or a number, got {type(value).__name__}")
  text = value.strip() if isinstance(value, str) else json.dumps(value)
  if not text:
    raise DataError(f"{where}: field {field!r} is empty")
  return text


def load_jsonl(path: str, *, question_field: str = "question", answer_field: str = "answer",
               solution_field: str = "", split: str = "train") -> list[Example]:
  """Reads and validates a JSONL file of math problems; raises DataError naming `path:line`."""
  path = os.path.expanduser(path)
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file (the {split} split of the jsonl task)")
  examples = []
  with open(path, "rb") as f:
    for lineno, raw in enumerate(f, start=1):
      where = f"{path}:{lineno}"
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise DataError(f"{where}: not valid UTF-8 (byte {e.start + 1} of the line: "
                        f"{raw[e.start:e.start + 1]!r}); re-encode the file as UTF-8") from None
      if lineno == 1:
        line = line.lstrip("\ufeff")  # a byte-order mark is harmless
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(f"{where}:{e.colno}: malformed JSON ({e.msg})") from None
      if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
      for field in (question_field, answer_field):
        if field not in row:
          raise DataError(f"{where}: missing field {field!r} (fields present: {sorted(row)}); set "
                          f"tasks.jsonl.{'question' if field == question_field else 'answer'}_field to rename")
      question = row[question_field]
      if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: field {question_field!r} must be a non-empty string, got {question!r:.60}")
      solution = ""
      if solution_field:
        if solution_field not in row:
          raise DataError(f"{where}: missing field {solution_field!r} (tasks.jsonl.solution_field)")
        solution = row[solution_field]
        if not isinstance(solution, str):
          raise DataError(f"{where}: field {solution_field!r} must be a string")
      examples.append(Example(
          uid=f"{NAME}-{split}-{lineno}-{stable_hash(question, 8)}",
          question=question.strip(),
          answer=_answer_text(row[answer_field], where, answer_field),
          solution=solution,
      ))
  if not examples:
    raise DataError(f"{path}: the {split} split is empty (no JSON rows)")
  return examples


def normalise_question(question: str) -> str:
  """The form used to de-duplicate train against test: case- and whitespace-insensitive."""
  return re.sub(r"\s+", " ", question).strip().lower()


def load_splits(cfg) -> dict[str, list[Example]]:
  """The configured JSONL splits (`default_config().jsonl`), train de-duplicated against test."""
  fields = dict(question_field=cfg.question_field, answer_field=cfg.answer_field,
                solution_field=cfg.solution_field)
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
