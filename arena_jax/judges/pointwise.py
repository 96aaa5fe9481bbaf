"""Pointwise rubric judging (SPEC §7: `rlaif` and `adaptive_pointwise` reward modes).

`PointwiseJudge.score(problem, reference, trace)` asks the judge for one rubric level
(`config.rubric_levels`, default 0 / 0.5 / 1 as in DeepSeekMath-V2's proof scoring) and returns a
`ScoreResult` whose `score` is the level normalised to [0, 1], or None when the judgment failed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from typing import Any, Sequence

from arena_jax.judges import prompts
from arena_jax.judges.client import Completion
from arena_jax.judges.pairwise import BaseJudge, JudgeCall, derive_seed, text_key
from arena_jax.judges.usage import Usage


@dataclasses.dataclass(frozen=True)
class ScoreRequest:
  """One trace to score."""

  problem: str
  reference: str
  trace: str
  key: Any = None


@dataclasses.dataclass(frozen=True)
class ScoreResult:
  """A pointwise judgment: `score` in [0, 1] or None when failed; `flaws` for the jury backend; `usage`
  what it cost (one call, or a whole jury audit)."""

  score: float | None
  failure_reason: str | None = None
  failure_detail: str = ""
  raw: str = ""
  reasoning: str = ""
  flaws: tuple = ()
  usage: Usage = Usage()
  cached: bool = False
  calls: tuple[JudgeCall, ...] = ()  # the request(s) behind it, for the transcripts

  @property
  def ok(self) -> bool:
    return self.failure_reason is None


def result_from_completion(c: Completion, score: float | None) -> ScoreResult:
  return ScoreResult(
    score,
    c.failure_reason,
    c.failure_detail,
    c.content or "",
    c.reasoning or "",
    (),
    c.usage,
    c.cached,
    (JudgeCall(False, c),),
  )


class PointwiseJudge(BaseJudge):
  """Scores one trace against a rubric (see module docstring)."""

  kind = "pointwise"

  def __init__(self, client, config):
    super().__init__(client, config)
    self.levels = tuple(float(v) for v in config.rubric_levels)
    self.rubric = prompts.rubric_text(self.levels)
    self._parse = functools.partial(self.format.parse_pointwise, levels=self.levels)

  async def score(self, problem: str, reference: str, trace: str, *, key: Any = None) -> ScoreResult:
    problem, reference = self.clean_context(problem, reference)

    def request(ts):
      return [
        self.templates.messages(
          self.format.template("pointwise"), problem=problem, reference=reference, trace=ts[0], rubric=self.rubric
        )
      ]

    fit = await self.fit([self.view(trace)], request)
    if fit.failure_reason:
      return ScoreResult(None, fit.failure_reason, fit.failure_detail)
    (trace,) = fit.traces
    if key is None:
      key = text_key(problem, reference, trace)
    (messages,) = request(fit.traces)
    c = await self.ask(messages, parse=self._parse, seed=derive_seed(self.config.seed, "score", key), fit=fit)
    return result_from_completion(c, c.parsed if c.ok else None)

  async def score_many(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
    """Scores many traces concurrently."""
    return list(await asyncio.gather(*(self.score(r.problem, r.reference, r.trace, key=r.key) for r in requests)))
