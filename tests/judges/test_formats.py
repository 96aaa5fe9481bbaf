"""Verdict formats for judges of every size (`judge.verdict_format`, `judges.formats`): the letter and logprobs
formats end to end against the embedded judge, what a small judge gets wrong, and the answer budget clipped to
the judge's context."""

import asyncio
import math

import pytest

from arena_jax import judges
from arena_jax.arena import Verdict, verdict_to_outcome
from arena_jax.errors import ConfigError
from arena_jax.judges import formats

from tests.judges.conftest import fast_config

WIN, LOSE = verdict_to_outcome(Verdict.FIRST_WINS, 0.4), verdict_to_outcome(Verdict.SECOND_WINS, 0.4)


@pytest.mark.parametrize(
  "answer, verdict",
  [
    ("A", Verdict.FIRST_WINS),
    ("B", Verdict.SECOND_WINS),
    (" **B**.", Verdict.SECOND_WINS),
    ("Answer: A", Verdict.FIRST_WINS),
    ("Final answer: (B)", Verdict.SECOND_WINS),
    ("The answer is A", Verdict.FIRST_WINS),  # SmolLM2's own words
    ("The better trace is **B**.", Verdict.SECOND_WINS),
    ("Trace B", Verdict.SECOND_WINS),
    ("The trace with A is better.", Verdict.FIRST_WINS),  # SmolLM2 in `make real` (docs/results/real.md)
    ('The trace with the letter "B"', Verdict.SECOND_WINS),
    ("The trace with a", None),  # a lead-in that names no label, cut at max_tokens
    ("The process of tracing", None),
    ("<think>A is wrong</think>B", Verdict.SECOND_WINS),  # thinking is never read
    ("C", None),  # a label that does not exist
    ("Both are fine.", None),  # rambling
    ("I cannot judge this.", None),  # a refusal
    ("", None),
    (None, None),
    ("AB", None),
  ],
)
def test_the_first_letter_is_the_verdict_and_anything_else_is_none(answer, verdict):
  assert formats.parse_letter(answer) == verdict


def test_yes_no_and_the_probability_of_a_label():
  assert [formats.parse_yes_no(t) for t in ("Yes", "no.", "**YES**", "Maybe", "")] == [1.0, 0.0, 1.0, None, None]
  alternatives = (("A", math.log(0.6)), (" B", math.log(0.2)), ("a", math.log(0.1)), ("C", math.log(0.1)))
  assert formats.parse_letter_logprobs(alternatives) == pytest.approx(0.7 / 0.9)  # "A", "a"; " B"
  assert formats.parse_letter_logprobs((("C", 0.0),)) is None and formats.parse_letter_logprobs(None) is None
  assert formats.parse_yes_no_logprobs((("Yes", math.log(0.3)), ("No", math.log(0.1)))) == pytest.approx(0.75)


def test_a_probability_scores_on_the_margins_scale():
  assert formats.shown_outcome(1.0, 0.4) == pytest.approx(WIN) and formats.shown_outcome(0.0, 0.4) == pytest.approx(
    LOSE
  )
  assert formats.shown_outcome(0.5, 0.4) == 0.5 and formats.shown_outcome(0.8, 0.5) == pytest.approx(0.8)
  assert formats.shown_outcome(Verdict.FIRST_WINS, 0.4) == WIN


def _judge_pairs(config, pairs, **knobs):
  async def main():
    async with judges.serve_in_process(**knobs) as url:
      judge = judges.make_judge(config, [url])
      try:
        return await judge.judge_pairs([judges.PairRequest(*p) for p in pairs]), judge.client.stats
      finally:
        await judge.close()

  return asyncio.run(main())


def _pairs(demos, n=4):
  d = demos["slip"]
  good = [(d.prompt, d.example.answer, d.example.solution, d.completion, ("k", i)) for i in range(n)]
  return good + [(p, r, b, a, k + ("flipped",)) for p, r, a, b, k in good]


@pytest.mark.parametrize("debias", ["random", "both"])
def test_the_letter_format_judges_the_sounder_trace_the_winner(demos, debias):
  config = fast_config()
  config.verdict_format, config.debias = "letter", debias
  results, stats = _judge_pairs(config, _pairs(demos))
  assert [r.outcome for r in results] == [WIN] * 4 + [LOSE] * 4
  assert all(r.raw.strip("-\n ").split()[0] in ("A", "B") for r in results)  # one letter per answer
  assert stats.usage.completion_tokens <= 2 * len(results)  # a letter, not an explanation


