"""`make real`: the first real run, end to end on one CPU machine.

  1. the policy: SmolLM2-135M-Instruct from the pinned wheel (`configs/real_smollm2.py`): an instruct model,
     so no SFT (a config that names an SFT policy directory has it trained first, once);
  2. its accuracy on held-out arithmetic of the run's difficulty (greedy and mean pass ratio, 95% intervals);
  3. Reasoning Arena-Live RL on it, its reward-non-diverse groups judged by a real LLM judge: `transformers serve`
     of the same model distilled into a judge by `make real-judge` (`configs/real_smollm2.py:distilled_judge`; the
     model off the shelf with `:llm_judge`), started and stopped by the run (`judge.serve`), asked for one letter
     in both orders;
  4. the RL policy on the same problems; a before/after table with what the judge did (the groups it judged, its
     failures by kind, its pairs/s, the share of the wall time spent waiting for it); `curves.png` and the
     inspector's pages.

The configs are arguments: `launch/real.py` reads `configs/real_smollm2.py:distilled_judge` by default.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import shutil
import time

import ml_collections

from arena_jax.eval import watch
from arena_jax.report import inspector
from arena_jax.train import checkpoint_steps, load_policy, read_metrics, train, train_sft
from arena_jax.train.config import validate_config
from configs import real_smollm2

REAL_EVAL = dict(num_examples=40, num_samples=8)  # the baseline's size (docs/results/real_model.md)


def eval_config(run_config: ml_collections.ConfigDict, **overrides) -> ml_collections.ConfigDict:
  """The held-out evaluation: the run's arithmetic (its test split), at the run's temperature and length."""
  c = watch.default_config()
  c.tasks = run_config.tasks.copy_and_resolve_references()
  c.benchmarks = ("arithmetic",)
  c.temperature = run_config.rollout.temperature
  c.max_new_tokens = run_config.rollout.max_new_tokens
  for k, v in {**REAL_EVAL, **overrides}.items():
    c[k] = v
  return c


def run_real(
  config: ml_collections.ConfigDict,
  *,
  root: str = "runs",
  steps: int | None = None,
  sft_config: ml_collections.ConfigDict | None = None,
  eval_overrides: dict | None = None,
) -> dict:
  """Runs the real run under `root` (module docstring); returns the summary it prints.

  Args:
    config: the RL run's config (`configs/real_smollm2.py:distilled_judge`); not modified.
    root: where the run (`<root>/real_arena_live`, trained afresh) and any SFT policy are written.
    steps: RL optimizer steps (default: `config.num_steps`).
    sft_config: trained first when `config.init.policy_dir` names a directory that holds no policy yet.
    eval_overrides: fields of the held-out evaluation's config (`REAL_EVAL`).
  """
  t0 = time.time()
  rc = copy.deepcopy(config)
  if steps is not None:
    rc.num_steps = steps
  validate_config(rc)  # a bad field stops here, in one line, before a model is loaded or a server started
  real_smollm2.check_distilled_judge(rc.judge)  # `make real-judge` first, named
  ec = eval_config(rc, **(eval_overrides or {}))

  # ── 1. the starting policy: SFT only when the config asks for a policy that is not there ──
  start = rc.init.policy_dir or rc.init.hf_path
  if rc.init.policy_dir and not os.path.isdir(rc.init.policy_dir):
    if sft_config is None:
      raise ValueError(f"config.init.policy_dir={rc.init.policy_dir!r} does not exist and no SFT config was given")
    print(f"== 1/4  SFT warm start into {rc.init.policy_dir} ==", flush=True)
    train_sft(sft_config, rc.init.policy_dir)
  else:
    print(f"== 1/4  no SFT: the run starts from {start} ==", flush=True)

  # ── 2. before ──
  print(f"== 2/4  evaluating the starting policy on {ec.num_examples} held-out problems ==", flush=True)
  policy = load_policy(start, weight_dtype=rc.model.weight_dtype, dtype=rc.model.dtype)
  before = watch.evaluate_params(policy.model, policy.config, policy.tokenizer, ec, add_bos=policy.add_bos)
  watch.pop_samples(before)
  del policy

  # ── 3. Reasoning Arena-Live RL against the judge ──
  workdir = os.path.join(root, "real_arena_live")
  if os.path.isdir(workdir):  # trained afresh every time
    shutil.rmtree(workdir)
  j = rc.judge
  judge = (
    f"{j.serve_model} behind transformers serve ({j.verdict_format}, debias {j.debias})"
    if j.serve == "transformers" and not j.urls
    else ("the embedded judge" if not j.urls else ", ".join(j.urls))
  )
  print(
    f"== 3/4  Reasoning Arena-Live RL: {rc.num_steps} steps of {rc.rollout.prompts_per_step} prompts × "
    f"G={rc.rollout.group_size}, judge: {judge} ==",
    flush=True,
  )
  t_rl = time.time()
  rl_summary = train(rc, workdir)
  rl_s = time.time() - t_rl

  # ── 4. after ──
  print("== 4/4  evaluating the RL policy on the same problems ==", flush=True)
  step = checkpoint_steps(workdir)[-1]
  after = watch.evaluate_step(workdir, step, ec)
  watch.pop_samples(after)
  report = inspector.write_report(workdir)
  summary = {
    "before": before["arithmetic"],
    "after": after["arithmetic"],
    "rl_steps": step,
    "rl_seconds": rl_s,
    "judge": judge_summary(read_metrics(workdir), rc.rollout.prompts_per_step),
    "plot": rl_summary.get("plot"),
    "inspector": report.run_page,
    "minutes": (time.time() - t0) / 60,
  }
  print(format_summary(summary, ec))
  with open(os.path.join(workdir, "real_summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1, default=float)
  return summary


def judge_summary(rows: list[dict], groups_per_step: int) -> dict:
  """What the judge did over the run's steps: groups judged of those generated, calls, failures by kind, its
  pairs/s while it worked, the generation's tokens/s, and the share of the wall time the loop waited for it."""
  total = lambda key: sum(float(r.get(key, 0) or 0) for r in rows)  # noqa: E731
  failures = collections.Counter()
  for r in rows:
    for key, value in r.items():
      if key.startswith("judge/failed/") and value:
        failures[key.split("/", 2)[2]] += int(value)
  groups = groups_per_step * len(rows) or None
  judged = total("judge/groups")
  busy = total("time/judge") or None
  return {
    "groups_judged": int(judged),
    "judged_fraction": judged / groups if groups else None,
    "routed_fraction": total("groups/routed") / max(len(rows), 1),
    "calls": int(total("judge/calls")),
    "failures": int(total("judge/failures")),
    "failures_by_kind": dict(failures),
    "pairs_per_s": total("judge/calls") / busy if busy else None,
    "tokens_per_s": total("gen/tokens") / max(total("time/sample"), 1e-9),
    "judge_wait_share": total("time/judge_wait") / max(total("time/wall"), 1e-9),
    "wall_s": total("time/wall"),
  }


