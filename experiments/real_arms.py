"""The real model's four arms: whether a judge's signal reaches a real
policy, and what a real small judge does to it (`launch/real_arms.py`, `make real-arms`; docs/results/real.md).

Every arm starts from SmolLM2-135M-Instruct (`configs/real_smollm2.py`) with the same sizes, seed by seed:

  rlvr        RLVR: non-diverse groups get no signal (the reference of every paired difference)
  checker     Reasoning Arena-Live judged by the embedded process checker (SPEC §3, §4)
  reversed    the same checker with every verdict on pairs that differ in process reversed (`flip_rate = 1`)
  llm_judge   Arena-Live judged by a real LLM: SmolLM2 itself behind `transformers serve`, off the shelf, in the
              `letter` format (`configs/real_smollm2.py:llm_judge`)
  distilled   the same, judged by SmolLM2 distilled from the process checker (`make real-judge`, what `make real`
              uses: `configs/real_smollm2.py:distilled_judge`)
  distilled_reversed  the distilled judge with every verdict reversed (`judge.reverse_verdicts`)

Two runs that share a seed share the starting policy, the prompt order and the sampling key; so do their
evaluations (the same held-out problems and evaluation key). The paired differences against RLVR are taken per
(seed, problem) and their 95% interval is a cluster bootstrap over problems (a problem's differences at every seed
resampled together): with 3 seeds a bootstrap over seeds would be three points, not an interval.

Per arm: held-out accuracy (mean pass ratio, greedy accuracy), the judged property (faithful pass ratio: a right
answer with every step valid, what the checker prefers), and whether the checker reads the real traces (the share of
written equations it parses). Per judged arm, the judge measured as a judge from its transcripts: agreement with
the process checker on the pairs where the checker prefers one trace, position bias (how often the trace shown
first wins), failures by kind and latency.

A finished run leaves `<root>/<arm>_s<seed>/arm_result.json` and is not trained again (delete it to rerun it); the
figures are always recomputed from those files.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import time
from typing import Sequence

import ml_collections
import numpy as np

from arena_jax import judges
from arena_jax import report
from arena_jax import tasks
from arena_jax.errors import ConfigError
from arena_jax.eval import watch
from arena_jax.sampling import accuracy
from arena_jax.train import checkpoint_steps, load_policy, read_metrics, train
from arena_jax.train.config import validate_config
from arena_jax.train.transcripts import read_groups
from configs import real_smollm2
from experiments import real

ARMS = ("rlvr", "checker", "reversed", "llm_judge", "distilled", "distilled_reversed")
REFERENCE = "rlvr"
JUDGED = ("checker", "reversed", "llm_judge", "distilled", "distilled_reversed")

# The sizes that fit 4 arms × 3 seeds into about an hour of this 2-core CPU (fewer prompts, a smaller G and fewer
# steps than the preset's). lr is 10× the preset's: at the preset's 1e-6 three steps move nothing at all.
SIZES = dict(num_steps=3, prompts_per_step=4, group_size=4, max_new_tokens=128, lr=1e-5, warmup_steps=1)
EVAL = dict(num_examples=40, num_samples=4)
# The checker's penalty weights (the embedded judge's defaults, `judges.server_config()`), for agreement.
SKIP_WEIGHT, ANSWER_WEIGHT = 0.5, 1.0
_UNPARSED = "an equation that cannot be parsed"


def arm_config(arm: str, seed: int, sizes: dict | None = None) -> ml_collections.ConfigDict:
  """The RL config of one (arm, seed): the real preset at `sizes` (module docstring)."""
  if arm not in ARMS:
    raise ValueError(f"unknown arm {arm!r}; arms are {', '.join(ARMS)}")
  s = {**SIZES, **(sizes or {})}
  judge = {"llm_judge": "llm_judge", "distilled": "distilled_judge", "distilled_reversed": "distilled_judge"}
  c = real_smollm2.get_config(judge.get(arm))
  c.seed = seed
  c.data_seed = 0  # every arm and seed sees the same prompts in the same order
  c.num_steps = s["num_steps"]
  c.rollout.prompts_per_step = s["prompts_per_step"]
  c.rollout.group_size = s["group_size"]
  c.rollout.max_new_tokens = s["max_new_tokens"]
  c.optim.lr = s["lr"]
  c.optim.warmup_steps = s["warmup_steps"]
  c.optim.micro_batches = max(1, c.rollout.prompts_per_step * c.rollout.group_size // 8)  # 8 rows a slice
  c.checkpoint.every = c.num_steps
  c.log.progress = False
  c.log.tensorboard = False
  c.log.plot = False
  if arm == "rlvr":
    c.reward.mode = "rlvr"
  if arm == "reversed":
    c.judge.server.flip_rate = 1.0
  if arm == "distilled_reversed":
    c.judge.reverse_verdicts = True
  return c


def problem_figures(details: dict, task) -> dict:
  """Per held-out problem: pass ratio, faithful pass ratio (right and every step valid), greedy right; and the
  equations the checker parses over all samples (the checker's reading of the real traces)."""
  examples, completions = details["examples"], details["completions"]
  rewards = np.asarray(details["rewards"], np.float64)
  n = rewards.shape[1]
  faithful = np.zeros_like(rewards)
  equations = parsed = traces_with_equation = 0
  for e, example in enumerate(examples):
    for k in range(n):
      report = task.check_process(example, completions[e * n + k])
      faithful[e, k] = rewards[e, k] > 0.5 and report.num_invalid == 0
      eq = [s for s in report.steps if "=" in s.text]
      equations += len(eq)
      parsed += sum(not s.note.startswith(_UNPARSED) for s in eq)
      traces_with_equation += bool(eq)
  return {
    "pass_ratio": rewards.mean(1).tolist(),
    "faithful": faithful.mean(1).tolist(),
    "greedy": np.asarray(details.get("greedy_rewards", np.zeros(len(examples))), np.float64).tolist(),
    "equations": equations,
    "equations_parsed": parsed,
    "traces_with_equation": traces_with_equation / max(rewards.size, 1),
  }


def _evaluate(ec, *, workdir: str | None = None, start: str | None = None, weight_dtype="float32") -> dict:
  if workdir is not None:
    results = watch.evaluate_step(workdir, checkpoint_steps(workdir)[-1], ec, keep_details=True)
  else:
    policy = load_policy(start, weight_dtype=weight_dtype, dtype=weight_dtype)
    results = watch.evaluate_params(
      policy.model, policy.config, policy.tokenizer, ec, add_bos=policy.add_bos, keep_details=True
    )
  details = watch.pop_details(results)["arithmetic"]
  watch.pop_samples(results)
  with tasks.get_task("arithmetic", ec.tasks) as task:
    return {"metrics": results["arithmetic"], "problems": problem_figures(details, task)}


def judge_measures(workdir: str) -> dict:
  """The judge as a judge, from a run's transcripts (module docstring): calls, failures by kind, latency, position
  bias, and agreement with the process checker on the pairs where its penalties differ."""
  calls = failures = first_wins = answered = 0
  kinds: collections.Counter = collections.Counter()
  latency: list[float] = []
  agree: list[float] = []
  pairs = 0
  for rec in read_groups(workdir):
    example, traces = rec.get("example") or {}, rec.get("traces") or []
    expression, reference = example.get("expression"), example.get("answer")
    penalty = {}
    for m in rec.get("matches") or []:
      pairs += 1
      for call in m.get("calls") or []:
        if call.get("cached"):
          continue
        calls += 1
        if call.get("latency_s") is not None:
          latency.append(float(call["latency_s"]))
        if call.get("failure_reason"):
          failures += 1
          kinds[call["failure_reason"]] += 1
        elif call.get("verdict_shown") in ("A", "B"):
          answered += 1
          first_wins += call["verdict_shown"] == "A"
      if m.get("failure_reason") or m.get("outcome") is None or not expression:
        continue
      for t in (m["i"], m["j"]):
        if t not in penalty:
          r = tasks.check_arithmetic(expression, reference, traces[t])
          penalty[t] = (
            r.num_invalid + r.num_irrelevant + SKIP_WEIGHT * r.num_skipped + ANSWER_WEIGHT * (not r.answer_correct)
          )
      pi, pj = penalty[m["i"]], penalty[m["j"]]
      if pi != pj:  # the checker prefers one trace: the outcome's weight on it (½ = a tie, no agreement either way)
        outcome = float(m["outcome"])  # P(trace i beats trace j)
        agree.append(outcome if pi < pj else 1.0 - outcome)
  out = {
    "pairs": pairs,
    "calls": calls,
    "failures": failures,
    "failure_rate": failures / calls if calls else None,
    "failures_by_kind": dict(kinds),
    "first_shown_wins": first_wins / answered if answered else None,
    "answered": answered,
    "latency_median_s": float(np.median(latency)) if latency else None,
    "latency_p90_s": float(np.quantile(latency, 0.9)) if latency else None,
    "checker_pairs": len(agree),
  }
  if agree:
    a = np.asarray(agree)
    out["agreement_with_checker"] = float(a.mean())
    if len(a) > 1:
      rng = np.random.default_rng(0)
      means = a[rng.integers(0, len(a), size=(10_000, len(a)))].mean(1)
      out["agreement_lo95"], out["agreement_hi95"] = (float(q) for q in np.quantile(means, [0.025, 0.975]))
  return out


# Each verdict format of the real judge on the same pairs (`measure_formats`): how many stored calls each replays, and
# the reasoned format's answer budget (SmolLM2 never writes its `[[A]]`; it loops until the budget is spent, and a
# call of 2,048 tokens takes minutes on this CPU).
FORMAT_CALLS = {"letter": 64, "reasoned": 16, "logprobs": 64}
REASONED_MAX_TOKENS = 256


def measure_formats(workdir: str, calls: dict | None = None) -> dict:
  """The real judge (SmolLM2 behind `transformers serve`) in each verdict format, on the same pairs: the process
  checker's stored calls of the run in `workdir` (a `checker` arm) replayed in the order shown (`report.rescore`).

  Per format: agreement with the checker's verdicts (first / tie / second) and Cohen's κ, the first-shown win rate
  (position bias), failures by kind, median latency; or, for a format the server cannot serve, the one-line error of
  its start-up check (`transformers serve` returns no logprobs).
  """
  calls = {**FORMAT_CALLS, **(calls or {})}
  base = arm_config("llm_judge", 0).judge
  out = {}
  for fmt, n in calls.items():
    c = base.copy_and_resolve_references()
    c.verdict_format = fmt
    if fmt == "reasoned":
      c.max_tokens = REASONED_MAX_TOKENS
    t0 = time.time()
    try:
      with judges.judge_endpoints(c) as urls:
        s = report.rescore(workdir, c, urls, max_calls=n).summary()
    except ConfigError as e:  # the start-up check's one line: a format this server cannot serve
      out[fmt] = {"error": str(e).splitlines()[0], "seconds": time.time() - t0}
      continue
    compared = s["compared"]
    if compared:
      s["agreement_lo95"], s["agreement_hi95"] = accuracy.wilson_interval(s["agreement"] * compared, compared)
    s["seconds"] = time.time() - t0
    s["max_tokens"] = c.max_tokens
    out[fmt] = s
  return out


def run_arm(arm: str, seed: int, root: str, ec, sizes: dict | None = None) -> dict:
  """Trains and evaluates one (arm, seed) under `<root>/<arm>_s<seed>`, or reads its finished result."""
  workdir = os.path.join(root, f"{arm}_s{seed}")
  done = os.path.join(workdir, "arm_result.json")
  if os.path.exists(done):
    with open(done, encoding="utf-8") as f:
      result = json.load(f)
    if arm in JUDGED:  # the judge's measures are read afresh from the transcripts
      result["judge"] = judge_measures(workdir)
    return result
  if os.path.isdir(workdir):  # an interrupted run: trained afresh
    shutil.rmtree(workdir)
  c = arm_config(arm, seed, sizes)
  validate_config(c)
  real_smollm2.check_distilled_judge(c.judge)
  t0 = time.time()
  summary = train(c, workdir)
  train_s = time.time() - t0
  result = {
    "arm": arm,
    "seed": seed,
    **_evaluate(ec, workdir=workdir),
    "train_s": train_s,
    "judge_run": real.judge_summary(read_metrics(workdir), c.rollout.prompts_per_step),
    "judge": judge_measures(workdir) if arm in JUDGED else None,
    "final_step": summary.get("step"),
  }
  with open(done, "w", encoding="utf-8") as f:
    json.dump(result, f, default=float)
  return result


def cluster_bootstrap(diff: np.ndarray, *, num_resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
  """(mean, lo, hi) of paired differences [seeds, problems]: problems resampled with replacement, each with its
  differences at every seed (the problems are the sampled units; a problem's seeds are not independent of it)."""
  d = np.asarray(diff, np.float64)
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, d.shape[1], size=(num_resamples, d.shape[1]))
  means = d[:, idx].mean(axis=(0, 2))
  lo, hi = np.quantile(means, [0.025, 0.975])
  return float(d.mean()), float(lo), float(hi)


def analyse(before: dict, results: Sequence[dict]) -> dict:
  """The arms' figures: means over seeds, paired differences against RLVR with intervals, the checker's parse share,
  and the judges' own measures pooled over seeds."""
  by_arm: dict[str, dict[int, dict]] = collections.defaultdict(dict)
  for r in results:
    by_arm[r["arm"]][r["seed"]] = r
  out = {"before": _arm_means([before]), "arms": {}}
  ref = by_arm.get(REFERENCE, {})
  for arm in [a for a in ARMS if a in by_arm]:
    runs = by_arm[arm]
    row = {"seeds": sorted(runs), **_arm_means(list(runs.values()))}
    seeds = sorted(set(runs) & set(ref))
    if arm != REFERENCE and seeds:
      for key in ("pass_ratio", "faithful", "greedy"):
        diff = np.asarray([runs[s]["problems"][key] for s in seeds]) - np.asarray(
          [ref[s]["problems"][key] for s in seeds]
        )
        row[f"d_{key}"] = cluster_bootstrap(diff)
        row[f"d_{key}_per_seed"] = diff.mean(1).tolist()
    if arm in JUDGED:
      row["judge"] = _pool_judge([r["judge"] for r in runs.values() if r.get("judge")])
      row["judge_run"] = {
        k: float(np.mean([r["judge_run"][k] or 0.0 for r in runs.values()]))
        for k in ("judged_fraction", "judge_wait_share", "pairs_per_s")
      }
    row["train_min"] = float(np.mean([r["train_s"] for r in runs.values()]) / 60)
    out["arms"][arm] = row
  return out


def _arm_means(runs: Sequence[dict]) -> dict:
  p = [r["problems"] for r in runs]
  eq = sum(x["equations"] for x in p)
  return {
    "pass_ratio": float(np.mean([np.mean(x["pass_ratio"]) for x in p])),
    "faithful": float(np.mean([np.mean(x["faithful"]) for x in p])),
    "greedy": float(np.mean([np.mean(x["greedy"]) for x in p])),
    "checker_parse_share": sum(x["equations_parsed"] for x in p) / eq if eq else None,
    "traces_with_equation": float(np.mean([x["traces_with_equation"] for x in p])),
  }


def _pool_judge(measures: Sequence[dict]) -> dict:
  calls = sum(m["calls"] for m in measures)
  answered = sum(m["answered"] for m in measures)
  kinds: collections.Counter = collections.Counter()
  for m in measures:
    kinds.update(m["failures_by_kind"])
  checker = sum(m["checker_pairs"] for m in measures)
  agreement = [m["agreement_with_checker"] * m["checker_pairs"] for m in measures if m["checker_pairs"]]
  return {
    "calls": calls,
    "failure_rate": sum(m["failures"] for m in measures) / calls if calls else None,
    "failures_by_kind": dict(kinds),
    "first_shown_wins": (sum((m["first_shown_wins"] or 0) * m["answered"] for m in measures) / answered)
    if answered
    else None,
    "latency_median_s": float(np.median([m["latency_median_s"] for m in measures if m["latency_median_s"]]))
    if any(m["latency_median_s"] for m in measures)
    else None,
    "checker_pairs": checker,
    "agreement_with_checker": sum(agreement) / checker if checker else None,
    "agreement_intervals": [
      (m.get("agreement_lo95"), m.get("agreement_hi95")) for m in measures if m.get("agreement_lo95") is not None
    ],
  }


def format_table(a: dict, sizes: dict, ec) -> str:
  """The readable table `run_arms` prints before its JSON line."""

  def d(row, key):
    if f"d_{key}" not in row:
      return "—"
    m, lo, hi = row[f"d_{key}"]
    return f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"

  lines = [
    f"held-out arithmetic, {ec.num_examples} problems × {ec.num_samples} samples at T={ec.temperature}; RL "
    f"{sizes['num_steps']} steps of {sizes['prompts_per_step']} prompts × G={sizes['group_size']}, lr {sizes['lr']:g}",
    f"{'arm':<10} {'seeds':<7} {'pass ratio':>10} {'Δ vs RLVR [95%]':>24} {'faithful':>9} {'Δ faithful [95%]':>24} "
    f"{'parsed':>7}",
  ]
  b = a["before"]
  lines.append(
    f"{'before':<10} {'':<7} {b['pass_ratio']:>10.3f} {'':>24} {b['faithful']:>9.3f} {'':>24} "
    f"{b['checker_parse_share'] or 0:>7.2f}"
  )
  for arm, row in a["arms"].items():
    lines.append(
      f"{arm:<10} {len(row['seeds']):<7} {row['pass_ratio']:>10.3f} {d(row, 'pass_ratio'):>24} {row['faithful']:>9.3f} "
      f"{d(row, 'faithful'):>24} {row['checker_parse_share'] or 0:>7.2f}"
    )
  lines.append("")
  lines.append(f"{'judge':<10} {'calls':>6} {'agree w/ checker':>17} {'first wins':>11} {'failures':>9} {'latency':>8}")
  for arm, row in a["arms"].items():
    j = row.get("judge")
    if not j:
      continue
    agree = (
      f"{j['agreement_with_checker']:.2f} ({j['checker_pairs']})" if j["agreement_with_checker"] is not None else "—"
    )
    first = f"{j['first_shown_wins']:.2f}" if j["first_shown_wins"] is not None else "—"
    fail = f"{j['failure_rate']:.2f}" if j["failure_rate"] is not None else "—"
    lat = f"{j['latency_median_s']:.2f}s" if j["latency_median_s"] is not None else "—"
    lines.append(f"{arm:<10} {j['calls']:>6} {agree:>17} {first:>11} {fail:>9} {lat:>8}")
  if a.get("formats"):
    lines += ["", "the real judge's verdict formats on the checker's stored pairs (agreement with the checker, κ):"]
    for fmt, f in a["formats"].items():
      if "error" in f:
        lines.append(f"  {fmt:<9} not served: {f['error']}")
        continue
      agree = f"{f['agreement']:.2f} [{f['agreement_lo95']:.2f}, {f['agreement_hi95']:.2f}]" if f["compared"] else "—"
      kappa = f"{f['kappa']:+.2f}" if f["kappa"] is not None else "—"
      first = f"{f['first_shown_rate']['rescore']}" if f["first_shown_rate"]["rescore"] is not None else "—"
      lines.append(
        f"  {fmt:<9} {f['calls']} calls, {f['compared']} answered: agreement {agree}, κ {kappa}, first shown wins "
        f"{first}, failures {f['rescore_failures_by_kind'] or 'none'}, median {f['rescore_latency_median_s']}s"
      )
  return "\n".join(lines)


def run_arms(
  *,
  arms: Sequence[str] = ARMS,
  seeds: Sequence[int] = (0, 1, 2),
  root: str = "runs/real_arms",
  sizes: dict | None = None,
  eval_overrides: dict | None = None,
  formats: bool = True,
) -> dict:
  """Runs (or reads) every (arm, seed), seed by seed so that a stopped run leaves whole seeds; with `formats`, the
  real judge's verdict formats on the first seed's checker pairs (`measure_formats`, once: `<root>/formats.json`);
  prints the table and returns the figures (`analyse`), also written to `<root>/arms.json`."""
  for arm in arms:
    if arm not in ARMS:
      raise ValueError(f"unknown arm {arm!r}; arms are {', '.join(ARMS)}")
  if REFERENCE not in arms:
    raise ValueError(f"the arms must include {REFERENCE!r}: every difference is paired against it")
  sizes = {**SIZES, **(sizes or {})}
  for arm in arms:  # a bad size stops here, in one line, before anything is evaluated or trained
    validate_config(arm_config(arm, seeds[0], sizes))
  os.makedirs(root, exist_ok=True)
  base = arm_config(REFERENCE, 0, sizes)
  ec = real.eval_config(base, **{**EVAL, **(eval_overrides or {})})
  before_path = os.path.join(root, "before.json")
  if os.path.exists(before_path):
    with open(before_path, encoding="utf-8") as f:
      before = json.load(f)
  else:
    print(f"== before: {ec.num_examples} held-out problems ==", flush=True)
    before = _evaluate(ec, start=base.init.hf_path, weight_dtype=base.model.weight_dtype)
    with open(before_path, "w", encoding="utf-8") as f:
      json.dump(before, f, default=float)
  results = []
  for seed in seeds:
    for arm in arms:
      t0 = time.time()
      print(f"== {arm}, seed {seed} ==", flush=True)
      results.append(run_arm(arm, seed, root, ec, sizes))
      print(f"   {arm} seed {seed}: {(time.time() - t0) / 60:.1f} min", flush=True)
  figures = analyse(before, results)
  if formats and "checker" in arms:
    path = os.path.join(root, "formats.json")
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        figures["formats"] = json.load(f)
    else:
      print("== the real judge's verdict formats on the checker's pairs ==", flush=True)
      figures["formats"] = measure_formats(os.path.join(root, f"checker_s{seeds[0]}"))
      with open(path, "w", encoding="utf-8") as f:
        json.dump(figures["formats"], f, default=float)
  figures["sizes"] = sizes
  figures["eval"] = {"num_examples": ec.num_examples, "num_samples": ec.num_samples, "temperature": ec.temperature}
  with open(os.path.join(root, "arms.json"), "w", encoding="utf-8") as f:
    json.dump(figures, f, indent=1, default=float)
  print(format_table(figures, sizes, ec))
  print(json.dumps(figures, default=float))
  return figures


__all__ = [
  "ARMS",
  "analyse",
  "arm_config",
  "cluster_bootstrap",
  "judge_measures",
  "measure_formats",
  "run_arm",
  "run_arms",
]
