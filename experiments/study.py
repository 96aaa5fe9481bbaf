"""The reproduction study (`make reproduce`): the reward modes of SPEC §7 side by side on the arithmetic testbed.

Every run starts from the same SFT policy, sees the same prompts in the same order (`data_seed`),
trains for the same number of optimizer steps, and differs only in its reward mode and its seed
(sampling and judge), so two runs of one seed are a pair. The modes are reward-mode registry names
(`arena_jax.rl.REWARD_MODES`), each run `mode_config(name)` of `configs.common`. The
judge-quality ablation adds runs of each of `study.ablation_modes` whose embedded judge reverses a
share 1 − a of its verdicts on pairs that differ in process (`judge.server.flip_rate`), one per verdict
accuracy a of `study.judge_accuracies`; a = 1 is the plain mode's own run, a = 0 a reversed judge (every
decisive verdict between traces of different penalty the wrong way round: the effect in the other
direction). The runs go one after another, so their wall-clock times are comparable. Finished runs are
skipped when the study is restarted (their final checkpoint and evaluation exist); a finished run of another
setup (length, SFT base, judge, evaluation) in the same root is refused rather than mixed in.

Presets (`--study.preset`): `full` (`make reproduce`, the defaults below), `quick` (`make
reproduce-quick`: 2 seeds, a few steps, a small evaluation, written under runs/study_quick; a smoke run of
the machinery, not evidence) and `smoke` (the tests' end-to-end run: tiny policy and shapes, seconds a run). A
field set on the command line keeps its value under a preset.

`write_results` turns the runs into `docs/results/`: what the mechanism predicts, whether its condition
held (all-correct groups the majority of routed groups by the end), the accuracy and process table (in
and out of distribution, mean ± std over seeds: the paper's Table 1), every mode's paired difference
from RLVR with a bootstrap interval (`experiments.stats`), the judge-quality ablation, the efficiency
table (Table 2 and Fig. 5, SPEC §9), curves (training accuracy, faithful accuracy and the all-correct
share over steps; Fig. 1, SPEC §1) and `study.json` with every run's numbers.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time

import ml_collections
import numpy as np

from arena_jax import rl
from arena_jax.errors import ConfigError, WorkdirError
from arena_jax.eval import watch
from arena_jax.train import read_metrics, train, train_sft
from configs.common import mode_config
from arena_jax.train.plot import smooth
from experiments import load_config
from experiments import stats

# The efficiency tables' reference: the paper measures its savings against RLVR with dynamic sampling
# (SPEC §7, §9).
BASELINE = "rlvr_dapo"
# The accuracy differences' reference: plain RLVR, which gives non-diverse groups no signal at all.
REFERENCE = "rlvr"
# Issue 32's modes: RLVR and Reasoning Arena (offline tournaments and live ones), each judged mode also with a
# reversed judge (the ablation): 25 runs, under `make reproduce`'s two hours on two cores. Issue 17's baselines,
# RLVR with dynamic sampling and a judge on every group, take `--study.modes` (any registry names), e.g. ALL_MODES.
STUDY_MODES = ("rlvr", "arena", "arena_live")
ALL_MODES = ("rlvr", "rlvr_dapo", "rlaif", "arena", "arena_live")

# `--study.preset=quick` (`make reproduce-quick`): the same machinery in minutes once the SFT policy exists.
PRESETS = {
  "full": {},
  # The tests' end-to-end run: the tiny smoke policy and shapes (`configs/sft.py:smoke`, `mode_config(m, "smoke")`).
  "smoke": dict(
    modes=("rlvr", "arena_live"),
    seeds=(0,),
    num_steps=2,
    judge_accuracies=(1.0, 0.0),
    ablation_modes=("arena_live",),
    run_arg="smoke",
    sft_config="configs/sft.py:smoke",
    sft_dir="runs/sft_smoke",
    root="runs/study_smoke",
    out_dir="runs/study_smoke/results",
    command="python -m launch.compare --study.preset=smoke",
    eval=dict(num_examples=4, num_samples=2, max_new_tokens=16, batch_size=4),
  ),
  "quick": dict(
    seeds=(0, 1),
    num_steps=8,
    judge_accuracies=(1.0, 0.0),
    root="runs/study_quick",
    out_dir="runs/study_quick/results",
    command="make reproduce-quick",
    eval=dict(num_examples=32, num_samples=4, batch_size=32),
  ),
}


def study_config() -> ml_collections.ConfigDict:
  """The study `launch/compare.py` runs (`--study.<field>` overrides a field)."""
  c = ml_collections.ConfigDict()
  c.preset = "full"  # a key of PRESETS: its values replace the defaults not set by hand
  c.modes = STUDY_MODES
  c.seeds = (0, 1, 2, 3, 4)
  # Long enough that all-correct groups should dominate the routed groups late in training (the regime where
  # the judge has something to do); the results' routing table shows whether they did.
  c.num_steps = 120
  # The ablation (issue 32): verdict accuracy on pairs that differ in process, the honest judge (1, the modes' own
  # runs) and a reversed one (0: every such verdict the wrong way round), the judge's effect in both directions.
  c.judge_accuracies = (1.0, 0.0)
  c.ablation_modes = ("arena", "arena_live")  # the judged modes the ablation runs at each accuracy
  c.final_fraction = 0.1  # the end-of-training routing figures average the last 10% of steps (≥ 5)
  # min_pairs: fewer paired seeds than this get the mean difference only, no interval and no star (issue 32).
  c.bootstrap = ml_collections.ConfigDict(dict(num_resamples=10_000, level=0.95, seed=0, min_pairs=stats.MIN_PAIRS))
  c.root = "runs/study"  # one workdir per (mode or ablation judge, seed)
  c.out_dir = "docs/results"
  # The shared SFT base (trained first from `sft_config` if missing): issue 32's testbed, the demo's tasks with
  # demonstrations whose flaws the verifier cannot see (`configs/sft.py:blind`, docs/results/testbed.md).
  c.sft_dir = "runs/sft_blind"
  c.sft_config = "configs/sft.py:blind"  # `path[:arg]`; a relative path is read from the repository root
  c.run_arg = ""  # each run is `mode_config(mode, run_arg)`: "" the testbed, "smoke" tiny shapes
  c.max_staleness = 0  # every run's `async_loop.max_staleness`: ≥ 1 trains with the asynchronous loop (0: lock-step)
  # countdown (far out of distribution, 0 for every policy so far) can be added to `benchmarks`.
  c.eval = ml_collections.ConfigDict(
    dict(
      benchmarks=("arithmetic", "arithmetic_shift"), num_examples=200, num_samples=8, max_new_tokens=96, batch_size=64
    )
  )
  c.command = "make reproduce"
  return c


def apply_preset(study, keep=()) -> ml_collections.ConfigDict:
  """A copy of `study` with its preset's values, except the fields (dotted paths) in `keep`, e.g. those the
  command line set (`config_flags.get_override_values`)."""
  if study.preset not in PRESETS:
    raise ConfigError(f"study.preset: {study.preset!r} is not a preset; choose from {tuple(PRESETS)}")
  out = ml_collections.ConfigDict(study.to_dict())
  for key, value in PRESETS[study.preset].items():
    for sub, v in value.items() if isinstance(value, dict) else [(None, value)]:
      path = key if sub is None else f"{key}.{sub}"
      if path not in keep:
        if sub is None:
          out[key] = v
        else:
          out[key][sub] = v
  return out


def ablation_name(mode: str, accuracy: float) -> str:
  """The run group of `mode` with a judge of verdict accuracy `accuracy` (the mode itself at 1)."""
  return mode if accuracy >= 1 else f"{mode}@acc{accuracy:g}"


def variants(study) -> dict[str, tuple[str, float | None]]:
  """{run group: (reward mode, judge verdict accuracy or None for the mode's own judge)}: the modes, then the
  ablation's judges, mode by mode (accuracy 1 is the mode's own run, trained once)."""
  out = {m: (m, None) for m in study.modes}
  for mode in study.ablation_modes:
    for acc in study.judge_accuracies:
      out.setdefault(ablation_name(mode, acc), (mode, None if acc >= 1 else acc))
  return out


def check_study(study) -> None:
  """Refuses a study that cannot run, naming the field."""
  if study.preset not in PRESETS:
    raise ConfigError(f"study.preset: {study.preset!r} is not a preset; choose from {tuple(PRESETS)}")
  if isinstance(study.ablation_modes, str):
    raise ConfigError(f"study.ablation_modes: {study.ablation_modes!r} is one name; give a tuple of reward modes")
  unknown = [m for m in (*study.modes, *study.ablation_modes) if m not in rl.REWARD_MODES]
  if unknown:
    raise ConfigError(
      f"study.modes / study.ablation_modes: {unknown} are not reward modes; choose from {tuple(rl.REWARD_MODES)}"
    )
  if not study.seeds:
    raise ConfigError("study.seeds: no seed; give at least one (two for intervals)")
  bad = [a for a in study.judge_accuracies if not 0 <= a <= 1]
  if bad:
    raise ConfigError(f"study.judge_accuracies: {bad} are not verdict accuracies in [0, 1]")
  blind = [m for m in study.ablation_modes if not rl.REWARD_MODES[m].uses_judge]
  if study.judge_accuracies and blind:
    raise ConfigError(
      f"study.ablation_modes: {blind} use no judge; the ablation varies the judge's "
      "accuracy (e.g. arena_live), or set study.judge_accuracies=()"
    )
  if not 0 < study.final_fraction <= 1:
    raise ConfigError(f"study.final_fraction: {study.final_fraction} is not in (0, 1]")


def run_config(mode_name: str, seed: int, study, judge_accuracy: float | None = None) -> ml_collections.ConfigDict:
  """The RL config of one run: `mode_config(mode_name)` from the shared SFT base, the study's length and seed;
  with `judge_accuracy`, the embedded judge reverses a share 1 − judge_accuracy of its verdicts on pairs that
  differ in process (`judge.server.flip_rate`)."""
  c = mode_config(mode_name, study.run_arg or None)
  c.init.policy_dir, c.init.random_model = study.sft_dir, ""  # the shared SFT base, whatever the mode config says
  c.seed = seed
  c.data_seed = 0
  c.num_steps = study.num_steps
  c.checkpoint.every = study.num_steps
  c.log.progress = False
  c.log.tensorboard = False
  c.async_loop.max_staleness = study.max_staleness
  if judge_accuracy is not None:
    c.judge.server.flip_rate = 1.0 - judge_accuracy
  return c


def run_setup(study, judge_accuracy: float | None) -> dict:
  """What a finished run must share with the study to be reused on a restart (beyond its mode and seed)."""
  setup = {
    "num_steps": study.num_steps,
    "sft_dir": study.sft_dir,
    "judge_accuracy": judge_accuracy,
    "eval": study.eval.to_dict(),
  }
  if study.max_staleness:  # (absent at 0, so that lock-step runs finished before the field existed are reused)
    setup["max_staleness"] = study.max_staleness
  return json.loads(json.dumps(setup))  # as eval_final.json holds it (tuples become lists)


def eval_config(study, tasks_config) -> ml_collections.ConfigDict:
  """The evaluation of every run's final checkpoint: `watch.default_config()` with `study.eval`."""
  c = watch.default_config()
  c.tasks = tasks_config
  for k, v in study.eval.items():
    c[k] = v
  return c


def run_study(study) -> dict:
  """Trains and evaluates every (run group, seed) not yet done; returns {"<group>/seed<s>": summary}."""
  check_study(study)
  train_sft(load_config(study.sft_config), study.sft_dir)  # cached when it exists with this config
  runs = {}
  for group, (mode_name, accuracy) in variants(study).items():
    for seed in study.seeds:
      name = f"{group}/seed{seed}"
      workdir = os.path.join(study.root, group, f"seed{seed}")
      done_file = os.path.join(workdir, "eval_final.json")
      setup = run_setup(study, accuracy)
      if os.path.exists(done_file):
        with open(done_file, encoding="utf-8") as f:
          summary = json.load(f)
        if summary.get("setup") != setup:  # e.g. a study of another length left in the same root
          raise WorkdirError(
            f"{workdir} holds a finished run of another setup ({summary.get('setup')}, this study: "
            f"{setup}); choose another --study.root or delete that directory"
          )
        runs[name] = summary
        print(f"[{name}] done earlier: skipped", flush=True)
        continue
      if os.path.isdir(workdir):  # an interrupted run: start it again from scratch
        shutil.rmtree(workdir)
      c = run_config(mode_name, seed, study, accuracy)
      t0 = time.time()
      print(f"[{name}] training {c.num_steps} steps ...", flush=True)
      train(c, workdir)
      t1 = time.time()
      results = watch.evaluate_step(workdir, c.num_steps, eval_config(study, c.tasks))
      watch.pop_samples(results)  # study.json keeps metrics; the runs' samples.jsonl keep completions
      summary = {
        "group": group,
        "mode": mode_name,
        "judge_accuracy": accuracy,
        "seed": seed,
        "setup": setup,
        "train_s": t1 - t0,
        "eval_s": time.time() - t1,
        "eval": results,
      }
      with open(done_file, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
      runs[name] = summary
      scores = ", ".join(
        f"{b} {k.replace('_', ' ')} {v[k]:.3f}"
        for b, v in results.items()
        for k in ("greedy_accuracy", "faithful_accuracy")
        if k in v
      )
      print(f"[{name}] train {t1 - t0:.0f} s, eval {summary['eval_s']:.0f} s; {scores}", flush=True)
  return runs


# ───────────────────────────────────────────── results ─────────────────────────────────────────────


def _all_correct_share(rows: list[dict]) -> np.ndarray:
  """Per step: all-correct groups / non-diverse groups (the groups Arena routes), NaN where none is."""
  ac = np.asarray([r.get("groups/all_correct", 0.0) for r in rows], float)
  nd = ac + np.asarray([r.get("groups/all_wrong", 0.0) for r in rows], float)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(nd > 0, ac / np.where(nd > 0, nd, 1.0), np.nan)


# The end-of-training figures average at least this many steps: one step's 16 groups are too few to read.
_MIN_FINAL_STEPS = 5


def _run_metrics(workdir: str, final_fraction: float) -> dict:
  rows = read_metrics(workdir)
  steady = rows[1:] or rows  # step 1 carries the compilations
  get = lambda k, rs=steady: np.asarray([r.get(k, 0.0) for r in rs], float)
  calls, groups = get("judge/calls").sum(), get("judge/groups").sum()
  tail = rows[-max(min(_MIN_FINAL_STEPS, len(rows)), math.ceil(final_fraction * len(rows))) :]
  ac, aw = get("groups/all_correct", tail).sum(), get("groups/all_wrong", tail).sum()
  faithful = [r.get("process/faithful_accuracy") for r in rows]
  head = rows[: len(tail)]
  return {
    "rows": rows,
    "gens_per_step": float(get("gen/trajectories", rows).mean()),
    "gen_batches_per_step": float(get("gen/batches", rows).mean()),
    "wall_per_step": float(get("time/wall").mean()),
    "judge_calls_per_routed_group": float(calls / groups) if groups else 0.0,
    "judge_calls_per_step": float(get("judge/calls", rows).mean()),
    "routed_fraction": float(get("groups/routed", rows).mean()),
    "utilisation": float(get("adv/nonzero_fraction", rows).mean()),
    # The effective judged signal (issue 32): rows whose advantage is the judge's and non-zero, their share of
    # Σ|Â|, and the distinct traces per routed group (a mean over routed groups, not over steps).
    "judge_signal_rows": _logged_mean(rows, "judge/signal_rows"),
    "judge_grad_share": _logged_mean(rows, "judge/grad_share"),
    "distinct_per_routed_group": _routed_mean(rows, "judge/distinct_per_group"),
    "adv_l1": float(get("adv/l1", rows).mean()),
    "judge_failures": float(get("judge/failures", rows).sum()),
    # The mechanism's condition at the end of training (routed groups mostly all-correct): over the last
    # `final_fraction` of steps, the non-diverse share of the trained groups and the all-correct share of those
    # (None: none trained).
    "final_steps": len(tail),
    "final_non_diverse": float((ac + aw) / len(tail)),
    "final_all_correct_share": float(ac / (ac + aw)) if ac + aw > 0 else None,
    "final_routed_fraction": float(get("groups/routed", tail).mean()),
    # Issue 32, condition (a): the flaw the verifier cannot see in the training samples, over as many steps at the
    # start as at the end; RLVR alone should leave it in place (None: a run that predates the metric).
    "blind_flaw_first": _logged_mean(head, "process/blind_flaw_rate"),
    "blind_flaw_final": _logged_mean(tail, "process/blind_flaw_rate"),
    "curves": {
      "step": [int(r["step"]) for r in rows],
      "accuracy": [r.get("accuracy") for r in rows],
      "faithful_accuracy": faithful,
      "all_correct_share": [None if math.isnan(x) else float(x) for x in _all_correct_share(rows)],
    },
  }


def _logged_mean(rows, key: str) -> float | None:
  """The mean of a metric over the steps that logged it; None for a run that predates it (shown as "–", not 0)."""
  v = [r[key] for r in rows if key in r]
  return float(np.mean(v)) if v else None


def _routed_mean(rows, key: str) -> float | None:
  """The mean of a per-routed-group metric over every routed group of the run (steps weighted by how many groups
  they routed); None when the run routed none or predates the metric."""
  w = np.asarray([r.get("groups/routed", 0.0) for r in rows if key in r], np.float64)
  v = np.asarray([r[key] for r in rows if key in r], np.float64)
  return float((w * v).sum() / w.sum()) if w.sum() > 0 else None


def _fmt_mean_std(values) -> str:
  mean, std, n = stats.mean_std(values)
  return "–" if not n else f"{mean:.3f} ± {std:.3f}"  # "–": a run evaluated before the metric existed


def _fmt_diff(mean: float, lo: float, hi: float) -> str:
  if math.isnan(mean):
    return "–"
  if math.isnan(lo):
    return f"{mean:+.3f} (too few pairs)"  # `stats.paired_bootstrap`: below min_pairs there is no interval
  star = "*" if lo > 0 or hi < 0 else ""
  return f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]{star}"


# Metrics of the evaluation (`watch.evaluate_step`, `tasks.process`): (benchmark, key, column label). The
# differences table reads the first list; the process table the second.
_HEADLINE = (
  ("arithmetic", "greedy_accuracy", "greedy acc"),
  ("arithmetic", "mean_pass_ratio", "pass ratio@{n}"),
  ("arithmetic", "faithful_accuracy", "faithful acc@{n}"),
  ("arithmetic", "greedy_faithful_accuracy", "greedy faithful acc"),
  ("arithmetic", "compensating_rate", "compensating@{n}"),
  # The flaw a verifier cannot see (every step valid, a step skipped or redundant; issue 32): the judge's own.
  ("arithmetic", "blind_flaw_rate", "blind flaw@{n}"),
  ("arithmetic_shift", "greedy_accuracy", "OOD greedy acc"),
  ("arithmetic_shift", "mean_pass_ratio", "OOD pass ratio@{n}"),
  ("arithmetic_shift", "faithful_accuracy", "OOD faithful acc@{n}"),
)
_PROCESS = (
  ("arithmetic", "flawed_correct_rate", "right answer, any flaw@{n}"),
  ("arithmetic", "bare_answer_rate", "bare answer@{n}"),
  ("arithmetic", "skipped_rate", "skipped step@{n}"),
  ("arithmetic", "first_error_step_wrong", "first error step (wrong)@{n}"),
  ("arithmetic", "all_correct_flawed", "all-correct groups with a flawed member@{n}"),
  ("arithmetic", "all_wrong_error_spread", "first-error spread, all-wrong groups@{n}"),
)
# Columns of the ablation table (a subset of the headline).
_ABLATION = ("greedy acc", "faithful acc@{n}", "compensating@{n}", "blind flaw@{n}", "OOD greedy acc")


def _table(head, rows) -> str:
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  return "\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def _value(summary: dict, bench: str, key: str):
  return summary["eval"].get(bench, {}).get(key)


def _paired(study, runs_a: list, runs_b: list, bench: str, key: str) -> tuple[float, float, float]:
  """Mean difference a − b over the seeds both ran, with its bootstrap interval (NaNs without a pair)."""
  a = {s["seed"]: _value(s, bench, key) for s, _ in runs_a}
  b = {s["seed"]: _value(s, bench, key) for s, _ in runs_b}
  d = stats.paired_differences(a, b)
  if not d:
    return float("nan"), float("nan"), float("nan")
  return stats.paired_bootstrap(d, **study.bootstrap.to_dict())


_PREDICTION = """## What the mechanism predicts

RLVR gives a group whose G samples all earn the same verifier reward no advantage at all; Reasoning Arena
routes exactly these non-diverse groups to the judge, which ranks their members by their reasoning
(SPEC §1, §4). The judge can only help where a routed group's members differ in process:

* inside an **all-correct** group it should prefer clean derivations over compensating errors, skipped steps,
  redundant steps and bare answers. Prediction: higher **faithful accuracy** (right answer, every step valid)
  and a lower **compensating** rate than RLVR, at no cost in answer accuracy;
* inside an **all-wrong** group it should prefer the trace that went wrong later. Prediction: a later first
  error step among wrong answers, and in time more right answers;
* the effect should grow as all-correct groups become the majority of routed groups (late in training) and
  shrink as the judge's verdicts get worse: at 50% verdict accuracy the judged rewards are noise, below it
  they teach the wrong preference (the ablation);
* out of distribution (`arithmetic_shift`), a policy that learned sounder steps should not lose, and may gain.

RLAIF (the judge on every group) and RLVR with dynamic sampling (DAPO: non-diverse groups are replaced,
not judged) separate "a judge's signal" from "routing" and from "more useful groups per step"."""

# The reading of the numbers is prose written by hand after a run (docs/results/reading.md), not generated: the
# page links it when it exists, and says that it describes the run recorded in study.json, not a later one.
READING_FILE = "reading.md"


def _reading(out_dir: str) -> str:
  if os.path.exists(os.path.join(out_dir, READING_FILE)):
    return (
      f"What these numbers say, which predictions held and which did not, is in [{READING_FILE}]({READING_FILE}), "
      "written by hand from the run recorded in `study.json`. Regenerating this page does not rewrite it: "
      "after a new run, read the tables again."
    )
  return (
    f"(No `{READING_FILE}` beside this page: the reading of these numbers, which predictions held and where "
    "the intervals exclude 0, is written by hand after a run.)"
  )


def _plots(study, groups: dict, ablation: list, gains: dict) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top  (lazy: only when plotting)

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  def mean_curve(runs, key):
    curves = [np.asarray([np.nan if v is None else v for v in r["curves"][key]], float) for _, r in runs]
    n = min(len(c) for c in curves)
    return np.arange(1, n + 1), np.nanmean(np.stack([c[:n] for c in curves]), 0) if n else np.zeros(0)

  def ratio_curve(runs):  # the all-correct share, smoothed as a ratio of smoothed counts (no NaNs)
    rows = [r["rows"] for _, r in runs]
    n = min(len(x) for x in rows)
    ac = np.mean([[row.get("groups/all_correct", 0.0) for row in x[:n]] for x in rows], 0)
    aw = np.mean([[row.get("groups/all_wrong", 0.0) for row in x[:n]] for x in rows], 0)
    num, den = smooth(ac, 5), smooth(ac + aw, 5)
    return np.arange(1, n + 1), np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)

  fig, axes = plt.subplots(2, 3, figsize=(16, 8))
  (a_acc, a_tok, a_faith), (a_share, a_comp, a_abl) = axes
  for m in study.modes:
    runs = groups.get(m) or []
    if not runs:
      continue
    steps, acc = mean_curve(runs, "accuracy")
    rows = [x["rows"] for _, x in runs]
    tokens = np.mean([np.cumsum([row.get("gen/tokens", 0) for row in r[: len(steps)]]) for r in rows], 0)
    a_acc.plot(steps, smooth(acc, 5), label=m)
    a_tok.plot(tokens / 1e3, smooth(acc, 5), label=m)
    steps, faith = mean_curve(runs, "faithful_accuracy")
    if np.isfinite(faith).any():
      a_faith.plot(steps, smooth(np.nan_to_num(faith), 5), label=m)
    steps, share = ratio_curve(runs)
    if np.isfinite(share).any():
      a_share.plot(steps, share, label=m)
  for ax, xl, yl in (
    (a_acc, "optimizer step", "training accuracy"),
    (a_tok, "generated tokens (k)", "training accuracy"),
    (a_faith, "optimizer step", "faithful accuracy (training samples)"),
    (a_share, "optimizer step", "all-correct share of non-diverse groups"),
  ):
    ax.set_xlabel(xl)
    ax.set_ylabel(yl + " (trailing 5-step mean)", fontsize=8)
    ax.grid(alpha=0.3)
  a_share.axhline(0.5, color="grey", lw=0.8, ls="--")
  a_acc.legend(fontsize=7)
  ref = groups.get(REFERENCE) or []
  if ref:
    n = min(len(x["rows"]) for _, x in ref)
    for key, label in (
      ("groups/all_correct", "all-correct"),
      ("groups/all_wrong", "all-wrong"),
      ("groups/diverse", "diverse"),
    ):
      a_comp.plot(
        np.arange(1, n + 1),
        smooth(np.mean([[row.get(key, 0.0) for row in x["rows"][:n]] for _, x in ref], 0), 5),
        label=label,
      )
    a_comp.set_title(f"{REFERENCE}: group composition", fontsize=10)
    a_comp.set_xlabel("optimizer step")
    a_comp.legend(fontsize=7)
    a_comp.grid(alpha=0.3)
  for acc, group, runs, _ in ablation:
    if runs:
      steps, faith = mean_curve(runs, "faithful_accuracy")
      if np.isfinite(faith).any():
        a_abl.plot(steps, smooth(np.nan_to_num(faith), 5), label=f"{group}: verdict accuracy {acc:g}")
  a_abl.set_title(f"ablation: {', '.join(study.ablation_modes)}, faithful accuracy", fontsize=10)
  a_abl.set_xlabel("optimizer step")
  a_abl.grid(alpha=0.3)
  if ablation:
    a_abl.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(os.path.join(study.out_dir, "curves.png"), dpi=110)
  plt.close(fig)
  if gains:  # the ablation: gain over the reference against the judge's verdict accuracy, with intervals
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for label, points in gains.items():
      acc, mean, lo, hi = (np.asarray(v, float) for v in zip(*sorted(points)))
      ax.errorbar(acc, mean, yerr=np.nan_to_num(np.stack([mean - lo, hi - mean])), marker="o", capsize=3, label=label)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("judge verdict accuracy on pairs that differ in process")
    ax.set_ylabel(f"gain over {REFERENCE} (paired, {study.bootstrap.level:.0%} interval)", fontsize=8)
    ax.set_title(f"{', '.join(study.ablation_modes)}: judge quality", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(study.out_dir, "ablation.png"), dpi=110)
    plt.close(fig)


