"""Checkpoints that defend themselves and one run per workdir.

A latest checkpoint that is truncated, missing a file, silently altered or holding NaNs is reported and
skipped: the resume falls back to the newest step that restores and verifies. The non-finite-loss
message names a checkpoint that really restores with finite values. The evaluator skips a bad step.
A second trainer on a live workdir is refused; a resume that changes the run's mode, task, model or
batch shape is refused unless `resume_allow_changes` names the change.
"""

import os
import re
import shutil
import signal

import jax
import numpy as np
import pytest

from arena_jax.errors import WorkdirError
from arena_jax.eval import watch as watch_lib
from arena_jax.train import Checkpointer, checkpoint, NonFiniteLossError, checkpoint_steps, read_metrics, train
from benchmarks.common import damage_checkpoint
from tests.reliability.helpers import launch_train, send, smoke_config, wait_for_rows

pytestmark = pytest.mark.heavy  # whole runs of the trainer: started early (tests/conftest.py)


def _config(data_dir, steps, *, resume=False, every=2):
  c = smoke_config("rlvr", data_dir)
  c.num_steps, c.resume, c.checkpoint.every = steps, resume, every
  return c


@pytest.fixture(scope="module")
def run4(tmp_path_factory, data_dir):
  """A finished 4-step run with checkpoints at steps 2 and 4 (copied by each test that alters it)."""
  workdir = tmp_path_factory.mktemp("run4")
  train(_config(data_dir, 4), str(workdir))
  return workdir


@pytest.fixture
def copy4(run4, tmp_path):
  workdir = tmp_path / "run"
  shutil.copytree(run4, workdir)
  return workdir


def _restore(workdir, step):
  ckpt = Checkpointer(os.path.join(workdir, "checkpoints"))
  try:
    return ckpt.restore(step, None)
  finally:
    ckpt.close()


def _all_finite(state) -> bool:
  return all(
    np.isfinite(np.asarray(x, np.float64)).all()
    for x in jax.tree.leaves(state)
    if np.issubdtype(np.asarray(x).dtype, np.inexact)
  )


def poison_checkpoint(workdir, step):
  """Rewrites checkpoint `step` with one parameter array full of NaN: every file is well-formed (as
  silently damaged bytes that still decode would be) and only the values are wrong."""
  state, meta = _restore(workdir, step)
  leaves, treedef = jax.tree.flatten(state["params"])
  leaves[0] = np.full(np.shape(leaves[0]), np.nan, np.asarray(leaves[0]).dtype)
  state["params"] = jax.tree.unflatten(treedef, leaves)
  shutil.rmtree(os.path.join(workdir, "checkpoints", str(step)))
  ckpt = Checkpointer(os.path.join(workdir, "checkpoints"))
  try:
    ckpt.save(step, state, meta)
  finally:
    ckpt.close()


@pytest.mark.parametrize("damage", ("truncate", "flip", "nan"))  # "delete": the watcher test
def test_a_damaged_latest_checkpoint_falls_back_to_the_newest_that_restores(damage, copy4, data_dir, capsys):
  if damage == "nan":
    poison_checkpoint(copy4, 4)
  else:
    damage_checkpoint(os.path.join(copy4, "checkpoints", "4"), damage)
  capsys.readouterr()
  summary = train(_config(data_dir, 4, resume=True), str(copy4))
  out = capsys.readouterr().out
  # It says which step failed and why, and which one it resumed from.
  assert re.search(r"checkpoint step 4 in \S+ (is damaged|does not restore|holds non-finite values)", out), out
  assert "falling back to step 2" in out and "resumed from step 2 " in out, out
  assert summary["steps"] == 4 and np.isfinite(summary["last"]["loss"])
  assert [r["step"] for r in read_metrics(str(copy4))] == [1, 2, 3, 4]
  # The damaged step is kept aside for inspection; step 4 was trained and saved again, and verifies.
  assert os.path.isdir(copy4 / "checkpoints" / "4.damaged")
  state, meta = _restore(copy4, 4)
  assert meta["step"] == 4 and _all_finite(state)
  assert checkpoint_steps(str(copy4)) == [2, 4]


