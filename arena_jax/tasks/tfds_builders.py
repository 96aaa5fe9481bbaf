"""TFDS `GeneratorBasedBuilder`s for the tasks, written as array_record.

Imported lazily (by `data.py`) so that importing `arena_jax.tasks` does not import TFDS. Nothing here
needs TensorFlow: the builders generate in Python, write array_record, and are read back with
`tfds.data_source` (random access, no tf.data).

One builder per task; a builder config carries the task's config section as JSON, and its name is a
hash of that JSON (and, for JSONL, of the files' contents), so changing a knob or editing a file
builds a new dataset beside the old one, and an unchanged config reuses what is on disk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from typing import Iterator

import ml_collections
import numpy as np
import tensorflow_datasets as tfds

from arena_jax.tasks import config as config_lib
from arena_jax.tasks import registry
from arena_jax.tasks.base import Example, stable_hash


class _QuietConfigs(logging.Filter):
  """Drops TFDS's warnings about what we do on purpose: configs made at run time, new dataset folders."""

  _EXPECTED = ("Using custom data configuration", "Variant folder")

  def filter(self, record: logging.LogRecord) -> bool:
    return not ("tensorflow_datasets" in record.pathname and str(record.msg).startswith(self._EXPECTED))


logging.getLogger("absl").addFilter(_QuietConfigs())

# Bump when generation changes what a config produces (the name of the stored dataset includes it).
VERSION = "1.0.0"
FILE_FORMAT = "array_record"


def features() -> tfds.features.FeaturesDict:
  """The one schema of every task (`base.Example`)."""
  text = tfds.features.Text
  return tfds.features.FeaturesDict(
    {
      "uid": text(),
      "question": text(),
      "answer": text(),
      "solution": text(),
      "expression": text(),
      "numbers": tfds.features.Sequence(np.int64),
    }
  )


def to_record(example: Example) -> dict:
  return {
    "uid": example.uid,
    "question": example.question,
    "answer": example.answer,
    "solution": example.solution,
    "expression": example.expression,
    "numbers": np.asarray(example.numbers, np.int64),
  }


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def from_record(record) -> Example:
  return Example(
    uid=_text(record["uid"]),
    question=_text(record["question"]),
    answer=_text(record["answer"]),
    solution=_text(record["solution"]),
    expression=_text(record["expression"]),
    numbers=tuple(int(n) for n in np.asarray(record["numbers"]).reshape(-1)),
  )


@dataclasses.dataclass(eq=False)
class TaskBuilderConfig(tfds.core.BuilderConfig):
  """A builder config: the JSON of the tasks config (seed and the task's section) that generates it."""

  params: str = "{}"


def _file_digest(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()[:16]


def builder_config(config: ml_collections.ConfigDict, task_name: str) -> TaskBuilderConfig:
  """The builder config for `task_name` under the tasks `config`."""
  section = config[task_name].to_dict()
  params = {"seed": config.seed, task_name: section}
  for other in _DEPENDS_ON.get(task_name, ()):  # a task drawn relative to another task's settings
    params[other] = {k: v for k, v in config[other].to_dict().items() if k != "prompt_template"}
  if task_name == "jsonl":
    # Workers and timeouts do not change the data; the files' contents do.
    for key in ("num_workers", "timeout_s", "max_items_per_worker", "prompt_template"):
      section.pop(key, None)
    for split in ("train", "test"):
      path = section[f"{split}_path"]
      if path:
        path = os.path.abspath(os.path.expanduser(path))
        section[f"{split}_path"] = path
        section[f"{split}_sha256"] = _file_digest(path)
  else:
    section.pop("prompt_template", None)  # prompts are formatted at read time
  blob = json.dumps(params, sort_keys=True)
  return TaskBuilderConfig(
    name=f"seed{config.seed}-{stable_hash(blob, 10)}", params=blob, description=f"arena_jax {task_name} data: {blob}"
  )


# The shifted arithmetic split is drawn outside the arithmetic task's ranges: its data depends on both.
_DEPENDS_ON = {"arithmetic_shift": ("arithmetic",)}


def splits_of(config: ml_collections.ConfigDict, task_name: str) -> tuple[str, ...]:
  """The non-empty splits a task config defines."""
  c = config[task_name]
  if task_name == "jsonl":
    return tuple(s for s in ("train", "test") if c[f"{s}_path"])
  return tuple(s for s in ("train", "test") if c.get(f"num_{s}", 0) > 0)


class _TaskBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Generates a task's splits with the task's own generator (`Task.generate`)."""

  VERSION = tfds.core.Version(VERSION)
  TASK = ""
  # Nothing is downloaded, so there is no checksums file next to the code to look up. (TFDS 4.9.10
  # resolves that path through `importlib_resources`, which it only installs for Python < 3.9.)
  code_path = None

  def _tasks_config(self) -> ml_collections.ConfigDict:

    params = json.loads(self.builder_config.params)
    config = config_lib.default_config()
    config.seed = params["seed"]
    for task_name in (self.TASK,) + _DEPENDS_ON.get(self.TASK, ()):
      config[task_name].update({k: v for k, v in params[task_name].items() if k in config[task_name]})
    return config

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
      builder=self, description=self.builder_config.description, features=features(), disable_shuffling=True
    )

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing is downloaded
    config = self._tasks_config()
    return {split: self._generate_examples(config, split) for split in splits_of(config, self.TASK)}

  def _generate_examples(self, config, split) -> Iterator[tuple[str, dict]]:
    with registry.get_task(self.TASK, config) as task:
      for example in task.generate(split):
        yield example.uid, to_record(example)


class ArenaArithmetic(_TaskBuilder):
  """Synthetic multi-step arithmetic (`arithmetic.py`)."""

  TASK = "arithmetic"


class ArenaArithmeticShift(_TaskBuilder):
  """Arithmetic outside the training distribution (`arithmetic.generate_shift`), test split only."""

  TASK = "arithmetic_shift"


class ArenaCountdown(_TaskBuilder):
  """Countdown, the out-of-distribution task (`countdown.py`)."""

  TASK = "countdown"


class ArenaJsonlMath(_TaskBuilder):
  """Users' JSONL math data; the builder config points at the local files (`jsonl.py`)."""

  TASK = "jsonl"


BUILDERS = {
  "arithmetic": ArenaArithmetic,
  "arithmetic_shift": ArenaArithmeticShift,
  "countdown": ArenaCountdown,
  "jsonl": ArenaJsonlMath,
}
