"""`make demo`: the main job on the embedded default, end to end on one CPU machine.

  1. SFT warm start of the tiny policy on synthetic demonstrations (cached: a second run reuses it);
  2. evaluation of the SFT policy on held-out arithmetic;
  3. Reasoning Arena-Live RL (`configs/arith_arena_live.py` by default) against the embedded judge server;
  4. evaluation of the RL policy on the same problems, a table, and a PNG of the training curves.

The configs are arguments: `launch/demo.py` reads them from `configs/` under the repository root.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import time

import ml_collections

from arena_jax.eval import watch
from arena_jax.train import checkpoint_steps, load_policy, train, train_sft

DEMO_EVAL = dict(num_examples=200, num_samples=8, max_new_tokens=96)


def eval_config(tasks_config: ml_collections.ConfigDict, **overrides) -> ml_collections.ConfigDict:
  """The demo's evaluation: held-out arithmetic and its shifted split, `DEMO_EVAL` sizes, the RL run's tasks."""
  c = watch.default_config()
  c.tasks = tasks_config
  c.benchmarks = ("arithmetic", "arithmetic_shift")  # in distribution, and out of it
  for k, v in {**DEMO_EVAL, **overrides}.items():
    c[k] = v
  return c


def run_demo(
  sft_config: ml_collections.ConfigDict,
  rl_config: ml_collections.ConfigDict,
  *,
  root: str = "runs",
  rl_steps: int | None = None,
) -> dict:
  """Runs the demo under `root`; returns the summary it prints (see module docstring).

  Args:
    sft_config: the SFT warm start's config (`configs/sft.py`); its policy goes to `<root>/sft_demo`.
    rl_config: the RL run's config (`configs/arith_arena_live.py`); not modified. The run starts from
      the SFT policy (whatever `rl_config.init` names) on the SFT config's tasks, in
      `<root>/demo_arena_live` (trained afresh every time).
    root: where the SFT policy and the RL run are written.
    rl_steps: RL optimizer steps (default: `rl_config.num_steps`).
  """
  t0 = time.time()
  # ── 1. SFT warm start (cached) ──
  policy_dir = os.path.join(root, "sft_demo")
  print("== 1/4  SFT warm start of the tiny policy (cached after the first run) ==", flush=True)
  sft_summary = train_sft(sft_config, policy_dir)

  # ── 2. the SFT policy's accuracy ──
  rc = copy.deepcopy(rl_config)
  rc.init.policy_dir, rc.init.hf_path, rc.init.random_model = (
    policy_dir,
    "",
    "",
  )  # the SFT policy, whatever rl_config says
  rc.tasks = copy.deepcopy(sft_config.tasks)  # the policy's own tasks: its difficulty, its held-out split
  if rl_steps is not None:
    rc.num_steps = rl_steps
  ec = eval_config(
    rc.tasks.copy_and_resolve_references(), temperature=rc.rollout.temperature, max_new_tokens=rc.rollout.max_new_tokens
  )
  print("== 2/4  evaluating the SFT policy on held-out arithmetic ==", flush=True)
  policy = load_policy(policy_dir)
  before = watch.evaluate_params(policy.model, policy.config, policy.tokenizer, ec, add_bos=policy.add_bos)
  watch.pop_samples(before)  # the table compares metrics; the RL run's samples.jsonl shows what it wrote

  # ── 3. Reasoning Arena-Live RL ──
  workdir = os.path.join(root, "demo_arena_live")
  if os.path.isdir(workdir):  # the demo's own RL run: every `make demo` trains it afresh
    shutil.rmtree(workdir)
  print(
    f"== 3/4  Reasoning Arena-Live RL: {rc.num_steps} steps of {rc.rollout.prompts_per_step} prompts × "
    f"G={rc.rollout.group_size}, embedded judge server ==",
    flush=True,
  )
  rl_summary = train(rc, workdir)

  # ── 4. the RL policy's accuracy ──
  print("== 4/4  evaluating the RL policy on the same problems ==", flush=True)
  step = checkpoint_steps(workdir)[-1]
  after = watch.evaluate_step(workdir, step, ec)
  watch.pop_samples(after)
  summary = {
    "sft": before["arithmetic"],
    "rl": after["arithmetic"],
    "sft_shift": before.get("arithmetic_shift", {}),
    "rl_shift": after.get("arithmetic_shift", {}),
    "rl_steps": step,
    "rl_last": rl_summary.get("last", {}),
    "plot": rl_summary.get("plot"),
    "sft_cached": bool(sft_summary.get("cached")),
    "minutes": (time.time() - t0) / 60,
  }
  print(format_summary(summary, ec))
  with open(os.path.join(workdir, "demo_summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1, default=float)
  return summary


def format_summary(s: dict, ec) -> str:
  """The before/after table `run_demo` prints."""
  rows = [
    ("greedy accuracy", "greedy_accuracy"),
    (f"mean pass ratio@{ec.num_samples} (T={ec.temperature})", "mean_pass_ratio"),
    ("groups all-correct", "frac_all_correct"),
    ("groups all-wrong", "frac_all_wrong"),
    ("groups diverse", "frac_diverse"),
    ("mean response length", "mean_response_length"),
  ]
  width = max(len(r[0]) for r in rows) + 2  # + the indent of the out-of-distribution lines
  lines = ["", f"held-out arithmetic, {ec.num_examples} problems", f"{'':{width}}  {'SFT':>8}  {'after RL':>8}"]
  for label, key in rows:
    a, b = s["sft"].get(key), s["rl"].get(key)
    lines.append(f"{label:{width}}  {a:8.3f}  {b:8.3f}")
  if s.get("sft_shift") and s.get("rl_shift"):
    lines.append("out of distribution (arithmetic_shift):")
    for label, key in rows[:2]:
      lines.append(f"{'  ' + label:{width}}  {s['sft_shift'][key]:8.3f}  {s['rl_shift'][key]:8.3f}")
  last = s["rl_last"]
  if last:
    lines.append("")
    lines.append(
      f"RL: {s['rl_steps']} steps; last step: groups routed to the judge {last.get('groups/routed', 0):.2f}, "
      f"judge calls {last.get('judge/calls', 0)}, judge failures {last.get('judge/failures', 0)}"
    )
  if s.get("plot"):
    lines.append(f"training curves: {s['plot']}")
    # the judge's transcripts of the same run, as HTML (docs/judges.md, "Transcripts and the inspector")
    lines.append(f"what the judge did: python -m launch.inspect --workdir={os.path.dirname(s['plot'])}")
  lines.append(f"total {s['minutes']:.1f} min (SFT {'cached' if s['sft_cached'] else 'trained'})")
  return "\n".join(lines)
