"""Soak: a long RL run through a faulty judge, a judge crash and a trainer crash, losing nothing.

    python -m benchmarks.soak [--steps 200] [--every 20] [--seed 0] [--workdir DIR] [--style reasoning]

The tiny arena_live config (`configs/arith_arena_live.py:smoke`, 4 groups × 4 samples) trains for
`--steps` RL steps with `python -m launch.train`, against an embedded judge server (its own process,
`python -m launch.serve_judge`) that injects this fault mix on every request:

  10% HTTP 5xx (500 / 503), 5% HTTP 429 with Retry-After, 5% hangs far past the client timeout,
  5% well-formed answers with no verdict in them, and 5% hostile answers (`judges/embedded/hostile.py`): a 200
  whose fields have the wrong types, a 429 / 503 with a Retry-After that is no usable number, a 1 MiB
  answer, a gzip bomb that inflates to 1 MiB, JSON nested 100,000 deep (the client reads at most
  256 KiB, `judge.client.max_response_bytes`),

and, at a random point in the first third of the run, the judge server is SIGKILLed and started again on
the same port a few steps later; at a random point in the middle of the run the trainer itself is
SIGKILLed (maybe mid-step, maybe mid-save) and resumed with `--config.resume=True`. The client retries
once (no parse retries), so failed matches are frequent; they are dropped and counted (SPEC §4).

A trainer that exits with an error is a crash, one that logs no step for `--hang_s` seconds a hang
(it is killed); either is counted and the run resumed from its checkpoint, so the figures still come.

Damaged-checkpoint resume (`damage_latest_checkpoint`, `--damage`): before the resume, the newest
checkpoint the killed trainer left is damaged as a failing disk would (`flip`: bytes inverted mid-file,
by default; `truncate`, `delete`, or `none`). The resume must detect it, say so, fall back to the
checkpoint before it and replay the steps after that one: progress lost to the damage is one more
checkpoint interval, never a crash.

`--style reasoning` makes the judge answer like a served reasoning LLM (`judge.server.style`): thinking
that names verdicts it does not give, in `reasoning_content` or inline `<think>`, the verdict in one of
several forms, and 2% of answers cut mid-thought (`finish_reason: "length"`, dropped as `truncated`).

The last line is JSON:
  steps               distinct steps logged (= --steps when nothing was lost)
  judge_failure_rate  failed judge calls / judge calls, over the final log
  matches_dropped     failed judge calls (each a dropped match)
  checkpoints         distinct checkpoint steps seen on disk during the run
  resumes             trainer restarts from a checkpoint (1)
  replayed_steps      steps logged before the kill and trained again after it (≤ --every)
  lost_steps          progress lost beyond the checkpoint interval, plus steps missing from the final log,
                      plus duplicated rows: must be 0
  nan_steps           logged steps with a non-finite metric: must be 0
  crashes             trainer exits with an error (a hostile judge must not cause one): must be 0
  hangs               times the trainer logged no step for --hang_s seconds: must be 0
  damaged_checkpoint  the checkpoint step damaged before the resume (null: none, or only one existed)
  fell_back_to_step   the step the resume started from, read from its log
  damage_undetected   1 if the resume started from the damaged checkpoint: must be 0
and the judge's injected fault counts (`truncated`: answers cut at max_tokens or, in the reasoning style,
mid-thought), the judge's style, the outage steps, wall-clock seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from arena_jax.judges.config import REPLY_STYLES
from arena_jax.train.metrics import read_metrics
from benchmarks import common
from benchmarks.common import DAMAGE_KINDS, damage_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY = re.compile(r"serving \S+ on (http://\S+)")
FAULTS = {
  "error_rate": 0.15,
  "error_statuses": "(500, 503, 429)",
  "retry_after_s": 0.2,
  "hang_rate": 0.05,
  "hang_s": 60.0,
  "malformed_rate": 0.05,
  "hostile_rate": 0.05,
  "hostile_bytes": 1 << 20,
}
CLIENT = {
  "timeout_s": 0.5,
  "max_retries": 1,
  "max_parse_retries": 0,
  "backoff_initial_s": 0.05,
  "backoff_max_s": 0.2,
  "startup_check_s": 60.0,
  "max_response_bytes": 256 << 10,
}
# The judge's planned outage lasts a few steps plus its restart, which takes tens of seconds on a loaded
# machine while steps without a judge take ~2 s: the default outage stop (10 steps, for a judge that is
# down for good; tests/reliability/test_judge_faults.py) would end the run that this benchmark wants to
# see ride the outage out.
OUTAGE_STEPS = 100
MAX_RELAUNCHES = 3  # after a crash or a hang: the run goes on from its checkpoint, counted


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class Judge:
  """`launch/serve_judge.py` with the fault mix, on a fixed port so that it can come back after a kill."""

  def __init__(self, port: int, seed: int, style: str = "plain"):
    self.port, self.seed, self.style, self.proc, self.counts, self.hostile = port, seed, style, None, {}, {}

  def start(self, generation: int) -> None:
    flags = [f"--server.{k}={v}" for k, v in FAULTS.items()] + [
      f"--server.seed={self.seed + generation}",
      f"--server.style={self.style}",
    ]
    self.proc = subprocess.Popen(
      [sys.executable, "-m", "launch.serve_judge", f"--port={self.port}", *flags],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.DEVNULL,
      text=True,
    )
    line = self.proc.stdout.readline()
    if not READY.search(line):
      raise RuntimeError(f"the judge server did not start: {line!r}")

  def kill(self) -> None:
    """Adds the server's fault counters to the totals, then SIGKILLs it (no clean shutdown)."""
    try:
      with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
        stats = json.loads(r.read())
      for k, v in stats.items():
        if isinstance(v, int) and k not in ("in_flight", "max_in_flight"):
          self.counts[k] = self.counts.get(k, 0) + v
      for k, v in stats.get("hostile_kinds", {}).items():
        self.hostile[k] = self.hostile.get(k, 0) + v
    except OSError:
      pass
    self.proc.kill()
    self.proc.wait()


