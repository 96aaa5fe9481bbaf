"""benchmarks.step_economics and step_economics_projection without training: the 8B projection's arithmetic, the
measured rows' window, the targets, the flags, and `main` end to end on fabricated metrics rows (nothing is timed
or trained)."""

import json

import pytest

from benchmarks import step_economics as se
from benchmarks import step_economics_projection as sep

# One chip at 1 token/s for both programs, no prompt: seconds = tokens, easy to check by hand.
UNIT = dict(prompt_tokens=0, rollouts_per_step=4, decode_tok_s_chip=1.0, train_tok_s_chip=1.0, chips=1)


def row(generations, judge_wait=0.0, verify=0.0, bt_fit=0.0, wall=1.0):
  return {
    "generations": generations,
    "judge_wait_s": judge_wait,
    "verify_s": verify,
    "bt_fit_s": bt_fit,
    "wall_s": wall,
  }


# ── project_8b ──


def test_async_with_equal_sample_and_update_is_half_of_lock_step():
  m = row(4)  # 4 generations of 10 tokens = 40 s to sample; 4 rows of 0 + 10 tokens = 40 s to train
  lock = sep.project_8b(m, asynchronous=False, judge_scale=1.0, measured_rollouts=4, new_tokens=10, **UNIT)
  asy = sep.project_8b(m, asynchronous=True, judge_scale=1.0, measured_rollouts=4, new_tokens=10, **UNIT)
  assert lock["sample_s"] == asy["sample_s"] == 40.0 and lock["update_s"] == asy["update_s"] == 40.0
  assert lock["wall_s"] == 80.0 and asy["wall_s"] == 40.0


def test_async_wall_is_the_longer_side():
  # DAPO-like: 8 generations for 4 trained rows: sampling 80 s, update 40 s.
  asy = sep.project_8b(row(8), asynchronous=True, judge_scale=1.0, measured_rollouts=4, new_tokens=10, **UNIT)
  assert asy["wall_s"] == 80.0
  # An update longer than the sampling (long prompts) sets the async wall instead.
  kw = {**UNIT, "prompt_tokens": 30}
  asy = sep.project_8b(row(4), asynchronous=True, judge_scale=1.0, measured_rollouts=4, new_tokens=10, **kw)
  assert (asy["sample_s"], asy["update_s"], asy["wall_s"]) == (40.0, 160.0, 160.0)


def test_generations_scale_with_the_batch_and_the_update_does_not_see_them():
  kw = {**UNIT, "rollouts_per_step": 512}
  rlvr = sep.project_8b(row(64), asynchronous=False, judge_scale=0.0, measured_rollouts=64, new_tokens=10, **kw)
  dapo = sep.project_8b(row(128), asynchronous=False, judge_scale=0.0, measured_rollouts=64, new_tokens=10, **kw)
  assert rlvr["generations"] == 512 and dapo["generations"] == 1024
  assert dapo["sample_s"] == 2 * rlvr["sample_s"]
  assert dapo["update_s"] == rlvr["update_s"] == 512 * 10  # every mode trains one batch of R rows


def test_host_work_and_the_scaled_judge_wait_add_outside_the_overlap():
  m = row(4, judge_wait=2.0, verify=0.5, bt_fit=0.25)
  for asynchronous, model in ((False, 80.0), (True, 40.0)):
    p = sep.project_8b(m, asynchronous=asynchronous, judge_scale=3.0, measured_rollouts=4, new_tokens=10, **UNIT)
    assert p["judge_wait_s"] == 6.0 and p["host_s"] == 0.75
    assert p["wall_s"] == model + 0.75 + 6.0


def test_missing_measured_keys_count_zero():
  p = sep.project_8b(
    {"generations": 4}, asynchronous=False, judge_scale=5.0, measured_rollouts=4, new_tokens=10, **UNIT
  )
  assert p["judge_wait_s"] == p["host_s"] == 0.0 and p["wall_s"] == 80.0


def test_default_constants_are_the_v5p_16k_roofline():
  assert (sep.TPU_CHIPS, sep.TPU_TRAIN_TOK_S_CHIP, sep.TPU_DECODE_TOK_S_CHIP) == (8, 8271.0, 1139.0)
  assert (sep.TPU_ROLLOUTS_PER_STEP, sep.TPU_PROMPT_TOKENS) == (512, 1024)
  p = sep.project_8b(row(64), asynchronous=False, judge_scale=0.0, measured_rollouts=64, new_tokens=8192)
  assert p["sample_s"] == pytest.approx(512 * 8192 / (1139 * 8))
  assert p["update_s"] == pytest.approx(512 * (1024 + 8192) / (8271 * 8))


