"""Small file helpers every room uses: atomic writes and one JSONL reader.

Writes go to a temporary name beside the target and are renamed over it, so a crash mid-write never
leaves a torn file where a resume, an evaluator or a second process looks for it (rename is atomic on
one filesystem). The JSONL reader serves two kinds of file with opposite needs, chosen explicitly:
an append-only log written by this code (`strict=False`: a line torn by a kill mid-write is skipped)
and a user's input file (`strict=True`: a bad line is an error that names the file and line).
"""

from __future__ import annotations

import json
import math
import os
from typing import Sequence

from arena_jax.errors import InputError


_TEMPORARY = ".tmp"


def is_temporary_of(name: str, target: str) -> bool:
  """`name` is a temporary file that `atomic_write` makes on its way to `target` (any writer's, mid-write)."""
  return name.startswith(target + ".") and name.endswith(_TEMPORARY)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
  """Writes `data` (text as UTF-8) to `path` through a temporary file renamed over it."""
  path = os.fspath(path)
  # The pid and the object id keep concurrent writers (threads, processes) off each other's temp file.
  tmp = f"{path}.{os.getpid()}.{id(data)}{_TEMPORARY}"
  try:
    with open(tmp, "wb") as f:
      f.write(data.encode("utf-8") if isinstance(data, str) else data)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def write_jsonl(path: str | os.PathLike, rows) -> None:
  """Rewrites a JSONL file atomically (one JSON object a line)."""
  atomic_write(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


MAX_REPORTED = 20  # malformed rows listed in one error (the count of the rest follows)


class _NonFinite:
  """A number JSON cannot hold (NaN, Infinity, or a literal that overflows a float), kept to be reported."""

  def __init__(self, text: str):
    self.text = text


def _parse_float(text: str):
  value = float(text)
  return value if math.isfinite(value) else _NonFinite(text)


def parse_json_row(line: str):
  """One JSONL line → a dict; non-finite numbers come back as `_NonFinite` (see `value_problem`).
  Raises ValueError with the problem (malformed JSON, nesting too deep, an integer too long)."""
  try:
    return json.loads(line, parse_constant=_NonFinite, parse_float=_parse_float)
  except json.JSONDecodeError as e:
    raise ValueError(f"{e.colno}: malformed JSON ({e.msg})") from None
  except RecursionError:
    raise ValueError("malformed JSON (nested too deeply)") from None
  except ValueError as e:  # e.g. an integer literal longer than Python converts
    raise ValueError(f"malformed JSON ({e})") from None


def value_problem(value) -> str | None:
  """Why a parsed JSON value cannot enter the data: a non-finite number, or a string with an unpaired
  surrogate (a valid JSON escape such as \\ud800 that no UTF-8 text can hold)."""
  if isinstance(value, _NonFinite):
    return f"non-finite number {value.text} (JSON has none; quote it if a string is meant)"
  if isinstance(value, str):
    try:
      value.encode("utf-8")
    except UnicodeEncodeError as e:
      return f"unpaired surrogate {value[e.start]!r} at character {e.start + 1}"
  return None


def report_rows(path: str, problems: list[str]) -> str:
  """One error for every malformed row of a file: `path:line: field: problem` each."""
  if len(problems) == 1:
    return problems[0]
  shown = "\n  ".join(problems[:MAX_REPORTED])
  more = f"\n  … and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
  return f"{path}: {len(problems)} malformed rows:\n  {shown}{more}"


def read_jsonl(path: str | os.PathLike, *, strict: bool, required: Sequence[Sequence[str]] = ()) -> list[dict]:
  """The rows of a JSONL file.

  strict=False: an append-only log of ours; [] if the file is absent, and a line that is not a JSON
    object (torn by a kill mid-write, or blank) is skipped.
  strict=True: an input file; a missing file raises, and every bad line — not JSON, not an object, a
    non-finite number or an unpaired surrogate in a field, a row lacking a `required` field — is listed
    in one InputError as `path:line: field: problem`. Each `required` entry is a group of alternatives,
    one of which must hold a string or a list.
  """
  path = os.path.expanduser(os.fspath(path))
  if not strict and not os.path.exists(path):
    return []
  rows, problems = [], []
  with open(path, "rb") as f:
    for n, raw in enumerate(f, 1):
      try:
        try:
          line = raw.decode("utf-8", errors="strict" if strict else "replace")
        except UnicodeDecodeError as e:
          raise ValueError(f"not valid UTF-8 (byte {e.start + 1} of the line); re-encode the file as UTF-8") from None
        if not line.strip():
          continue
        row = parse_json_row(line) if strict else json.loads(line)
        if not isinstance(row, dict):
          raise ValueError("a row must be a JSON object")
        for key, value in row.items() if strict else ():
          if value_problem(value):
            raise ValueError(f"{key}: {value_problem(value)}")
        for group in required:
          if not any(isinstance(row.get(k), (str, list)) for k in group):
            raise ValueError(f"{' or '.join(group)}: the row needs this field (a string or a list)")
      except (ValueError, RecursionError) as e:
        if strict:
          problems.append(f"{path}:{n}:{e}" if str(e)[:1].isdigit() else f"{path}:{n}: {e}")
        continue
      rows.append(row)
  if problems:
    raise InputError(report_rows(path, problems))
  return rows
