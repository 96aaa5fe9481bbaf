"""Orbax checkpoints of the RL train state plus a JSON record of everything else a resume needs.

A checkpoint at step s holds the state *after* s optimizer steps: params, optimizer state, step
(orbax StandardSave, multi-host aware), and `meta` (JSON): the data iterator's state, the step, the
seed and the config. Orbax writes into a temporary directory and renames it when complete, so a crash
mid-save never leaves a checkpoint that `latest_step` would pick.
"""
from __future__ import annotations

import os

import orbax.checkpoint as ocp


class Checkpointer:
  """Keeps the last `keep` checkpoints under `directory`.

  `cleanup_tmp=True` (the trainer's, never a reader's) deletes the temporary directories of saves that
  a crash cut short: they are never read, but one is a full-size copy of the state.
  A reader (the evaluator) must not pass it: it would delete a save the trainer has in progress.
  """

  def __init__(self, directory: str, *, keep: int = 3, cleanup_tmp: bool = False):
    self.directory = os.path.abspath(directory)
    self._manager = ocp.CheckpointManager(
        self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                                             cleanup_tmp_directories=cleanup_tmp))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._manager.all_steps())

  def save(self, step: int, state, meta: dict) -> None:
    self._manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                      meta=ocp.args.JsonSave(meta)), force=True)
    self._manager.wait_until_finished()

  def restore(self, step: int, target):
    """(state shaped like `target`, meta dict) of checkpoint `step`."""
    out = self._manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target),
                                                               meta=ocp.args.JsonRestore()))
    return out["state"], out["meta"]

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()
