"""Pairs judged per second through the async client against the embedded judge server.

    python -m benchmarks.judge_throughput [--latency_ms 100] [--concurrency 1,8,64] [--rounds 10]
        [--debias random] [--repeats 3]

The embedded server (a separate process, `judges.EmbeddedJudgeServer`) answers every request after a
fixed injected latency L (100 ms) and judges the pair with the arithmetic process checker. A
`PairwiseJudge` whose client allows c requests in flight judges c × rounds distinct pairs of
arithmetic demonstrations (a clean solution against a demonstration of varied quality); the time
is the median over `repeats` after one warm-up. With latency L nothing can beat the bound c / L
pairs per second, so efficiency = pairs_per_s / bound measures what the client, the server and the
machine's CPUs cost on top (target at c = 64: ≥ 0.8). Client and server share the machine's cores.
The last line is JSON: `pairs_per_s`, `bound` and `efficiency` at the largest concurrency, and
every concurrency under `by_concurrency`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools

from benchmarks import common

from arena_jax import judges  # noqa: E402
from arena_jax import tasks  # noqa: E402


def make_pairs(n: int) -> list[judges.PairRequest]:
  """n distinct pairs: the canonical solution vs a demonstration (clean, slip, skipped, ...)."""
  cfg = tasks.default_config()
  demos = list(itertools.islice(tasks.demonstrations(cfg, "arithmetic", "train"), n))
  return [
    judges.PairRequest(d.prompt, d.example.answer, d.example.solution, d.completion, key=("bench", k))
    for k, d in enumerate(demos)
  ]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--latency_ms", type=float, default=100.0)
  parser.add_argument("--concurrency", default="1,8,64")
  parser.add_argument("--rounds", type=int, default=10, help="pairs per request slot per timed run")
  parser.add_argument("--debias", default="random", choices=judges.DEBIAS_MODES)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)
  levels = [int(c) for c in args.concurrency.split(",")]
  pairs = make_pairs(max(levels) * args.rounds)
  latency_s = args.latency_ms / 1000.0
  config = judges.default_config()
  config.debias = args.debias
  rows, by = [], {}
  with judges.EmbeddedJudgeServer(latency_ms=args.latency_ms) as server:
    loop = asyncio.new_event_loop()
    try:
      for c in levels:
        config.client.concurrency = c
        judge = judges.make_judge(config, [server.url])
        batch = pairs[: c * args.rounds]
        results = []
        run = lambda: results.append(loop.run_until_complete(judge.judge_pairs(batch)))  # noqa: B023
        seconds = common.timed(run, repeats=args.repeats, warmup=1)
        calls = len(batch) * (2 if args.debias == "both" else 1)
        pairs_per_s = len(batch) / seconds
        bound = c / latency_s / (2 if args.debias == "both" else 1)
        failed = sum(not r.ok for r in results[-1])
        stats = judge.client.stats
        rows.append(
          [
            c,
            len(batch),
            calls,
            seconds,
            pairs_per_s,
            bound,
            pairs_per_s / bound,
            failed,
            stats.usage.prompt_tokens // max(stats.usage.calls, 1),
          ]
        )
        by[str(c)] = {
          "pairs": len(batch),
          "seconds": seconds,
          "pairs_per_s": pairs_per_s,
          "bound": bound,
          "efficiency": pairs_per_s / bound,
          "failed": failed,
        }
        loop.run_until_complete(judge.close())
    finally:
      loop.close()
  common.print_table(
    ["concurrency", "pairs", "calls", "seconds", "pairs/s", "bound", "efficiency", "failed", "prompt tok/call"], rows
  )
  top = by[str(max(levels))]
  common.emit_json(
    {
      "benchmark": "judge_throughput",
      "latency_ms": args.latency_ms,
      "debias": args.debias,
      "concurrency": max(levels),
      "pairs_per_s": top["pairs_per_s"],
      "bound": top["bound"],
      "efficiency": top["efficiency"],
      "by_concurrency": by,
    }
  )


if __name__ == "__main__":
  main()