def test_a_flipped_byte_is_caught_by_the_manifest(tmp_path):
  """Damage that orbax itself may not notice (a few bytes of array data inverted) fails verification."""
  ckpt = Checkpointer(str(tmp_path))
  try:
    ckpt.save(1, {"w": np.arange(1 << 16, dtype=np.float32)}, {"step": 1})
    ckpt.restore(1, None)  # intact: restores
    damage_checkpoint(os.path.join(tmp_path, "1"), "flip")
    with pytest.raises(ValueError, match=r"checkpoint step 1 in \S+ is damaged: file \S+ does not match its checksum"):
      ckpt.restore(1, None)
  finally:
    ckpt.close()


def test_a_manifest_never_records_another_writers_temporary_file(tmp_path):
  """Two processes writing the manifest at once (each through a temporary file renamed over it): one lists the
  step while the other's temporary file exists. That file is gone a moment later, so recording it would make every
  restore report the step damaged (CI read `file arena_manifest.json.7443.93997636440624.tmp is missing`)."""
  ckpt = Checkpointer(str(tmp_path))
  try:
    ckpt.save(1, {"w": np.arange(8, dtype=np.float32)}, {"step": 1}, main=False)
    step_dir = os.path.join(tmp_path, "1")
    assert not os.path.exists(os.path.join(step_dir, checkpoint.MANIFEST))  # main=False: no manifest of its own
    other = os.path.join(step_dir, f"{checkpoint.MANIFEST}.7443.93997636440624.tmp")
    with open(other, "w") as f:
      f.write("{}")  # the other writer's file, mid-write
    checkpoint.write_manifest(step_dir)
    os.remove(other)  # ... renamed over the manifest by its writer
    assert checkpoint.manifest_problem(step_dir) is None
    ckpt.restore(1, None)
  finally:
    ckpt.close()


def test_no_checkpoint_that_restores_is_one_clear_error(copy4, data_dir):
  for step in (2, 4):
    damage_checkpoint(os.path.join(copy4, "checkpoints", str(step)), "truncate")
  with pytest.raises(ValueError, match=r"no checkpoint in \S+ restores: checkpoint step 4 .*; checkpoint step 2 "):
    train(_config(data_dir, 6, resume=True), str(copy4))
  assert sorted(os.listdir(copy4 / "checkpoints")) == ["2", "4"]  # nothing moved when nothing restores


@pytest.mark.slow  # a run to a non-finite loss
def test_the_non_finite_loss_message_names_a_checkpoint_that_verifies(copy4, data_dir, coin_verifier):
  """A NaN step-4 checkpoint is resumed with an absurd learning rate: the run diverges, and the step the
  message calls the last good checkpoint restores with finite values (never the poisoned one). The coin
  verifier gives the random policy non-zero advantages, hence updates."""
  poison_checkpoint(copy4, 4)
  c = _config(data_dir, 8, resume=True, every=1)
  c.optim.lr = 1e30
  with pytest.raises(NonFiniteLossError) as info:
    train(c, str(copy4))
  named = re.search(r"checkpoint\D*?step (\d+)", str(info.value))
  assert named, str(info.value)
  state, _ = _restore(copy4, int(named.group(1)))
  assert _all_finite(state), str(info.value)


def test_the_watcher_logs_and_skips_a_bad_step(tmp_path, caplog):
  ckpts = tmp_path / "checkpoints"
  ckpt = Checkpointer(str(ckpts))
  try:
    for step in (1, 2, 3):
      ckpt.save(step, {"params": {"w": np.full(1 << 14, step, np.float32)}}, {"step": step})
  finally:
    ckpt.close()
  damage_checkpoint(str(ckpts / "2"), "delete")

  def evaluate(workdir, step, config):
    del config
    return {"bench": {"sum": float(np.sum(watch_lib.load_params(workdir, step)["w"]))}}

  rows = watch_lib.watch(
    str(tmp_path), None, poll_s=0.01, stop_after_step=3, timeout_s=30, evaluate_fn=evaluate, tensorboard=False
  )
  assert [r["step"] for r in rows] == [1, 3]
  assert rows[1]["results"]["bench"]["sum"] == 3 * (1 << 14)
  assert any("skipping checkpoint step 2" in r.getMessage() for r in caplog.records)


