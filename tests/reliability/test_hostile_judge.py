"""A hostile judge cannot stop training; no secret reaches disk; a wrong judge URL fails at start; the
embedded server defends itself.

A judge here is hostile rather than flaky: its answers are well-formed HTTP whose contents are not what
the protocol promises (`judges/embedded/hostile.py`). Whatever it sends, the client returns a failed judgment with
a reason, within its deadline; a step whose judging raises anyway costs that step's judge signal, counted;
a judge that fails every call stops the run after `reward.max_judge_outage_steps`.
"""

import asyncio
import json
import math
import os
import socket
import threading
import urllib.error
import urllib.request

import pytest

from arena_jax import judges
from arena_jax.errors import UserError
from arena_jax.judges import client as client_lib
from arena_jax.judges.embedded import hostile
from arena_jax.judges.embedded import simulated
from arena_jax.train import train
from arena_jax.train import trainer as trainer_lib
from tests.reliability.helpers import (
  fast_client,
  free_port,
  judge_in_thread,
  killable_judge,
  read_rows,
  serve_routes,
  smoke_config,
)

pytestmark = pytest.mark.heavy  # whole runs of the trainer: started early (tests/conftest.py)

MESSAGES = judges.load_templates().messages(
  "pairwise",
  problem="Question: Compute 7 + 5.\nSolution:\n",
  reference="12",
  trace_a="7 + 5 = 12.\n\nAnswer: 12",
  trace_b="7 + 5 = 13.\n\nAnswer: 13",
)
BOUND_S = 60.0  # no judgment below may run this long: a bound on hangs, not a timing


def _ask(url, n=8, parse=judges.parse_pairwise, **client):
  """`n` judgments through a fast client; fails the test if they do not all end within BOUND_S."""
  options = dict(
    model=judges.server_config().model,
    backoff_initial_s=0.001,
    backoff_max_s=0.004,
    timeout_s=10.0,
    deadline_s=30.0,
    max_retries=0,
    max_parse_retries=0,
  )
  options.update(client)
  c = judges.JudgeClient([url], **options)

  async def main():
    async with c:
      return await asyncio.wait_for(asyncio.gather(*(c.chat(MESSAGES, parse=parse, seed=i) for i in range(n))), BOUND_S)

  return asyncio.run(main()), c.stats


# ── item 1: whatever a judge answers is a failed judgment with a reason ──


@pytest.mark.parametrize("path,value", hostile.WRONG_TYPES)
def test_every_field_of_a_wrong_type_is_a_bad_response_not_an_exception(path, value):
  body = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "[[A]]"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
  }
  assert client_lib.completion_fields(json.dumps(body).encode())["content"] == "[[A]]"
  hostile._put(body, path, value)  # pylint: disable=protected-access
  with pytest.raises(ValueError, match=str(path[-1]) if path[-1] != 0 else "choices"):
    client_lib.completion_fields(json.dumps(body).encode())


@pytest.mark.parametrize("kind", hostile.HOSTILE_KINDS)
def test_hostile_answers_fail_the_judgment_with_a_reason(kind):
  async def main():
    async with judges.serve_in_process(hostile_rate=1.0, hostile_kinds=(kind,), hostile_bytes=1 << 20) as url:
      return await asyncio.to_thread(_ask, url, max_response_bytes=64 << 10, max_retries=2)

  results, stats = asyncio.run(main())
  reasons = {r.failure_reason for r in results}
  expected = {"http_429", "http_503", "deadline"} if kind == "bad_retry_after" else {"bad_response"}
  assert reasons <= expected and not any(r.ok for r in results), [(r.failure_reason, r.failure_detail) for r in results]
  if kind in ("huge", "bomb"):
    assert all("max_response_bytes" in r.failure_detail for r in results), [r.failure_detail for r in results]
  assert stats.failed == len(results) == 8 and stats.usage.completion_tokens == 0


def test_retry_after_values_a_client_cannot_sleep_on_are_ignored():
  for headers in hostile.RETRY_AFTERS:
    wait = client_lib.retry_after_seconds({k.lower(): v for k, v in headers.items()})
    assert wait is None or wait >= 0, (headers, wait)  # NaN and negatives would reach asyncio.sleep
  assert client_lib.retry_after_seconds({"retry-after": "2"}) == 2.0
  assert math.isinf(client_lib.retry_after_seconds({"retry-after": "inf"}))  # too long: a final failure


def test_a_parser_that_raises_on_an_answer_makes_it_unparseable():
  def parse(text):
    raise ZeroDivisionError(text[:5])

  async def main():
    async with judges.serve_in_process() as url:
      return await asyncio.to_thread(_ask, url, n=2, parse=parse)

  results, _ = asyncio.run(main())
  assert [r.failure_reason for r in results] == ["unparseable"] * 2
  assert "ZeroDivisionError" in results[0].failure_detail