# ── projection_8b ──


def results(**extra):
  out = {"rlvr": row(4, wall=2.0), "rlvr_dapo": row(8, wall=3.0)}
  out.update(extra)
  return out


def test_projection_ratios_against_dapo_and_the_same_loop():
  res = results(
    arena_live=row(4, judge_wait=1.0, wall=4.0),
    rlvr_async=row(4, wall=1.5),
    rlvr_dapo_async=row(8, wall=2.0),
    arena_live_async=row(4, judge_wait=0.5, wall=2.0),
  )
  out = sep.projection_8b(res, measured_rollouts=4, new_tokens=10, **UNIT)
  # RLVR at 8B: 40 + 40 s against 2 s measured: the judge's wait scales × 40.
  assert out["judge_scale"] == pytest.approx(40.0)
  m = out["modes"]
  assert m["rlvr_dapo"]["wall_s"] == 120.0 and m["rlvr_dapo_async"]["wall_s"] == 80.0
  assert m["rlvr"]["wall_vs_dapo"] == pytest.approx(80 / 120)
  assert m["rlvr"]["generations_vs_dapo"] == pytest.approx(0.5)
  assert m["arena_live"]["wall_s"] == pytest.approx(80 + 40.0)  # lock-step + 1 s × 40
  assert m["arena_live_async"]["wall_s"] == pytest.approx(40 + 20.0)  # max(40, 40) + 0.5 s × 40
  assert m["arena_live_async"]["wall_vs_dapo"] == pytest.approx(60 / 120)  # against lock-step DAPO
  assert m["arena_live_async"]["wall_vs_dapo_same_loop"] == pytest.approx(60 / 80)  # against rlvr_dapo_async
  assert m["arena_live_async"]["generations_vs_dapo_same_loop"] == pytest.approx(0.5)
  assert m["arena_live"]["wall_vs_dapo_same_loop"] == m["arena_live"]["wall_vs_dapo"]  # lock-step: same row


def test_projection_without_dapo_rows_gives_none():
  res = {"rlvr": row(4, wall=2.0), "arena_live_async": row(4, wall=1.0)}
  m = sep.projection_8b(res, measured_rollouts=4, new_tokens=10, **UNIT)["modes"]
  for p in m.values():
    assert p["wall_vs_dapo"] is None and p["generations_vs_dapo"] is None
    assert p["wall_vs_dapo_same_loop"] is None and p["generations_vs_dapo_same_loop"] is None
  # Lock-step DAPO but no async DAPO: the async row has a ratio to DAPO, none to its own loop's.
  m = sep.projection_8b(results(arena_live_async=row(4)), measured_rollouts=4, new_tokens=10, **UNIT)["modes"]
  assert m["arena_live_async"]["wall_vs_dapo"] == pytest.approx(40 / 120)
  assert m["arena_live_async"]["wall_vs_dapo_same_loop"] is None


def test_projection_needs_rlvr():
  with pytest.raises(KeyError):
    sep.projection_8b({"rlvr_dapo": row(8)}, measured_rollouts=4, new_tokens=10, **UNIT)


# ── targets ──


def test_target_figures_and_verdicts():
  wall = {"arena_live": 4.0, "arena_live_async": 3.0, "rlvr_async": 2.0}
  gens = {"arena_live_async": 64.0, "rlvr_dapo_async": 128.0}
  t = sep.target_figures(wall, gens)
  assert t == {
    "arena_live_async_vs_lockstep": 0.75,
    "arena_live_async_vs_rlvr_async": 1.5,
    "arena_live_vs_dapo_generations": 0.5,
  }
  bounds = {key: bound for key, bound, _ in sep.TARGETS}
  assert bounds == {
    "arena_live_async_vs_lockstep": 0.85,
    "arena_live_async_vs_rlvr_async": 1.0,
    "arena_live_vs_dapo_generations": 0.6,
  }
  assert [sep.verdict(t[k], bounds[k]) for k in bounds] == ["met", "missed", "met"]
  assert sep.verdict(None, 1.0) == "n/a" and sep.verdict(1.00001, 1.0) == "met"  # as the JSON rounds it
  assert sep.target_figures({"arena_live": 4.0}, {}) == dict.fromkeys(bounds)


