"""The study's results page (`write_results`): `study.out_dir`'s README.md, study.json and figures, one step per table
or file, in the page's order. The tables: whether the mechanism's condition held, accuracy and process (the paper's
Table 1), the paired differences from the reference with bootstrap intervals (`experiments.stats`), the judge-quality
ablation, the blind flaw during training, the effective judged signal, efficiency (Table 2 and Fig. 5, SPEC §9). A new
table is a step here and a line in `write_results`."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import ml_collections
import numpy as np

from experiments import stats
from experiments.study import plots
from experiments.study.grid import BASELINE, REFERENCE, ablation_name, eval_config, run_config, variants
from experiments.study.metrics import MIN_FINAL_STEPS, run_metrics


def _fmt_mean_std(values) -> str:
  mean, std, n = stats.mean_std(values)
  return "–" if not n else f"{mean:.3f} ± {std:.3f}"  # "–": a run evaluated before the metric existed


def fmt_diff(mean: float, lo: float, hi: float) -> str:
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
  # The flaw a verifier cannot see (every step valid, a step skipped or redundant): the judge's own.
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


def table(head, rows) -> str:
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


@dataclasses.dataclass(frozen=True)
class _Page:
  """What the page's steps share: the study, its run groups ({group: [(summary, run metrics)] by seed}), the columns
  of its evaluation, the configs its runs used and the phrases every section repeats."""

  study: ml_collections.ConfigDict
  groups: dict
  headline: list  # (benchmark, key, column label) of _HEADLINE that the study evaluated
  process: list  # ... of _PROCESS
  ref: list  # the reference's runs: every difference pairs with them
  rc: ml_collections.ConfigDict  # the first run's RL config
  ec: ml_collections.ConfigDict  # its evaluation
  cmd: str
  tail_note: str
  level: str

  def heads(self, first) -> list:
    return list(first) + [label for _, _, label in self.headline]


def _run_groups(study, runs: dict) -> dict[str, list]:
  """{run group: [(summary, run metrics)] by seed}: the grid's groups, then any other group the runs name."""
  groups: dict[str, list] = {g: [] for g in variants(study)}
  for summary in runs.values():
    group = summary.get("group", summary["mode"])  # runs of a study before the ablation carry only their mode
    workdir = os.path.join(study.root, group, f"seed{summary['seed']}")
    groups.setdefault(group, []).append((summary, run_metrics(workdir, study.final_fraction)))
  for g in groups.values():
    g.sort(key=lambda x: x[0]["seed"])
  return groups


def _page(study, groups: dict) -> _Page:
  n = study.eval.num_samples
  benches = set(study.eval.benchmarks)
  # What the setup was, read off the configs the runs used, so it stays true when they change.
  rc = run_config(study.modes[0], study.seeds[0], study)
  return _Page(
    study=study,
    groups=groups,
    headline=[(b, k, label.format(n=n)) for b, k, label in _HEADLINE if b in benches],
    process=[(b, k, label.format(n=n)) for b, k, label in _PROCESS if b in benches],
    ref=groups.get(REFERENCE) or [],
    rc=rc,
    ec=eval_config(study, rc.tasks),
    cmd=f"`{study.command}`",
    tail_note=(
      f"the last {study.final_fraction:.0%} of the {study.num_steps} steps (at least "
      f"{min(MIN_FINAL_STEPS, study.num_steps)})"
    ),
    level=f"{study.bootstrap.level:.0%}",
  )


def _intro(page: _Page) -> list[str]:
  """The title, how to regenerate the page, what every run was and what the runs took, then the predictions."""
  study, rc, ec, cmd = page.study, page.rc, page.ec, page.cmd
  judge = "the embedded rule-based process judge" if not rc.judge.urls else f"the judge at {', '.join(rc.judge.urls)}"
  summaries = [s for g in page.groups.values() for s, _ in g]
  train_s = sum(s["train_s"] for s in summaries)
  eval_s = sum(s.get("eval_s") or 0.0 for s in summaries)
  wall = (
    f"The {len(summaries)} runs took {(train_s + eval_s) / 60:.0f} min in all ({train_s / 60:.0f} min training, "
    f"{eval_s / 60:.0f} min evaluation)."
    if summaries
    else ""
  )
  return [
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
  ]


def _condition(page: _Page) -> list[str]:
  """The condition: all-correct groups the majority of routed (non-diverse) groups by the end."""
  study, groups, cmd, tail_note = page.study, page.groups, page.cmd, page.tail_note
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
  return [
    "## Did the condition hold? Routing at the end of training",
    "",
    f"Made by {cmd}. Over {tail_note}: the share of trained groups that are non-diverse (all-correct or "
    "all-wrong: the groups Arena routes to the judge), the all-correct share of those, and the share of groups "
    "routed (0 for modes without a judge; DAPO trains no non-diverse group, so it has no share). The step count "
    "must be checked against this table, not assumed.",
    "",
    table(
      ["mode", "non-diverse groups", "all-correct share of them", "groups routed", "all-correct majority"], cond_rows
    ),
    "",
    cond_verdict,
    "",
  ]