def test_training_rides_out_a_hostile_judge(data_dir, tmp_path):
  c = fast_client(smoke_config("arena_live", data_dir), max_retries=1, max_response_bytes=64 << 10)
  c.num_steps, c.checkpoint.every = 3, 3
  c.judge.server.hostile_rate, c.judge.server.hostile_bytes = 0.4, 1 << 20  # every kind, drawn per request
  summary = train(c, str(tmp_path))
  rows = read_rows(tmp_path)
  assert summary["steps"] == 3 and [r["step"] for r in rows] == [1, 2, 3]
  assert all(math.isfinite(v) for r in rows for v in r.values() if isinstance(v, float)), rows
  assert sum(r.get("judge/failed/bad_response", 0) for r in rows) > 0, rows
  assert sum(r["judge/calls"] - r["judge/failures"] for r in rows) > 0  # and the honest answers still count


def test_judging_that_raises_drops_the_step_and_an_outage_stops_the_run(data_dir, tmp_path, monkeypatch):
  async def broken(*args, **kwargs):
    raise RuntimeError("a bug reached by a judge's answer")

  monkeypatch.setattr(judges, "run_tournament", broken)
  c = fast_client(smoke_config("arena_live", data_dir))
  c.num_steps, c.checkpoint.every, c.reward.max_judge_outage_steps = 8, 8, 2
  with pytest.raises(trainer_lib.JudgeOutageError, match="exception: RuntimeError: a bug reached"):
    train(c, str(tmp_path))
  rows = read_rows(tmp_path)
  assert rows and all(
    r["judge/failed/exception"] == r["judge/groups"] == r["judge/groups_all_failed"] > 0
    for r in rows
    if r["judge/groups"]
  ), rows


# ── item 4: credentials in a judge URL never reach a log, an error or the disk ──


def test_a_url_with_credentials_is_refused_and_the_secret_is_never_written(data_dir, tmp_path, capsys, caplog):
  secret = "s3cr3t-pw-4711"
  url = f"http://user:{secret}@127.0.0.1:{free_port()}/v1"
  c = smoke_config("arena_live", data_dir)
  c.judge.urls, c.judge.client.startup_check_s = (url,), 1.0
  with pytest.raises(UserError) as info:
    train(c, str(tmp_path / "run"))
  assert "judge.api_key_env" in str(info.value) and "***@127.0.0.1" in str(info.value), str(info.value)
  for api in (lambda: judges.JudgeClient([url], model="m"), lambda: judges.check_endpoints([url], timeout_s=1.0)):
    with pytest.raises(UserError) as info_api:
      api()
    assert secret not in str(info_api.value)
  out = capsys.readouterr()
  seen = [str(info.value), out.out, out.err, caplog.text]
  for root, _, files in os.walk(tmp_path):
    for name in files:
      with open(os.path.join(root, name), "rb") as f:
        seen.append(f.read().decode("utf-8", "replace"))
  assert not [s for s in seen if secret in s]


# ── item 5: the start-up check fails on a URL that is not the judge's API ──


def test_a_wrong_path_fails_the_start_up_check_naming_the_endpoint():
  with killable_judge() as judge:
    judges.check_endpoints([judge.url], timeout_s=5.0)  # the right one passes
    wrong = judge.url + "/api/judge"
    with pytest.raises(judges.JudgeUnreachableError) as info:
      judges.check_endpoints([wrong], timeout_s=5.0)
  assert f"{wrong}/v1/models" in str(info.value) and "HTTP 404" in str(info.value), str(info.value)


def test_a_200_that_is_not_a_model_list_fails_the_start_up_check():
  from aiohttp import web  # pylint: disable=g-import-not-at-top

  async def page(request):
    del request
    return web.Response(text="<html>welcome</html>", content_type="text/html")

  async def main():
    async with serve_routes(web.get("/{tail:.*}", page)) as url:
      with pytest.raises(judges.JudgeUnreachableError, match="not an OpenAI model list") as info:
        await asyncio.to_thread(judges.check_endpoints, [url], timeout_s=5.0)
      return str(info.value)

  assert "<html>welcome" in asyncio.run(main())


# ── item 6: the embedded server judges off its event loop, times out slow bodies, says 400 ──


def _http(url, body=None, headers=None, method=None):
  """(status, decoded JSON or text) of one request (30 s bound)."""
  req = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
  try:
    with urllib.request.urlopen(req, timeout=30) as r:
      return r.status, r.read().decode()
  except urllib.error.HTTPError as e:
    return e.code, e.read().decode()


def _chat(**fields):
  return json.dumps({"messages": [{"role": "user", "content": "hello"}], **fields}).encode()


def test_judging_runs_off_the_event_loop(monkeypatch):
  started, release = threading.Event(), threading.Event()
  original = simulated.JudgeLogic.reply

  def slow_reply(self, *args, **kwargs):
    started.set()
    release.wait(60)  # a judging that takes as long as the test lets it
    return original(self, *args, **kwargs)

  monkeypatch.setattr(simulated.JudgeLogic, "reply", slow_reply)
  with judge_in_thread() as url:
    answers = []
    chat = threading.Thread(target=lambda: answers.append(_http(url + "/v1/chat/completions", _chat())))
    chat.start()
    try:
      assert started.wait(30)
      req = urllib.request.Request(url + "/health")
      with urllib.request.urlopen(req, timeout=10) as r:  # answered while the judging is still running
        assert r.status == 200
    finally:
      release.set()
      chat.join(60)
  assert answers and answers[0][0] == 200, answers