# ── the measured window ──


def metrics_rows(n, staleness=None):
  rows = []
  for i in range(n):
    r = {"time/wall": float(i), "gen/trajectories": 10.0 * i, "judge/calls": 6, "judge/groups": 2}
    if staleness is not None:
      r["staleness/max"] = staleness[i]
    rows.append(r)
  return rows


def test_summarize_measures_rows_after_the_warmup_and_before_the_last():
  assert se.steps_for(2, 3) == 6
  m = se.summarize(metrics_rows(6), warmup=2, measure=3)  # rows 2, 3, 4
  assert m["wall_s"] == 3.0 and m["generations"] == 30.0 and m["calls_per_routed_group"] == 3.0
  assert m["max_staleness_seen"] is None
  m = se.summarize(metrics_rows(4), warmup=0, measure=3)  # rows 0, 1, 2
  assert m["wall_s"] == 1.0


def test_max_staleness_seen_counts_every_row():
  m = se.summarize(metrics_rows(6, staleness=[0, 3, 1, 2, 1, 0]), warmup=2, measure=3)
  assert m["max_staleness_seen"] == 3  # in a warm-up row


def test_summarize_refuses_a_short_run():
  with pytest.raises(RuntimeError, match="expected 6"):
    se.summarize(metrics_rows(5), warmup=2, measure=3)


# ── flags ──


def test_steps_are_derived_and_checked(tmp_path):
  args = se.parse_args(["--policy_dir", str(tmp_path)])
  assert (args.warmup, args.measure, args.steps, args.max_staleness, args.project_tokens) == (2, 4, 7, 2, 8192)
  assert se.parse_args(["--policy_dir", str(tmp_path), "--steps", "7"]).steps == 7
  assert se.parse_args(["--policy_dir", str(tmp_path), "--warmup", "1", "--measure", "2"]).steps == 4
  with pytest.raises(SystemExit):
    se.parse_args(["--policy_dir", str(tmp_path), "--steps", "8"])
  with pytest.raises(SystemExit):
    se.parse_args(["--policy_dir", str(tmp_path), "--modes", "rlvr_async"])  # async rows follow --max_staleness


# ── main, on fabricated rows ──


class FakeTrainer:
  """`train` records each run's config; `read_metrics` answers rows that depend on the mode and the loop."""

  def __init__(self):
    self.configs, self.by_workdir = [], {}

  def train(self, c, workdir):
    self.configs.append(c)
    self.by_workdir[str(workdir)] = c

  def read_metrics(self, workdir):
    c = self.by_workdir[str(workdir)]
    mode, k = c.reward.mode, c.rollout.get("max_staleness", 0)
    dapo = mode == "rlvr_dapo"
    wall = {"rlvr": 2.0, "rlvr_dapo": 2.4, "arena_live": 4.0}.get(mode, 2.2) * (0.5 if k else 1.0)
    row = {
      "time/wall": wall,
      "time/sample": 0.5 * (2 if dapo else 1),
      "time/verify": 0.01,
      "time/update": 1.0,
      "time/judge_wait": 0.2 if mode.startswith("arena") else 0.0,
      "time/bt_fit": 0.0,
      "time/judge_after_gen": 0.0,
      "gen/trajectories": 128.0 if dapo else 64.0,
      "gen/batches": 2.0 if dapo else 1.0,
      "accuracy": 0.5,
    }
    rows = [dict(row) for _ in range(c.num_steps)]
    if k:
      for i, r in enumerate(rows):
        r["staleness/max"], r["staleness/mean"] = min(i, k), min(i, k) / 2
    return rows


def run_main(monkeypatch, capsys, tmp_path, *, async_field: bool, argv=()):
  fake = FakeTrainer()
  monkeypatch.setattr(se, "train", fake.train)
  monkeypatch.setattr(se, "read_metrics", fake.read_metrics)
  monkeypatch.setattr(se, "use_compilation_cache", lambda: None)  # leave the test session's jax config alone
  real = se.mode_config

  def config(mode, **reward):
    """The checkout's config, with or without the asynchronous loop's field, whichever the checkout has."""
    c = real(mode, **reward)
    if async_field and "max_staleness" not in c.rollout:
      c.rollout.max_staleness = 0  # what the asynchronous loop's config declares
    elif not async_field and "max_staleness" in c.rollout:
      del c.rollout["max_staleness"]
    return c

  monkeypatch.setattr(se, "mode_config", config)
  modes = "rlvr,rlvr_dapo,arena_live"
  se.main(["--policy_dir", str(tmp_path), "--modes", modes, "--prompts", "8", "--group_size", "8", *argv])
  out = capsys.readouterr().out.strip().splitlines()
  return fake, out, json.loads(out[-1])


