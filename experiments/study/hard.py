"""The hard regime's page (`--study.preset=hard`, docs/results/hard_regime.md): does Arena-Live learn faster than RLVR
where most groups are all wrong (SPEC §1, §9: the paper's 27–41% less training time than RLVR)?

Where RLVR learns nothing (a group of G wrong answers has zero advantage) the judge still ranks the group's traces; the
embedded process checker prefers the trace with fewer invalid steps, partial credit. The page reads:

- **The base**: the SFT policy on the study's problems before any RL (its pass ratio and all-wrong share) and whether
  the honest checker prefers, inside its all-wrong groups, the trace whose answer is closer to the reference.
- **Speed to RLVR's level** (`speed_to_level`; fixed here before the reported runs):
  - RLVR's level, per seed: the mean held-out pass ratio of RLVR's evaluations in the final `study.level_fraction`
    of the steps (at least one evaluation);
  - a run reaches it at its first evaluation at or above the level that the next evaluation confirms (also at or
    above it); the last evaluation has no next one, so a run that first holds the level there is censored;
  - a run that never reaches it is censored at its last step: its steps count as the run's length, so its ratio is
    a lower bound, and the table counts the censored runs;
  - per seed, an arm's steps, generations and wall time to the level divided by RLVR's own (RLVR itself can be
    censored: then its steps are the run's length too); the table gives the mean over seeds with a percentile
    bootstrap interval (`experiments.stats.paired_bootstrap`, resampling the seeds' ratios).
- **Final accuracy**: the held-out pass ratio and greedy accuracy of the final checkpoint, in and out of distribution,
  paired differences from RLVR.
- **Where the signal came from**: per run, the share of routed groups that were all wrong and all correct, and the
  judge's share of Σ|Â| (`judge/grad_share`).
- **Curves**: held-out pass ratio against step and against generations, a band (min to max over seeds) per arm.

hard_regime.json: one JSON object per line, each run's curve and figures; the last line is the summary
(`steps_to_rlvr_level` per arm with its interval, the final pass-ratio differences, the base's pass ratio and
all-wrong share)."""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction

import numpy as np

from arena_jax import judges, tasks
from arena_jax.eval import watch
from arena_jax.judges.embedded import checking
from arena_jax.train import load_policy, read_metrics
from experiments import stats
from experiments.study.grid import REFERENCE, arithmetic_overrides, eval_config, run_config, variants
from experiments.study.results import fmt_diff, table

PAGE = "hard_regime"
_KEY = ("arithmetic", "mean_pass_ratio")  # the held-out pass ratio: the curve and the level


# ── the speed to RLVR's level ──


def rlvr_level(curve: list[tuple[int, float]], level_fraction: float) -> float:
  """RLVR's level on one seed: the mean of its evaluations (step, value) in the final `level_fraction` of its
  steps, at least the last one."""
  last = curve[-1][0]
  tail = [v for s, v in curve if s > (1 - level_fraction) * last] or [curve[-1][1]]
  return float(np.mean(tail))


def speed_to_level(curve: list[tuple[int, float]], level: float) -> tuple[int, bool]:
  """(step, censored): the first evaluation at or above `level` that the next evaluation confirms; a run that
  never reaches it (or only at its last evaluation) is censored at its last step (module docstring)."""
  for (step, value), (_, following) in zip(curve, curve[1:]):
    if value >= level and following >= level:
      return step, False
  return curve[-1][0], True


def cumulative_at(rows: list[dict], key: str, step: int) -> float:
  """The sum of a per-step metric over the steps up to `step` (generations: gen/trajectories; wall: time/wall)."""
  return float(sum(r.get(key, 0.0) for r in rows if r["step"] <= step))


# ── the base: the SFT policy on the study's problems ──


