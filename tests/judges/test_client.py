"""The async judge client against the embedded server and its fault injection."""

import asyncio
import random
import socket

import aiohttp
import pytest
from aiohttp import web

from arena_jax import judges
from arena_jax.arena import Verdict

MESSAGES = judges.load_templates().messages(
  "pairwise",
  problem="Question: Compute 7 + 5.\nSolution:\n",
  reference="12",
  trace_a="7 + 5 = 12.\n\nAnswer: 12",
  trace_b="7 + 5 = 13.\n\nAnswer: 13",
)


def make_client(urls, **kw):
  options = dict(
    model="arena-judge",
    backoff_initial_s=0.001,
    backoff_max_s=0.004,
    timeout_s=10.0,
    max_retries=3,
    max_parse_retries=2,
  )
  options.update(kw)
  return judges.JudgeClient(urls if isinstance(urls, (list, tuple)) else [urls], **options)


async def ask(client, n=1, **kw):
  async with client:
    return await asyncio.gather(*(client.chat(MESSAGES, parse=judges.parse_pairwise, **kw) for _ in range(n)))


async def server_stats(url):
  async with aiohttp.ClientSession() as s:
    async with s.get(url + "/stats") as r:
      return await r.json()


def with_server(knobs, fn):
  """Runs `fn(url)` (a coroutine function) against an in-process embedded server with `knobs`."""

  async def main():
    async with judges.serve_in_process(**knobs) as url:
      return await fn(url)

  return asyncio.run(main())


# ── the happy path, against the server process ──


def test_answer_reasoning_tokens_and_latency_are_read_and_counted(server):
  client = make_client(server.url)
  (c,) = asyncio.run(ask(client))
  assert c.ok and c.parsed == Verdict.FIRST_WINS and c.finish_reason == "stop"
  assert c.content.rstrip().endswith("[[A]]") and "Penalties" in c.reasoning
  assert c.usage.prompt_tokens > 100 and c.usage.completion_tokens > 10 and c.usage.latency_s > 0
  assert c.usage.calls == c.usage.http_requests == c.parse_attempts == 1 and c.endpoint == server.url and c.seed == 0
  s = client.stats.as_dict()
  assert s["calls"] == s["succeeded"] == s["http_requests"] == 1 and s["failed"] == 0
  assert s["prompt_tokens"] == c.usage.prompt_tokens and s["per_endpoint"][server.url]["requests"] == 1


