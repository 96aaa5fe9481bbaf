"""The step economics of the reward modes on this machine (the paper's Table 2; issue 14).

    python -m benchmarks.step_economics [--steps 6] [--measure 3] [--prompts 8] [--group_size 8]
        [--max_new_tokens 96] [--latency_fraction 0.25] [--p99_factor 2] [--target_gen_fraction 0.8]
        [--policy_dir runs/sft_demo] [--modes rlvr,rlvr_dapo,rlaif,arena,arena_live,...]

Every mode runs the same number of RL steps from the same SFT policy (`make demo` writes it) on the
same prompts, against the embedded judge in reasoning style with a served LLM's latency: each call's
latency is lognormal with a median of `latency_fraction` × RLVR's measured wall time per step (RLVR runs
first, without a judge) and a 99th percentile `p99_factor` times that, and the server has enough slots
for every group's round robin to run in one round (so a blocking live tournament, G − 1 rounds deep,
is several RLVR steps long). `arena_live` runs three ways: judging after the step is generated (the
default `reward.live_start = "step_done"`), `group_done` and `speculative` (`arena_live_group_done`,
`arena_live_speculative`), and speculative with pipelined opponent choice (`arena_live_pipelined`,
`reward.live_pipelined`). The first steps (compilation) are not measured; the figures are medians
(means for counts) over `measure` steps before the last one (which drains the pipeline: its row holds
no next step's generation), so each measured row is one steady-state step: a generation and an update.

Per mode: wall per step and its ratio to `rlvr` and `rlvr_dapo`, generations per step, judge calls per
routed group, how long the update waited for the judge (`time/judge_wait`), how long the judge still
worked after the step was generated (`time/judge_after_gen`), calls wasted (speculation) and matches
late (none: no deadline is set).

On this CPU the update dominates a step, unlike the paper's regime where generation does. So besides
the measured figures it prints a PROJECTION, labelled as such: the same measured components with one
generation batch costing k × RLVR's measured sampling time, k chosen so that generation is
`target_gen_fraction` of a DAPO step (which generates more batches), the judge's latency
kept at `latency_fraction` of the (projected) RLVR step, and the judge's remaining work after
generation hidden behind the next step's generation (async lag 1) as far as that lasts:

    wall' = k·b·sample₁ + verify + update + bt_fit + max(0, judge_after_gen · s − k·b·sample₁)

with sample₁ RLVR's sampling time of one batch, b the mode's generation batches per step, k the
sampling scale and s = RLVR's projected / measured wall. It is arithmetic on measured figures, not a
measurement, and conservative for group_done / speculative (their judging would start earlier inside a
longer generation; only the measured time after generation is used). The last line is JSON.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import jax  # noqa: E402
from absl import logging  # noqa: E402

from arena_jax.train import read_metrics, train  # noqa: E402
from configs.common import DEFAULT_POLICY_DIR, mode_config  # noqa: E402

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


def run_config(args, mode: str, reward: dict, latency_s: float):
  """The demo testbed shrunk to `args`, with the embedded judge's latency model."""
  c = mode_config(mode, **reward)
  c.init.policy_dir = args.policy_dir
  c.num_steps = args.steps
  c.checkpoint.every = args.steps
  c.log.progress = c.log.tensorboard = c.log.plot = False
  c.rollout.update(dict(prompts_per_step=args.prompts, group_size=args.group_size, max_new_tokens=args.max_new_tokens))
  c.reward.max_gen_batches = 16
  s = c.judge.server
  s.style, s.truncate_rate = "reasoning", 0.0  # a reasoning judge's answers, none cut (no failures to count)
  s.latency_ms = 1000.0 * latency_s
  s.latency_p99_ms = 1000.0 * latency_s * args.p99_factor
  # Slots for every group's round robin at once; the client may keep them all busy.
  s.slots = c.judge.client.concurrency = args.prompts * args.group_size * (args.group_size - 1) // 2
  c.judge.client.timeout_s = c.judge.client.deadline_s = max(600.0, 20 * latency_s * args.p99_factor)
  return c


def measure(args, mode: str, reward: dict, latency_s: float) -> dict:
  with tempfile.TemporaryDirectory() as workdir:
    train(run_config(args, mode, reward, latency_s), workdir)
    # Steady state: not the first steps (compilation) nor the last one, which drains the pipeline (its
    # row holds no next step's generation).
    rows = read_metrics(workdir)[-args.measure - 1 : -1]
  med = lambda k: statistics.median(r.get(k, 0.0) for r in rows)
  mean = lambda k: statistics.fmean(r.get(k, 0.0) for r in rows)
  routed = sum(r.get("judge/groups", 0) for r in rows)
  return {
    "wall_s": med("time/wall"),
    "sample_s": med("time/sample"),
    "verify_s": med("time/verify"),
    "update_s": med("time/update"),
    "judge_wait_s": med("time/judge_wait"),
    "bt_fit_s": med("time/bt_fit"),
    "judge_after_gen_s": med("time/judge_after_gen"),
    "generations": mean("gen/trajectories"),
    "calls_per_routed_group": sum(r.get("judge/calls", 0) for r in rows) / routed if routed else 0.0,
    "calls_wasted": mean("judge/calls_wasted"),
    "matches_late": mean("judge/matches_late"),
    "groups_judged_early": mean("gen/groups_judged_early"),
    "accuracy": mean("accuracy"),
    "batches": mean("gen/batches"),
  }