def checker_agreement(examples, rewards: np.ndarray, completions: list[str], skip_weight: float | None = None) -> dict:
  """Inside the all-wrong groups (every one of n samples wrong), over pairs of traces whose final answers differ in
  distance from the reference and whose checker penalties differ (`judges.embedded.checking.assess`, the
  study's judge, at its `skip_weight`: the embedded judge's default 0.5): the share where the lower penalty goes
  with the closer answer. 0.5 is no relation; above it, the checker's partial credit points towards right answers."""
  judge = judges.server_config()  # the embedded judge's weights, unless `skip_weight` says otherwise
  skip_weight = judge.skip_weight if skip_weight is None else skip_weight
  n = rewards.shape[1]
  agree = total = groups = 0
  for i, example in enumerate(examples):
    if rewards[i].max() > 0:
      continue
    groups += 1
    reference = Fraction(example.answer)
    scored = []
    for text in dict.fromkeys(completions[i * n : (i + 1) * n]):  # distinct traces, the judge's deduplication
      answer = tasks.parse_number(tasks.extract_answer(text))
      distance = math.inf if answer is None else abs(answer - reference)
      steps = tasks.split_steps(text) or [text]
      penalty = checking.assess(
        example.question, example.answer, steps, skip_weight=skip_weight, answer_weight=judge.answer_weight
      ).penalty
      scored.append((penalty, distance))
    for a in range(len(scored)):
      for b in range(a + 1, len(scored)):
        (pa, da), (pb, db) = scored[a], scored[b]
        if pa != pb and da != db:
          total += 1
          agree += (pa < pb) == (da < db)
  return {"all_wrong_groups": groups, "pairs": total, "agreement": agree / total if total else None}


def base_figures(study) -> dict:
  """The SFT policy's held-out figures on the study's problems (the curves' step 0, the same for every run group)
  and `checker_agreement` on its all-wrong groups; computed once into `study.root`/base_eval.json."""
  tasks_config = run_config(REFERENCE, study.seeds[0], study).tasks
  ec = eval_config(study, tasks_config)
  arith = {"arithmetic": arithmetic_overrides(study)} if arithmetic_overrides(study) else {}
  setup = json.loads(json.dumps({"sft_dir": study.sft_dir, "eval": study.eval.to_dict(), **arith}))
  path = os.path.join(study.root, "base_eval.json")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      cached = json.load(f)
    if cached.get("setup") == setup:
      return cached
  policy = load_policy(study.sft_dir)
  results = watch.evaluate_params(
    policy.model, policy.config, policy.tokenizer, ec, add_bos=policy.add_bos, progress=False, keep_details=True
  )
  details = watch.pop_details(results)
  watch.pop_samples(results)
  held_out = details.get("arithmetic")
  agreement = (
    checker_agreement(held_out["examples"], np.asarray(held_out["rewards"]), held_out["completions"])
    if held_out
    else None
  )
  out = {"setup": setup, "eval": results, "checker": agreement}
  os.makedirs(study.root, exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1)
  return out


# ── the page ──


def _curve(summary: dict, base: dict) -> list[tuple[int, float]]:
  points = [(0, base["eval"][_KEY[0]][_KEY[1]])] if base else []
  return points + [(p["step"], p["eval"][_KEY[0]][_KEY[1]]) for p in summary["curve"]]


def _interval(values: list[float], study) -> dict:
  mean, lo, hi = stats.paired_bootstrap(values, **study.bootstrap.to_dict()) if values else (math.nan,) * 3
  return {"mean": mean, "lo": lo, "hi": hi, "n": len(values)}


def _fmt(d: dict) -> str:
  if math.isnan(d["mean"]):
    return "–"
  if math.isnan(d["lo"]):
    return f"{d['mean']:.2f} (too few pairs)"
  return f"{d['mean']:.2f} [{d['lo']:.2f}, {d['hi']:.2f}]"


def _fmt_diff(d: dict) -> str:
  return fmt_diff(d["mean"], d["lo"], d["hi"])


def _run_rows(study, runs: dict) -> dict[str, dict[int, dict]]:
  """{run group: {seed: {summary, rows}}} of the grid's groups."""
  groups: dict[str, dict[int, dict]] = {g: {} for g in variants(study)}
  for summary in runs.values():
    workdir = os.path.join(study.root, summary["group"], f"seed{summary['seed']}")
    groups.setdefault(summary["group"], {})[summary["seed"]] = {"summary": summary, "rows": read_metrics(workdir)}
  return groups


def speed_table(study, groups: dict, base: dict) -> dict:
  """{group: {"runs": [(seed, steps, censored, gens, wall)], "steps"/"gens"/"wall": ratio intervals}}."""
  ref = groups.get(REFERENCE, {})
  levels = {s: rlvr_level(_curve(r["summary"], base), study.level_fraction) for s, r in ref.items()}
  reached = {}
  for g, runs in groups.items():
    reached[g] = {}
    for s, r in runs.items():
      if s not in levels:
        continue
      step, censored = speed_to_level(_curve(r["summary"], base), levels[s])
      reached[g][s] = (
        step,
        censored,
        cumulative_at(r["rows"], "gen/trajectories", step),
        cumulative_at(r["rows"], "time/wall", step),
      )
  out = {}
  for g, per_seed in reached.items():
    ratios = {k: [] for k in ("steps", "gens", "wall")}
    for s, (step, _, gens, wall) in sorted(per_seed.items()):
      r_step, _, r_gens, r_wall = reached[REFERENCE][s]
      ratios["steps"].append(step / max(r_step, 1))
      ratios["gens"].append(gens / r_gens if r_gens else math.nan)
      ratios["wall"].append(wall / r_wall if r_wall else math.nan)
    out[g] = {
      "runs": [(s, *v) for s, v in sorted(per_seed.items())],
      "censored": sum(v[1] for v in per_seed.values()),
      **{k: _interval([x for x in v if not math.isnan(x)], study) for k, v in ratios.items()},
    }
  return {"levels": levels, "arms": out}


