"""The optional on-disk cache of answers (`client.cache_dir`), keyed by the request.

The key is the request body itself — model, messages and sampling parameters, not the endpoint — so a
cached answer is returned, parsed, without a call, from any endpoint and any process.
"""

from __future__ import annotations

import hashlib
import json
import os

from arena_jax import fileio


def request_key(payload: dict) -> str:
  """The cache key of a request: SHA-256 of its canonical JSON (endpoint-independent)."""
  return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class ResponseCache:
  """Answers on disk, one JSON file per request key (atomic writes; safe across processes)."""

  def __init__(self, directory: str):
    self.directory = os.path.expanduser(directory)
    os.makedirs(self.directory, exist_ok=True)

  def _path(self, key: str) -> str:
    return os.path.join(self.directory, key[:2], key + ".json")

  def get(self, key: str) -> dict | None:
    """The record stored under `key`, or None (none, unreadable, or not a record: asked again)."""
    try:
      with open(self._path(key), encoding="utf-8") as f:
        record = json.load(f)
    except (OSError, ValueError, RecursionError):
      return None
    ok = (
      isinstance(record, dict)
      and all(isinstance(record.get(k), (str, type(None))) for k in ("content", "reasoning", "finish_reason"))
      and all(
        isinstance(record.get(k, 0), int) and record.get(k, 0) >= 0 for k in ("prompt_tokens", "completion_tokens")
      )
    )
    return record if ok else None

  def put(self, key: str, record: dict) -> None:
    path = self._path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fileio.atomic_write(path, json.dumps(record, ensure_ascii=False))
