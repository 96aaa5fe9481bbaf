"""What a served reasoning judge needs from the client: a per-judgment deadline, separate retry budgets,
truncation not retried by default, and `judge.extra_body` sent verbatim (config, flags, errors).

Nothing here times the client: the deadlines are short so that the tests are quick, and the only timing
assertions are generous guards against a hang (a judgment that slept or waited past its deadline).
"""

import asyncio
import contextlib
import dataclasses
import json
import time

import pytest
from absl import flags
from aiohttp import web
from ml_collections import config_flags

from arena_jax import judges
from arena_jax.judges.client import judge_client as client_lib
from arena_jax.arena import Verdict
from tests.judges.test_client import MESSAGES, ask, make_client, with_server

HANG_GUARD_S = 15.0  # far above every deadline below, far below what the old limits allowed

OK = {
  "choices": [
    {"message": {"content": "Fine.\n\n[[A]]", "reasoning_content": "I compared them."}, "finish_reason": "stop"}
  ],
  "usage": {"prompt_tokens": 7, "completion_tokens": 3},
}
UNPARSEABLE = {"choices": [{"message": {"content": "I cannot decide."}, "finish_reason": "stop"}]}
THOUGHT_ONLY = {"choices": [{"message": {"content": None, "reasoning_content": "Step 1 ..."}, "finish_reason": "stop"}]}


@contextlib.asynccontextmanager
async def scripted_server(script):
  """A chat-completions server answering its i-th request with `script[i]` (the last one repeated): a
  dict is a 200 JSON body, an int an HTTP error status. Yields (url, the request bodies received)."""
  bodies = []

  async def handler(request):
    bodies.append(await request.json())
    step = script[min(len(bodies), len(script)) - 1]
    if isinstance(step, int):
      return web.Response(status=step, text="scripted error")
    return web.json_response(step)

  app = web.Application()
  app.router.add_post("/v1/chat/completions", handler)
  runner = web.AppRunner(app, shutdown_timeout=0.1)
  await runner.setup()
  site = web.TCPSite(runner, "127.0.0.1", 0)
  await site.start()
  host, port = runner.addresses[0][:2]
  try:
    yield f"http://{host}:{port}/v1", bodies
  finally:
    await runner.cleanup()


def run_scripted(script, **client_kw):
  async def main():
    async with scripted_server(script) as (url, bodies):
      client = make_client(url, **client_kw)
      (c,) = await ask(client)
      return c, client.stats, bodies

  return asyncio.run(main())


# ── the deadline ──


def test_a_judge_slower_than_the_deadline_fails_with_reason_deadline():
  async def run(url):
    client = make_client(url, deadline_s=0.5, timeout_s=30.0, max_retries=5)
    return (await ask(client))[0], client.stats

  c, stats = with_server(dict(hang_rate=1.0, hang_s=60.0), run)
  assert not c.ok and c.failure_reason == "deadline" and "client.deadline_s" in c.failure_detail
  # The attempt was clipped to the deadline, so nothing was left to retry with.
  assert c.usage.http_requests == 1 and stats.transport_retries == 0 and stats.failures == {"deadline": 1}
  assert c.usage.latency_s < HANG_GUARD_S


def test_timeouts_are_retried_only_until_the_deadline():
  async def run(url):
    client = make_client(url, deadline_s=0.7, timeout_s=0.2, max_retries=100)
    return (await ask(client))[0], client.stats

  c, stats = with_server(dict(hang_rate=1.0, hang_s=60.0), run)
  assert c.failure_reason == "deadline"
  # Every attempt but the last ran its full 0.2 s, so at most 0.7 / 0.2 + 1 of them fit: the budget of
  # 100 retries is never reached.
  assert 1 <= c.usage.http_requests <= 4 and stats.transport_retries == c.usage.http_requests - 1
  if c.usage.http_requests > 1:
    assert "before it: timeout" in c.failure_detail
  assert c.usage.latency_s < HANG_GUARD_S


def test_a_retry_after_beyond_the_deadline_ends_the_judgment_without_sleeping():
  async def run(url):
    client = make_client(url, deadline_s=10.0, max_retry_after_s=300.0)
    return (await ask(client))[0]

  c = with_server(dict(error_rate=1.0, error_statuses=(503,), retry_after_s=40.0), run)
  assert c.failure_reason == "deadline" and c.usage.http_requests == 1
  assert "due in 40 s" in c.failure_detail and "before it: http_503" in c.failure_detail
  assert c.usage.latency_s < HANG_GUARD_S  # it did not sleep the 40 s


def test_a_backoff_beyond_the_deadline_ends_the_judgment_without_sleeping():
  c, stats, _ = run_scripted([503], deadline_s=5.0, backoff_initial_s=30.0, backoff_max_s=30.0, jitter=0.0)
  assert c.failure_reason == "deadline" and c.usage.http_requests == 1 and stats.transport_retries == 0
  assert c.usage.latency_s < HANG_GUARD_S