def test_requests_carry_model_sampling_parameters_and_key():
  seen = []

  async def handler(request):
    seen.append((await request.json(), request.headers.get("Authorization")))
    return web.json_response(
      {
        "choices": [{"message": {"content": "[[B]]", "reasoning": "r"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
      }
    )

  async def main():
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
      client = make_client(f"http://{host}:{port}/v1", api_key="sekret", temperature=0.7, max_tokens=99, seed=5)
      return await ask(client)
    finally:
      await runner.cleanup()

  (c,) = asyncio.run(main())
  body, auth = seen[0]
  assert body == {"model": "arena-judge", "messages": MESSAGES, "temperature": 0.7, "max_tokens": 99, "seed": 5}
  assert auth == "Bearer sekret"
  assert c.parsed == Verdict.SECOND_WINS and c.reasoning == "r"  # vLLM's newer `reasoning` field


@pytest.mark.parametrize("base", ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/chat/completions"])
def test_base_urls_are_normalised(base):
  assert judges.chat_completions_url(base) == "http://h:1/v1/chat/completions"


# ── retries ──


def test_transient_errors_are_retried_until_they_pass():
  async def run(url):
    client = make_client(url, max_retries=10)
    answers = await ask(client, 30)
    return answers, client.stats, await server_stats(url)

  answers, stats, served = with_server(dict(error_rate=0.5, error_statuses=(500, 503, 429), retry_after_s=0.001), run)
  assert all(c.ok and c.parsed == Verdict.FIRST_WINS for c in answers)
  assert stats.transport_retries == served["errors"] > 0
  assert stats.usage.http_requests == 30 + served["errors"]


def test_persistent_errors_end_in_an_explicit_failed_result():
  async def run(url):
    client = make_client(url, max_retries=3)
    return (await ask(client))[0], client.stats

  c, stats = with_server(dict(error_rate=1.0, error_statuses=(503,)), run)
  assert not c.ok and c.failure_reason == "http_503" and c.parsed is None and "injected fault" in c.failure_detail
  assert (
    c.usage.http_requests == 4
    and stats.failed == 1
    and stats.failures["http_503"] == 1
    and stats.transport_retries == 3
  )


def test_retry_after_is_read_like_openai_python():
  assert judges.retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
  assert judges.retry_after_seconds({"retry-after": "3"}) == 3.0
  assert judges.retry_after_seconds({"retry-after": "soon"}) is None
  assert judges.retry_after_seconds({}) is None
  date = judges.retry_after_seconds({"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"})
  assert date is not None and date > 1e6


def test_a_retry_after_beyond_the_cap_is_a_final_failure():
  async def run(url):
    return (await ask(make_client(url, max_retry_after_s=60.0)))[0]

  c = with_server(dict(error_rate=1.0, error_statuses=(429,), retry_after_s=120.0), run)
  assert (
    c.failure_reason == "http_429"
    and c.usage.http_requests == 1
    and "exceeds client.max_retry_after_s" in c.failure_detail
  )


def test_backoff_is_exponential_capped_and_jittered():
  rng = random.Random(0)
  for k in range(8):
    d = judges.backoff_delay(k, initial=0.5, maximum=8.0, jitter=0.25, rng=rng)
    assert 0.75 * min(0.5 * 2**k, 8.0) <= d <= min(0.5 * 2**k, 8.0)


@pytest.mark.parametrize(
  "knobs, reason, attempts",
  [
    (dict(hang_rate=1.0, hang_s=5.0), "timeout", 2),
    (dict(disconnect_rate=1.0), "connection", 2),
    (dict(bad_body_rate=1.0), "bad_response", 2),
  ],
)
def test_transport_faults_are_retried_then_reported(knobs, reason, attempts):
  async def run(url):
    return (await ask(make_client(url, max_retries=1, timeout_s=0.3)))[0]

  c = with_server(knobs, run)
  assert not c.ok and c.failure_reason == reason and c.usage.http_requests == attempts and c.parsed is None


def test_unparseable_answers_get_a_capped_number_of_fresh_requests():
  async def run(url):
    client = make_client(url, max_parse_retries=2, seed=40)
    return (await ask(client))[0], client.stats

  c, stats = with_server(dict(malformed_rate=1.0), run)
  assert c.failure_reason == "unparseable" and c.parsed is None
  assert (
    c.parse_attempts == 3 and c.usage.http_requests == 3 and stats.parse_retries == 2 and stats.transport_retries == 0
  )
  assert c.seed == 42  # each fresh request uses the next seed
  assert c.usage.prompt_tokens > 0 and c.usage.completion_tokens > 0  # the failed answers' tokens are counted


def test_answers_cut_at_max_tokens_are_truncated_and_not_retried_by_default():
  async def run(url):
    client = make_client(url, max_tokens=5, max_parse_retries=3)  # the parse budget does not cover truncation
    return (await ask(client))[0], client.stats

  c, stats = with_server({}, run)
  assert c.failure_reason == "truncated" and c.finish_reason == "length" and "max_tokens=5" in c.failure_detail
  assert c.parse_attempts == c.usage.http_requests == 1
  assert stats.truncation_retries == stats.parse_retries == 0 and stats.failures == {"truncated": 1}


def test_truncation_has_its_own_retry_budget():
  async def run(url):
    client = make_client(url, max_tokens=5, max_parse_retries=0, max_truncation_retries=2, seed=7)
    return (await ask(client))[0], client.stats

  c, stats = with_server({}, run)
  assert c.failure_reason == "truncated" and c.parse_attempts == c.usage.http_requests == 3
  assert c.seed == 9 and stats.truncation_retries == 2 and stats.parse_retries == 0  # each with the next seed


@pytest.mark.parametrize(
  "knobs, client_kw, status",
  [
    (dict(model="other-judge"), {}, 404),
    (dict(max_request_bytes=1024), {}, 413),
    (dict(api_key_env="ARENA_TEST_JUDGE_KEY"), {}, 401),
    (dict(api_key_env="ARENA_TEST_JUDGE_KEY"), dict(api_key="wrong"), 401),
  ],
)
def test_client_errors_fail_at_once(monkeypatch, knobs, client_kw, status):
  monkeypatch.setenv("ARENA_TEST_JUDGE_KEY", "right")

  async def run(url):
    return (await ask(make_client(url, **client_kw)))[0]

  c = with_server(knobs, run)
  assert c.failure_reason == f"http_{status}" and c.usage.http_requests == 1


def test_the_right_api_key_is_accepted(monkeypatch):
  monkeypatch.setenv("ARENA_TEST_JUDGE_KEY", "right")

  async def run(url):
    async with aiohttp.ClientSession() as s:
      async with s.get(url + "/v1/models") as r:
        refused = r.status
      async with s.get(url + "/v1/models", headers={"Authorization": "Bearer right"}) as r:
        models = await r.json()
    return refused, models, (await ask(make_client(url, api_key="right")))[0]

  refused, models, c = with_server(dict(api_key_env="ARENA_TEST_JUDGE_KEY"), run)
  assert refused == 401 and models["data"][0]["id"] == "arena-judge" and c.ok


def test_mixed_faults_against_the_server_process():
  with judges.EmbeddedJudgeServer(
    error_rate=0.2, disconnect_rate=0.05, malformed_rate=0.2, bad_body_rate=0.05, seed=3
  ) as s:
    client = make_client(s.url, max_retries=10, max_parse_retries=6)
    answers = asyncio.run(ask(client, 40))
  assert all(c.ok and c.parsed == Verdict.FIRST_WINS for c in answers)
  st = client.stats
  assert st.transport_retries > 0 and st.parse_retries > 0 and st.succeeded == 40


# ── endpoints ──


def test_load_is_spread_and_per_endpoint_limits_hold():
  async def main():
    async with judges.serve_in_process(latency_ms=20) as a, judges.serve_in_process(latency_ms=20) as b:
      client = make_client([a, b], concurrency=3)
      answers = await ask(client, 40)
      return answers, client.stats, await server_stats(a), await server_stats(b)

  answers, stats, sa, sb = asyncio.run(main())
  assert all(c.ok for c in answers)
  assert sa["answered"] >= 10 and sb["answered"] >= 10 and sa["answered"] + sb["answered"] == 40
  assert sa["max_in_flight"] <= 3 and sb["max_in_flight"] <= 3
  assert sum(v["requests"] for v in stats.per_endpoint.values()) == 40


def test_a_server_with_few_slots_queues_what_it_cannot_answer_at_once():
  async def run(url):
    answers = await ask(make_client(url, concurrency=8), 8)
    return answers, await server_stats(url)

  answers, st = with_server(dict(latency_ms=30, slots=2), run)
  assert all(c.ok for c in answers)
  assert st["max_in_flight"] > 2 and st["max_active"] == 2  # 8 sent at once, 2 answered at a time
  assert st["max_queued"] >= 1 and st["queue_wait_s"] > 0 and st["queued"] == 0


def test_a_dead_endpoint_is_retried_elsewhere_and_cooled_down():
  with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}"

  async def run(url):
    client = make_client([dead, url], concurrency=2, failures_before_cooldown=2, cooldown_s=60.0)
    answers = await ask(client, 20)
    return answers, client.stats

  answers, stats = with_server(dict(latency_ms=5), run)
  assert all(c.ok for c in answers)
  assert 1 <= stats.per_endpoint[dead]["errors"] == stats.per_endpoint[dead]["requests"] <= 4
  assert stats.transport_retries == stats.per_endpoint[dead]["errors"]


def test_the_cache_answers_repeated_requests(tmp_path):
  async def run(url):
    first = (await ask(make_client(url, cache_dir=str(tmp_path))))[0]
    client = make_client(url, cache_dir=str(tmp_path))
    again = (await ask(client))[0]
    other_seed = (await ask(make_client(url, cache_dir=str(tmp_path), seed=1)))[0]
    return first, again, other_seed, client.stats, await server_stats(url)

  first, again, other_seed, stats, served = with_server({}, run)
  assert first.ok and not first.cached and again.cached and again.usage.http_requests == 0
  assert again.parsed == first.parsed and again.content == first.content and stats.cache_hits == 1
  assert not other_seed.cached and served["answered"] == 2


def test_a_client_outlives_its_event_loop(server):
  client = make_client(server.url)
  a = asyncio.run(ask(client))[0]
  b = asyncio.run(ask(client))[0]
  assert a.ok and b.ok and client.stats.usage.calls == 2
