"""The reproduction study (`make reproduce`): every reward mode of SPEC §7 side by side on the arithmetic testbed.

Every run starts from the same SFT policy, sees the same prompts in the same order (`data_seed`),
trains for the same number of optimizer steps, and differs only in its reward mode and its seed
(sampling and judge). The modes are the reward-mode registry's (`arena_jax.rl.REWARD_MODES`, in
registry order), each run `mode_config(name)` of `arena_jax.train.config`. The runs go one after
another, so their wall-clock times are comparable. Finished runs are skipped when the study is
restarted (their final checkpoint and evaluation exist).

`write_results` turns the runs into `docs/results/`: the accuracy table (in and out of distribution,
mean ± std over seeds: the paper's Table 1), the efficiency table (judge calls per routed group,
fraction of groups routed, generations and wall-clock per optimizer step relative to `BASELINE`, RLVR
with DAPO dynamic sampling, sample utilisation and advantage L1: Table 2 and Fig. 5, SPEC §9), and
plots (accuracy vs step and vs generated tokens, all-correct / all-wrong fractions over training:
Fig. 1, SPEC §1).
"""
from __future__ import annotations

import json
import os
import shutil
import time

import ml_collections
import numpy as np

from arena_jax import rl
from arena_jax.eval import watch
from arena_jax.train import read_metrics, train, train_sft
from arena_jax.train.config import mode_config
from arena_jax.train.plot import smooth
from experiments import load_config

# The efficiency tables' reference: the paper measures its savings against RLVR with dynamic sampling
# (SPEC §7, §9).
BASELINE = "rlvr_dapo"


def study_config() -> ml_collections.ConfigDict:
  """The study `launch/compare.py` runs (`--study.<field>` overrides a field)."""
  c = ml_collections.ConfigDict()
  c.modes = tuple(rl.REWARD_MODES)  # every registered reward mode, in registry order
  c.seeds = (0, 1, 2)
  c.num_steps = 60
  c.root = "runs/study"            # one workdir per (mode, seed)
  c.out_dir = "docs/results"
  c.sft_dir = "runs/sft_demo"      # the shared SFT base (trained first from `sft_config` if missing)
  c.sft_config = "configs/sft.py"  # `path[:arg]`; a relative path is read from the repository root
  c.eval = ml_collections.ConfigDict(dict(benchmarks=("arithmetic", "arithmetic_shift", "countdown"), num_examples=200,
                                          num_samples=8, max_new_tokens=96, batch_size=64))
  c.command = "make reproduce"
  return c


def run_config(mode_name: str, seed: int, study) -> ml_collections.ConfigDict:
  """The RL config of one run: `mode_config(mode_name)` from the shared SFT base, the study's length and seed."""
  c = mode_config(mode_name)
  c.seed = seed
  c.data_seed = 0
  c.num_steps = study.num_steps
  c.init.policy_dir = study.sft_dir
  c.checkpoint.every = study.num_steps
  c.log.progress = False
  c.log.tensorboard = False
  return c


def eval_config(study, tasks_config) -> ml_collections.ConfigDict:
  """The evaluation of every run's final checkpoint: `watch.default_config()` with `study.eval`."""
  c = watch.default_config()
  c.tasks = tasks_config
  for k, v in study.eval.items():
    c[k] = v
  return c


