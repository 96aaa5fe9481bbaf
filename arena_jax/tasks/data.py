"""Stored task data: built into the data dir on first use, read back with the builder's `as_data_source`.

    source = tasks.load_split(config, "arithmetic", "train")   # builds once, then reuses
    example = source[0]                                        # an `Example`, random access

TFDS is imported here, inside the functions, so that `import arena_jax.tasks` stays light and quiet.
Building prints nothing: TFDS's progress bars and banners are captured and replaced by one log line.
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Sequence

from absl import logging
import ml_collections

from arena_jax.tasks import config as config_lib
from arena_jax.tasks import registry
from arena_jax.tasks.base import DataError, Example


def data_dir(config: ml_collections.ConfigDict) -> str:
  return os.path.abspath(os.path.expanduser(config.data_dir))


def _builder(config: ml_collections.ConfigDict, task_name: str):
  from arena_jax.tasks import tfds_builders  # pylint: disable=g-import-not-at-top  (lazy TFDS)

  cls = tfds_builders.builder_class(task_name)
  return cls(
    config=tfds_builders.builder_config(config, task_name),
    data_dir=data_dir(config),
    file_format=tfds_builders.FILE_FORMAT,
  )


def prepare(config: ml_collections.ConfigDict, task_name: str) -> str:
  """Builds a task's dataset unless it is already in the data dir; returns its directory.

  On a shared file system with many hosts, run this once before the job starts (the build writes
  to a temporary directory and renames it, but two hosts building at once waste work).
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  config_lib.validate_config(config)
  builder = _builder(config, task_name)
  if not builder.is_prepared():
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
      builder.download_and_prepare(download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    logging.info("Built the %s dataset in %s", task_name, builder.data_dir)
  return str(builder.data_dir)


class ExampleSource(Sequence[Example]):
  """Random access to the examples of one split (a thin decoding view of a TFDS data source)."""

  def __init__(self, source, task_name: str, split: str):
    self._source = source
    self.task_name = task_name
    self.split = split

  def __len__(self) -> int:
    return len(self._source)

  def __getitem__(self, index):
    from arena_jax.tasks import tfds_builders  # pylint: disable=g-import-not-at-top

    if isinstance(index, slice):
      return [self[i] for i in range(*index.indices(len(self)))]
    if not -len(self) <= index < len(self):
      raise IndexError(f"index {index} out of range for {len(self)} examples")
    return tfds_builders.from_record(self._source[index % len(self)])

  def __repr__(self) -> str:
    return f"ExampleSource({self.task_name!r}, {self.split!r}, {len(self)} examples)"


def load_split(config: ml_collections.ConfigDict, task_name: str, split: str) -> ExampleSource:
  """The examples of a task's split, building the dataset first if it is not on disk yet.

  Raises DataError, before anything trains, for a split that the config leaves empty.
  """
  from arena_jax.tasks import tfds_builders  # pylint: disable=g-import-not-at-top

  config_lib.validate_config(config)
  if split not in tfds_builders.splits_of(config, task_name):
    raise DataError(f"{registry.task_class(task_name).empty_split(split)}: the {split} split is empty")
  prepare(config, task_name)
  # The builder itself, not `tfds.data_source(name)`: the builders are made from the task registry and are
  # not in TFDS's own registry of names.
  source = _builder(config, task_name).as_data_source(split=split)
  if len(source) == 0:
    raise DataError(f"the {split} split of {task_name} in {data_dir(config)} is empty")
  return ExampleSource(source, task_name, split)
