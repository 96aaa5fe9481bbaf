"""The study's runner (`make reproduce`): trains and evaluates every (run group, seed) of the grid one after another,
skipping those a restart finds finished with the same setup."""

from __future__ import annotations

import json
import os
import shutil
import time

from arena_jax.errors import WorkdirError
from arena_jax.eval import watch
from arena_jax.train import train, train_sft
from experiments import load_config
from experiments.study.grid import check_study, eval_config, run_config, run_setup, variants


def run_study(study) -> dict:
  """Trains and evaluates every (run group, seed) not yet done; returns {"<group>/seed<s>": summary}."""
  check_study(study)
  train_sft(load_config(study.sft_config), study.sft_dir)  # cached when it exists with this config
  runs = {}
  # Seed by seed, every run group of a seed before the next seed: a study stopped half-way leaves paired runs.
  for seed in study.seeds:
    for group, (mode_name, accuracy) in variants(study).items():
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
      ec = eval_config(study, c.tasks)
      # The held-out curve: every `eval_every` steps on `curve_benchmarks`, then the final evaluation on every
      # benchmark, on the same problems and sampling key for every run group.
      curve_ec = ec.copy_and_resolve_references()
      curve_ec.benchmarks = tuple(study.curve_benchmarks)
      steps = range(study.eval_every, c.num_steps + 1, study.eval_every) if study.eval_every else [c.num_steps]
      curve = []
      for step in steps:
        results = watch.evaluate_step(workdir, step, ec if step == c.num_steps else curve_ec)
        watch.pop_samples(results)  # study.json keeps metrics; the runs' samples.jsonl keep completions
        curve.append({"step": step, "eval": results})
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
      if study.eval_every:
        summary["curve"] = curve
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