def test_parse_retries_stop_at_the_deadline():
  async def run(url):
    client = make_client(url, deadline_s=1.5, max_parse_retries=100)
    return (await ask(client))[0]

  c = with_server(dict(malformed_rate=1.0, latency_ms=200), run)
  assert c.failure_reason == "deadline" and "before it: unparseable" in c.failure_detail
  assert 1 <= c.parse_attempts <= 8 and c.usage.latency_s < HANG_GUARD_S  # each answer takes ≥ 0.2 s


def test_waiting_for_a_free_slot_does_not_count_against_the_deadline():
  async def run(url):
    client = make_client(url, concurrency=1, deadline_s=1.0)
    return await ask(client, 30)

  # 30 judgments of 50 ms through one slot: the last waits ~1.5 s in the queue, longer than its deadline.
  answers = with_server(dict(latency_ms=50), run)
  assert all(c.ok for c in answers)


def test_a_retry_waiting_for_a_slot_gives_up_at_the_deadline_and_leaks_nothing():
  async def main():
    client = make_client("http://127.0.0.1:9", concurrency=1)
    client._ensure_loop_state()
    held = await client._acquire(None, client_lib._Budget(0, 0, 0))
    expired = await client._acquire(None, client_lib._Budget(0, 0, 0, deadline=time.monotonic() + 0.05))
    client._release(held, failed=False)
    again = await asyncio.wait_for(client._acquire(None, client_lib._Budget(0, 0, 0)), HANG_GUARD_S)
    await client.close()
    return held, expired, again

  held, expired, again = asyncio.run(main())
  assert expired is None and again is held and again.in_flight == 1


# ── separate retry budgets ──


@pytest.mark.parametrize("max_retries, ok, requests", [(1, False, 3), (2, True, 4)])
def test_transport_retries_are_one_budget_per_judgment(max_retries, ok, requests):
  # 503, an unparseable answer (its own budget), 503 again, then a verdict.
  c, stats, bodies = run_scripted([503, UNPARSEABLE, 503, OK], max_retries=max_retries, max_parse_retries=1)
  assert c.ok is ok and c.usage.http_requests == len(bodies) == requests
  assert c.failure_reason == (None if ok else "http_503") and stats.parse_retries == 1
  assert [b["seed"] for b in bodies] == [0, 0, 1, 1][:requests]  # a fresh answer gets the next seed


def test_an_answer_with_only_reasoning_is_unparseable_and_says_so():
  c, _, _ = run_scripted([THOUGHT_ONLY], max_parse_retries=0)
  assert c.failure_reason == "unparseable" and "no content, only reasoning" in c.failure_detail
  assert c.reasoning == "Step 1 ..."


def test_the_verdict_is_read_from_the_content_and_the_reasoning_kept_apart():
  c, _, _ = run_scripted([OK])
  assert c.ok and c.parsed == Verdict.FIRST_WINS and c.reasoning == "I compared them."


# ── extra_body ──

THINKING = {"chat_template_kwargs": {"enable_thinking": True}, "top_k": 20, "stop": ["</verdict>"]}


def test_extra_body_reaches_the_server_verbatim_from_the_config():
  config = judges.default_config()
  config.extra_body = THINKING
  config = judges.validate_config(config).copy_and_resolve_references()  # as the trainer passes it on

  async def main():
    async with scripted_server([OK]) as (url, bodies):
      client = judges.JudgeClient.from_config(config, [url])
      async with client:
        c = await client.chat(MESSAGES, parse=judges.parse_pairwise)
      return c, bodies

  c, (body,) = asyncio.run(main())
  assert c.ok
  assert body == {
    "model": config.model,
    "messages": MESSAGES,
    "temperature": 0.0,
    "max_tokens": 16384,
    "seed": 0,
    **THINKING,
  }


@pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")  # ml_collections loading the file
@pytest.mark.parametrize(
  "flag",
  [
    '{"chat_template_kwargs": {"enable_thinking": True}, "top_k": 20, "stop": ["</verdict>"]}',  # Python literal
    '{"chat_template_kwargs": {"enable_thinking": true}, "top_k": 20, "stop": ["</verdict>"]}',  # JSON text
  ],
)
def test_extra_body_can_be_set_on_the_command_line(tmp_path, flag):
  path = tmp_path / "judge_config.py"
  path.write_text("from arena_jax import judges\n\ndef get_config():\n  return judges.default_config()\n")
  argv = ["train", f"--config={path}", f"--config.extra_body={flag}"]
  flag_values = flags.FlagValues()
  # As launch/*.py define it; the override flags are found in argv when the flag is defined.
  holder = config_flags.DEFINE_config_file("config", flag_values=flag_values, lock_config=True, sys_argv=argv)
  flag_values(argv)
  config = judges.validate_config(holder.value)
  assert judges.JudgeClient.from_config(config, ["http://judge:8000"]).settings.extra_body == THINKING


