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

from arena_jax.tasks import rows
from arena_jax.tasks.base import Example, dump_extras, stable_hash

NAME = "jsonl"


def _answer_text(value) -> str:
  if isinstance(value, bool) or not isinstance(value, (str, int, float)):
    raise ValueError(f"must be a string or a number, got {type(value).__name__}")
  text = value.strip() if isinstance(value, str) else json.dumps(value)
  if not text:
    raise ValueError("is empty")
  return text


def parse_row(row: dict, lineno: int, names: dict, split: str) -> Example:
  """The Example of one math row; ValueError(`field: problem`)."""
  for role in ("question", "answer"):
    if names[role] not in row:
      raise ValueError(
        f"{names[role]}: missing field (fields present: {sorted(row)}); set tasks.jsonl.{role}_field to rename"
      )
  if names["solution"] and names["solution"] not in row:
    raise ValueError(f"{names['solution']}: missing field (tasks.jsonl.solution_field)")
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
  extras = rows.leftover(row, set(names.values()))
  return Example(
    uid=f"{NAME}-{split}-{lineno}-{stable_hash(question, 8)}",
    question=question.strip(),
    answer=answer,
    solution=solution,
    extras=dump_extras({"row": extras} if extras else {}),
  )


def load_jsonl(
  path: str,
  *,
  question_field: str = "question",
  answer_field: str = "answer",
  solution_field: str = "",
  split: str = "train",
  on_bad_row: str = "error",
) -> list[Example]:
  """Reads and validates a JSONL (or Parquet) file of math problems; raises DataError listing every
  malformed row as `path:line: field: problem` (`on_bad_row="skip"`: leaves them out and logs them)."""
  names = {"question": question_field, "answer": answer_field, "solution": solution_field}
  examples, _ = rows.read_examples(
    path,
    lambda row, lineno: parse_row(row, lineno, names, split),
    split=split,
    on_bad_row=on_bad_row,
    what="jsonl task",
  )
  return examples
