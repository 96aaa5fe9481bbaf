"""Named benchmarks: the entries of one evaluation, each a task with its file, samples, k and token budget.

    config.suite = {
      "aime24": dict(task="jsonl", path="aime24.jsonl", num_samples=16),
      "gpqa_diamond": dict(task="choice", path="gpqa_diamond.jsonl", num_samples=16),
      "lcb_v6": dict(task="code", path="lcb_v6.jsonl", num_samples=16, ks=(1, 5), max_new_tokens=16384),
    }
    config.benchmarks = ("aime24", "gpqa_diamond", "lcb_v6", "arithmetic")

A name in `benchmarks` is a `suite` entry, or, with no entry of that name, a registered task scored on the
test split the run's own task settings define (the default: `("arithmetic", "arithmetic_shift")`). An entry's
unset fields take the evaluation's own values (`num_examples`, `num_samples`, …); `path` replaces the task's
test file, so any file of the task's row format can be a benchmark beside the run's own; a relative path is
read under `data_root`. `type` names the evaluator (`evaluators.EVALUATORS`: a new kind of measurement is one
module there). Configs with whole suites: `configs/eval_samples.py` (the shipped sample files) and
`configs/eval_paper.py` (the paper's Table 1 benchmarks, on files you provide).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import ml_collections

from arena_jax import tasks

# The fields of an entry; None = the evaluation's own value of the same name.
ENTRY_FIELDS = dict(
  task="the registered task that prompts and verifies it (jsonl = math rows, choice, code, arithmetic, …)",
  path="its test file (JSONL or Parquet, the task's row format); empty = the task's configured test split",
  type="the evaluator (`evaluators.EVALUATORS`; default `accuracy`: greedy, pass ratio@n, pass@k)",
  num_examples="problems (the first ones of the file); 0 = all",
  num_samples="n of pass ratio@n and pass@k",
  ks="the k of pass@k (each ≤ n)",
  temperature="temperature of the n samples",
  max_new_tokens="the completion budget",
  greedy="also decode each problem greedily",
)
SAMPLING_FIELDS = ("num_examples", "num_samples", "temperature", "max_new_tokens", "greedy")


@dataclasses.dataclass(frozen=True)
class Benchmark:
  """One resolved benchmark: every field set."""

  name: str
  task: str
  path: str
  type: str
  num_examples: int
  num_samples: int
  ks: tuple[int, ...] | None
  temperature: float
  max_new_tokens: int
  greedy: bool

  def tasks_config(self, tasks_config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The tasks config it reads: `tasks_config` with this benchmark's file as its task's test split."""
    if not self.path:
      return tasks_config
    out = tasks_config.copy_and_resolve_references()
    section = tasks.task_class(self.task).section_name
    out[section].test_path = self.path
    if "eval_tasks" in out and self.task not in out.eval_tasks:
      out.eval_tasks = tuple(out.eval_tasks) + (self.task,)
    return out


def _entry(suite, name: str) -> dict[str, Any] | None:
  if suite is None or name not in suite:
    return None
  entry = suite[name]
  entry = entry.to_dict() if isinstance(entry, ml_collections.ConfigDict) else dict(entry)
  unknown = sorted(set(entry) - set(ENTRY_FIELDS))
  if unknown:
    raise ValueError(f"config.suite.{name}: unknown field(s) {unknown}; an entry has {', '.join(ENTRY_FIELDS)}")
  return entry


def resolve(config: ml_collections.ConfigDict) -> list[Benchmark]:
  """The benchmarks of an evaluation config, in `config.benchmarks` order; ValueError naming the entry and
  field of a bad one (an unknown task, a path to no file, a path for a task without files)."""
  suite = config.get("suite")
  root = os.path.expanduser(config.get("data_root", "") or "")
  names = tuple(config.benchmarks)
  if not names:
    raise ValueError("config.benchmarks is empty: name at least one suite entry or task")
  if len(set(names)) != len(names):
    raise ValueError(f"config.benchmarks names one benchmark twice: {names}")
  out = []
  for name in names:
    entry = _entry(suite, name)
    where = f"config.suite.{name}" if entry is not None else "config.benchmarks"
    entry = entry if entry is not None else {"task": name}
    task = entry.get("task") or name
    if task not in tasks.task_names():
      raise ValueError(f"{where}: unknown task {task!r}; the tasks are {', '.join(tasks.task_names())}")
    path = entry.get("path") or ""
    if path:
      if not issubclass(tasks.task_class(task), tasks.FileTask):
        raise ValueError(f"{where}.path: the {task} task reads no files (it generates its problems)")
      path = os.path.join(root, path) if root and not os.path.isabs(os.path.expanduser(path)) else path
      if not os.path.isfile(os.path.expanduser(path)):
        raise ValueError(f"{where}.path: no such file: {path!r}" + ("" if root else " (relative paths: set data_root)"))
    values = {k: entry.get(k) if entry.get(k) is not None else config[k] for k in SAMPLING_FIELDS}
    ks = entry.get("ks")
    ks = tuple(int(k) for k in ks) if ks else (tuple(config.ks) if config.get("ks") else None)
    if ks and values["num_samples"] and max(ks) > values["num_samples"]:
      raise ValueError(f"{where}.ks: {ks} has a k above num_samples = {values['num_samples']}")
    out.append(
      Benchmark(
        name=name,
        task=task,
        path=path,
        type=entry.get("type") or "accuracy",
        ks=ks if values["num_samples"] else None,
        **values,
      )
    )
  return out
