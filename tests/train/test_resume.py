"""Checkpoints: a run stopped and resumed ends with exactly the parameters of an uninterrupted run."""

import shutil

import jax
import numpy as np
import pytest

from arena_jax.train import Checkpointer, read_metrics, train
from arena_jax.train.config import validate_config
from tests.train.conftest import rlvr_run_config, smoke_config

pytestmark = pytest.mark.heavy  # whole runs of the trainer: started early (tests/conftest.py)


def _params(workdir, step):
  ckpt = Checkpointer(f"{workdir}/checkpoints")
  try:
    state, meta = ckpt.restore(step, None)
  finally:
    ckpt.close()
  return state["params"], meta


@pytest.mark.parametrize(
  "lag, live_start, dtype",
  [
    (0, "step_done", ""),
    # `make test` resumes the lock-step loop; the lagged, speculative and bf16 runs compile their own programs.
    pytest.param(1, "step_done", "", marks=pytest.mark.slow),
    pytest.param(0, "speculative", "", marks=pytest.mark.slow),
    pytest.param(1, "step_done", "bfloat16", marks=pytest.mark.slow),
  ],
)
def test_stop_and_resume_equals_straight_run(lag, live_start, dtype, data_dir, coin_verifier, tmp_path):
  """`dtype` bfloat16: float32 masters under bf16 compute (the real configs' precision); the checkpoints hold
  the float32 masters and the AdamW moments, so the resumed run is the straight one to the bit."""

  # The embedded judge is deterministic by default (no noise): the same matches give the same verdicts.
  def config(steps, resume=False):
    c = smoke_config("arena_live", data_dir)
    c.num_steps, c.resume, c.checkpoint.every = steps, resume, 2
    c.lockstep.judge_lag, c.lockstep.live_start = lag, live_start
    c.model.dtype = dtype
    return c

  straight, split = tmp_path / "straight", tmp_path / "split"
  train(config(4), str(straight))
  train(config(2), str(split))
  train(config(4, resume=True), str(split))
  a, meta_a = _params(straight, 4)
  b, meta_b = _params(split, 4)
  assert meta_a["iterator"] == meta_b["iterator"]
  assert {str(np.asarray(x).dtype) for x in jax.tree.leaves(b)} == {"float32"}  # the masters, whatever computes
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)
  # Training happened (the comparison is not between two untouched initialisations).
  first, _ = _params(straight, 2)
  assert any(not np.array_equal(x, y) for x, y in zip(jax.tree.leaves(first), jax.tree.leaves(a)))
  # The resumed run's metrics continue the log: one row per step, none duplicated.
  assert [r["step"] for r in read_metrics(str(split))] == [1, 2, 3, 4]


def test_resume_drops_metric_rows_written_after_the_last_checkpoint(rlvr_run, data_dir, coin_verifier, tmp_path):
  shutil.copytree(rlvr_run[0], tmp_path, dirs_exist_ok=True)  # the shared RLVR run: checkpoints at 2 and 3
  c = rlvr_run_config(data_dir)
  with open(tmp_path / "metrics.jsonl", "a", encoding="utf-8") as f:
    f.write('{"step": 4, "accuracy": 0.5}\n{"step": 5, "acc')  # rows of a run that died mid-write
  c.num_steps, c.resume = 4, True
  train(c, str(tmp_path))
  assert [r["step"] for r in read_metrics(str(tmp_path))] == [1, 2, 3, 4]


