"""The teacher's labels (SPEC §10): any judge the project has, asked about each pair in both orders.

    labels, stats = label_pairs(pairs, judge_config)   # judge_config: a `judges.default_config()`

A pairwise teacher (`judge.backend = pairwise`: the embedded process checker, any OpenAI-compatible judge, in any
verdict format) is asked with `debias = both`, whatever the config says: the label is the soft outcome of the
pair's first trace averaged over the two orders (SPEC §4), so a teacher's own position bias cancels in the target.
A pointwise teacher (`pointwise`, `jury`) scores each trace alone; the label is 1/2 + (s_first − s_second)/2. A
failed judgment skips its pair and is counted by reason.

Each label also carries the flaw kind that separates the two traces as the process checker reads them
(`flaw_kind`): how the measures are broken down, whatever the teacher.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from typing import Sequence

from arena_jax import tasks
from arena_jax.distill.pairs import Pair
from arena_jax.errors import UserError

DECISIVE = 1e-6  # |outcome − 1/2| above this: the teacher preferred one trace
# What separates two traces, in the order of the process checker's penalty weights (a wrong answer first).
FLAW_KINDS = ("answer", "slip", "redundant", "skipped", "none", "unknown")


class TeacherError(UserError, RuntimeError):
  """The teacher failed every judgment (its reasons are in the message)."""


@dataclasses.dataclass(frozen=True)
class Label:
  """A pair and what the teacher said: `outcome` the soft score of `pair.first` in [0, 1] (None: failed, with
  `failure`), `kind` the flaw kind that separates the traces (`flaw_kind`)."""

  pair: Pair
  outcome: float | None
  kind: str
  failure: str | None = None

  @property
  def decisive(self) -> bool:
    return self.outcome is not None and abs(self.outcome - 0.5) > DECISIVE

  def to_json(self) -> dict:
    return {**self.pair.to_json(), "outcome": self.outcome, "kind": self.kind, "failure": self.failure}

  @classmethod
  def from_json(cls, row: dict) -> "Label":
    pair = Pair(row["problem"], row["reference"], row["first"], row["second"], int(row["group"]))
    return cls(pair, row["outcome"], row["kind"], row.get("failure"))


def flaw_kind(pair: Pair) -> str:
  """What separates the two traces for the process checker (`judges.embedded.checking`): `answer` (one final
  answer right, the other not), `slip` (a different number of wrong steps), `redundant` (of pointless or repeated
  steps), `skipped` (of operations done without being shown), `none` (the checker sees no difference), or
  `unknown` (a problem the checker does not read)."""
  from arena_jax.judges.embedded import checking  # pylint: disable=g-import-not-at-top

  found = []
  for trace in (pair.first, pair.second):
    found.append(
      checking.assess(
        pair.problem, pair.reference or None, tasks.split_steps(trace) or [trace], skip_weight=0.5, answer_weight=1.0
      )
    )
  a, b = found
  if a.task not in ("arithmetic", "countdown"):
    return "unknown"
  if a.answer_correct != b.answer_correct:
    return "answer"
  if len(a.invalid) != len(b.invalid):
    return "slip"
  if len(a.irrelevant) != len(b.irrelevant):
    return "redundant"
  if a.skipped != b.skipped:
    return "skipped"
  return "none"


@dataclasses.dataclass
class TeacherStats:
  asked: int = 0
  failed: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  seconds: float = 0.0

  @property
  def pairs_per_s(self) -> float:
    return self.asked / self.seconds if self.seconds > 0 else 0.0

  def to_json(self) -> dict:
    return {"asked": self.asked, "failed": dict(self.failed), "seconds": self.seconds, "pairs_per_s": self.pairs_per_s}


def teacher_config(judge_config):
  """`judge_config` as the teacher is asked: both orders for a pairwise judge (module docstring)."""
  config = judge_config.copy_and_resolve_references()
  if config.backend == "pairwise":
    with config.unlocked():
      config.debias = "both"
  return config


async def _label(judge, backend: str, pairs: Sequence[Pair], chunk: int, progress) -> list[tuple[float | None, str]]:
  from arena_jax import judges  # pylint: disable=g-import-not-at-top

  out = []
  for start in range(0, len(pairs), chunk):
    part = pairs[start : start + chunk]
    if backend == "pairwise":
      results = await judge.judge_pairs(
        [
          judges.PairRequest(p.problem, p.reference, p.first, p.second, key=(p.group, start + i))
          for i, p in enumerate(part)
        ]
      )
      out += [(r.outcome, r.failure_reason) for r in results]
    else:
      requests = [
        judges.ScoreRequest(p.problem, p.reference, t, key=(p.group, start + i, k))
        for i, p in enumerate(part)
        for k, t in enumerate((p.first, p.second))
      ]
      scores = await judge.score_many(requests)
      for a, b in zip(scores[::2], scores[1::2]):
        if a.ok and b.ok:
          out.append((0.5 + 0.5 * (a.score - b.score), None))
        else:
          out.append((None, a.failure_reason or b.failure_reason))
    if progress:
      progress(len(out), len(pairs))
  return out


def label_pairs(
  pairs: Sequence[Pair], judge_config, *, chunk: int = 64, progress=None
) -> tuple[list[Label], TeacherStats]:
  """Every pair's `Label` from the teacher `judge_config` (its URLs, or the embedded server started for the call:
  `judges.judge_endpoints`), and what asking cost.

  Raises:
    TeacherError: every judgment failed (the reasons, counted, are in the message).
  """
  from arena_jax import judges  # pylint: disable=g-import-not-at-top

  config = teacher_config(judge_config)
  stats = TeacherStats()
  with judges.judge_endpoints(config) as urls:

    async def run():
      judge = judges.make_judge(config, urls)
      try:
        return await _label(judge, config.backend, list(pairs), chunk, progress)
      finally:
        await judge.close()

    start = time.perf_counter()
    answers = asyncio.run(run())
    stats.seconds = time.perf_counter() - start
  labels = []
  for pair, (outcome, failure) in zip(pairs, answers):
    stats.asked += 1
    if outcome is None:
      stats.failed[failure or "failed"] += 1
    labels.append(Label(pair, outcome, flaw_kind(pair), failure))
  if pairs and all(label.outcome is None for label in labels):
    reasons = ", ".join(f"{k} × {v}" for k, v in stats.failed.most_common())
    raise TeacherError(
      f"the teacher (judge.model={config.model!r} at {', '.join(urls) or 'the embedded server'}) failed all "
      f"{len(labels)} judgments: {reasons}"
    )
  return labels, stats


__all__ = [
  "DECISIVE",
  "FLAW_KINDS",
  "Label",
  "TeacherError",
  "TeacherStats",
  "flaw_kind",
  "label_pairs",
  "teacher_config",
]