def _accuracy(page: _Page) -> list[str]:
  """Accuracy and process, mean ± std over seeds of every mode (the paper's Table 1)."""
  groups = page.groups
  acc_rows = [
    [g] + [_fmt_mean_std([_value(s, b, k) for s, _ in groups[g]]) for b, k, _ in page.headline]
    for g in page.study.modes
    if groups.get(g)
  ]
  return [
    "## Accuracy and process (mean ± std over seeds; the paper's Table 1)",
    "",
    f"Made by {page.cmd}.",
    "",
    table(page.heads(["mode"]), acc_rows),
    "",
  ]


def _differences(page: _Page) -> tuple[list[str], dict]:
  """Every mode's paired difference from the reference with its bootstrap interval; also {mode: {"<bench>/<key>":
  {mean, low, high}}} for study.json."""
  study, groups, ref, cmd, level = page.study, page.groups, page.ref, page.cmd, page.level
  diff_rows, diffs = [], {}
  for g in study.modes:
    if g == REFERENCE or not groups.get(g) or not ref:
      continue
    cells = [g]
    for b, k, label in page.headline:
      d = _paired(study, groups[g], ref, b, k)
      diffs.setdefault(g, {})[f"{b}/{k}"] = dict(zip(("mean", "low", "high"), d))
      cells.append(fmt_diff(*d))
    diff_rows.append(cells)
  ci_note = (
    f"Paired by seed (same SFT policy, prompt order and sampling key): the mean of the per-seed "
    f"differences from `{REFERENCE}` and its {level} percentile bootstrap interval "
    f"({study.bootstrap.num_resamples} resamples of the seeds, `experiments.stats.paired_bootstrap`); "
    f"`*` marks an interval that excludes 0. With few seeds such intervals are approximate and tend to be "
    f"narrow; below {study.bootstrap.min_pairs} pairs they mean nothing (over two pairs the bootstrap has three "
    f"values), so a difference over fewer seeds is printed without an interval or a star, marked "
    f"\"(too few pairs)\". For `compensating` a negative difference is the predicted direction."
  )
  lines = [
    f"## Differences from {REFERENCE} (paired by seed, {level} bootstrap interval)",
    "",
    f"Made by {cmd}. {ci_note}",
    "",
    table(page.heads(["mode"]), diff_rows) if diff_rows else f"(no `{REFERENCE}` runs to pair with)",
    "",
  ]
  return lines, diffs


def _process(page: _Page) -> list[str]:
  """The evaluation's process detail, mean ± std over seeds of every mode."""
  groups = page.groups
  proc_rows = [
    [g] + [_fmt_mean_std([_value(s, b, k) for s, _ in groups[g]]) for b, k, _ in page.process]
    for g in page.study.modes
    if groups.get(g)
  ]
  return [
    "## Process detail (mean ± std over seeds)",
    "",
    f"Made by {page.cmd}. Rates over the {page.ec.num_samples} samples per problem; the first error step is 0-based, "
    "among wrong answers with an invalid step; the group columns read each problem's samples as one group.",
    "",
    table(["mode"] + [label for _, _, label in page.process], proc_rows),
    "",
  ]


def _ablation_runs(study, groups: dict) -> list[tuple]:
  """[(verdict accuracy, run group, its runs, mode)] of the ablation, mode by mode."""
  ablation = []
  for mode in study.ablation_modes:
    for acc in study.judge_accuracies:
      group = ablation_name(mode, acc)
      ablation.append((acc, group, groups.get(group) or [], mode))
  return ablation


def _ablation(page: _Page, ablation: list) -> tuple[list[str], dict, dict]:
  """The judge-quality ablation's table (mean ± std, then the gain over the reference); also {group:
  {judge_accuracy, "<bench>/<key>": {mean, low, high}}} for study.json and the gains ablation.png plots
  ({"<mode: >metric label": [(verdict accuracy, mean, low, high)]}, empty without a gain)."""
  study, ref, cmd, level = page.study, page.ref, page.cmd, page.level
  n = study.eval.num_samples
  abl_cols = [(b, k, label) for b, k, label in page.headline if label in [c.format(n=n) for c in _ABLATION]]
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
      cells.append(fmt_diff(*d))
    abl_rows.append(cells)
  gains = {}
  for acc, group, _, mode in ablation:
    for b, k, label in abl_cols:
      d = abl_diffs.get(group, {}).get(f"{b}/{k}")
      if d and not math.isnan(d["mean"]):
        name = label if len(study.ablation_modes) == 1 else f"{mode}: {label}"
        gains.setdefault(name, []).append((acc, d["mean"], d["low"], d["high"]))
  lines = [
    f"## Judge-quality ablation: {', '.join(f'`{m}`' for m in study.ablation_modes)} at verdict accuracies "
    f"{tuple(study.judge_accuracies)}",
    "",
    f"Made by {cmd} (`study.judge_accuracies`, `study.ablation_modes`). The embedded judge reverses a share "
    "1 − a of its decisive verdicts on pairs whose process penalties differ (`judge.server.flip_rate`; "
    "a = 1 is the mode's plain run, a = 0 reverses every such verdict); same seeds, so each accuracy pairs "
    f"with `{REFERENCE}`. "
    "Mean ± std, then the gain over " + f"`{REFERENCE}` with its {level} interval.",
    "",
    table(
      ["verdict accuracy", "flip_rate", "runs"]
      + [lb for _, _, lb in abl_cols]
      + [f"gain: {lb}" for _, _, lb in abl_cols],
      abl_rows,
    )
    if abl_rows
    else "(no ablation runs)",
    "",
    *(["![ablation](ablation.png)", ""] if gains else []),
  ]
  return lines, abl_diffs, gains


