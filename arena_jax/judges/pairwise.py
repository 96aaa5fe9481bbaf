"""Pairwise judging with order debiasing (SPEC §4).

`PairwiseJudge.compare(problem, reference, first, second)` asks the judge which of two traces is
better and returns a `JudgeResult` whose `outcome` is the soft score of the canonical *first* trace,
s = 1/2 + m (first wins), 1/2 (tie), 1/2 − m (second wins), from `arena.verdict_to_outcome`, or None
when the judgment failed (dropped and counted by the scheduler, never a tie).

Order debiasing (`config.debias`):
  none    the canonical order is shown as (A, B);
  random  (default, SPEC §4 (1)) each query's presentation order is a coin drawn from a hash of
          (config.seed, the query's key), so a run is reproducible whatever order answers come back
          in; a verdict about the shown order is mapped back to the canonical one;
  both    both orders are judged concurrently and the two canonical outcomes averaged (ArenaRL's
          option, twice the cost): agreement keeps the verdict, opposite verdicts give exactly 1/2,
          a tie against a win gives 1/2 ± m/2. Either call failing fails the pair.
A query's key is whatever identifies it in the caller's bookkeeping (the tournament runner uses
(group id, i, j)); without one, a hash of the texts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from typing import Any, NamedTuple, Sequence

from arena_jax import tasks
from arena_jax.arena.outcomes import Verdict, check_margin, outcome_to_verdict, verdict_to_outcome
from arena_jax.judges import formats
from arena_jax.judges import hygiene
from arena_jax.judges import prompts
from arena_jax.judges import tokens
from arena_jax.judges.client import Completion, JudgeClient, served_context
from arena_jax.judges.usage import Usage


def derive_seed(*parts: Any) -> int:
  """A 31-bit integer that depends only on `parts` (stable across processes, unlike `hash`)."""
  digest = hashlib.blake2b("\x1f".join(map(repr, parts)).encode("utf-8"), digest_size=8).digest()
  return int.from_bytes(digest, "big") & 0x7FFFFFFF


def settle(c: Completion) -> Completion:
  """`c`, failed as "truncated" rather than "unparseable" when the judge's thinking never ended.

  The client names a failure from the answer's `finish_reason` and the parser's None; an unclosed
  `<think>` block is a cut answer too (`prompts.split_reasoning`), whatever the server said. Either way
  the judgment is dropped and counted (SPEC §4); the reason says which.
  """
  if c.failure_reason == "unparseable" and prompts.split_reasoning(c.content).truncated:
    return dataclasses.replace(
      c, failure_reason="truncated", failure_detail="the judge's thinking never ended (an unclosed <think> block)"
    )
  return c


def text_key(*texts: str) -> str:
  """A key for a query identified by its texts alone."""
  h = hashlib.sha256()
  for t in texts:
    h.update(t.encode("utf-8"))
    h.update(b"\x00")
  return h.hexdigest()[:24]


@dataclasses.dataclass(frozen=True)
class PairRequest:
  """One pair to judge; `outcome` will be the soft score of `trace_first` (SPEC §4)."""

  problem: str
  reference: str
  trace_first: str
  trace_second: str
  key: Any = None


@dataclasses.dataclass(frozen=True)
class JudgeResult:
  """A pairwise judgment in the canonical order.

  outcome: soft score of the first trace in [0, 1], or None when the judgment failed.
  verdict: the canonical verdict (FIRST_WINS / TIE / SECOND_WINS), None when failed.
  failure_reason: None, or the client's reason ("timeout", "http_503", "unparseable", "truncated", ...).
  raw: the judge's answer text (both answers, separated by a rule, in `both` mode).
  swapped: whether the second trace was shown as A (in `both` mode: the first call's order, False).
  usage: what the judge calls cost; in `both` mode the two orders are asked concurrently, so their
    counts add up and the latency is the slower call's (`Usage.parallel`).
  calls: each call's `JudgeCall` (one, or two in `both` mode): what the judge was shown and said, for the
    transcripts (`arena_jax.train.transcripts`).
  """

  outcome: float | None
  verdict: Verdict | None
  failure_reason: str | None = None
  failure_detail: str = ""
  raw: str = ""
  reasoning: str = ""
  swapped: bool = False
  usage: Usage = Usage()
  cached: bool = False
  calls: tuple["JudgeCall", ...] = ()

  @property
  def ok(self) -> bool:
    return self.failure_reason is None


class JudgeCall(NamedTuple):
  """One request of a judgment: whether the canonical order was swapped when shown (the second trace as
  A; always False for a pointwise score) and the client's `Completion` (answer, reasoning, parsed verdict
  in the shown order, failure, usage, endpoint, seed)."""

  swapped: bool
  completion: Completion


class BaseJudge:
  """What every judge backend shares: a client, the templates, trace hygiene, config."""

  kind = ""  # "pairwise" | "pointwise"

  def __init__(self, client: JudgeClient, config):
    self.client = client
    self.config = config
    self.templates = prompts.load_templates(config.template_dir)
    self.format = formats.get(config.get("verdict_format", "reasoned"))  # how the verdict is asked and read
    # Counts the judge's tokens (`judge.tokenizer`) and cuts traces to the budget and the context (the config's,
    # else what the server said: `client.served_context`).
    self.fitter = tokens.TraceFitter(
      tokens.make_counter(config, client), config, served_context=served_context(getattr(client, "urls", ()))
    )

  def clean(self, text: str, *, budget: bool = True) -> str:
    """Trace hygiene (`hygiene.sanitize`): neutralised, and cut to the token budget when `budget`, as the judge
    is shown it (`tokens.TraceFitter.cut_now`: by `judge.tokenizer`; a trace cut further to fit a request's
    context reads as last shown)."""
    text = hygiene.neutralise(text or "", self.templates.delimiters)
    return self.fitter.cut_now(text) if budget else text

  def view(self, text: str) -> str:
    """What the judge may see of a policy completion before any cut: its `judge.trace_view`
    (`tasks.trace_view`: the thinking block removed by default, SPEC §9), neutralised."""
    return hygiene.neutralise(tasks.trace_view(text or "", self.config.trace_view), self.templates.delimiters)

  async def fit(self, traces, build) -> tokens.Fit:
    """`traces` (`view`s) as the judge is shown them: each cut to `judge.token_budget`, then all of them
    further until every request `build(traces)` returns fits the judge's context (`tokens.TraceFitter`)."""
    return await self.fitter.fit_request(traces, build)

  def clean_context(self, problem: str, reference: str) -> tuple[str, str]:
    """The problem and reference answer as the judge is shown them (no token budget; no reference reads
    "(not given)")."""
    return (self.clean(problem, budget=False), self.clean(reference, budget=False) if reference else prompts.NOT_GIVEN)

  def trace(self, text: str) -> str:
    """What the judge is shown of a policy completion on its own: its `view`, cut to the budget (`clean`)."""
    return self.fitter.cut_now(self.view(text))

  async def ask(self, messages, *, parse, seed: int, fit: tokens.Fit) -> Completion:
    """One request in the verdict format: its answer budget (the format's, clipped to the context the fit
    left), its logprobs request, its parser."""
    max_tokens = fit.max_tokens
    if max_tokens is None and self.format.max_tokens is not None:
      max_tokens = self.fitter.max_tokens  # else the client's own judge.max_tokens
    completion = await self.client.chat(
      messages,
      parse=parse,
      seed=seed,
      max_tokens=max_tokens,
      top_logprobs=self.format.top_logprobs,
      read_cut=self.format.max_tokens is not None,  # a letter read from the first tokens of a cut answer
    )
    return settle(completion)

  async def close(self) -> None:
    await self.client.close()


