"""Verifiers on their own: score stored completions with a task's verifier, one score and its reason per row.

    rows = scoring.score_file("choice", "rows.jsonl")    # each row: the task's row format + "completion"

For checking a verifier on one's own data before a run, and for re-scoring stored completions
(`launch.score`). Rows are parsed by the task's own `parse_row` (the same errors, `path:line: field: problem`),
with no shuffling of a choice row's options: a completion's letter is read against the options in the order
the row lists them. `math` names the math-row task (`jsonl`).
"""

from __future__ import annotations

from typing import Sequence

import ml_collections

from arena_jax.tasks import config as config_lib
from arena_jax.tasks import registry
from arena_jax.tasks import rows
from arena_jax.tasks.base import DataError
from arena_jax.tasks.file_task import FileTask

ALIASES = {"math": "jsonl"}
COMPLETION = "completion"
KEPT = ("id",)  # row fields copied to the score row, to match scores with rows


def score_task(name: str, config: ml_collections.ConfigDict | None = None) -> FileTask:
  """The file-backed task `name` (or its alias) set up for scoring: choice options in the row's order."""
  name = ALIASES.get(name, name)
  cls = registry.task_class(name)
  if not issubclass(cls, FileTask):
    raise ValueError(f"--task={name}: scores rows of a file-backed task ({', '.join(file_task_names())}), not {name}")
  config = (config or config_lib.default_config()).copy_and_resolve_references()
  if "shuffle" in config[cls.section_name]:
    config[cls.section_name].shuffle = False
  return cls(config)


def file_task_names() -> list[str]:
  names = [n for n in registry.task_names() if issubclass(registry.task_class(n), FileTask)]
  return sorted(names + [a for a, n in ALIASES.items() if n in names])


def score_file(
  name: str, path: str, *, config: ml_collections.ConfigDict | None = None, on_bad_row: str = "error"
) -> list[dict]:
  """One {"line", "score", "reason"[, "id"]} per row of `path`, in file order (a row without a `completion`
  string is a bad row, named with its line)."""
  with score_task(name, config) as task:
    completions: list[str] = []
    lines: list[int] = []
    kept: list[dict] = []

    def parse(row: dict, line: int):
      completion = row.get(COMPLETION)
      if not isinstance(completion, str):
        raise ValueError(f"{COMPLETION}: missing or not a string (every row holds the completion to score)")
      example = task.parse_row({k: v for k, v in row.items() if k != COMPLETION}, "test", line)
      # Only after the row parsed: a bad row (skipped) leaves no completion behind.
      completions.append(completion)
      lines.append(line)
      kept.append({k: row[k] for k in KEPT if k in row})
      return example

    examples, _ = rows.read_examples(path, parse, split="test", on_bad_row=on_bad_row, what=f"{name} rows")
    scores = task.score_batch(examples, completions)
  return [{"line": ln, **k, **s} for ln, k, s in zip(lines, kept, scores)]


def summary(scored: Sequence[dict]) -> dict:
  """{"rows", "mean_score"}: the figures `launch.score` prints last."""
  if not scored:
    raise DataError("no rows were scored")
  return {"rows": len(scored), "mean_score": sum(s["score"] for s in scored) / len(scored)}