def _declared(config, name):
  """A client setting's value in a judge config: `judge.<name>`, else `judge.client.<name>`."""
  return config[name] if name in config else config.client[name]


def test_client_settings_read_every_field_from_the_judge_config(monkeypatch):
  monkeypatch.setenv("ARENA_TEST_JUDGE_KEY", "k3y")
  config = judges.default_config()
  config.api_key_env = "ARENA_TEST_JUDGE_KEY"
  wanted = {}
  for f in dataclasses.fields(judges.JudgeClientSettings):
    if f.name in ("api_key", "rng_seed"):  # not config fields: the key's variable is named; the jitter's seed is not
      continue
    value = _declared(config, f.name)
    if value is None:
      changed = THINKING  # extra_body
    elif isinstance(value, str):
      changed = value + "x"
    else:
      changed = value + (1 if isinstance(value, int) else 0.5)
    (config if f.name in config else config.client)[f.name] = changed
    wanted[f.name] = changed
  settings = judges.JudgeClientSettings.from_config(config)
  assert {name: getattr(settings, name) for name in wanted} == wanted and settings.api_key == "k3y"
  client = judges.JudgeClient.from_config(config, ["http://judge:8000"], model="other", max_retries=0)
  assert client.settings == dataclasses.replace(settings, model="other", max_retries=0)
  assert "k3y" not in repr(client.settings)


def test_a_client_made_without_a_config_has_the_declared_defaults_and_no_key(monkeypatch):
  monkeypatch.setenv("ARENA_JUDGE_API_KEY", "from-env")  # judge.api_key_env's default: read only with a config
  config = judges.default_config()
  settings = judges.JudgeClient(["http://judge:8000"], model="m", jitter=0.5).settings
  for f in dataclasses.fields(settings):
    if f.name not in ("model", "api_key", "rng_seed", "jitter", "extra_body"):
      assert getattr(settings, f.name) == _declared(config, f.name), f.name
  assert (settings.model, settings.api_key, settings.jitter, settings.extra_body) == ("m", None, 0.5, {})
  with pytest.raises(TypeError, match="model"):
    judges.JudgeClient(["http://judge:8000"])


@pytest.mark.parametrize(
  "value, says",
  [
    ({"max_tokens": 100}, "must not set ['max_tokens']"),
    ({"model": "x", "seed": 3}, "must not set ['model', 'seed']"),
    ({"messages": []}, "must not set ['messages']"),
    ({"temperature": 1.0}, "must not set ['temperature']"),
    ({"max_completion_tokens": 9}, "must not set ['max_completion_tokens']"),
    ({"n": 2}, "must not set ['n']"),
    ({"stream": True}, "must not set ['stream']"),
    ({"top_p": float("nan")}, "only JSON values"),
    ({"logit_bias": {7: 1.0}}, "keys must be strings"),
    ({"stop": {"a", "b"}}, "only JSON values"),
    ("{'enable_thinking': True}", "is not JSON"),
    ('["enable_thinking"]', "must be a dict"),
    (("chat_template_kwargs",), "must be a dict"),
  ],
)
def test_bad_extra_body_is_a_config_error_naming_the_field(value, says):
  config = judges.default_config()
  config.extra_body = value
  with pytest.raises(ValueError, match=r"^judge\.extra_body: ") as e:
    judges.validate_config(config)
  assert says in str(e.value)


def test_the_client_refuses_extra_body_that_overrides_its_own_keys():
  with pytest.raises(ValueError, match=r"extra_body.*must not set \['seed'\]"):
    judges.JudgeClient(["http://judge:8000"], model="m", extra_body={"seed": 1})


@pytest.mark.parametrize(
  "path, value",
  [
    ("client.deadline_s", 0.0),
    ("client.deadline_s", float("inf")),
    ("client.max_truncation_retries", -1),
  ],
)
def test_bad_limits_are_named(path, value):
  config = judges.default_config()
  section, name = path.split(".")
  config[section][name] = value
  with pytest.raises(ValueError, match=rf"^judge\.{section}\.{name}: "):
    judges.validate_config(config)


def test_defaults_suit_a_reasoning_judge():
  config = judges.validate_config(judges.default_config())
  c = config.client
  assert config.max_tokens >= 16384 and config.extra_body is None and c.max_truncation_retries == 0
  assert c.timeout_s <= c.deadline_s  # one attempt may use a whole deadline: a long thought is not cut short
  body = judges.JudgeClient.from_config(config, ["http://judge:8000"]).payload(MESSAGES)
  assert json.loads(json.dumps(body)) == body and body["max_tokens"] == config.max_tokens