def run_study(study) -> dict:
  """Trains and evaluates every (mode, seed) not yet done; returns {run name: summary}."""
  unknown = [m for m in study.modes if m not in rl.REWARD_MODES]
  if unknown:
    raise ValueError(f"study.modes: {unknown} are not reward modes; choose from {tuple(rl.REWARD_MODES)}")
  train_sft(load_config(study.sft_config), study.sft_dir)  # cached when it exists with this config
  runs = {}
  for mode_name in study.modes:
    for seed in study.seeds:
      name = f"{mode_name}/seed{seed}"
      workdir = os.path.join(study.root, mode_name, f"seed{seed}")
      done_file = os.path.join(workdir, "eval_final.json")
      if os.path.exists(done_file):
        with open(done_file, encoding="utf-8") as f:
          runs[name] = json.load(f)
        print(f"[{name}] done earlier: skipped", flush=True)
        continue
      if os.path.isdir(workdir):  # an interrupted run: start it again from scratch
        shutil.rmtree(workdir)
      c = run_config(mode_name, seed, study)
      t0 = time.time()
      print(f"[{name}] training {c.num_steps} steps ...", flush=True)
      train(c, workdir)
      t1 = time.time()
      results = watch.evaluate_step(workdir, c.num_steps, eval_config(study, c.tasks))
      watch.pop_samples(results)  # study.json keeps metrics; the runs' samples.jsonl keep completions
      summary = {"mode": mode_name, "seed": seed, "train_s": t1 - t0, "eval_s": time.time() - t1, "eval": results}
      with open(done_file, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
      runs[name] = summary
      print(f"[{name}] {t1 - t0:.0f} s; arithmetic greedy {results['arithmetic']['greedy_accuracy']:.3f}, "
            f"pass ratio {results['arithmetic']['mean_pass_ratio']:.3f}", flush=True)
  return runs


# ───────────────────────────────────────────── results ─────────────────────────────────────────────


def _run_metrics(workdir: str) -> dict:
  rows = read_metrics(workdir)
  steady = rows[1:] or rows  # step 1 carries the compilations
  get = lambda k, rs=steady: np.asarray([r.get(k, 0.0) for r in rs], float)
  calls, groups = get("judge/calls").sum(), get("judge/groups").sum()
  return {
      "rows": rows,
      "gens_per_step": float(get("gen/trajectories", rows).mean()),
      "gen_batches_per_step": float(get("gen/batches", rows).mean()),
      "wall_per_step": float(get("time/wall").mean()),
      "judge_calls_per_routed_group": float(calls / groups) if groups else 0.0,
      "judge_calls_per_step": float(get("judge/calls", rows).mean()),
      "routed_fraction": float(get("groups/routed", rows).mean()),
      "utilisation": float(get("adv/nonzero_fraction", rows).mean()),
      "adv_l1": float(get("adv/l1", rows).mean()),
      "judge_failures": float(get("judge/failures", rows).sum()),
  }


def _mean_std(values) -> str:
  v = np.asarray([x for x in values if x is not None], float)
  if not len(v):
    return "–"  # a run evaluated before the metric existed
  return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.3f}"


# The accuracy table's columns per benchmark: answers (greedy, n samples) and process (issue 17: right
# answer with every step valid, over the n samples).
_ACC_KEYS = (("greedy_accuracy", "greedy acc"), ("mean_pass_ratio", "pass ratio@{n}"),
             ("faithful_accuracy", "faithful acc@{n}"))