def test_a_letter_judge_with_a_position_bias_gives_a_half_with_both_orders(demos):
  """A judge that always answers with the position it prefers (SmolLM2 answers A to every pair) gives every
  pair exactly 1/2 with `debias = both`: the two orders cancel."""
  config = fast_config()
  config.verdict_format, config.debias = "letter", "both"
  results, _ = _judge_pairs(config, _pairs(demos), position_bias=50.0)
  assert [r.outcome for r in results] == [0.5] * 8
  assert all(r.raw.replace("-", "").split() == ["A", "A"] for r in results)


def test_the_logprobs_format_gives_soft_outcomes_from_the_judges_probabilities(demos):
  config = fast_config()
  config.verdict_format = "logprobs"
  results, stats = _judge_pairs(config, _pairs(demos))
  first, flipped = [r.outcome for r in results[:4]], [r.outcome for r in results[4:]]
  assert all(0.5 < s < WIN for s in first) and all(LOSE < s < 0.5 for s in flipped)  # soft, on the right side
  assert first == pytest.approx([1 - s for s in flipped])  # the order shown is mapped back
  assert stats.failed == 0


def test_a_server_that_ignores_logprobs_is_refused_at_start_naming_the_other_formats():
  async def main():
    async with judges.serve_in_process(logprobs=False) as url:
      with pytest.raises(ConfigError, match=r"judge\.verdict_format = 'logprobs'.*'letter'.*'reasoned'"):
        await asyncio.to_thread(judges.check_logprobs, [url], model=judges.default_config().model)
    async with judges.serve_in_process() as url:
      await asyncio.to_thread(judges.check_logprobs, [url], model=judges.default_config().model)  # no error

  asyncio.run(main())


def test_a_label_that_does_not_exist_is_a_counted_failure_never_a_tie(demos):
  """A letter judge that writes something else than A or B (here: the embedded judge's malformed answers)
  fails the judgment (`unparseable`), retried then counted."""
  config = fast_config(max_parse_retries=0)
  config.verdict_format = "letter"
  results, stats = _judge_pairs(config, _pairs(demos, 2), malformed_rate=1.0)
  assert [r.outcome for r in results] == [None] * 4 and {r.failure_reason for r in results} == {"unparseable"}
  assert stats.failures["unparseable"] == 4


@pytest.mark.parametrize("verdict_format", ["letter", "logprobs"])
def test_pointwise_scores_in_each_format(demos, verdict_format):
  config = fast_config()
  config.backend, config.verdict_format = "pointwise", verdict_format
  d = demos["slip"]

  async def main():
    async with judges.serve_in_process() as url:
      judge = judges.make_judge(config, [url])
      try:
        good = await judge.score(d.prompt, d.example.answer, d.example.solution)
        bad = await judge.score(d.prompt, d.example.answer, d.completion)
      finally:
        await judge.close()
    return good, bad

  good, bad = asyncio.run(main())
  assert good.ok and bad.ok and good.score > bad.score
  if verdict_format == "letter":
    assert (good.score, bad.score, good.raw) == (1.0, 0.0, "Yes")


def test_the_jury_needs_the_reasoned_format():
  config = judges.default_config()
  config.backend, config.verdict_format = "jury", "letter"
  with pytest.raises(ValueError, match=r"judge\.verdict_format.*jury"):
    judges.validate_config(config)


def test_the_answer_budget_is_clipped_to_the_context_the_prompt_leaves(demos):
  """A judge of 2,000 tokens of context asked with judge.max_tokens = 16,384 (twice SmolLM2's context, the
  default that failed every judgment): each request asks for what the context leaves, and the server (which
  refuses a request over its context, as vLLM does) answers every one."""
  config = fast_config()
  config.context_tokens = 2000
  results, stats = _judge_pairs(config, _pairs(demos, 2), max_model_len=2000)
  assert all(r.ok for r in results), [r.failure_detail for r in results]
  for r in results:
    (call,) = r.calls
    assert call.completion.usage.prompt_tokens + 1 <= 2000
  assert stats.failed == 0


def test_a_context_the_server_states_is_used_when_the_config_gives_none(demos):
  """vLLM lists `max_model_len` with each model; a started transformers judge notes its model's: with
  `context_tokens` 0 the judges use it (`client.served_context`)."""
  config = fast_config()

  async def main():
    async with judges.serve_in_process(max_model_len=2000) as url:
      judges.note_context(url, 2000)
      judge = judges.make_judge(config, [url])
      try:
        return await judge.judge_pairs([judges.PairRequest(*p) for p in _pairs(demos, 1)])
      finally:
        await judge.close()

  results = asyncio.run(main())
  assert all(r.ok for r in results), [r.failure_detail for r in results]
