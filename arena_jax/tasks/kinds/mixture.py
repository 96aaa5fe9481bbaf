"""A training mix of several files and kinds (a STEM RL mix): mixture weights, and a verifier per row.

    tasks.train_task = "mixture"
    tasks.mixture.train_files = ("0.6:data/math.jsonl", "0.3:data/gpqa_style.parquet", "0.1:data/code.jsonl")

Each row's `kind` field (`kind_field`; `default_kind` when a row has none) names the row kind of a file-backed
task (`FileTask.row_kind`: math → `jsonl`, choice, code, or a kind a new task module declares), and that task
parses the row, writes its prompt, verifies its completions and briefs the judge. A file may mix kinds.

The train split draws from file i a share wᵢ / Σw of its rows. With `size` = 0 the split is as long as it can
be without repeating a row (the file that its weight asks most of is used once); with `size` > 0 it has that
many rows, and a file whose share exceeds its rows repeats them (each copy gets its own uid). The draw and the
interleaving are fixed by `tasks.seed`. `test_path` is one file (mixed kinds allowed), not mixed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import file_task
from arena_jax.tasks import registry
from arena_jax.tasks import rows
from arena_jax.tasks.base import DataError, Example, dump_extras
from arena_jax.tasks.task import TASK_CLASSES, register_task

NAME = "mixture"


def parse_entry(entry) -> tuple[float, str]:
  """ "weight:path" → (weight, path); ValueError saying what a valid entry looks like."""
  if not isinstance(entry, str) or ":" not in entry:
    raise ValueError(f"each entry is 'weight:path', got {entry!r}")
  weight, path = entry.split(":", 1)
  try:
    w = float(weight)
  except ValueError:
    raise ValueError(f"the weight of {entry!r} is not a number") from None
  if not math.isfinite(w) or w <= 0 or not path.strip():
    raise ValueError(f"each entry is 'weight:path' with a weight > 0 and a path, got {entry!r}")
  return w, path.strip()


def _entries_check(v) -> str | None:
  if not isinstance(v, (tuple, list)):
    return f"must be a tuple of 'weight:path' strings, got {v!r}"
  for entry in v:
    try:
      parse_entry(entry)
    except ValueError as e:
      return str(e)
  return None


MIXTURE = cs.Section(
  dict(
    train_files=field(
      (),
      "The train split's files, each 'weight:path' (JSONL or Parquet); a file's share of the split is its "
      "weight over the weights' sum.",
      cs.Check("tuple of 'weight:path'", _entries_check),
    ),
    test_path=field("", 'One JSONL or Parquet file for the test split (not mixed); "" = none.', valid='file or ""'),
    kind_field=field("kind", "The row field naming its kind (math, choice, code, …).", cs.string(nonempty=True)),
    default_kind=field("math", "The kind of a row without `kind_field`.", cs.string(nonempty=True)),
    size=field(0, "Rows of the train split; 0 = as many as the weights allow without repeating a row.", cs.integer(0)),
    dedup=field(True, "Drop train rows whose question is also in the test split.", valid="bool", checked=False),
    on_bad_row=file_task.file_fields("")["on_bad_row"],
  ),
  title="a mix of files and row kinds for training (weights per file, a verifier per row)",
)


@config_lib.TASKS.rule
def _mixture_files(c, report):
  """When train_task or eval_tasks selects mixture: train_files are set when it is trained on, and exist."""
  if c.train_task != NAME and NAME not in c.eval_tasks:
    return
  m = c.mixture
  if c.train_task == NAME and not m.train_files:
    report("mixture.train_files", "must list at least one 'weight:path' when train_task is 'mixture'")
  for entry in m.train_files:
    path = parse_entry(entry)[1]
    if not os.path.isfile(os.path.expanduser(path)):
      report("mixture.train_files", f"no such file: {path!r}")
  if m.test_path and not os.path.isfile(os.path.expanduser(m.test_path)):
    report("mixture.test_path", f"no such file: {m.test_path!r}")


def row_kinds() -> dict[str, str]:
  """{row kind: task name} of the registered file-backed tasks."""
  return {cls.row_kind: name for name, cls in TASK_CLASSES.items() if getattr(cls, "row_kind", "")}


def mix_counts(sizes: list[int], weights: list[float], size: int) -> list[int]:
  """Rows drawn from each file: shares wᵢ/Σw of `size`, or (size = 0) of the longest split that repeats no row."""
  shares = [w / sum(weights) for w in weights]
  total = size or min(math.floor(n / p + 1e-9) for n, p in zip(sizes, shares))
  counts = [round(p * total) for p in shares]
  return [min(c, n) for c, n in zip(counts, sizes)] if not size else counts


@register_task(NAME, MIXTURE)
class MixtureTask(file_task.FileTask):
  """Rows of several kinds from several files; each row's own kind parses, prompts and verifies it."""

  what = "rows of mixed kinds"

  def __init__(self, config):
    super().__init__(config)
    self._subtasks: dict[str, object] = {}

  @classmethod
  def splits(cls, config):
    m = config[cls.section_name]
    return tuple(s for s, on in (("train", bool(m.train_files)), ("test", bool(m.test_path))) if on)

  @classmethod
  def empty_split(cls, split):
    return f"tasks.mixture.{'train_files is empty' if split == 'train' else 'test_path is not set'}"

  @classmethod
  def data_params(cls, config):
    params = super(file_task.FileTask, cls).data_params(config)
    section = params[NAME]
    files = [(w, os.path.abspath(os.path.expanduser(p))) for w, p in map(parse_entry, section["train_files"])]
    section["train_files"] = [f"{w}:{p}" for w, p in files]
    section["train_sha256"] = [file_task.file_digest(p) for _, p in files]
    if section["test_path"]:
      path = os.path.abspath(os.path.expanduser(section["test_path"]))
      section["test_path"], section["test_sha256"] = path, file_task.file_digest(path)
    # The kinds' own sections parse the rows (field names, shuffling): they are part of the data too.
    for kind_task in sorted(set(row_kinds().values())):
      params[kind_task] = {k: v for k, v in config[kind_task].to_dict().items() if k != "prompt_template"}
    return params

  # ── the kinds ──

  def subtask(self, kind: str):
    if kind not in self._subtasks:
      kinds = row_kinds()
      if kind not in kinds:
        raise ValueError(f"unknown row kind {kind!r}; the kinds are {', '.join(sorted(kinds))}")
      self._subtasks[kind] = registry.get_task(kinds[kind], self.config)
    return self._subtasks[kind]

  def _of(self, example: Example):
    return self.subtask(example.meta["kind"])

  def parse_row(self, row, split, line):
    m = self.task_config
    kind = row.get(m.kind_field, m.default_kind)
    if not isinstance(kind, str):
      raise ValueError(f"{m.kind_field}: must be a string, got {kind!r:.40}")
    try:
      sub = self.subtask(kind)
    except ValueError as e:
      raise ValueError(f"{m.kind_field}: {e}") from None
    example = sub.parse_row({k: v for k, v in row.items() if k != m.kind_field}, split, line)
    return dataclasses.replace(example, extras=dump_extras({**example.meta, "kind": kind}))

  def read_split(self, split):
    if split == "test":
      return self._read(self.task_config.test_path, split)
    files = [parse_entry(e) for e in self.task_config.train_files]
    per_file = [self._read(path, split) for _, path in files]
    counts = mix_counts([len(x) for x in per_file], [w for w, _ in files], self.task_config.size)
    rng = random.Random(f"arena_jax/{NAME}/{self.config.seed}")
    mixed = []
    for (_, path), examples, count in zip(files, per_file, counts):
      copies, rest = divmod(count, len(examples))
      order = list(range(len(examples)))
      rng.shuffle(order)
      picked = [(c, i) for c in range(copies) for i in range(len(examples))] + [(copies, i) for i in order[:rest]]
      mixed += [_copy(examples[i], c) for c, i in picked]
    rng.shuffle(mixed)
    if not mixed:
      raise DataError("tasks.mixture.train_files: the mix is empty (every file's share rounds to 0 rows)")
    return mixed

  def _read(self, path: str, split: str) -> list[Example]:
    examples, report = rows.read_examples(
      path,
      lambda row, line: self.parse_row(row, split, line),
      split=split,
      on_bad_row=self.task_config.on_bad_row,
      what="mixture task",
    )
    self.reports[f"{split}:{path}"] = report
    return examples

  def load_splits(self):
    if self._splits is None:
      out = {s: self.read_split(s) for s in self.splits(self.config)}
      if "train" in out and "test" in out and self.task_config.dedup:
        held_out = {file_task.normalise_question(e.question) for e in out["test"]}
        out["train"] = [e for e in out["train"] if file_task.normalise_question(e.question) not in held_out]
      if not out or ("train" in out and not out["train"]):
        raise DataError("tasks.mixture: the train split is empty after de-duplication against the test split")
      self._splits = out
    return self._splits

  # ── per row: its kind's prompt, verifier and judge briefing ──

  def prompt(self, example):
    return self._of(example).prompt(example)

  def judge_question(self, example):
    return self._of(example).judge_question(example)

  def reference_answer(self, example):
    return self._of(example).reference_answer(example)

  def score(self, example, completion):
    return self._of(example).score(example, completion)

  def verify(self, example, completion):
    return self._of(example).verify(example, completion)

  def verify_batch(self, examples, completions):
    if len(examples) != len(completions):
      raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
    rewards = [0.0] * len(examples)
    by_kind: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
      by_kind.setdefault(e.meta["kind"], []).append(i)
    for kind, idx in by_kind.items():  # each kind's verifier once, on its rows (a pool per kind, not per row)
      out = self.subtask(kind).verify_batch([examples[i] for i in idx], [completions[i] for i in idx])
      for i, r in zip(idx, out):
        rewards[i] = r
    return rewards

  def close(self):
    for sub in self._subtasks.values():
      sub.close()
    self._subtasks = {}


def _copy(example: Example, copy: int) -> Example:
  return example if copy == 0 else dataclasses.replace(example, uid=f"{example.uid}#{copy}")