def _interval(r: dict, key: str) -> str:
  lo, hi = r.get(f"{key}_lo95"), r.get(f"{key}_hi95")
  return f"{r[key]:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else f"{r[key]:.3f}"


def format_summary(s: dict, ec) -> str:
  """The before/after table `run_real` prints."""
  rows = [
    ("greedy accuracy", "greedy_accuracy"),
    (f"mean pass ratio@{ec.num_samples} (T={ec.temperature})", "mean_pass_ratio"),
  ]
  width = max(len(r[0]) for r in rows)
  lines = [
    "",
    f"held-out arithmetic, {ec.num_examples} problems (95% intervals)",
    f"{'':{width}}  {'before':>22}  {'after RL':>22}",
  ]
  for label, key in rows:
    lines.append(f"{label:{width}}  {_interval(s['before'], key):>22}  {_interval(s['after'], key):>22}")
  j = s["judge"]
  fraction = f"{j['judged_fraction']:.2f}" if j["judged_fraction"] is not None else "?"
  kinds = ", ".join(f"{k} {v}" for k, v in sorted(j["failures_by_kind"].items())) or "none"
  pairs = f"{j['pairs_per_s']:.2f}" if j["pairs_per_s"] else "?"
  lines += [
    "",
    f"RL: {s['rl_steps']} steps in {s['rl_seconds'] / 60:.1f} min; generation {j['tokens_per_s']:.0f} tokens/s",
    f"judge: {j['groups_judged']} groups judged (a fraction {fraction} of all groups), {j['calls']} calls, "
    f"{pairs} calls/s while judging; failures {j['failures']} ({kinds})",
    f"time waiting for the judge: {100 * j['judge_wait_share']:.0f}% of the RL wall time",
  ]
  if s.get("plot"):
    lines.append(f"training curves: {s['plot']}")
  if s.get("inspector"):
    lines.append(f"what the judge said, pair by pair: {s['inspector']}")
  lines.append(f"total {s['minutes']:.1f} min")
  return "\n".join(lines)
