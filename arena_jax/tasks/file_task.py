"""The shared part of the tasks whose problems come from users' files (math, choice, code, a mixture).

A file-backed task declares its row format (`parse_row`), its prompt and its verifier; the files, their
splits, the de-duplication of train against test, bad rows (`rows.read_examples`) and the key of the stored
dataset (the files' contents, not their paths' timestamps) are handled here once. Its config section starts
from `file_fields()`, and `file_rule(name)` checks its files when the task is selected.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import ClassVar

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import rows
from arena_jax.tasks.base import DataError, Example
from arena_jax.tasks.task import Task


def file_fields(what: str, prompt_template: str = config_lib.PROMPT_TEMPLATE) -> dict:
  """The fields every file-backed task has: its two files, de-duplication, bad rows and its prompt."""
  return dict(
    # The two paths are checked by `file_rule`, and only when the task is selected.
    train_path=field(
      "",
      f'Local JSONL or Parquet file of {what} for the train split; "" = not used. Required when it is `train_task`.',
      valid='existing file or ""',
    ),
    test_path=field(
      "", f'Local JSONL or Parquet file of {what} for the test split; "" = not used.', valid='existing file or ""'
    ),
    dedup=field(True, "Drop train rows whose question is also in the test split.", valid="bool", checked=False),
    on_bad_row=field(
      "error",
      "A malformed row: `error` stops before training, listing every bad row as file:line; `skip` leaves it "
      "out and logs how many were skipped and why (the first few as file:line).",
      cs.one_of(rows.ON_BAD_ROW),
    ),
    prompt_template=config_lib.template_field(default=prompt_template),
  )


def file_rule(name: str):
  """A rule of `tasks`: when `name` is the train task or one of the eval tasks, its files exist, and
  train_path is set if it is trained on."""

  def check(c, report):
    if c.train_task != name and name not in c.eval_tasks:
      return
    j = c[name]
    if not j.train_path and not j.test_path:
      report(f"{name}.train_path", f"the {name} task is selected but neither train_path nor test_path is set")
    if c.train_task == name and not j.train_path:
      report(f"{name}.train_path", f"must name a JSONL or Parquet file when train_task is {name!r}")
    for key in ("train_path", "test_path"):
      path = j[key]
      if not isinstance(path, str):
        report(f"{name}.{key}", f"must be a file path or '', got {path!r}")
      if path and not os.path.isfile(os.path.expanduser(path)):
        report(f"{name}.{key}", f"no such file: {path!r}")

  check.__name__ = check.__qualname__ = f"_{name}_files"
  check.__doc__ = (
    f"When train_task or eval_tasks selects {name}: the files exist, and train_path is set if it is trained on."
  )
  return check


def file_digest(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()[:16]


def normalise_question(question: str) -> str:
  """The form used to de-duplicate train against test: case- and whitespace-insensitive."""
  return re.sub(r"\s+", " ", question).strip().lower()


class FileTask(Task):
  """A task whose splits are rows of `tasks.<name>.train_path` / `test_path` (JSONL or Parquet).

  Subclasses implement `parse_row(row, split, line)` → Example (ValueError("field: problem") for a bad row),
  `verify` and, where the prompt is not the template around the question, `prompt`.
  """

  what: ClassVar[str] = "rows"  # what the files hold, for messages
  # What `verify` reads of a row's kind in a mixture (`kinds/mixture.py`): "math", "choice", "code", ….
  row_kind: ClassVar[str] = ""
  not_data = ("prompt_template",)  # on_bad_row stays: it decides which rows are stored

  def __init__(self, config):
    super().__init__(config)
    self._splits: dict[str, list[Example]] | None = None
    self.reports: dict[str, rows.RowReport] = {}

  def parse_row(self, row: dict, split: str, line: int) -> Example:
    raise NotImplementedError

  @classmethod
  def splits(cls, config):
    c = config[cls.section_name]
    return tuple(s for s in ("train", "test") if c[f"{s}_path"])

  @classmethod
  def empty_split(cls, split):
    return f"tasks.{cls.section_name}.{split}_path is not set"

  @classmethod
  def data_params(cls, config):
    params = super().data_params(config)
    section = params[cls.section_name]
    for split in ("train", "test"):  # the files' contents, not their names, decide the data
      path = section.get(f"{split}_path")
      if path:
        path = os.path.abspath(os.path.expanduser(path))
        section[f"{split}_path"] = path
        section[f"{split}_sha256"] = file_digest(path)
    return params

  def read_split(self, split: str) -> list[Example]:
    path = self.task_config[f"{split}_path"]
    examples, report = rows.read_examples(
      path,
      lambda row, line: self.parse_row(row, split, line),
      split=split,
      on_bad_row=self.task_config.on_bad_row,
      what=f"{self.name} task",
    )
    self.reports[split] = report
    return examples

  def load_splits(self) -> dict[str, list[Example]]:
    if self._splits is None:
      out = {}
      for split in self.splits(self.config):
        out[split] = self.read_split(split)
      if "train" in out and "test" in out and self.task_config.dedup:
        held_out = {normalise_question(e.question) for e in out["test"]}
        out["train"] = [e for e in out["train"] if normalise_question(e.question) not in held_out]
        if not out["train"]:
          raise DataError(f"{self.task_config.train_path}: every train question also appears in the test split")
      if not out:
        raise DataError(f"tasks.{self.section_name}: set train_path and/or test_path to local JSONL or Parquet files")
      self._splits = out
    return self._splits

  def generate(self, split):
    splits = self.load_splits()
    if split not in splits:
      raise ValueError(f"{self.empty_split(split)}, so there is no {split} split")
    return iter(splits[split])