def test_a_body_that_never_arrives_gets_408():
  with judge_in_thread(read_timeout_s=0.3) as url:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as s:
      s.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{\"messages\": "
      )
      answer = s.recv(4096).decode()
  assert answer.startswith("HTTP/1.1 408") and "did not arrive within 0.3 s" in answer, answer


def test_a_client_that_never_finishes_its_headers_is_disconnected():
  with judge_in_thread(read_timeout_s=0.3) as url:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as s:
      s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # and nothing more
      assert s.recv(4096) == b""  # closed by the server (a recv timeout would raise)


BAD_REQUESTS = [
  (b"[" * 100_000 + b"]" * 100_000, {}, "not valid JSON"),
  (b'{"messages": [{"role": "user", "content": "\xff\xfe\xfa"}]}', {}, "not valid JSON"),
  (_chat(), {"Content-Type": "application/json; charset=no-such-charset"}, None),  # 200: the charset is ignored
  (b"", {}, "not valid JSON"),
  (b"[1, 2]", {}, "must be a JSON object"),
  (_chat(n=2), {}, "n=2 is not supported"),
  (_chat(n="1"), {}, "n='1' is not supported"),
  (_chat(stream=True), {}, "stream=True is not supported"),
  (_chat(stream="no"), {}, "stream='no' is not supported"),
  (json.dumps({"messages": [{"role": "user", "content": [{"type": "text"}]}]}).encode(), {}, "messages must be"),
  (json.dumps({"messages": [{"content": "hi"}]}).encode(), {}, "messages must be"),
  (_chat(seed=2**64), {}, "seed must be an integer"),
  (_chat(seed=-1), {}, None),
  (_chat(max_tokens=10**30), {}, "max_tokens must be an integer"),
  (_chat(temperature=float("nan")), {}, "temperature must be"),
]


def test_every_request_it_cannot_read_gets_400_saying_why():
  with judge_in_thread() as url:
    for body, headers, problem in BAD_REQUESTS:
      status, text = _http(url + "/v1/chat/completions", body, {"Content-Type": "application/json", **headers})
      if problem is None:
        assert status == 200, (body[:60], status, text)
      else:
        assert status == 400 and problem in text, (body[:60], status, text)


def test_stats_require_the_key(monkeypatch):
  monkeypatch.setenv("RELIABILITY_STATS_KEY", "k3y")
  with judge_in_thread(api_key_env="RELIABILITY_STATS_KEY") as url:
    assert _http(url + "/stats")[0] == 401
    assert _http(url + "/stats", headers={"Authorization": "Bearer wrong"})[0] == 401
    status, text = _http(url + "/stats", headers={"Authorization": "Bearer k3y"})
    assert status == 200 and "requests" in json.loads(text)
    assert _http(url + "/health")[0] == 200  # liveness stays open


def test_a_judge_that_echoes_the_api_key_does_not_put_it_in_any_result():
  from aiohttp import web  # pylint: disable=g-import-not-at-top

  key = "sk-test-0123456789"

  async def echo(request):
    said = request.headers.get("Authorization", "")
    if (await request.json())["seed"] % 2:
      return web.json_response({"error": {"message": f"bad request from {said}"}}, status=400)
    return web.json_response(
      {"choices": [{"message": {"content": f"{said} [[A]]", "reasoning_content": said}, "finish_reason": "stop"}]}
    )

  async def main():
    async with serve_routes(web.post("/v1/chat/completions", echo)) as url:
      return await asyncio.to_thread(_ask, url, n=4, api_key=key)

  results, _ = asyncio.run(main())
  assert [r.ok for r in results] == [True, False, True, False], [r.failure_detail for r in results]
  assert all(key not in f"{r.content} {r.reasoning} {r.failure_detail}" for r in results)
  assert "Bearer ***" in results[0].content and "Bearer ***" in results[1].failure_detail


@pytest.mark.parametrize(
  "record", ["[1, 2]", '{"content": "[[A]]", "completion_tokens": -5}', '{"content": "[[A]]", "prompt_tokens": "x"}']
)
def test_a_damaged_cache_record_is_asked_again(tmp_path, record):
  cache = judges.ResponseCache(str(tmp_path))
  c = judges.JudgeClient(["http://127.0.0.1:9"], model=judges.server_config().model, cache_dir=str(tmp_path))
  key = client_lib.request_key(c.payload(MESSAGES, seed=0))
  os.makedirs(os.path.dirname(cache._path(key)), exist_ok=True)  # pylint: disable=protected-access
  with open(cache._path(key), "w", encoding="utf-8") as f:  # pylint: disable=protected-access
    f.write(record)

  async def main():
    async with judges.serve_in_process() as url:
      return await asyncio.to_thread(_ask, url, n=1, cache_dir=str(tmp_path))

  (result,), stats = asyncio.run(main())
  assert result.ok and not result.cached and stats.usage.http_requests == 1