def _blind_flaw(page: _Page) -> list[str]:
  """The testbed's condition (a) (docs/results/testbed.md) over the run: the blind flaw in the training samples at
  the start and at the end."""
  blind_rows = []
  for g, runs_g in page.groups.items():
    r = [x for _, x in runs_g]
    if r:
      blind_rows.append(
        [
          g,
          _fmt_mean_std([x.get("blind_flaw_first") for x in r]),
          _fmt_mean_std([x.get("blind_flaw_final") for x in r]),
        ]
      )
  return [
    "## The flaw the verifier cannot see, during training (mean ± std over seeds)",
    "",
    f"Made by {page.cmd}. `process/blind_flaw_rate` of the training samples (every step valid, yet an operation "
    f"skipped or a step redundant: the verifier rewards such a trace as it rewards a clean one), averaged over the "
    f"first and over {page.tail_note}. The testbed needs RLVR to leave it in place; a judge that sees it should "
    "lower it, a reversed judge raise it.",
    "",
    table(["run group", "blind flaw, first steps", "blind flaw, last steps"], blind_rows),
    "",
  ]


def _judged_signal(page: _Page) -> list[str]:
  """The effective judged signal of every run group with a judge: does the judge reach the update at all?"""
  signal_rows = []
  for g, runs_g in page.groups.items():
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
  return [
    "## The effective judged signal (mean ± std over seeds)",
    "",
    f"Made by {page.cmd}. Per step, averaged over the run: the share of groups routed to the judge, the distinct "
    f"traces per routed group of G={page.rc.rollout.group_size} (`judge/distinct_per_group`, weighted by the groups "
    "routed: a group of copies of one trace gives the judge nothing to rank), the share of the step's rows whose "
    "advantage is the judge's and non-zero (`judge/signal_rows`), their share of the step's Σ|Â| (`judge/grad_share`: "
    "how much of the update the judge steers), and the sample utilisation of every row. A judge with near-zero signal "
    "rows and gradient share cannot move the policy, however good its verdicts.",
    "",
    table(
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
  ]


def _efficiency(page: _Page) -> list[str]:
  """Efficiency of every mode, means over runs, relative to the baseline (Table 2, Fig. 5, SPEC §9)."""
  base = page.groups.get(BASELINE)
  base_gens = np.mean([r["gens_per_step"] for _, r in base]) if base else float("nan")
  base_wall = np.mean([r["wall_per_step"] for _, r in base]) if base else float("nan")
  eff_rows = []
  for m in page.study.modes:
    r = [x for _, x in page.groups.get(m, [])]
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
  return [
    f"## Efficiency (means over runs; relative to `{BASELINE}`, RLVR with dynamic sampling; Table 2, Fig. 5)",
    "",
    f"Made by {page.cmd}.",
    "",
    table(
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
  ]


def _curves_and_reading(study) -> list[str]:
  """The figures' caption and the link to the hand-written reading."""
  return [
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


def _write_json(study, groups: dict, diffs: dict, abl_diffs: dict) -> None:
  """study.json: the study's config, every run's numbers (its metrics.jsonl rows left out), the differences."""
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


def write_results(study, runs: dict) -> str:
  """Writes `study.out_dir`: README.md (predictions, tables, intervals, ablation), curves.png, study.json;
  returns the markdown."""
  os.makedirs(study.out_dir, exist_ok=True)
  page = _page(study, _run_groups(study, runs))
  differences, diffs = _differences(page)
  ablation = _ablation_runs(study, page.groups)
  ablation_section, abl_diffs, gains = _ablation(page, ablation)
  plots.plot_curves(study, page.groups, ablation)
  if gains:
    plots.plot_ablation(study, gains)
  md = "\n".join(
    [
      *_intro(page),
      *_condition(page),
      *_accuracy(page),
      *differences,
      *_process(page),
      *ablation_section,
      *_blind_flaw(page),
      *_judged_signal(page),
      *_efficiency(page),
      *_curves_and_reading(study),
    ]
  )
  with open(os.path.join(study.out_dir, "README.md"), "w", encoding="utf-8") as f:
    f.write(md)
  _write_json(study, page.groups, diffs, abl_diffs)
  return md