# ───────────────────────────── one run per workdir ─────────────────────────────


@pytest.mark.slow  # a trainer in a child
def test_a_second_trainer_on_a_live_workdir_is_refused_and_a_crash_releases_the_lock(data_dir, tmp_path):
  workdir = tmp_path / "run"
  log = open(tmp_path / "first.log", "wb")  # pylint: disable=consider-using-with
  first = launch_train(workdir, data_dir, "--config.num_steps=1000", "--config.checkpoint.every=1", log=log)
  try:
    wait_for_rows(first, workdir, 2)
    assert first.poll() is None, open(tmp_path / "first.log", encoding="utf-8").read()[-2000:]
    c = smoke_config("arena_live", data_dir)
    c.resume = True
    with pytest.raises(WorkdirError, match=rf"another trainer \(pid {first.pid} on .*\) is running in {workdir}"):
      train(c, str(workdir))
    send(first, signal.SIGKILL)  # a crash: no clean-up code runs
    first.wait()
  finally:
    if first.poll() is None:
      first.kill()
    log.close()
  rows = [r["step"] for r in read_metrics(str(workdir))]
  assert rows == list(range(1, len(rows) + 1))  # the refused trainer wrote nothing into the run
  from arena_jax.train.workdir import WorkdirLock  # pylint: disable=g-import-not-at-top

  WorkdirLock(str(workdir)).acquire().release()  # the kernel released the dead trainer's lock


@pytest.mark.parametrize(
  "field, value",
  [
    ("reward.mode", "rlvr_dapo"),
    ("rollout.group_size", 2),
    ("rollout.prompts_per_step", 2),
    ("rollout.max_new_tokens", 8),
    ("tasks.train_task", "countdown"),
  ],
)
def test_a_resume_that_changes_the_run_is_refused(field, value, copy4, data_dir):
  before = {name: (copy4 / name).read_bytes() for name in ("metrics.jsonl", "policy.json")}
  c = _config(data_dir, 6, resume=True)
  section, name = field.split(".")
  c[section][name] = value
  with pytest.raises(
    WorkdirError,
    match=rf"would change what the run in {copy4} trains \({re.escape(field)}: "
    rf".* → {re.escape(repr(value))}\).*--config.resume_allow_changes='\(\"{re.escape(field)}\",\)'",
  ):
    train(c, str(copy4))
  assert {name: (copy4 / name).read_bytes() for name in before} == before  # refused before writing anything


def test_a_model_change_is_refused(run4, data_dir):
  """The model guard on its own (an end-to-end resume onto a real 8B model would build it if it failed)."""
  from arena_jax.train.workdir import check_resume_config  # pylint: disable=g-import-not-at-top

  ckpt = Checkpointer(os.path.join(run4, "checkpoints"))
  try:
    saved = ckpt.read_meta(4)["config"]
  finally:
    ckpt.close()
  c = _config(data_dir, 6, resume=True)
  check_resume_config(saved, c, "run")  # the same run: accepted
  c.init.random_model = "llama3_8b"
  with pytest.raises(WorkdirError, match=r"init.random_model: 'tiny' → 'llama3_8b'"):
    check_resume_config(saved, c, "run")
  c.resume_allow_changes = ("init.random_model",)
  check_resume_config(saved, c, "run")


def test_a_change_named_in_resume_allow_changes_resumes(copy4, data_dir):
  c = _config(data_dir, 5, resume=True)
  c.rollout.group_size = 2
  c.resume_allow_changes = ("rollout.group_size",)
  assert train(c, str(copy4))["steps"] == 5
  # The lock of the finished run is released: the workdir can be resumed again.
  from arena_jax.train.workdir import WorkdirLock  # pylint: disable=g-import-not-at-top

  WorkdirLock(str(copy4)).acquire().release()
