"""Users' data files, row by row: JSONL and Parquet, with errors that name the file and the line.

Every file-backed task (math, choice, code, a mixture of them: `kinds/`) reads its files here and turns each
row into an `Example` with its own `parse(row, where)`, which raises ValueError("field: problem") for a bad
row. What happens to a bad row is the config's `on_bad_row`:

  error   one `DataError` lists every bad row as `path:line: field: problem` (the first ones, then a count),
          before anything trains;
  skip    bad rows are left out; the log says how many and why, with the first few as `path:line: …`
          (`RowReport`), and a file left with no good row is still an error.

JSONL rows are checked as bytes first (UTF-8, a JSON object, no `NaN`/`Infinity`, no unpaired surrogate);
Parquet rows (`.parquet`, read with pyarrow) are numbered from 1 in file order, and their values are checked
the same way (a float column may hold NaN).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Callable

from absl import logging

from arena_jax import fileio
from arena_jax.tasks.base import DataError, Example

ON_BAD_ROW = ("error", "skip")
PARQUET_SUFFIXES = (".parquet", ".pq")
SHOWN = 5  # bad rows quoted in a skip report


@dataclasses.dataclass
class RowReport:
  """What reading one file kept and left out."""

  path: str
  kept: int = 0
  problems: list[str] = dataclasses.field(default_factory=list)

  @property
  def skipped(self) -> int:
    return len(self.problems)

  def summary(self) -> str:
    head = f"{self.path}: skipped {self.skipped} bad row(s) of {self.kept + self.skipped}"
    return (
      head
      + "".join(f"\n  {p}" for p in self.problems[:SHOWN])
      + (f"\n  … and {self.skipped - SHOWN} more" if self.skipped > SHOWN else "")
    )


def _jsonl_rows(path: str):
  """(line number, row dict or the ValueError of a bad line) of a JSONL file; blank lines are skipped."""
  with open(path, "rb") as f:
    for lineno, raw in enumerate(f, start=1):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        yield (
          lineno,
          ValueError(
            f"not valid UTF-8 (byte {e.start + 1} of the line: {raw[e.start : e.start + 1]!r}); "
            "re-encode the file as UTF-8"
          ),
        )
        continue
      if lineno == 1:
        line = line.lstrip("\ufeff")  # a byte-order mark is harmless
      if not line.strip():
        continue
      try:
        row = fileio.parse_json_row(line)
      except ValueError as e:
        yield lineno, e
        continue
      if not isinstance(row, dict):
        yield lineno, ValueError(f"expected a JSON object, got {type(row).__name__}")
        continue
      yield lineno, row


def _parquet_rows(path: str):
  try:
    import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top  (pyarrow: only for Parquet files)
  except ImportError:  # pragma: no cover - pyarrow comes with tensorflow-datasets and is pinned in setup.py
    raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
  try:
    table = pq.read_table(path)
  except Exception as e:  # pylint: disable=broad-except  (pyarrow's many error types)
    raise DataError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from None
  for index, row in enumerate(table.to_pylist(), start=1):
    yield index, row


def _value_problem(value) -> str | None:
  if isinstance(value, float) and not math.isfinite(value):
    return f"non-finite number {value}"
  if isinstance(value, dict):
    return next((p for p in map(_value_problem, value.values()) if p), None)
  if isinstance(value, list):
    return next((p for p in map(_value_problem, value) if p), None)
  return fileio.value_problem(value)


def read_examples(
  path: str, parse: Callable[[dict, int], Example], *, split: str, on_bad_row: str = "error", what: str = "data"
) -> tuple[list[Example], RowReport]:
  """The examples of a JSONL or Parquet file, `parse(row, line)` each (ValueError("field: problem") for a bad
  row), and the report of what was left out. Raises DataError for a missing file, an empty one, and (with
  `on_bad_row="error"`) every bad row at once."""
  if on_bad_row not in ON_BAD_ROW:
    raise ValueError(f"on_bad_row must be one of {ON_BAD_ROW}, got {on_bad_row!r}")
  path = os.path.expanduser(path)
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file (the {split} split of the {what})")
  rows = _parquet_rows(path) if path.endswith(PARQUET_SUFFIXES) else _jsonl_rows(path)
  report, examples = RowReport(path), []
  for lineno, row in rows:
    where = f"{path}:{lineno}"
    try:
      if isinstance(row, Exception):
        raise row
      for name, value in row.items():  # every field, used or not: a NaN anywhere says the row is broken
        problem = _value_problem(value)
        if problem:
          raise ValueError(f"{name}: {problem}")
      example = parse(row, lineno)
    except ValueError as e:
      report.problems.append(f"{where}:{e}" if str(e)[:1].isdigit() else f"{where}: {e}")
      continue
    examples.append(example)
  report.kept = len(examples)
  if report.problems and on_bad_row == "error":
    raise DataError(
      fileio.report_rows(path, report.problems)
      + ("" if len(report.problems) == 1 else "\n(on_bad_row = 'skip' leaves bad rows out and reports them)")
    )
  if report.problems:
    logging.warning("%s", report.summary())
  if not examples:
    raise DataError(
      f"{path}: the {split} split is empty (no JSON rows)"
      if not report.problems
      else f"{path}: every row of the {split} split is bad:\n  " + "\n  ".join(report.problems[:SHOWN])
    )
  return examples, report


def text_field(row: dict, name: str, *, nonempty: bool = True) -> str:
  """A string field of a row, stripped; ValueError("name: problem") if it is missing, not a string or empty."""
  if name not in row:
    raise ValueError(f"{name}: missing field (fields present: {sorted(row)})")
  value = row[name]
  if not isinstance(value, str) or (nonempty and not value.strip()):
    raise ValueError(f"{name}: must be a non-empty string, got {value!r:.60}")
  return value.strip()


def leftover(row: dict, used) -> dict:
  """The keys of a row that its task does not read: kept in `Example.extras` under "row"."""
  return {k: v for k, v in row.items() if k not in used}