def test_main_with_the_async_loop(monkeypatch, capsys, tmp_path):
  fake, out, figures = run_main(monkeypatch, capsys, tmp_path, async_field=True)
  # The warm-up runs first: rlvr as long as a measured run, lock-step and asynchronous; then rlvr (calibration) and
  # each async row after its own.
  assert [(c.reward.mode, c.rollout.max_staleness, c.num_steps) for c in fake.configs[:2]] == [
    ("rlvr", 0, 7),
    ("rlvr", 2, 7),
  ]
  assert [(c.reward.mode, c.rollout.max_staleness, c.num_steps) for c in fake.configs[2:]] == [
    ("rlvr", 0, 7),
    ("rlvr", 2, 7),
    ("rlvr_dapo", 0, 7),
    ("rlvr_dapo", 2, 7),
    ("arena_live", 0, 7),
    ("arena_live", 2, 7),
  ]
  assert any(
    line.startswith("warm-up: unmeasured rlvr runs of 7 steps (lock-step and max_staleness 2)") for line in out
  )
  assert any("2 warm-up steps excluded" in line for line in out)
  assert list(figures["modes"]) == [
    "rlvr",
    "rlvr_async",
    "rlvr_dapo",
    "rlvr_dapo_async",
    "arena_live",
    "arena_live_async",
  ]
  lock_keys = set(figures["modes"]["rlvr"])
  for name, m in figures["modes"].items():
    if name.endswith("_async"):
      assert set(m) == lock_keys | {"max_staleness_seen"} and m["max_staleness_seen"] == 2
    else:
      assert set(m) == lock_keys
  assert figures["targets"] == {
    "arena_live_async_vs_lockstep": 0.5,
    "arena_live_async_vs_rlvr_async": 2.0,
    "arena_live_vs_dapo_generations": 0.5,
  }
  assert (figures["warmup_steps"], figures["measured_steps"], figures["steps_per_run"]) == (2, 4, 7)
  assert figures["max_staleness"] == 2 and figures["async_note"] is None
  p8 = figures["projection_8b"]
  assert p8["label"] == "projected, not measured" and p8["slice"] == sep.TPU_SLICE
  assert p8["constants"]["train_tok_s_chip"] == sep.TPU_TRAIN_TOK_S_CHIP and p8["constants"]["new_tokens"] == 8192
  assert set(p8["modes"]) == set(figures["modes"])
  assert p8["modes"]["rlvr_dapo"]["wall_vs_dapo"] == 1.0 and p8["modes"]["rlvr"]["generations_vs_dapo"] == 0.5
  assert p8["modes"]["rlvr_dapo_async"]["wall_vs_dapo_same_loop"] == 1.0
  # The CPU-scaled projection models the lock-step loop only.
  assert figures["projection"]["modes"]["arena_live_async"] == {"wall_vs_rlvr": None, "wall_vs_dapo": None}
  assert figures["projection"]["modes"]["rlvr"]["wall_vs_rlvr"] == 1.0


def test_main_before_the_async_loop_skips_its_rows(monkeypatch, capsys, tmp_path):
  fake, out, figures = run_main(monkeypatch, capsys, tmp_path, async_field=False)
  assert any(line.startswith("async rows skipped") for line in out)
  assert list(figures["modes"]) == ["rlvr", "rlvr_dapo", "arena_live"]
  assert figures["max_staleness"] == 0 and "max_staleness" in figures["async_note"]
  assert "max_staleness" not in fake.configs[-1].rollout  # nothing was added to the configs silently
  assert figures["targets"] == dict.fromkeys(figures["target_bounds"])
  assert figures["projection_8b"]["modes"]["arena_live"]["wall_vs_dapo"] is not None


def test_main_with_max_staleness_zero_runs_no_async_rows(monkeypatch, capsys, tmp_path):
  _, out, figures = run_main(monkeypatch, capsys, tmp_path, async_field=True, argv=("--max_staleness", "0"))
  assert "async rows skipped: --max_staleness 0" in out
  assert list(figures["modes"]) == ["rlvr", "rlvr_dapo", "arena_live"]