def write_results(study, runs: dict) -> str:
  """Writes `study.out_dir`: README.md (predictions, tables, intervals, ablation), curves.png, study.json;
  returns the markdown."""
  os.makedirs(study.out_dir, exist_ok=True)
  groups: dict[str, list] = {g: [] for g in variants(study)}
  for summary in runs.values():
    group = summary.get("group", summary["mode"])  # runs of a study before the ablation carry only their mode
    workdir = os.path.join(study.root, group, f"seed{summary['seed']}")
    groups.setdefault(group, []).append((summary, _run_metrics(workdir, study.final_fraction)))
  for g in groups.values():
    g.sort(key=lambda x: x[0]["seed"])
  n = study.eval.num_samples
  benches = set(study.eval.benchmarks)
  headline = [(b, k, label.format(n=n)) for b, k, label in _HEADLINE if b in benches]
  process = [(b, k, label.format(n=n)) for b, k, label in _PROCESS if b in benches]
  ref = groups.get(REFERENCE) or []

  # What the setup was, read off the configs the runs used, so it stays true when they change.
  rc = run_config(study.modes[0], study.seeds[0], study)
  ec = eval_config(study, rc.tasks)
  judge = "the embedded rule-based process judge" if not rc.judge.urls else f"the judge at {', '.join(rc.judge.urls)}"
  cmd = f"`{study.command}`"
  tail_note = (
    f"the last {study.final_fraction:.0%} of the {study.num_steps} steps (at least "
    f"{min(_MIN_FINAL_STEPS, study.num_steps)})"
  )

  # The condition: all-correct groups the majority of routed (non-diverse) groups by the end.
  cond_rows, short = [], []
  for m in study.modes:
    r = [x for _, x in groups.get(m, [])]
    if not r:
      continue
    shares = [x["final_all_correct_share"] for x in r]
    mean_share = stats.mean_std(shares)[0]
    majority = "–" if math.isnan(mean_share) else ("yes" if mean_share > 0.5 else "**no**")
    if majority == "**no**":
      short.append(m)
    cond_rows.append(
      [
        m,
        _fmt_mean_std([x["final_non_diverse"] for x in r]),
        _fmt_mean_std(shares),
        _fmt_mean_std([x["final_routed_fraction"] for x in r]),
        majority,
      ]
    )
  cond_verdict = (
    f"All-correct groups are **not** the majority of non-diverse groups by the end for {short}: the "
    f"study is too short (or the policy too weak) for the regime the mechanism needs; raise "
    f"`--study.num_steps` and run again."
    if short
    else "All-correct groups are the majority of non-diverse groups by the end in every mode that has them."
  )

  acc_rows = [
    [g] + [_fmt_mean_std([_value(s, b, k) for s, _ in groups[g]]) for b, k, _ in headline]
    for g in study.modes
    if groups.get(g)
  ]
  proc_rows = [
    [g] + [_fmt_mean_std([_value(s, b, k) for s, _ in groups[g]]) for b, k, _ in process]
    for g in study.modes
    if groups.get(g)
  ]
  diff_rows, diffs = [], {}
  for g in study.modes:
    if g == REFERENCE or not groups.get(g) or not ref:
      continue
    cells = [g]
    for b, k, label in headline:
      d = _paired(study, groups[g], ref, b, k)
      diffs.setdefault(g, {})[f"{b}/{k}"] = dict(zip(("mean", "low", "high"), d))
      cells.append(_fmt_diff(*d))
    diff_rows.append(cells)

  ablation = []
  for mode in study.ablation_modes:
    for acc in study.judge_accuracies:
      group = ablation_name(mode, acc)
      ablation.append((acc, group, groups.get(group) or [], mode))
  abl_cols = [(b, k, label) for b, k, label in headline if label in [c.format(n=n) for c in _ABLATION]]
  abl_rows, abl_diffs = [], {}
  for acc, group, runs_g, _ in ablation:
    if not runs_g:
      continue
    cells = [f"{acc:g}", f"{1 - acc:g}", group]
    for b, k, _ in abl_cols:
      cells.append(_fmt_mean_std([_value(s, b, k) for s, _ in runs_g]))
    for b, k, _ in abl_cols:
      d = _paired(study, runs_g, ref, b, k) if ref else (float("nan"),) * 3
      abl_diffs.setdefault(group, {"judge_accuracy": acc})[f"{b}/{k}"] = dict(zip(("mean", "low", "high"), d))
      cells.append(_fmt_diff(*d))
    abl_rows.append(cells)

  base = groups.get(BASELINE)
  base_gens = np.mean([r["gens_per_step"] for _, r in base]) if base else float("nan")
  base_wall = np.mean([r["wall_per_step"] for _, r in base]) if base else float("nan")
  eff_rows = []
  for m in study.modes:
    r = [x for _, x in groups.get(m, [])]
    if not r:
      continue
    mean = lambda k, r=r: float(np.mean([x[k] for x in r]))
    rel = lambda x, b: "–" if math.isnan(b) else f"{x / b:.2f}"  # "–": no baseline runs
    eff_rows.append(
      [
        m,
        f"{mean('judge_calls_per_routed_group'):.1f}",
        f"{mean('routed_fraction'):.2f}",
        f"{mean('gens_per_step'):.0f}",
        rel(mean('gens_per_step'), base_gens),
        f"{mean('wall_per_step'):.2f}",
        rel(mean('wall_per_step'), base_wall),
        f"{mean('utilisation'):.2f}",
        f"{mean('adv_l1'):.3f}",
        f"{mean('judge_failures'):.0f}",
      ]
    )

  # The effective judged signal (issue 32) of every run group with a judge: does the judge reach the update at all?
  signal_rows = []
  for g, runs_g in groups.items():
    r = [x for _, x in runs_g]
    if not r or not any(x.get("judge_calls_per_step") for x in r):
      continue
    mean = lambda k, r=r: _fmt_mean_std([x.get(k) for x in r])
    signal_rows.append(
      [
        g,
        mean("routed_fraction"),
        mean("distinct_per_routed_group"),
        mean("judge_signal_rows"),
        mean("judge_grad_share"),
        mean("utilisation"),
      ]
    )

  # Issue 32, condition (a) over the run: the blind flaw in the training samples at the start and at the end.
  blind_rows = []
  for g, runs_g in groups.items():
    r = [x for _, x in runs_g]
    if r:
      blind_rows.append(
        [
          g,
          _fmt_mean_std([x.get("blind_flaw_first") for x in r]),
          _fmt_mean_std([x.get("blind_flaw_final") for x in r]),
        ]
      )

  gains = {}  # {"mode: metric label": [(verdict accuracy, mean, low, high)]} for ablation.png
  for acc, group, _, mode in ablation:
    for b, k, label in abl_cols:
      d = abl_diffs.get(group, {}).get(f"{b}/{k}")
      if d and not math.isnan(d["mean"]):
        name = label if len(study.ablation_modes) == 1 else f"{mode}: {label}"
        gains.setdefault(name, []).append((acc, d["mean"], d["low"], d["high"]))
  _plots(study, groups, ablation, gains)

  summaries = [s for g in groups.values() for s, _ in g]
  train_s = sum(s["train_s"] for s in summaries)
  eval_s = sum(s.get("eval_s") or 0.0 for s in summaries)
  wall = (
    f"The {len(summaries)} runs took {(train_s + eval_s) / 60:.0f} min in all ({train_s / 60:.0f} min training, "
    f"{eval_s / 60:.0f} min evaluation)."
    if summaries
    else ""
  )
  level = f"{study.bootstrap.level:.0%}"
  ci_note = (
    f"Paired by seed (same SFT policy, prompt order and sampling key): the mean of the per-seed "
    f"differences from `{REFERENCE}` and its {level} percentile bootstrap interval "
    f"({study.bootstrap.num_resamples} resamples of the seeds, `experiments.stats.paired_bootstrap`); "
    f"`*` marks an interval that excludes 0. With few seeds such intervals are approximate and tend to be "
    f"narrow; below {study.bootstrap.min_pairs} pairs they mean nothing (over two pairs the bootstrap has three "
    f"values), so a difference over fewer seeds is printed without an interval or a star, marked "
    f"\"(too few pairs)\". For `compensating` a negative difference is the predicted direction."
  )
  heads = lambda first: list(first) + [label for _, _, label in headline]
  md = "\n".join(
    [
      "# Reproduction study: the reward modes on the arithmetic testbed",
      "",
      f"Regenerate with {cmd} (the study's config: `experiments.study.study_config()`; each run: "
      "`configs.common.mode_config(mode)`). Every number below is in `study.json`, run by run.",
      f"Every run: the SFT policy of `{study.sft_config}`, {study.num_steps} optimizer steps of "
      f"{rc.rollout.prompts_per_step} prompts × G={rc.rollout.group_size}, the same prompt order, seeds "
      f"{tuple(study.seeds)}, {judge}; runs one after another on this machine. Evaluation of the final policy: "
      f"{ec.num_examples} held-out problems per benchmark, {'greedy and ' if ec.greedy else ''}{ec.num_samples} "
      f"samples at T={ec.temperature:g} (arithmetic = in distribution; arithmetic_shift = out of distribution, "
      "problems no training problem could be). Faithful accuracy: the answer is right and the task's process "
      f"checker finds every step valid; compensating: a right answer with an invalid step. {wall}",
      "",
      _PREDICTION,
      "",
      "## Did the condition hold? Routing at the end of training",
      "",
      f"Made by {cmd}. Over {tail_note}: the share of trained groups that are non-diverse (all-correct or "
      "all-wrong: the groups Arena routes to the judge), the all-correct share of those, and the share of groups "
      "routed (0 for modes without a judge; DAPO trains no non-diverse group, so it has no share). The step count "
      "must be checked against this table, not assumed.",
      "",
      _table(
        ["mode", "non-diverse groups", "all-correct share of them", "groups routed", "all-correct majority"], cond_rows
      ),
      "",
      cond_verdict,
      "",
      "## Accuracy and process (mean ± std over seeds; the paper's Table 1)",
      "",
      f"Made by {cmd}.",
      "",
      _table(heads(["mode"]), acc_rows),
      "",
      f"## Differences from {REFERENCE} (paired by seed, {level} bootstrap interval)",
      "",
      f"Made by {cmd}. {ci_note}",
      "",
      _table(heads(["mode"]), diff_rows) if diff_rows else f"(no `{REFERENCE}` runs to pair with)",
      "",
      "## Process detail (mean ± std over seeds)",
      "",
      f"Made by {cmd}. Rates over the {ec.num_samples} samples per problem; the first error step is 0-based, "
      "among wrong answers with an invalid step; the group columns read each problem's samples as one group.",
      "",
      _table(["mode"] + [label for _, _, label in process], proc_rows),
      "",
      f"## Judge-quality ablation: {', '.join(f'`{m}`' for m in study.ablation_modes)} at verdict accuracies "
      f"{tuple(study.judge_accuracies)}",
      "",
      f"Made by {cmd} (`study.judge_accuracies`, `study.ablation_modes`). The embedded judge reverses a share "
      "1 − a of its decisive verdicts on pairs whose process penalties differ (`judge.server.flip_rate`; "
      "a = 1 is the mode's plain run, a = 0 reverses every such verdict); same seeds, so each accuracy pairs "
      f"with `{REFERENCE}`. "
      "Mean ± std, then the gain over " + f"`{REFERENCE}` with its {level} interval.",
      "",
      _table(
        ["verdict accuracy", "flip_rate", "runs"]
        + [lb for _, _, lb in abl_cols]
        + [f"gain: {lb}" for _, _, lb in abl_cols],
        abl_rows,
      )
      if abl_rows
      else "(no ablation runs)",
      "",
      *(["![ablation](ablation.png)", ""] if gains else []),
      "## The flaw the verifier cannot see, during training (mean ± std over seeds)",
      "",
      f"Made by {cmd}. `process/blind_flaw_rate` of the training samples (every step valid, yet an operation "
      f"skipped or a step redundant: the verifier rewards such a trace as it rewards a clean one), averaged over the "
      f"first and over {tail_note}. The testbed needs RLVR to leave it in place; a judge that sees it should "
      "lower it, a reversed judge raise it.",
      "",
      _table(["run group", "blind flaw, first steps", "blind flaw, last steps"], blind_rows),
      "",
      "## The effective judged signal (mean ± std over seeds)",
      "",
      f"Made by {cmd}. Per step, averaged over the run: the share of groups routed to the judge, the distinct traces "
      f"per routed group of G={rc.rollout.group_size} (`judge/distinct_per_group`, weighted by the groups routed: a "
      "group of copies of one trace gives the judge nothing to rank), the share of the step's rows whose advantage is "
      "the judge's and non-zero (`judge/signal_rows`), their share of the step's Σ|Â| (`judge/grad_share`: how much "
      "of the update the judge steers), and the sample utilisation of every row. A judge with near-zero signal rows "
      "and gradient share cannot move the policy, however good its verdicts.",
      "",
      _table(
        [
          "run group",
          "groups routed",
          "distinct traces / routed group",
          "judged rows with Â ≠ 0",
          "judged share of Σ|Â|",
          "sample utilisation",
        ],
        signal_rows,
      )
      if signal_rows
      else "(no run with a judge)",
      "",
      f"## Efficiency (means over runs; relative to `{BASELINE}`, RLVR with dynamic sampling; Table 2, Fig. 5)",
      "",
      f"Made by {cmd}.",
      "",
      _table(
        [
          "mode",
          "judge calls / routed group",
          "groups routed",
          "generations / step",
          f"× {BASELINE}",
          "wall s / step",
          f"× {BASELINE}",
          "sample utilisation",
          "advantage L1",
          "judge failures",
        ],
        eff_rows,
      ),
      "",
      "Sample utilisation: the fraction of trajectories with a non-zero advantage. Wall-clock per step excludes step 1 "
      "(compilation).",
      "",
      "## Curves",
      "",
      "Means over seeds, trailing 5-step means: training accuracy per step and per generated token, faithful "
      "accuracy of the training samples (`process/faithful_accuracy`), the all-correct share of non-diverse groups "
      f"(dashed: one half), `{REFERENCE}`'s group composition, and the ablation's faithful accuracy.",
      "",
      "![curves](curves.png)",
      "",
      "## Reading",
      "",
      _reading(study.out_dir),
      "",
    ]
  )
  with open(os.path.join(study.out_dir, "README.md"), "w", encoding="utf-8") as f:
    f.write(md)
  raw = {
    g: [
      {
        "seed": s["seed"],
        "mode": s["mode"],
        "judge_accuracy": s.get("judge_accuracy"),
        "eval": s["eval"],
        "train_s": s["train_s"],
        "eval_s": s.get("eval_s"),
        **{k: v for k, v in r.items() if k != "rows"},
      }
      for s, r in groups[g]
    ]
    for g in groups
  }
  with open(os.path.join(study.out_dir, "study.json"), "w", encoding="utf-8") as f:
    json.dump(
      {"config": study.to_dict(), "runs": raw, "differences": diffs, "ablation": abl_diffs}, f, indent=1, default=list
    )
  return md
