"""Tasks by name: `get_task("arithmetic", config)` → a `Task` (prompt, reference answer, verify, process check).

A task is one module of `arena_jax/tasks/kinds/`; importing this module imports every module there (`kinds`),
and each registers its `Task` and its config section (`task.register_task`). Adding a task is adding that
module (and its test): the config's task names, its `tasks.<name>` section and the TFDS builder of its data
all come from the registration. A task outside the library registers the same way when its module is imported.

Rewards are computed on the host from text; model output is never `eval`ed (see `expressions.py`), and code
runs only in the sandbox (`sandbox.py`).
"""

from __future__ import annotations

import ml_collections

from arena_jax.tasks import config as config_lib
from arena_jax.tasks import kinds  # noqa: F401  (registers every task module of kinds/)
from arena_jax.tasks.task import TASK_CLASSES, Task, register_task  # noqa: F401


def task_names() -> tuple[str, ...]:
  return tuple(TASK_CLASSES)


def task_class(name: str) -> type[Task]:
  """The registered class of task `name` (a KeyError listing the registered names otherwise)."""
  return TASK_CLASSES.get_or_raise(name)


def get_task(name: str, config: ml_collections.ConfigDict | None = None) -> Task:
  """The task `name`, configured by the tasks config (`default_config()` when None)."""
  return task_class(name)(config if config is not None else config_lib.default_config())