def _final(study, groups: dict, bench: str, key: str) -> dict:
  ref = {s: r["summary"]["eval"].get(bench, {}).get(key) for s, r in groups.get(REFERENCE, {}).items()}
  out = {}
  for g, runs in groups.items():
    vals = {s: r["summary"]["eval"].get(bench, {}).get(key) for s, r in runs.items()}
    d = stats.paired_differences(vals, ref)
    mean, std, n = stats.mean_std(list(vals.values()))
    out[g] = {"value": (mean, std, n), "diff": _interval(d, study)}
  return out


def _signal(rows: list[dict]) -> dict:
  routed_aw = sum(r.get("groups/all_wrong", 0.0) for r in rows)
  routed_ac = sum(r.get("groups/all_correct", 0.0) for r in rows)
  nd = routed_aw + routed_ac
  share = [r["judge/grad_share"] for r in rows if "judge/grad_share" in r]
  return {
    "all_wrong_share": routed_aw / nd if nd else None,
    "all_correct_share": routed_ac / nd if nd else None,
    "non_diverse": nd / len(rows) if rows else None,
    "judge_grad_share": float(np.mean(share)) if share else None,
    "judge_calls": sum(r.get("judge/calls", 0.0) for r in rows),
    "generations": sum(r.get("gen/trajectories", 0.0) for r in rows),
  }


