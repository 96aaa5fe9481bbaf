"""Judges by name and the embedded default (SPEC §7)."""

import asyncio

import pytest

from arena_jax import judges

from tests.judges.conftest import fast_config


def test_pointwise_rubric_scores_follow_process_quality(server, demos):
  config = fast_config()
  config.backend = "pointwise"

  async def main():
    judge = judges.make_judge(config, [server.url])
    try:
      return await judge.score_many(
        [judges.ScoreRequest(d.prompt, d.example.answer, d.completion, key=k) for k, d in demos.items()]
      )
    finally:
      await judge.close()

  scores = dict(zip(demos, asyncio.run(main())))
  assert scores["clean"].score == 1.0 and scores["slip"].score == 0.0
  assert scores["compensating"].score == scores["redundant"].score == scores["skipped"].score == 0.5
  assert all(s.ok and s.usage.calls == 1 and "Rating: [[" in s.raw for s in scores.values())


def test_rubric_levels_are_configurable(server, demos):
  config = fast_config()
  config.backend = "pointwise"
  config.rubric_levels = (0.0, 1.0, 2.0, 3.0, 4.0)

  async def main():
    judge = judges.make_judge(config, [server.url])
    try:
      d = demos["compensating"]
      return await judge.score(d.prompt, d.example.answer, d.completion)
    finally:
      await judge.close()

  r = asyncio.run(main())
  assert r.score == 0.5 and r.raw.endswith("Rating: [[2]]")  # the middle of five levels


@pytest.mark.parametrize("backend, kind", [("pairwise", "pairwise"), ("pointwise", "pointwise"), ("jury", "pointwise")])
def test_the_embedded_server_is_started_when_no_url_is_configured(backend, kind, demos):
  config = fast_config()
  config.backend = backend
  config.server.latency_ms = 1.0
  d = demos["slip"]

  async def use(judge):
    try:
      if kind == "pairwise":
        return (await judge.compare(d.prompt, d.example.answer, d.example.solution, d.completion)).outcome
      return (await judge.score(d.prompt, d.example.answer, d.completion)).score
    finally:
      await judge.close()

  with judges.judge_endpoints(config) as urls:
    assert len(urls) == 1 and urls[0].startswith("http://127.0.0.1:")
    judge = judges.make_judge(config, urls)
    assert judge.kind == kind
    value = asyncio.run(use(judge))
  assert value == (0.9 if kind == "pairwise" else 0.0)


def test_configured_urls_are_used_as_they_are():
  config = judges.default_config()
  config.urls = ("http://judge-1:8000/v1", "http://judge-2:8000/v1")
  with judges.judge_endpoints(config) as urls:
    assert urls == config.urls
  judge = judges.make_judge(config)
  assert judge.client.urls == config.urls