def write_results(study, runs: dict) -> str:
  """Writes docs/results/ (tables, plots, study.json); returns the markdown."""
  import matplotlib  # pylint: disable=g-import-not-at-top  (lazy: only when plotting)

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  os.makedirs(study.out_dir, exist_ok=True)
  per_mode: dict[str, list] = {m: [] for m in study.modes}
  for name, summary in runs.items():
    workdir = os.path.join(study.root, summary["mode"], f"seed{summary['seed']}")
    per_mode[summary["mode"]].append((summary, _run_metrics(workdir)))

  benches = list(study.eval.benchmarks)
  acc_rows = []
  for m in study.modes:
    cells = [m]
    for b in benches:
      for key, _ in _ACC_KEYS:
        cells.append(_mean_std([s["eval"][b].get(key) for s, _ in per_mode[m]]))
    acc_rows.append(cells)
  base = per_mode.get(BASELINE)
  base_gens = np.mean([r["gens_per_step"] for _, r in base]) if base else float("nan")
  base_wall = np.mean([r["wall_per_step"] for _, r in base]) if base else float("nan")
  eff_rows = []
  for m in study.modes:
    r = [x for _, x in per_mode[m]]
    mean = lambda k: float(np.mean([x[k] for x in r]))
    eff_rows.append([m, f"{mean('judge_calls_per_routed_group'):.1f}", f"{mean('routed_fraction'):.2f}",
                     f"{mean('gens_per_step'):.0f}", f"{mean('gens_per_step') / base_gens:.2f}",
                     f"{mean('wall_per_step'):.2f}", f"{mean('wall_per_step') / base_wall:.2f}",
                     f"{mean('utilisation'):.2f}", f"{mean('adv_l1'):.3f}", f"{mean('judge_failures'):.0f}"])

  def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows])

  acc_head = ["mode"] + [f"{b} {label.format(n=study.eval.num_samples)}" for b in benches for _, label in _ACC_KEYS]
  eff_head = ["mode", "judge calls / routed group", "groups routed", "generations / step", f"× {BASELINE}",
              "wall s / step", f"× {BASELINE}", "sample utilisation", "advantage L1", "judge failures"]

  # Plots: training accuracy vs step and vs generated tokens; group fractions over training (Fig. 1).
  fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
  for m in study.modes:
    rows = [x["rows"] for _, x in per_mode[m]]
    if not rows:
      continue
    n = min(len(r) for r in rows)
    steps = np.arange(1, n + 1)
    acc = np.mean([[row["accuracy"] for row in r[:n]] for r in rows], 0)
    tokens = np.mean([np.cumsum([row["gen/tokens"] for row in r[:n]]) for r in rows], 0)
    axes[0].plot(steps, smooth(acc, 5), label=m)
    axes[1].plot(tokens / 1e3, smooth(acc, 5), label=m)
  for ax, xl in zip(axes[:2], ("optimizer step", "generated tokens (k)")):
    ax.set_xlabel(xl)
    ax.set_ylabel("training accuracy (trailing 5-step mean)")
    ax.grid(alpha=0.3)
  axes[0].legend(fontsize=7)
  rlvr = [x["rows"] for _, x in per_mode.get("rlvr", [])]
  if rlvr:
    n = min(len(r) for r in rlvr)
    for key, label in (("groups/all_correct", "all-correct"), ("groups/all_wrong", "all-wrong"),
                       ("groups/diverse", "diverse")):
      axes[2].plot(np.arange(1, n + 1), np.mean([[row[key] for row in r[:n]] for r in rlvr], 0), label=label)
    axes[2].set_title("RLVR: group composition", fontsize=10)
    axes[2].set_xlabel("optimizer step")
    axes[2].legend(fontsize=7)
    axes[2].grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(os.path.join(study.out_dir, "curves.png"), dpi=110)
  plt.close(fig)

  # The setup paragraph is read off the configs the runs used, so it stays true when they change.
  rc = run_config(study.modes[0], study.seeds[0], study)
  ec = eval_config(study, rc.tasks)
  judge = ("the embedded rule-based process judge" if not rc.judge.urls
           else f"the judge at {', '.join(rc.judge.urls)}")
  md = "\n".join([
      "# Reproduction study: every reward mode on the arithmetic testbed",
      "",
      f"Regenerate with `{study.command}` (the study's config: `experiments.study.study_config()`; each run: "
      "`arena_jax.train.config.mode_config(mode)`).",
      f"Every run: the SFT policy of `{study.sft_config}`, {study.num_steps} optimizer steps of "
      f"{rc.rollout.prompts_per_step} prompts × G={rc.rollout.group_size}, the same prompt order, seeds "
      f"{tuple(study.seeds)}, {judge}; runs one after another on this machine. Evaluation: {ec.num_examples} "
      f"held-out problems per benchmark, {'greedy and ' if ec.greedy else ''}{ec.num_samples} samples at "
      f"T={ec.temperature:g} (arithmetic = in distribution; arithmetic_shift = out of distribution, problems no "
      "training problem could be, by default exact division; countdown = a different task).",
      "",
      "## Accuracy (mean ± std over seeds; the paper's Table 1)",
      "",
      "Faithful accuracy: the answer is right and the task's process checker finds every step valid.",
      "",
      table(acc_head, acc_rows),
      "",
      f"## Efficiency (means over runs; relative to `{BASELINE}`, RLVR with dynamic sampling; Table 2, Fig. 5)",
      "",
      table(eff_head, eff_rows),
      "",
      "Sample utilisation: the fraction of trajectories with a non-zero advantage. Wall-clock per step excludes step 1 "
      "(compilation).",
      "",
      "![curves](curves.png)",
      "",
  ])
  with open(os.path.join(study.out_dir, "README.md"), "w", encoding="utf-8") as f:
    f.write(md)
  raw = {m: [{"seed": s["seed"], "eval": s["eval"], "train_s": s["train_s"],
              **{k: v for k, v in r.items() if k != "rows"}} for s, r in per_mode[m]] for m in study.modes}
  with open(os.path.join(study.out_dir, "study.json"), "w", encoding="utf-8") as f:
    json.dump({"config": study.to_dict(), "runs": raw}, f, indent=1, default=list)
  return md