def _plot(study, groups: dict, base: dict, path: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top  (lazy: only when plotting)

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for g, runs in groups.items():
    if not runs:
      continue
    curves = [_curve(r["summary"], base) for _, r in sorted(runs.items())]
    n = min(len(c) for c in curves)
    steps = np.asarray([p[0] for p in curves[0][:n]], float)
    values = np.asarray([[p[1] for p in c[:n]] for c in curves])
    gens = np.asarray(
      [[cumulative_at(r["rows"], "gen/trajectories", int(s)) for s in steps] for _, r in sorted(runs.items())]
    ).mean(0)
    for ax, x in ((axes[0], steps), (axes[1], gens)):
      (line,) = ax.plot(x, values.mean(0), label=f"{g} ({len(curves)} seeds)")
      ax.fill_between(x, values.min(0), values.max(0), color=line.get_color(), alpha=0.15)
  axes[0].set_xlabel("RL step")
  axes[1].set_xlabel("generations (cumulative, mean over seeds)")
  for ax in axes:
    ax.set_ylabel(f"held-out pass ratio@{study.eval.num_samples}")
    ax.grid(alpha=0.3)
  axes[0].legend(fontsize=8)
  fig.suptitle("The hard regime: held-out pass ratio, mean and min–max band over seeds")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def write_hard_results(study, runs: dict) -> str:
  """Writes `study.out_dir`/hard_regime.md, .json and .png (module docstring); returns the markdown."""
  os.makedirs(study.out_dir, exist_ok=True)
  base = base_figures(study)
  groups = _run_rows(study, runs)
  speed = speed_table(study, groups, base)
  finals = {
    (b, k): _final(study, groups, b, k)
    for b in ("arithmetic", "arithmetic_shift")
    for k in ("mean_pass_ratio", "greedy_accuracy")
    if b in study.eval.benchmarks
  }
  signals = {g: {s: _signal(r["rows"]) for s, r in runs_.items()} for g, runs_ in groups.items()}
  _plot(study, groups, base, os.path.join(study.out_dir, f"{PAGE}.png"))
  rc = run_config(REFERENCE, study.seeds[0], study)
  held = base["eval"].get("arithmetic", {})
  n = study.eval.num_samples
  lines = [
    "# The hard regime: does Arena-Live learn faster than RLVR where groups are all wrong?",
    "",
    f"Regenerate with `{study.command}` (`experiments/study/hard.py`; the study's config: "
    "`experiments.study.study_config()` with the `hard` preset of `experiments/study/grid.py`). Every number below "
    f"is in [{PAGE}.json]({PAGE}.json), run by run.",
    "",
    f"Every run: the SFT policy of `{study.sft_config}` ({study.sft_dir}), {study.num_steps} RL steps of "
    f"{rc.rollout.prompts_per_step} prompts × G={rc.rollout.group_size} on arithmetic problems with "
    f"{rc.tasks.arithmetic.min_ops}–{rc.tasks.arithmetic.max_ops} operations, operands "
    f"{rc.tasks.arithmetic.min_operand}–{rc.tasks.arithmetic.max_operand}, values ≤ {rc.tasks.arithmetic.max_value}; "
    f"seeds {tuple(study.seeds)}; the held-out evaluation every {study.eval_every} steps on the same "
    f"{study.eval.num_examples} problems per benchmark with {n} samples at T=1 and the same sampling key for every "
    "run. Arena-Live is judged by the embedded process checker (`judges/embedded/checking.py`); `@acc0` is the same "
    "checker reversed (every verdict between traces of different penalty the wrong way round).",
    "",
    "## The base",
    "",
    table(
      ["", f"pass ratio@{n}", "greedy acc", "all-wrong groups", "all-correct groups", "diverse groups"],
      [
        [
          b,
          *(
            f"{base['eval'].get(b, {}).get(k, math.nan):.3f}"
            for k in ("mean_pass_ratio", "greedy_accuracy", "frac_all_wrong", "frac_all_correct", "frac_diverse")
          ),
        ]
        for b in study.eval.benchmarks
      ],
    ),
    "",
  ]
  checker = base.get("checker") or {}
  if checker.get("agreement") is not None:
    lines += [
      f"Inside the base's {checker['all_wrong_groups']} all-wrong held-out groups, over {checker['pairs']} pairs of "
      "traces whose checker penalties and answer distances both differ, the lower penalty went with the answer "
      f"closer to the reference in **{checker['agreement']:.3f}** of them (0.5: no relation).",
      "",
    ]
  arms = [g for g in groups if g != REFERENCE]
  lines += [
    "## Speed to RLVR's level",
    "",
    "RLVR's level, per seed: its mean held-out pass ratio over the evaluations in the final "
    f"{study.level_fraction:.0%} of the steps. An arm reaches it at its first evaluation at or above it that the next "
    "evaluation confirms; an arm that never does is censored at its last step (its ratio is then a lower bound). "
    f"Ratios to RLVR's own, per seed; mean over seeds with a {study.bootstrap.level:.0%} bootstrap interval.",
    "",
    "RLVR's levels: " + ", ".join(f"seed {s} {v:.3f}" for s, v in sorted(speed["levels"].items())) + ".",
    "",
    table(
      [
        "run group",
        "steps to the level, per seed",
        "censored",
        "steps ÷ RLVR's",
        "generations ÷ RLVR's",
        "wall ÷ RLVR's",
      ],
      [
        [
          g,
          ", ".join(f"{st}{'+' if c else ''}" for _, st, c, _, _ in speed["arms"][g]["runs"]),
          f"{speed['arms'][g]['censored']} of {len(speed['arms'][g]['runs'])}",
          _fmt(speed["arms"][g]["steps"]),
          _fmt(speed["arms"][g]["gens"]),
          _fmt(speed["arms"][g]["wall"]),
        ]
        for g in groups
        if g in speed["arms"]
      ],
    ),
    "",
    "(`+`: censored at that step.) The paper's claim: Arena-Live reaches RLVR's final level in 0.59–0.73× its "
    "training time; this page's target is ≤ 0.75× RLVR's steps with the interval's upper end below 1.0, and the "
    "reversed judge not.",
    "",
    "## Final accuracy",
    "",
    "The final checkpoint; mean ± std over seeds, and the paired difference from RLVR with its interval (`*`: the "
    "interval excludes 0).",
    "",
  ]
  head = ["run group"]
  for b, k in finals:
    head += [f"{b} {k.replace('_', ' ')}", "− RLVR"]
  rows = []
  for g in groups:
    row = [g]
    for b, k in finals:
      mean, std, cnt = finals[(b, k)][g]["value"]
      row += [
        "–" if not cnt else f"{mean:.3f} ± {std:.3f}",
        "" if g == REFERENCE else _fmt_diff(finals[(b, k)][g]["diff"]),
      ]
    rows.append(row)
  lines += [table(head, rows), ""]
  lines += [
    "## Where the signal came from",
    "",
    "Over each run's steps: the routed (non-diverse) groups that were all wrong and all correct, the non-diverse "
    "groups per step, the judge's share of Σ|Â| (`judge/grad_share`), judge calls and generations per run; mean over "
    "seeds.",
    "",
    table(
      [
        "run group",
        "all-wrong share",
        "all-correct share",
        "non-diverse share of groups",
        "judge grad share",
        "judge calls / run",
        "generations / run",
        "train min / run",
      ],
      [
        [
          g,
          *(
            _mean_of([signals[g][s][k] for s in signals[g]])
            for k in (
              "all_wrong_share",
              "all_correct_share",
              "non_diverse",
              "judge_grad_share",
              "judge_calls",
              "generations",
            )
          ),
          _mean_of([groups[g][s]["summary"]["train_s"] / 60 for s in groups[g]]),
        ]
        for g in groups
      ],
    ),
    "",
    "## Curves",
    "",
    f"![held-out pass ratio]({PAGE}.png)",
    "",
    "## Reading",
    "",
    *_reading(study.out_dir),
  ]
  md = "\n".join(lines)
  with open(os.path.join(study.out_dir, f"{PAGE}.md"), "w", encoding="utf-8") as f:
    f.write(md)
  summary = {
    "base": {
      "pass_ratio": held.get("mean_pass_ratio"),
      "all_wrong_share": held.get("frac_all_wrong"),
      "checker_agreement": checker.get("agreement"),
    },
    "levels": speed["levels"],
    "steps_to_rlvr_level": {g: speed["arms"][g]["steps"] for g in arms if g in speed["arms"]},
    "generations_to_rlvr_level": {g: speed["arms"][g]["gens"] for g in arms if g in speed["arms"]},
    "wall_to_rlvr_level": {g: speed["arms"][g]["wall"] for g in arms if g in speed["arms"]},
    "censored": {g: speed["arms"][g]["censored"] for g in speed["arms"]},
    "final_pass_ratio_diff": {g: finals[("arithmetic", "mean_pass_ratio")][g]["diff"] for g in arms}
    if ("arithmetic", "mean_pass_ratio") in finals
    else {},
    "final_shift_pass_ratio_diff": {g: finals[("arithmetic_shift", "mean_pass_ratio")][g]["diff"] for g in arms}
    if ("arithmetic_shift", "mean_pass_ratio") in finals
    else {},
    "seeds": list(study.seeds),
    "num_steps": study.num_steps,
  }
  # Strict JSON: a figure that is not a number (an interval of fewer seeds than `min_pairs`, a share with no groups)
  # is written as null, which every JSON reader reads (NaN is Python's extension).
  dumps = lambda obj: json.dumps(_nan_to_none(obj), allow_nan=False)
  with open(os.path.join(study.out_dir, f"{PAGE}.json"), "w", encoding="utf-8") as f:
    for g, runs_ in groups.items():
      for s, r in sorted(runs_.items()):
        f.write(
          dumps(
            {
              "group": g,
              "seed": s,
              "curve": _curve(r["summary"], base),
              "eval": r["summary"]["eval"],
              "signal": signals[g][s],
              "train_s": r["summary"]["train_s"],
              "eval_s": r["summary"].get("eval_s"),
            }
          )
          + "\n"
        )
    f.write(dumps(summary) + "\n")
  return md


def _nan_to_none(obj):
  """`obj` with every float NaN, at any depth of dicts, lists and tuples, replaced by None."""
  if isinstance(obj, float) and math.isnan(obj):
    return None
  if isinstance(obj, dict):
    return {k: _nan_to_none(v) for k, v in obj.items()}
  if isinstance(obj, list | tuple):
    return [_nan_to_none(v) for v in obj]
  return obj


# The reading is prose written by hand after the runs, kept beside the page and shown in it: regenerating the page
# does not rewrite it.
READING = f"{PAGE}_reading.md"


def _reading(out_dir: str) -> list[str]:
  path = os.path.join(out_dir, READING)
  if not os.path.exists(path):
    return [f"(No `{READING}` beside this page: the reading of these numbers is written by hand after the runs.)", ""]
  with open(path, encoding="utf-8") as f:
    text = f.read().strip()
  if text.startswith("# "):  # the reading's own title: the page's section heading stands for it
    text = text.split("\n", 1)[1].strip() if "\n" in text else ""
  return [
    f"Written by hand from the runs in [{PAGE}.json]({PAGE}.json) ([{READING}]({READING}); regenerating the page "
    "does not rewrite it: after new runs, read the tables again).",
    "",
    text,
    "",
  ]


def _mean_of(values) -> str:
  v = [x for x in values if x is not None]
  return "–" if not v else f"{np.mean(v):.3g}"
