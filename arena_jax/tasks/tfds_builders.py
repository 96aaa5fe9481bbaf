"""TFDS `GeneratorBasedBuilder`s for the tasks, written as array_record.

Imported lazily (by `data.py`) so that importing `arena_jax.tasks` does not import TFDS. Nothing here
needs TensorFlow: the builders generate in Python, write array_record, and are read back with
`tfds.data_source` (random access, no tf.data).

One builder per task, made from its registered `Task` class (`builder_class`): nothing here names a task. A
builder config carries what the task's data depends on (`Task.data_params`: its section, for file-backed tasks
the files' contents) as JSON, and its name is a hash of that JSON, so changing a knob or editing a file builds
a new dataset beside the old one, and an unchanged config reuses what is on disk.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import types
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
# 1.1.0: `extras` (a task's own fields as JSON), the last schema change a new task needs.
VERSION = "1.1.0"
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
      "extras": text(),
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
    "extras": example.extras,
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
    extras=_text(record["extras"]),
  )


@dataclasses.dataclass(eq=False)
class TaskBuilderConfig(tfds.core.BuilderConfig):
  """A builder config: the JSON of the tasks config (seed and the task's section) that generates it."""

  params: str = "{}"


def builder_config(config: ml_collections.ConfigDict, task_name: str) -> TaskBuilderConfig:
  """The builder config for `task_name` under the tasks `config`."""
  blob = json.dumps(registry.task_class(task_name).data_params(config), sort_keys=True)
  return TaskBuilderConfig(
    name=f"seed{config.seed}-{stable_hash(blob, 10)}", params=blob, description=f"arena_jax {task_name} data: {blob}"
  )


def splits_of(config: ml_collections.ConfigDict, task_name: str) -> tuple[str, ...]:
  """The non-empty splits a task config defines."""
  return registry.task_class(task_name).splits(config)


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
    for section, values in params.items():
      if section != "seed":
        config[section].update({k: v for k, v in values.items() if k in config[section]})
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


_BUILDERS: dict[str, type] = {}


def builder_class(task_name: str) -> type:
  """The TFDS builder of a registered task (made once per process): `Task.generate` writes its splits."""
  if task_name not in _BUILDERS:
    cls = registry.task_class(task_name)
    tfds_name = cls.tfds_name or f"arena_{task_name}"
    camel = "".join(part.title() for part in tfds_name.split("_"))
    _BUILDERS[task_name] = types.new_class(
      camel,
      (_TaskBuilder,),
      {"skip_registration": True},
      lambda ns: ns.update(TASK=task_name, name=tfds_name, __doc__=f"The stored data of the {task_name} task."),
    )
  return _BUILDERS[task_name]
