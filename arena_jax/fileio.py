"""Small file helpers every room uses: atomic writes and one JSONL reader.

Writes go to a temporary name beside the target and are renamed over it, so a crash mid-write never
leaves a torn file where a resume, an evaluator or a second process looks for it (rename is atomic on
one filesystem). The JSONL reader serves two kinds of file with opposite needs, chosen explicitly:
an append-only log written by this code (`strict=False`: a line torn by a kill mid-write is skipped)
and a user's input file (`strict=True`: a bad line is an error that names the file and line).
"""
from __future__ import annotations

import json
import os
from typing import Sequence


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
  """Writes `data` (text as UTF-8) to `path` through a temporary file renamed over it."""
  path = os.fspath(path)
  # The pid and the object id keep concurrent writers (threads, processes) off each other's temp file.
  tmp = f"{path}.{os.getpid()}.{id(data)}.tmp"
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


def read_jsonl(path: str | os.PathLike, *, strict: bool, required: Sequence[Sequence[str]] = ()) -> list[dict]:
  """The rows of a JSONL file.

  strict=False: an append-only log of ours; [] if the file is absent, and a line that is not a JSON
    object (torn by a kill mid-write, or blank) is skipped.
  strict=True: an input file; a missing file, a bad line or a row lacking a `required` field raises an
    error naming `path:line`. Each `required` entry is a group of alternatives, one of which must hold
    a string or a list.
  """
  path = os.path.expanduser(os.fspath(path))
  if not strict and not os.path.exists(path):
    return []
  rows = []
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except ValueError as e:
        if not strict:
          continue
        raise ValueError(f"{path}:{n}: not valid JSON ({e})") from e
      if not isinstance(row, dict):
        if not strict:
          continue
        raise ValueError(f"{path}:{n}: a row must be a JSON object")
      for group in required:
        if not any(isinstance(row.get(k), (str, list)) for k in group):
          raise ValueError(f"{path}:{n}: the row needs the field {' or '.join(map(repr, group))}")
      rows.append(row)
  return rows