def _rows(workdir: str) -> list[dict]:
  return read_metrics(workdir)  # a row torn by the SIGKILL is skipped


def _ckpts(workdir: str) -> set[int]:
  try:
    return {int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit()}
  except FileNotFoundError:
    return set()


def _finite(row: dict) -> bool:
  return all(
    not (isinstance(v, float) and not math.isfinite(v)) and v not in ("nan", "inf", "-inf") for v in row.values()
  )


def damage_latest_checkpoint(workdir: str, kind: str) -> int | None:
  """The damaged-checkpoint scenario: damages the newest checkpoint of a killed run (`kind` of
  `common.DAMAGE_KINDS`) when an older one exists to fall back to; returns the damaged step."""
  steps = sorted(_ckpts(workdir))
  if kind == "none" or len(steps) < 2:
    return None
  damage_checkpoint(os.path.join(workdir, "checkpoints", str(steps[-1])), kind)
  return steps[-1]


def _resumed_from(log_path: str) -> int | None:
  with open(log_path, encoding="utf-8", errors="replace") as f:
    found = re.search(r"resumed from step (\d+) ", f.read())
  return int(found.group(1)) if found else None


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--every", type=int, default=20, help="checkpoint interval")
  parser.add_argument("--seed", type=int, default=0, help="where the kills land and the judge's fault draws")
  parser.add_argument("--workdir", default="", help="default: a fresh temporary directory")
  parser.add_argument("--data_dir", default="", help="task datasets (default: inside the workdir)")
  parser.add_argument(
    "--style", default="plain", choices=REPLY_STYLES, help="how the judge writes its answers (judge.server.style)"
  )
  parser.add_argument(
    "--hang_s",
    type=float,
    default=300.0,
    help="a trainer that logs no step for this long is hung (compilation included)",
  )
  parser.add_argument(
    "--damage",
    default="flip",
    choices=DAMAGE_KINDS + ("none",),
    help="how the newest checkpoint is damaged before the resume",
  )
  args = parser.parse_args(argv)
  n, every = args.steps, args.every
  rng = random.Random(args.seed)
  workdir = args.workdir or tempfile.mkdtemp(prefix="arena_soak_")
  data_dir = args.data_dir or os.path.join(workdir, "datasets")
  judge_down_at = rng.randint(max(2, n // 6), max(3, n // 3))
  judge_up_at = judge_down_at + max(3, n // 40)
  kill_at = rng.randint(max(judge_up_at + 2, (2 * n) // 5), max(judge_up_at + 3, (7 * n) // 10))
  judge = Judge(_free_port(), args.seed, args.style)
  flags = [
    f"--workdir={workdir}",
    f"--config.tasks.data_dir={data_dir}",
    f"--config.num_steps={n}",
    f"--config.checkpoint.every={every}",
    f"--config.judge.urls=('http://127.0.0.1:{judge.port}',)",
    f"--config.reward.max_judge_outage_steps={OUTAGE_STEPS}",
    # Every member plays: the tiny policy's many identical traces would otherwise share tournament
    # nodes (reward.dedupe_traces) and spare the faulty judge most of its calls.
    "--config.reward.dedupe_traces=False",
    *[f"--config.judge.client.{k}={v}" for k, v in CLIENT.items()],
  ]

  def launch(name, *extra):
    log = open(os.path.join(workdir, name), "wb")  # pylint: disable=consider-using-with
    cmd = [sys.executable, "-m", "launch.train", "--config=configs/arith_arena_live.py:smoke", *flags, *extra]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), log

  seen: set[int] = set()
  trouble = {"crashes": 0, "hangs": 0, "relaunches": 0}
  run = {"proc": None, "log": None}

  def start_trainer(name, *extra):
    run["proc"], run["log"] = launch(name, *extra)

  def wait(count) -> bool:
    """Polls the log (and the checkpoint directory) until `count` rows are written (True) or the run
    finished (False); a trainer that crashes or hangs on the way is counted and resumed."""
    rows, progress = len(_rows(workdir)), time.monotonic()
    while rows < count:
      proc = run["proc"]
      seen.update(_ckpts(workdir))
      rc = proc.poll()
      hung = rc is None and time.monotonic() - progress > args.hang_s
      if rc == 0:
        return False
      if rc is not None or hung:
        if hung:
          proc.kill()
          proc.wait()
        trouble["hangs" if hung else "crashes"] += 1
        run["log"].close()
        if trouble["relaunches"] >= MAX_RELAUNCHES:
          return False
        trouble["relaunches"] += 1
        start_trainer(f"train_relaunch_{trouble['relaunches']}.log", "--config.resume=True")
        progress = time.monotonic()
      time.sleep(0.02)
      now_rows = len(_rows(workdir))
      if now_rows != rows:
        rows, progress = now_rows, time.monotonic()
    seen.update(_ckpts(workdir))
    return True

  start = time.perf_counter()
  judge.start(0)
  os.makedirs(workdir, exist_ok=True)
  start_trainer("train_1.log")
  logged_before = resumed_from = 0
  damaged = None
  try:
    wait(judge_down_at)
    judge.kill()  # the judge dies mid-run ...
    wait(judge_up_at)
    judge.start(1)  # ... and comes back on the same port
    if wait(kill_at):
      time.sleep(rng.uniform(0.0, 0.3))  # a random point inside the step (maybe mid-save)
      run["proc"].send_signal(signal.SIGKILL)  # the trainer dies (preemption, OOM killer)
      run["proc"].wait()
      run["log"].close()
      seen.update(_ckpts(workdir))
      logged_before = max((r["step"] for r in _rows(workdir)), default=0)
      damaged = damage_latest_checkpoint(workdir, args.damage)
      start_trainer("train_2.log", "--config.resume=True")
    wait(n + 1)
    run["proc"].wait()
  finally:
    if run["proc"].poll() is None:
      run["proc"].kill()
    run["log"].close()
    judge.kill()
  wall = time.perf_counter() - start

  resumed_from = _resumed_from(os.path.join(workdir, "train_2.log")) or 0
  rows = _rows(workdir)
  steps = [r["step"] for r in rows]
  calls = sum(r.get("judge/calls", 0) for r in rows)
  failures = sum(r.get("judge/failures", 0) for r in rows)
  replayed = logged_before - resumed_from
  missing = len(set(range(1, n + 1)) - set(steps))
  duplicated = len(steps) - len(set(steps))
  figures = {
    "steps": len(set(steps)),
    "judge_failure_rate": failures / max(calls, 1),
    "matches_dropped": failures,
    "checkpoints": len(seen),
    "resumes": 1 + trouble["relaunches"],
    "replayed_steps": replayed,
    # A damaged checkpoint costs one more interval (the resume falls back past it), never more.
    "lost_steps": max(0, replayed - every * (2 if damaged is not None else 1)) + missing + duplicated,
    "nan_steps": sum(not _finite(r) for r in rows),
    "crashes": trouble["crashes"],
    "hangs": trouble["hangs"],
    "judge_calls": calls,
    "judge_outage_steps": sum(r.get("judge/failure_rate", 0.0) == 1.0 for r in rows),
    "groups_all_failed": sum(r.get("judge/groups_all_failed", 0) for r in rows),
    "injected": {
      k: judge.counts.get(k, 0) for k in ("requests", "errors", "hangs", "malformed", "truncated", "hostile")
    },
    "hostile_kinds": judge.hostile,
    "judge_style": args.style,
    "judge_killed_at_step": judge_down_at,
    "judge_back_at_step": judge_up_at,
    "trainer_killed_after_step": logged_before,
    "resumed_from_step": resumed_from,
    "damaged_checkpoint": damaged,
    "fell_back_to_step": resumed_from if damaged is not None else None,
    "damage_undetected": int(damaged is not None and resumed_from >= damaged),  # must be 0
    "checkpoint_every": every,
    "wall_s": round(wall, 1),
    "workdir": workdir,
  }
  table = [(k, v) for k, v in figures.items() if k not in ("injected", "hostile_kinds", "workdir")]
  table += [(f"injected/{k}", v) for k, v in figures["injected"].items()]
  common.print_table(["soak", "value"], table)
  common.emit_json(figures)


if __name__ == "__main__":
  main()