class PairwiseJudge(BaseJudge):
  """Asks an LLM judge which of two traces is better (see module docstring)."""

  kind = "pairwise"

  def __init__(self, client: JudgeClient, config):
    super().__init__(client, config)
    self.margin = check_margin(config.margin)
    self.debias = config.debias

  def presentation_swapped(self, key: Any) -> bool:
    """Whether the query `key` shows the second trace first (`random` mode)."""
    return self.debias == "random" and bool(derive_seed(self.config.seed, "order", key) & 1)

  async def _ask(
    self, problem: str, reference: str, first: str, second: str, swapped: bool, key: Any, fit: tokens.Fit
  ) -> Completion:
    shown_a, shown_b = (second, first) if swapped else (first, second)
    messages = self._messages(problem, reference, shown_a, shown_b)
    seed = derive_seed(self.config.seed, "request", key, swapped)
    return await self.ask(messages, parse=self.format.parse_pairwise, seed=seed, fit=fit)

  def _messages(self, problem: str, reference: str, shown_a: str, shown_b: str) -> list[dict]:
    return self.templates.messages(
      self.format.template("pairwise"), problem=problem, reference=reference, trace_a=shown_a, trace_b=shown_b
    )

  async def compare(
    self, problem: str, reference: str, trace_first: str, trace_second: str, *, key: Any = None
  ) -> JudgeResult:
    """Judges one pair; `outcome` = soft score of `trace_first` (SPEC §4), None if the judgment failed
    (reason `context` / `tokenize` too when the request could not be fitted to the judge's context)."""
    problem, reference = self.clean_context(problem, reference)

    def requests(ts):  # the orders that may be shown (one with debias none)
      orders = [ts] if self.debias == "none" else [ts, ts[::-1]]
      return [self._messages(problem, reference, a, b) for a, b in orders]

    fit = await self.fit([self.view(trace_first), self.view(trace_second)], requests)
    if fit.failure_reason:
      return JudgeResult(None, None, fit.failure_reason, fit.failure_detail)
    first, second = fit.traces
    if key is None:
      key = text_key(problem, reference, first, second)
    if self.debias == "both":
      done = await asyncio.gather(
        self._ask(problem, reference, first, second, False, key, fit),
        self._ask(problem, reference, first, second, True, key, fit),
      )
      return self._combine(list(zip(done, (False, True))))
    swapped = self.presentation_swapped(key)
    completion = await self._ask(problem, reference, first, second, swapped, key, fit)
    return self._combine([(completion, swapped)])

  def _combine(self, answers: list[tuple[Completion, bool]]) -> JudgeResult:
    totals = dict(
      usage=Usage.parallel(*(c.usage for c, _ in answers)),
      cached=all(c.cached for c, _ in answers),
      raw="\n\n-----\n\n".join(c.content or "" for c, _ in answers),
      reasoning="\n\n-----\n\n".join(c.reasoning or "" for c, _ in answers),
      swapped=answers[0][1] if len(answers) == 1 else False,
      calls=tuple(JudgeCall(swapped, c) for c, swapped in answers),
    )
    failed = [c for c, _ in answers if not c.ok]
    if failed:
      return JudgeResult(None, None, failed[0].failure_reason, failed[0].failure_detail, **totals)
    outcomes = []
    for completion, swapped in answers:
      shown = completion.parsed  # a Verdict, or (logprobs) the probability that the trace shown first wins
      if isinstance(shown, Verdict):
        outcomes.append(verdict_to_outcome(shown.flipped() if swapped else shown, self.margin))
      else:
        s = formats.shown_outcome(shown, self.margin)
        outcomes.append(1.0 - s if swapped else s)
    outcome = outcomes[0] if len(outcomes) == 1 else 0.5 * (outcomes[0] + outcomes[1])
    if self.config.get("reverse_verdicts", False):  # the reversed judge of an ablation (`judge.reverse_verdicts`)
      outcome = 1.0 - outcome
    return JudgeResult(outcome, outcome_to_verdict(outcome), **totals)

  async def judge_pairs(self, requests: Sequence[PairRequest]) -> list[JudgeResult]:
    """Judges many pairs concurrently (the client's per-endpoint limits bound the load)."""
    return list(
      await asyncio.gather(
        *(self.compare(r.problem, r.reference, r.trace_first, r.trace_second, key=r.key) for r in requests)
      )
    )