@pytest.mark.parametrize(
  "field, value, match",
  [
    ("rollout.group_size", 1, r"config.rollout.group_size: a group needs ≥ 2"),
    ("reward.mode", "ppo", r"config.reward.mode: unknown reward mode 'ppo'"),
    ("reward.topology", "ladder", r"config.reward.topology: unknown topology 'ladder'"),
    ("reward.bt_solver", "adam", r"config.reward.bt_solver: unknown Bradley–Terry solver 'adam'"),
    ("lockstep.judge_lag", 2, r"config.lockstep.judge_lag: must be 0 or 1"),
    ("reward.dynamic_sampling", True, r"config.reward.dynamic_sampling: no longer exists: .* 'rlvr_dapo'"),
    ("judge.margin", 0.7, r"margin"),
    ("judge.backend", "pointwise", r"config.judge.backend: mode 'arena_live' compares pairs"),
    ("optim.micro_batches", 3, r"config.optim.micro_batches: .* 16 rows"),
    ("loss.aggregation", "sum", r"config.loss.aggregation"),
  ],
)
def test_bad_config_fails_up_front_naming_the_field(field, value, match, data_dir):
  c = smoke_config("arena_live", data_dir)
  section, name = field.split(".")
  c[section][name] = value
  with pytest.raises(ValueError, match=match):
    validate_config(c)


def test_runs_that_differ_only_in_length_share_the_update_program_and_others_do_not(data_dir, tmp_path):
  """The next run in a process (a resume, a notebook's next train()) reuses the update already compiled when
  nothing it depends on changed; a change of the optimizer, the loss or the reward mode builds a new one."""
  from arena_jax.train.trainer import Trainer  # pylint: disable=g-import-not-at-top

  def update_fn(name, **changes):
    c = smoke_config("arena_live", data_dir)
    for path, value in changes.items():
      section, key = path.split("__")
      c[section][key] = value
    validate_config(c)
    return Trainer(c, str(tmp_path / name)).update_fn

  first = update_fn("a")
  assert update_fn("b", checkpoint__every=1) is first
  assert update_fn("c", optim__lr=3e-4) is not first
  assert update_fn("d", loss__eps_high=0.5) is not first
  assert update_fn("e", reward__mode="rlvr") is not first


@pytest.mark.slow  # three runs with their own programs
def test_a_config_changed_after_the_update_was_built_does_not_change_the_program_keyed_before(
  data_dir, tmp_path, monkeypatch
):
  """The update's program is keyed by what it reads of the config and traces from that, never from the live config:
  jax traces at the first call: a loss field changed after one run's update was built, before it ran,
  builds the next run's program (another key) and leaves the first one computing what its key says, as a program
  built afresh from the unchanged config does."""
  from arena_jax import program_cache  # pylint: disable=g-import-not-at-top
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top
  from arena_jax.train.trainer import Trainer  # pylint: disable=g-import-not-at-top
  from tests.parallel.conftest import rollout  # pylint: disable=g-import-not-at-top

  def config():
    c = smoke_config("rlvr", data_dir)
    validate_config(c)
    return c

  rows = rollout(rows=16, seed=5)  # 4 groups × 4 completions, as the smoke config's step
  rows = rows._replace(old_logprobs=rows.old_logprobs - 2.0)  # ratios π/π_old ≈ 4: under eps_high = 4's clip
  verifier = np.tile(np.asarray([1.0, 0.0, 0.0, 1.0], np.float32), (4, 1))
  rewards = step_lib.StepRewards(verifier, np.zeros_like(verifier), np.zeros(4, bool))

  def update(t):
    """The trainer's update of `rows` from its initial state: (clip_fraction, loss)."""
    _, m = t.update_fn(
      t.state,
      jax.device_put(rows, t.shardings.rollout),
      t.ref_params,
      jax.device_put(rewards, t.shardings.replicated),
      0,
    )
    return float(m["clip_fraction"]), float(m["loss"])

  monkeypatch.setattr(program_cache, "_PROGRAMS", program_cache.collections.OrderedDict())  # none traced yet
  c = config()
  assert c.loss.eps_high == 4.0
  first = Trainer(c, str(tmp_path / "first"))
  c.loss.eps_high = 0.01  # read by the loss when it is traced
  second = Trainer(c, str(tmp_path / "second"))
  assert second.update_fn is not first.update_fn
  got, changed = update(first), update(second)
  monkeypatch.setattr(program_cache, "_PROGRAMS", program_cache.collections.OrderedDict())
  want = update(Trainer(config(), str(tmp_path / "afresh")))
  assert got == want and changed[0] > want[0], (got, want, changed)