def project(m: dict, per_batch: float, k: float, s: float) -> float:
  """The projected wall per step (see module docstring)."""
  sample = k * per_batch * m["batches"]
  return sample + m["verify_s"] + m["update_s"] + m["bt_fit_s"] + max(0.0, m["judge_after_gen_s"] * s - sample)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--steps", type=int, default=6)
  p.add_argument("--measure", type=int, default=3, help="steps measured, before the last one")
  p.add_argument("--prompts", type=int, default=8)
  p.add_argument("--group_size", type=int, default=8)
  p.add_argument("--max_new_tokens", type=int, default=96)
  p.add_argument("--latency_fraction", type=float, default=0.25, help="judge median latency / RLVR wall per step")
  p.add_argument("--p99_factor", type=float, default=2.0)
  p.add_argument("--target_gen_fraction", type=float, default=0.8)
  p.add_argument("--policy_dir", default=DEFAULT_POLICY_DIR)
  p.add_argument("--modes", default=",".join(r[0] for r in RUNS))
  args = p.parse_args(argv)
  if args.measure > args.steps - 2:
    p.error("--measure ≤ steps − 2: the first step compiles and the last one drains the pipeline")
  if not os.path.isdir(args.policy_dir):
    p.error(
      f"--policy_dir {args.policy_dir!r} does not exist: run `make demo` (it writes the SFT policy) or "
      "pass --policy_dir"
    )
  wanted = args.modes.split(",")
  unknown = set(wanted) - {r[0] for r in RUNS} - {"rlvr"}
  if unknown:
    p.error(f"unknown --modes {sorted(unknown)}; choose from {[r[0] for r in RUNS]}")
  logging.set_verbosity(logging.WARNING)
  # Later runs reuse the programs earlier runs compiled (the same shapes); only unmeasured steps compile.
  jax.config.update("jax_compilation_cache_dir", os.path.join(tempfile.gettempdir(), "arena_jax_step_economics"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

  results = {"rlvr": measure(args, "rlvr", {}, 0.0)}  # calibrates the judge's latency
  latency_s = args.latency_fraction * results["rlvr"]["wall_s"]
  print(
    f"judge latency: median {latency_s:.3f} s (= {args.latency_fraction} × RLVR's {results['rlvr']['wall_s']:.3f} "
    f"s per step), p99 {latency_s * args.p99_factor:.3f} s",
    flush=True,
  )
  for name, mode, reward in RUNS:
    if name != "rlvr" and name in wanted:
      results[name] = measure(args, mode, reward, latency_s)
      print(f"  {name}: {results[name]['wall_s']:.3f} s per step", flush=True)

  rlvr, dapo = results["rlvr"], results.get("rlvr_dapo")
  gen_fraction = dapo["sample_s"] / dapo["wall_s"] if dapo else None
  # Projection: one generation batch costs RLVR's measured sampling time (the steadiest estimate on a
  # shared machine) × k, k chosen so that generation is target_gen_fraction of a DAPO step.
  ref = dapo or rlvr
  per_batch = rlvr["sample_s"] / rlvr["batches"]
  rest = ref["wall_s"] - ref["sample_s"]
  # (≥ 1: where generation already dominates, nothing is projected)
  k = max(1.0, args.target_gen_fraction * rest / ((1 - args.target_gen_fraction) * per_batch * ref["batches"]))
  s = project(rlvr, per_batch, k, 1.0) / rlvr["wall_s"]
  projected = {name: project(m, per_batch, k, s) for name, m in results.items()}

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
    "proj. vs rlvr",
    "proj. vs dapo",
  ]
  table, figures = [], {}
  for name, m in results.items():
    vs_dapo = m["wall_s"] / dapo["wall_s"] if dapo else None
    p_dapo = projected[name] / projected["rlvr_dapo"] if dapo else None
    table.append(
      [
        name,
        m["wall_s"],
        m["wall_s"] / rlvr["wall_s"],
        vs_dapo if vs_dapo is not None else "-",
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
        projected[name] / projected["rlvr"],
        p_dapo if p_dapo is not None else "-",
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
  print(
    f"\nstep economics: {args.prompts} prompts × G = {args.group_size}, {args.max_new_tokens} new tokens, "
    f"{args.steps} steps ({args.measure} measured), judge latency {latency_s:.3f} s median"
  )
  common.print_table(headers, table)
  if gen_fraction is not None:
    print(
      f"\ngeneration is {gen_fraction:.1%} of a DAPO step here. PROJECTION (arithmetic on the measured "
      f"components, not a measurement): a generation batch = {k:.1f} × RLVR's, so that generation is "
      f"{args.target_gen_fraction:.0%} of a DAPO step; the judge's latency scaled with RLVR's step (× {s:.2f})."
    )
  common.emit_json(
    {
      "benchmark": "step_economics",
      "generation_fraction_dapo": None if gen_fraction is None else round(gen_fraction, 4),
      "judge_latency_s": round(latency_s, 4),
      "modes": figures,
      "projection": {
        "label": "projected, not measured",
        "target_gen_fraction": args.target_gen_fraction,
        "sample_scale": round(k, 3),
        "judge_latency_scale": round(s, 3),
        "modes": {
          name: {
            "wall_vs_rlvr": round(projected[name] / projected["rlvr"], 4),
            "wall_vs_dapo": (round(projected[name] / projected["rlvr_dapo"], 4) if dapo else None),
          }
          for name in results
        },
      },
    }
  )


if __name__ == "__main__":
  main()
