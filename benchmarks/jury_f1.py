"""Step-level flaw detection of one juror vs a Reasoning Jury of three (SPEC §8).

    python -m benchmarks.jury_f1 [--traces 300] [--miss_rate 0.3] [--false_alarm_rate 0.1]
        [--debate_miss_rate 0.1] [--debate_false_alarm_rate 0.05] [--seed 0]

Traces: arithmetic demonstrations (`tasks.demonstrations`, every kind equally likely: clean, slip,
compensating errors, skipped operations, bare answer, redundant step), so flaws sit at known steps;
the truth of each step is the process checker's (the demonstrations are generated to be what the
checker says they are). The jurors are the embedded judge server in juror mode: each reports the
true flaws except that it misses a flawed step with probability `miss_rate` and flags a clean one
with probability `false_alarm_rate`, its errors drawn from its own seed (decorrelated). In Phase 2
a juror or the consolidator confirms a claim by its own check, missing a real flaw with probability
`debate_miss_rate` and confirming a false one with `debate_false_alarm_rate`.

Rows: a single juror; three jurors with a plain majority vote (no Phase-2 call); consolidation;
deliberation. Reported: step-level TPR, TNR and balanced F1 = 2·TPR·TNR/(TPR + TNR) over every
step (a step is flawed when the checker finds any flaw), ProcessBench-style acc1 / acc2 / F1 on the
earliest error (flaws of impact major or fatal; label = the demonstration's `error_step`), and judge
calls and tokens per trace. The last line is JSON.
"""

from __future__ import annotations

import asyncio
import itertools

from benchmarks import common

from arena_jax import judges  # noqa: E402
from arena_jax import tasks  # noqa: E402

SETUPS = (
  ("one juror", 1, "vote"),
  ("3 jurors, majority vote", 3, "vote"),
  ("3 jurors, consolidation", 3, "consolidation"),
  ("3 jurors, deliberation", 3, "deliberation"),
)


def make_traces(n: int, seed: int):
  cfg = tasks.default_config()
  cfg.sft.seed = seed
  for kind in tasks.DEMO_KINDS:
    cfg.sft.fractions[kind] = 1.0 / len(tasks.DEMO_KINDS)
  demos = list(itertools.islice(tasks.demonstrations(cfg, "arithmetic", "test"), n))
  truth = []
  for d in demos:
    report = tasks.check_arithmetic(d.example.expression, d.example.answer, d.completion)
    truth.append({s.index: s.impact is not None for s in report.steps})
  return demos, truth


async def audit_all(jury: judges.Jury, demos) -> list[judges.JuryVerdict]:
  return list(
    await asyncio.gather(
      *(jury.audit(d.prompt, d.completion, d.example.answer, key=("bench", k)) for k, d in enumerate(demos))
    )
  )


def main(argv=None):
  defaults = {"--traces": 300, "--miss_rate": 0.3, "--false_alarm_rate": 0.1, "--debate_miss_rate": 0.1}
  args = common.parse_flags(__doc__, argv, {**defaults, "--debate_false_alarm_rate": 0.05, "--seed": 0})
  demos, truth = make_traces(args.traces, args.seed)
  labels = [d.error_step for d in demos]
  config = judges.default_config()
  config.seed = args.seed
  knobs = dict(
    miss_rate=args.miss_rate,
    false_alarm_rate=args.false_alarm_rate,
    debate_miss_rate=args.debate_miss_rate,
    debate_false_alarm_rate=args.debate_false_alarm_rate,
  )
  rows, results = [], {}
  with judges.EmbeddedJudgeServer(seed=args.seed, **knobs) as server:
    for name, num_jurors, mode in SETUPS:
      config.jury.num_jurors = num_jurors
      config.jury.mode = mode
      jury = judges.make_jury(config, [server.url])
      verdicts = asyncio.run(_audit_and_close(jury, demos))
      det = judges.step_detection([v.flagged_steps("neutral") for v in verdicts], truth)
      pb = judges.processbench_scores([v.first_error_step("major") for v in verdicts], labels)
      usage = sum((v.usage for v in verdicts), judges.Usage())
      calls, tokens = usage.calls / len(verdicts), usage.total_tokens / len(verdicts)
      failed = sum(not v.ok for v in verdicts)
      rows.append(
        [name, det["tpr"], det["tnr"], det["balanced_f1"], pb["acc1"], pb["acc2"], pb["f1"], calls, tokens, failed]
      )
      results[f"{mode}_{num_jurors}"] = {
        "name": name,
        **{k: det[k] for k in ("tpr", "tnr", "balanced_f1")},
        "processbench": pb,
        "calls_per_trace": calls,
        "tokens_per_trace": tokens,
        "failed": failed,
      }
  flawed = sum(v for t in truth for v in t.values())
  steps = sum(len(t) for t in truth)
  print(
    f"{len(demos)} traces, {steps} steps, {flawed} flawed; juror miss {args.miss_rate}, false alarm "
    f"{args.false_alarm_rate}; Phase-2 miss {args.debate_miss_rate}, false confirm {args.debate_false_alarm_rate}"
  )
  common.print_table(
    ["setup", "TPR", "TNR", "balanced F1", "PB acc1", "PB acc2", "PB F1", "calls/trace", "tokens/trace", "failed"], rows
  )
  common.emit_json(
    {
      "benchmark": "jury_f1",
      "traces": len(demos),
      "steps": steps,
      "flawed_steps": flawed,
      **knobs,
      "balanced_f1": {k: v["balanced_f1"] for k, v in results.items()},
      "calls_per_trace": {k: v["calls_per_trace"] for k, v in results.items()},
      "results": results,
    }
  )


async def _audit_and_close(jury, demos):
  try:
    return await audit_all(jury, demos)
  finally:
    for client in {id(c): c for c in [jury.moderator, *jury.jurors]}.values():
      await client.close()


if __name__ == "__main__":
  main()
