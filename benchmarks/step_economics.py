"""The step economics of the reward modes on this machine (the paper's Table 2).

    python -m benchmarks.step_economics [--warmup 2] [--measure 4] [--max_staleness 2] [--prompts 8]
        [--group_size 8] [--max_new_tokens 96] [--latency_fraction 0.25] [--p99_factor 2]
        [--target_gen_fraction 0.8] [--project_tokens 8192] [--policy_dir runs/sft_demo]
        [--modes rlvr,rlvr_dapo,rlaif,arena,arena_live,...]

Every mode runs the same number of RL steps from the same SFT policy (`make demo` writes it) on the
same prompts, against the embedded judge in reasoning style with a served LLM's latency: each call's
latency is lognormal with a median of `latency_fraction` × RLVR's measured wall time per step (RLVR runs
first, without a judge) and a 99th percentile `p99_factor` times that, and the server has enough slots
for every group's round robin to run in one round (so a blocking live tournament, G − 1 rounds deep,
is several RLVR steps long). `arena_live` runs three ways: judging after the step is generated (the
default `lockstep.live_start = "step_done"`), `group_done` and `speculative` (`arena_live_group_done`,
`arena_live_speculative`), and speculative with pipelined opponent choice (`arena_live_pipelined`,
`reward.live_pipelined`).

**Steps and warm-up.** Each run has `warmup + measure + 1` steps: the first `warmup` (W, default 2) are
never measured, rows `[W : W + measure]` of metrics.jsonl are, and the last step, which drains the pipeline
(its row holds no next step's generation), is not either. `--steps` is derived; it is still accepted, and
must then equal W + measure + 1 (an error otherwise). The sampler compiles one decode program per
compaction row bucket on first use, so a bucket first reached in a later step would compile inside a
measured step: before any measured run, throwaway `rlvr` runs as long as a measured one, lock-step and
asynchronous (untimed; their duration is printed), fill jax's persistent compilation cache (a temp
directory) and the in-process program cache with every bucket the measured runs reach on the same prompts,
and every run's first W steps absorb what is left. The figures are means over the measured rows (a step's
cost is the run's time over its steps; a median would hide the steps that wait for a judge, which a
blocking live tournament several steps long makes every other step or so).

**Devices.** The process sees the machine as 2 CPU devices (`--xla_force_host_platform_device_count=2`
unless XLA_FLAGS sets a count). XLA runs the programs of one device one after another, and of two devices at
once: the lock-step rows use both devices for every stage (fsdp = 2); the async rows put the sampler on
`--sample_devices` of them (default 1, `mesh.sample_devices`) and the update on the rest, as a pod would put
them on disjoint chips, so the sampler decodes while the update runs. The same cores either way.

**Async rows.** For rlvr, rlvr_dapo, arena_live and arena_live_pipelined (each when in `--modes`; the last
with `live_start = group_done`, as the asynchronous loop judges a group once it has finished) the same config
also runs with `rollout.max_staleness = K` (`--max_staleness`, default 2; 0 runs no async rows): the
asynchronous loop, in which the sampler runs ahead of the trainer by up to K updates, rows `<name>_async`. In
that loop a step's `gen/trajectories` counts the samples it trained and those discarded since the previous
step (DAPO's non-diverse groups): what the step cost in generation. Its DAPO keeps surplus diverse groups for
the next step, where the lock-step DAPO truncates them. Where the config has no `rollout.max_staleness`
(before the async loop exists) the async rows are skipped with a printed note. Each async row's JSON also
holds `max_staleness_seen`: the largest `staleness/max` over all of that run's rows, warm-up included.

Per mode: wall per step and its ratio to `rlvr` and `rlvr_dapo`, generations per step, judge calls per
routed group, how long the update waited for the judge (`time/judge_wait`), how long the judge still
worked after the step was generated (`time/judge_after_gen`), calls wasted (speculation) and matches
late (none: no deadline is set).

**Targets** (JSON `targets`, printed with the bounds below; None where a row is missing):

    arena_live_async_vs_lockstep     wall(arena_live_async) / wall(arena_live)                ≤ 0.85
    arena_live_async_vs_rlvr_async   wall(arena_live_async) / wall(rlvr_async)                ≤ 1.0
    arena_live_vs_dapo_generations   generations(arena_live_async) / generations(rlvr_dapo_async)   ≤ 0.6

**The projections** (JSON `projection`, a CPU-scaled one, and `projection_8b`, the paper's 8B policy on a
TPU slice; both "projected, not measured"): arithmetic on the measured figures, described and computed in
benchmarks/step_economics_projection.py. The last line is JSON.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

# The machine's cores as 2 CPU devices (unless the caller chose a count): programs on one device run one after
# another, on two devices at once, so the async rows can sample on one while the update runs on the other
# (`mesh.sample_devices`), as a pod samples and trains on disjoint chips; every lock-step row uses both for every
# stage (fsdp = 2). Before jax is imported.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()

import jax  # noqa: E402
from absl import logging  # noqa: E402

from arena_jax.train import read_metrics, train  # noqa: E402
from configs.common import DEFAULT_POLICY_DIR, mode_config  # noqa: E402
from benchmarks.step_economics_projection import (  # noqa: E402
  ASYNC_SUFFIX,
  PAPER_GENERATIONS_VS_DAPO,
  PAPER_REFERENCE,
  PAPER_WALL_VS_DAPO,
  TARGETS,
  TPU_CHIPS,
  TPU_DECODE_TOK_S_CHIP,
  TPU_PROMPT_TOKENS,
  TPU_ROLLOUTS_PER_STEP,
  TPU_SLICE,
  TPU_TRAIN_TOK_S_CHIP,
  cpu_projection,
  is_async,
  projection_8b,
  ratio,
  target_figures,
  verdict,
)

# (row name, reward mode, reward overrides)
RUNS = (
  ("rlvr", "rlvr", {}),
  ("rlvr_dapo", "rlvr_dapo", {}),
  ("rlaif", "rlaif", {}),
  ("arena", "arena", {}),
  ("arena_live", "arena_live", {}),
  ("arena_live_group_done", "arena_live", {"live_start": "group_done"}),
  ("arena_live_speculative", "arena_live", {"live_start": "speculative"}),
  ("arena_live_pipelined", "arena_live", {"live_start": "speculative", "live_pipelined": True}),
)
# Rows that also run in the asynchronous loop (`rollout.max_staleness = K`), as `<name>_async`. The loop judges a
# group once its last member finished (`group_done`): a speculative row runs so there.
ASYNC_RUNS = ("rlvr", "rlvr_dapo", "arena_live", "arena_live_pipelined")


def steps_for(warmup: int, measure: int) -> int:
  """Steps per run: W warm-up steps, `measure` measured ones and the last, draining step."""
  return warmup + measure + 1


def run_config(args, mode: str, reward: dict, latency_s: float, *, steps: int | None = None, max_staleness: int = 0):
  """The demo testbed shrunk to `args`, with the embedded judge's latency model; `max_staleness` > 0 sets
  `rollout.max_staleness` (AttributeError where the config has no such field)."""
  c = mode_config(mode, **{k: v for k, v in reward.items() if k != "live_start"})
  if "live_start" in reward:  # a row's live_start is the lock-step loop's (`lockstep.live_start`)
    c.lockstep.live_start = reward["live_start"]
  steps = steps_for(args.warmup, args.measure) if steps is None else steps
  c.init.policy_dir = args.policy_dir
  c.num_steps = steps
  c.checkpoint.every = steps
  c.log.progress = c.log.tensorboard = c.log.plot = False
  c.rollout.update(dict(prompts_per_step=args.prompts, group_size=args.group_size, max_new_tokens=args.max_new_tokens))
  if max_staleness:
    # The config is not locked: assigning an unknown field would add it silently, and train it lock-step.
    if "max_staleness" not in c.rollout:
      raise AttributeError("the config has no rollout.max_staleness (no asynchronous loop in this checkout)")
    c.rollout.max_staleness = max_staleness
    n = getattr(args, "sample_devices", 0)
    if n and "sample_devices" in c.mesh and jax.device_count() > n:
      c.mesh.sample_devices = n  # the sampler on its own device(s), the update on the rest
  c.reward.max_gen_batches = 16
  s = c.judge.server
  s.style, s.truncate_rate = "reasoning", 0.0  # a reasoning judge's answers, none cut (no failures to count)
  s.latency_ms = 1000.0 * latency_s
  s.latency_p99_ms = 1000.0 * latency_s * args.p99_factor
  # Slots for every group's round robin at once; the client may keep them all busy.
  s.slots = c.judge.client.concurrency = args.prompts * args.group_size * (args.group_size - 1) // 2
  c.judge.client.timeout_s = c.judge.client.deadline_s = max(600.0, 20 * latency_s * args.p99_factor)
  return c


def summarize(rows: list[dict], warmup: int, measure: int) -> dict:
  """A run's figures from its metrics rows: means over rows [warmup : warmup + measure] (a step's cost is the
  run's time over its steps: a median would hide the steps that waited for a judge, which blocking live
  tournaments do every other step or so);
  `max_staleness_seen` over all rows (None where no row has `staleness/max`)."""
  if len(rows) < steps_for(warmup, measure):
    raise RuntimeError(
      f"{len(rows)} metrics rows, expected {steps_for(warmup, measure)} (= {warmup} warm-up + {measure} measured "
      "+ the last, draining step)"
    )
  staleness = [r["staleness/max"] for r in rows if "staleness/max" in r]
  rows = rows[warmup : warmup + measure]
  mean = lambda k: statistics.fmean(r.get(k, 0.0) for r in rows)
  routed = sum(r.get("judge/groups", 0) for r in rows)
  return {
    "wall_s": mean("time/wall"),
    "sample_s": mean("time/sample"),
    "verify_s": mean("time/verify"),
    "update_s": mean("time/update"),
    "judge_wait_s": mean("time/judge_wait"),
    "bt_fit_s": mean("time/bt_fit"),
    "judge_after_gen_s": mean("time/judge_after_gen"),
    "generations": mean("gen/trajectories"),
    "calls_per_routed_group": sum(r.get("judge/calls", 0) for r in rows) / routed if routed else 0.0,
    "calls_wasted": mean("judge/calls_wasted"),
    "matches_late": mean("judge/matches_late"),
    "groups_judged_early": mean("gen/groups_judged_early"),
    "accuracy": mean("accuracy"),
    "batches": mean("gen/batches"),
    "max_staleness_seen": int(max(staleness)) if staleness else None,
  }


def measure(args, mode: str, reward: dict, latency_s: float, max_staleness: int = 0) -> dict:
  with tempfile.TemporaryDirectory() as workdir:
    train(run_config(args, mode, reward, latency_s, max_staleness=max_staleness), workdir)
    return summarize(read_metrics(workdir), args.warmup, args.measure)


def warm_up(args, max_staleness: int) -> float:
  """Untimed throwaway `rlvr` runs as long as a measured one, lock-step and (with `--max_staleness`) asynchronous:
  they compile the decode programs of the compaction row buckets every measured run reaches on the same prompts
  (a shorter one left the buckets of the later steps to compile inside measured steps), the asynchronous loop's
  segment programs and the rest, into the persistent and in-process caches. Returns their duration in seconds."""
  t0 = time.perf_counter()
  for k in sorted({0, max_staleness}):
    with tempfile.TemporaryDirectory() as workdir:
      train(run_config(args, "rlvr", {}, 0.0, max_staleness=k), workdir)
  return time.perf_counter() - t0


def _rounded(x, digits: int = 4):
  if isinstance(x, float):
    return round(x, digits)
  if isinstance(x, dict):
    return {k: _rounded(v, digits) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_rounded(v, digits) for v in x]
  return x


def _dash(x):
  return "-" if x is None else x


def use_compilation_cache() -> None:
  """Later runs reuse the programs earlier runs compiled (the same shapes); only unmeasured steps compile."""
  jax.config.update("jax_compilation_cache_dir", os.path.join(tempfile.gettempdir(), "arena_jax_step_economics"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument(
    "--steps",
    type=int,
    default=None,
    help="derived: warmup + measure + 1 (the last step drains the pipeline); if given, it must equal that",
  )
  p.add_argument(
    "--sample_devices",
    type=int,
    default=1,
    help="async rows: CPU devices of the sampler (mesh.sample_devices; the update gets the rest); 0 = shared",
  )
  p.add_argument("--warmup", type=int, default=2, help="steps at the start of each run that are never measured")
  p.add_argument("--measure", type=int, default=4, help="steps measured, after the warm-up and before the last one")
  p.add_argument(
    "--max_staleness",
    type=int,
    default=2,
    help="rollout.max_staleness K of the <name>_async rows (rlvr, rlvr_dapo, arena_live); 0: no async rows",
  )
  p.add_argument("--prompts", type=int, default=8)
  p.add_argument("--group_size", type=int, default=8)
  p.add_argument("--max_new_tokens", type=int, default=96)
  p.add_argument("--latency_fraction", type=float, default=0.25, help="judge median latency / RLVR wall per step")
  p.add_argument("--p99_factor", type=float, default=2.0)
  p.add_argument("--target_gen_fraction", type=float, default=0.8)
  p.add_argument(
    "--project_tokens", type=int, default=8192, help="new tokens per generation in the 8B projection (mean)"
  )
  p.add_argument("--policy_dir", default=DEFAULT_POLICY_DIR)
  p.add_argument("--modes", default=",".join(r[0] for r in RUNS))
  args = p.parse_args(argv)
  if args.warmup < 0 or args.measure < 1 or args.max_staleness < 0 or args.project_tokens < 1:
    p.error("--warmup ≥ 0, --measure ≥ 1, --max_staleness ≥ 0 and --project_tokens ≥ 1")
  derived = steps_for(args.warmup, args.measure)
  if args.steps is not None and args.steps != derived:
    p.error(
      f"--steps {args.steps} ≠ --warmup {args.warmup} + --measure {args.measure} + 1 (the last step drains the "
      f"pipeline) = {derived}: the steps are derived; drop --steps or set --warmup / --measure"
    )
  args.steps = derived
  if not os.path.isdir(args.policy_dir):
    p.error(
      f"--policy_dir {args.policy_dir!r} does not exist: run `make demo` (it writes the SFT policy) or "
      "pass --policy_dir"
    )
  unknown = set(args.modes.split(",")) - {r[0] for r in RUNS}
  if unknown:
    p.error(
      f"unknown --modes {sorted(unknown)}; choose from {[r[0] for r in RUNS]} (async rows follow --max_staleness)"
    )
  return args


def main(argv=None):
  args = parse_args(argv)
  wanted = args.modes.split(",")
  logging.set_verbosity(logging.WARNING)
  use_compilation_cache()

  # Which rows run, in order: rlvr first (it calibrates the judge's latency), each async row after its own.
  K = args.max_staleness
  async_note = None
  if K:
    try:
      run_config(args, "rlvr", {}, 0.0, max_staleness=K)
    except Exception as e:  # pylint: disable=broad-except  (whatever the checkout's config says, skip the rows)
      async_note = f"async rows skipped: rollout.max_staleness = {K} cannot be set ({type(e).__name__}: {e})"
      K = 0
  plan = []
  for name, mode, reward in RUNS:
    if name == "rlvr" or name in wanted:
      plan.append((name, mode, reward, 0))
      if K and name in ASYNC_RUNS and name in wanted:
        speculative = reward.get("live_start") == "speculative"
        plan.append((name + ASYNC_SUFFIX, mode, {**reward, "live_start": "group_done"} if speculative else reward, K))
  if async_note:
    print(async_note, flush=True)
  elif not K:
    print("async rows skipped: --max_staleness 0", flush=True)
  elif args.warmup < K:
    print(f"note: --warmup {args.warmup} < max_staleness {K}: measured async steps may include the pipeline's filling")

  warm_s = warm_up(args, K)
  print(
    f"warm-up: unmeasured rlvr runs of {steps_for(args.warmup, args.measure)} steps (lock-step"
    f"{' and max_staleness ' + str(K) if K else ''}) filled the compilation caches (the decode program of each "
    f"compaction row bucket the measured runs reach, and the rest) in {warm_s:.1f} s",
    flush=True,
  )
  results = {"rlvr": measure(args, "rlvr", {}, 0.0)}  # calibrates the judge's latency
  latency_s = args.latency_fraction * results["rlvr"]["wall_s"]
  print(
    f"judge latency: median {latency_s:.3f} s (= {args.latency_fraction} × RLVR's {results['rlvr']['wall_s']:.3f} "
    f"s per step), p99 {latency_s * args.p99_factor:.3f} s",
    flush=True,
  )
  for name, mode, reward, k_stale in plan:
    if name == "rlvr":
      continue
    results[name] = measure(args, mode, reward, latency_s, max_staleness=k_stale)
    seen = results[name]["max_staleness_seen"]
    print(
      f"  {name}: {results[name]['wall_s']:.3f} s per step"
      + (f", max staleness seen {_dash(seen)} (K = {k_stale})" if k_stale else ""),
      flush=True,
    )

  rlvr, dapo = results["rlvr"], results.get("rlvr_dapo")
  gen_fraction = dapo["sample_s"] / dapo["wall_s"] if dapo else None
  k, s, projected = cpu_projection(results, args.target_gen_fraction)  # lock-step rows
  p_vs = lambda name, ref_name: ratio(projected[name], projected.get(ref_name))

  headers = [
    "mode",
    "wall s",
    "vs rlvr",
    "vs dapo",
    "gens/step",
    "sample s",
    "update s",
    "bt fit s",
    "judge wait s",
    "judge after gen s",
    "calls/routed group",
    "calls wasted",
    "late",
    "judged early",
    "max stale",
    "proj. vs rlvr",
    "proj. vs dapo",
  ]
  table, figures = [], {}
  for name, m in results.items():
    vs_dapo = ratio(m["wall_s"], dapo and dapo["wall_s"])
    table.append(
      [
        name,
        m["wall_s"],
        m["wall_s"] / rlvr["wall_s"],
        _dash(vs_dapo),
        m["generations"],
        m["sample_s"],
        m["update_s"],
        m["bt_fit_s"],
        m["judge_wait_s"],
        m["judge_after_gen_s"],
        m["calls_per_routed_group"],
        m["calls_wasted"],
        m["matches_late"],
        m["groups_judged_early"],
        _dash(m["max_staleness_seen"]) if is_async(name) else "-",
        _dash(p_vs(name, "rlvr")),
        _dash(p_vs(name, "rlvr_dapo")),
      ]
    )
    figures[name] = {
      "wall_s": round(m["wall_s"], 4),
      "wall_vs_rlvr": round(m["wall_s"] / rlvr["wall_s"], 4),
      "wall_vs_dapo": None if vs_dapo is None else round(vs_dapo, 4),
      "generations_per_step": m["generations"],
      "judge_wait_s": round(m["judge_wait_s"], 4),
      "judge_after_gen_s": round(m["judge_after_gen_s"], 4),
      "calls_per_routed_group": round(m["calls_per_routed_group"], 3),
      "calls_wasted": m["calls_wasted"],
      "matches_late": m["matches_late"],
    }
    if is_async(name):
      figures[name]["max_staleness_seen"] = m["max_staleness_seen"]
  print(
    f"\nstep economics: {args.prompts} prompts × G = {args.group_size}, {args.max_new_tokens} new tokens, "
    f"{args.steps} steps per run ({args.warmup} warm-up steps excluded, {args.measure} measured, the last one "
    f"excluded), judge latency {latency_s:.3f} s median" + (f"; *_async rows: rollout.max_staleness = {K}" if K else "")
  )
  common.print_table(headers, table)
  print(
    f"(means over rows [{args.warmup} : {args.warmup + args.measure}] of each run: the first {args.warmup} "
    "warm-up steps and the last, draining step are not measured)"
  )
  if gen_fraction is not None:
    print(
      f"\ngeneration is {gen_fraction:.1%} of a DAPO step here. PROJECTION (arithmetic on the measured "
      f"components, not a measurement; lock-step rows): a generation batch = {k:.1f} × RLVR's, so that generation "
      f"is {args.target_gen_fraction:.0%} of a DAPO step; the judge's latency scaled with RLVR's step (× {s:.2f})."
    )

  targets = target_figures(
    {n: m["wall_s"] for n, m in results.items()}, {n: m["generations"] for n, m in results.items()}
  )
  print("\ntargets (measured):")
  for key, bound, what in TARGETS:
    v = targets[key]
    print(f"  {key} = {what}: {'-' if v is None else f'{v:.3f}'} (target ≤ {bound}): {verdict(v, bound)}")

  proj8 = projection_8b(results, measured_rollouts=args.prompts * args.group_size, new_tokens=args.project_tokens)
  print(
    f"\n8B PROJECTION (projected, not measured): {TPU_SLICE} ({TPU_CHIPS} chips; roofline of docs/tpu.md: train "
    f"{TPU_TRAIN_TOK_S_CHIP:,.0f}, decode {TPU_DECODE_TOK_S_CHIP:,.0f} tok/s per chip), {TPU_ROLLOUTS_PER_STEP} "
    f"rollouts per step, {TPU_PROMPT_TOKENS} + {args.project_tokens} tokens each; the judge's wait × "
    f"{proj8['judge_scale']:.1f} (RLVR's step). Paper, Table 2 (Arena against DAPO): {PAPER_REFERENCE}"
  )
  p_headers = [
    "mode",
    "loop",
    "gens/step",
    "sample s",
    "update s",
    "judge wait s",
    "wall s",
    "vs rlvr_dapo",
    "gens vs rlvr_dapo",
    "vs same-loop dapo",
    "gens vs same-loop dapo",
    "paper vs dapo",
  ]
  p_table = []
  for name, p in proj8["modes"].items():
    p_table.append(
      [
        name,
        f"async K={K}" if is_async(name) else "lock-step",
        p["generations"],
        p["sample_s"],
        p["update_s"],
        p["judge_wait_s"],
        p["wall_s"],
        _dash(p["wall_vs_dapo"]),
        _dash(p["generations_vs_dapo"]),
        _dash(p["wall_vs_dapo_same_loop"]),
        _dash(p["generations_vs_dapo_same_loop"]),
        f"{PAPER_WALL_VS_DAPO[0]}–{PAPER_WALL_VS_DAPO[1]}×, ~{PAPER_GENERATIONS_VS_DAPO}× gens"
        if name.startswith("arena")
        else "-",
      ]
    )
  common.print_table(p_headers, p_table)
  targets_8b = target_figures(
    {n: p["wall_s"] for n, p in proj8["modes"].items()}, {n: p["generations"] for n, p in proj8["modes"].items()}
  )
  print("targets (projected at 8B, not measured):")
  for key, bound, _ in TARGETS:
    v = targets_8b[key]
    print(f"  {key}: {'-' if v is None else f'{v:.3f}'} (target ≤ {bound}): {verdict(v, bound)}")

  common.emit_json(
    {
      "benchmark": "step_economics",
      "warmup_steps": args.warmup,
      "measured_steps": args.measure,
      "steps_per_run": args.steps,
      "warmup_run_s": round(warm_s, 2),
      "max_staleness": K,
      "async_note": async_note,
      "generation_fraction_dapo": None if gen_fraction is None else round(gen_fraction, 4),
      "judge_latency_s": round(latency_s, 4),
      "modes": figures,
      "targets": _rounded(targets),
      "target_bounds": {key: bound for key, bound, _ in TARGETS},
      "projection": {
        "label": "projected, not measured",
        "target_gen_fraction": args.target_gen_fraction,
        "sample_scale": round(k, 3),
        "judge_latency_scale": round(s, 3),
        "modes": {
          name: {"wall_vs_rlvr": _rounded(p_vs(name, "rlvr")), "wall_vs_dapo": _rounded(p_vs(name, "rlvr_dapo"))}
          for name in results
        },
      },
      "projection_8b": {
        "label": "projected, not measured",
        "slice": TPU_SLICE,
        "source": "docs/tpu.md, The long-trace slices: aot_compile configs/real_ministral3_8b.py:v5p:2x2x2:16k",
        "constants": {
          "chips": TPU_CHIPS,
          "train_tok_s_chip": TPU_TRAIN_TOK_S_CHIP,
          "decode_tok_s_chip": TPU_DECODE_TOK_S_CHIP,
          "rollouts_per_step": TPU_ROLLOUTS_PER_STEP,
          "prompt_tokens": TPU_PROMPT_TOKENS,
          "new_tokens": args.project_tokens,
        },
        "judge_scale": _rounded(proj8["judge_scale"], 2),
        "paper_reference": {
          "text": PAPER_REFERENCE,
          "wall_vs_dapo": list(PAPER_WALL_VS_DAPO),
          "generations_vs_dapo": PAPER_GENERATIONS_VS_DAPO,
        },
        "modes": _rounded(proj8["modes"]),
        "targets": _rounded(targets_8b),
      },
    }
  )


if __name__ == "__main__":
  main()
