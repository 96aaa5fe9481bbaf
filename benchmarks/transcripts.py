"""What judge transcripts (`judge.transcripts`) cost the training step, and their size on disk.

    python -m benchmarks.transcripts [--steps 8] [--rounds 2] [--groups 8] [--group-size 8] [--tokens 64]

End to end: the tiny arena_live config (random policy, embedded judge) with a verifier that never
rewards, so every group is routed to the judge (the worst case: every group's tournament is written),
trains `--steps` steps with transcripts off and on, alternately, `--rounds` times each in this process
after one warm-up run (compilation). The step time is the median of `time/wall` (wall-clock between
optimizer steps) over the steps after the first two of each run; the ratio on / off is the overhead.

Writer: the writer thread's time per group row (the trace hygiene that builds a row from a finished
tournament, then serialising, compressing, writing), measured on the last "on" run's rows, its share of
a step (all groups routed), and the rows' compressed size.

The last line is JSON: step_s_off, step_s_on, ratio_on_off, each run's median step time (their spread
within one setting is the machine's noise: a ratio inside it measures nothing), calls_per_step,
kib_per_call (compressed),
writer_ms_per_group, writer_share_of_step, and the sizes.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from benchmarks import common  # sets JAX_PLATFORMS=cpu before jax loads

from arena_jax import judges  # pylint: disable=g-bad-import-order
from arena_jax import tasks
from arena_jax.train import read_groups, read_metrics, train
from arena_jax.train import transcripts as tr
from configs.common import mode_config


def _config(args, data_dir: str, transcripts: float, steps: int):
  c = mode_config("arena_live", "smoke")
  c.tasks.data_dir = data_dir
  c.num_steps = steps
  c.checkpoint.every = steps
  c.rollout.prompts_per_step, c.rollout.group_size = args.groups, args.group_size
  c.rollout.max_new_tokens = args.tokens
  c.judge.transcripts = transcripts
  return c


def _run(args, root: str, data_dir: str, name: str, transcripts: float, steps: int) -> tuple[str, list[dict]]:
  workdir = os.path.join(root, name)
  train(_config(args, data_dir, transcripts, steps), workdir)
  return workdir, read_metrics(workdir)


def main(argv=None) -> dict:
  args = common.parse_flags(
    __doc__, argv, {"--steps": 8, "--rounds": 2, "--groups": 8, "--group-size": 8, "--tokens": 64}
  )
  tasks.ArithmeticTask.verify = lambda self, example, completion: 0.0  # every group all-wrong: all routed
  root = tempfile.mkdtemp(prefix="bench_transcripts_")
  data_dir = os.path.join(root, "data")
  _run(args, root, data_dir, "warmup", 0.0, 2)
  walls = {"off": [], "on": []}
  per_run = {"off": [], "on": []}  # each run's median: the spread between runs of one setting is the noise
  calls = []
  on_dir = None
  for k in range(args.rounds):
    for name, fraction in (("off", 0.0), ("on", 1.0)) if k % 2 == 0 else (("on", 1.0), ("off", 0.0)):
      workdir, rows = _run(args, root, data_dir, f"{name}{k}", fraction, args.steps)
      walls[name] += [r["time/wall"] for r in rows[2:]]
      per_run[name].append(round(statistics.median(r["time/wall"] for r in rows[2:]), 3))
      calls += [r["judge/calls"] for r in rows]
      on_dir = workdir if name == "on" else on_dir

  # The writer thread's cost per group row: the trace hygiene that builds a row (as `pairwise_group_row`
  # does), then serialising, compressing and writing the last run's rows again.
  groups = list(read_groups(on_dir))
  judge = judges.make_judge(_config(args, data_dir, 1.0, 1).judge, ["http://127.0.0.1:9"])  # never called
  t0 = time.perf_counter()
  for g in groups:
    judge.clean_context(g["problem"], g["reference"])
    [judge.clean(t) for t in g["traces"]]
  hygiene_s = time.perf_counter() - t0
  writer = tr.TranscriptWriter(os.path.join(root, "rewrite"), fraction=1.0)
  t0 = time.perf_counter()
  for g in groups:
    writer.put(g)
  writer.close()
  writer_s = time.perf_counter() - t0 + hygiene_s
  files = tr._parts(tr.transcripts_dir(on_dir))  # pylint: disable=protected-access
  size = sum(os.path.getsize(f) for f in files)
  n_calls = sum(len(c["calls"]) for g in groups for c in g["matches"])

  off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
  figures = {
    "step_s_off": round(off, 4),
    "step_s_on": round(on, 4),
    "ratio_on_off": round(on / off, 3),
    "run_medians_off": per_run["off"],
    "run_medians_on": per_run["on"],
    "steps_measured": len(walls["on"]),
    "calls_per_step": round(statistics.mean(calls), 1),
    "groups_written": len(groups),
    "kib_per_call": round(size / 1024 / max(n_calls, 1), 3),
    "mib_per_1000_steps": round(size / 1024**2 / args.steps * 1000, 1),
    "writer_ms_per_group": round(1000 * writer_s / max(len(groups), 1), 3),
    # the writer thread's work per step as a share of the step (it runs beside training, not in its path)
    "writer_share_of_step": round(writer_s / max(len(groups), 1) * args.groups / off, 5),
    "shape": {"groups": args.groups, "group_size": args.group_size, "tokens": args.tokens},
  }
  common.print_table(
    ["transcripts", "median step (s)", "ratio to off"], [["off", off, 1.0], ["on (all)", on, on / off]]
  )
  print(
    f"{figures['calls_per_step']} judge calls per step; {figures['kib_per_call']} KiB per call compressed; "
    f"writer thread {figures['writer_ms_per_group']} ms per group row"
  )
  common.emit_json(figures)
  return figures


if __name__ == "__main__":
  main()
