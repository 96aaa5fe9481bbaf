"""The judge's token count (`judge.tokenizer`, `judges.tokens`): traces cut to the budget and requests to the
judge's context by the judge's own tokenizer or its server's `POST /tokenize`, where the estimate undercounts."""

import asyncio

import aiohttp
import pytest
from aiohttp import web

from arena_jax import judges
from arena_jax import tokenizer as tok
from tests.tokenizer_fixtures import arithmetic_corpus, write_bpe_tokenizer
from arena_jax.errors import ConfigError
from arena_jax.judges import hygiene, tokens

from tests.judges.conftest import fast_config

CHATML = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
NOWHERE = ["http://127.0.0.1:9"]  # judges built only to cut traces; never called


_corpus = arithmetic_corpus


def numbers_trace(steps=60):
  """A trace of long numbers: the estimate counts up to 3 digits as one token, these tokenizers one per digit
  (SentencePiece's split_digits) or a few (a small byte-level BPE)."""
  lines = [f"Step {i}: {1234567 + i} + {7654321 * i} = {1234567 + i + 7654321 * i}." for i in range(steps)]
  return "\n\n".join(lines) + "\n\nAnswer: 42"


@pytest.fixture(scope="module")
def sp_path(tmp_path_factory):
  """A SentencePiece `.model` (digits split, byte fallback): a tokenizer the estimate undercounts ~2.3×."""
  path = tmp_path_factory.mktemp("sp") / "judge.model"
  tok.SentencePieceTokenizer.train(_corpus(), vocab_size=400, byte_fallback=True).save(path)
  return str(path)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
  """A HF tokenizer directory (byte-level BPE, tokenizer.json) with a ChatML chat template."""
  path = tmp_path_factory.mktemp("hf")
  write_bpe_tokenizer(
    path,
    vocab_size=320,
    special_tokens=["<pad>", "<|im_end|>", "<|im_start|>", "<unk>"],
    config={"eos_token": "<|im_end|>", "pad_token": "<pad>", "chat_template": CHATML},
  )
  return str(path)


def _judge(config, urls=NOWHERE):
  return judges.make_judge(config, urls)


def test_a_trace_the_estimate_undercounts_is_cut_to_the_budget_by_the_judges_tokenizer(sp_path):
  sp = tok.load_tokenizer(sp_path)
  trace = numbers_trace()
  assert hygiene.count_tokens(trace) < 1000 < 2 * 1000 < len(sp.encode(trace))  # the estimate: less than half
  config = fast_config()
  config.token_budget = 1000
  assert _judge(config).trace(trace) == trace  # the estimate lets the whole trace through: over twice the budget
  config.tokenizer = sp_path
  shown = _judge(config).trace(trace)
  assert 0.85 * 1000 <= len(sp.encode(shown)) <= 1000  # cut to the budget, by the judge's count, and not far below
  assert "tokens omitted" in shown and shown.endswith("Answer: 42") and shown.startswith("Step 0:")


def test_cuts_search_the_estimates_budget_to_the_counters():
  """`fit_text` with a counter that counts 3 tokens per estimated one: within the budget, and close to it."""

  async def count(text):
    return 3 * hygiene.count_tokens(text)

  text = "\n\n".join(f"Step {i}: the value is now {i * 17} and we go on." for i in range(300))
  for budget in (300, 1000, 3000):
    out = asyncio.run(tokens.fit_text(text, budget, count, tail_fraction=0.25))
    assert 0.8 * budget <= 3 * hygiene.count_tokens(out) <= budget, budget
  assert tokens.water_fill([100, 900, 50], 600) == [100, 450, 50]  # the longest trace is cut first
  assert tokens.water_fill([400, 500], 600) == [300, 300]


def _pair(demos, trace, second=None):
  d = demos["clean"]
  return d.prompt, d.example.answer, trace, d.example.solution if second is None else second


def long_pair(demos):
  return _pair(demos, numbers_trace(), numbers_trace().replace("Answer: 42", "Answer: 43"))


def _compare(config, url, pair):
  async def main():
    judge = _judge(config, [url])
    try:
      return await judge.compare(*pair, key="k"), judge
    finally:
      await judge.close()

  return asyncio.run(main())


def test_requests_fit_the_judges_context_by_its_tokenizer_over_http(sp_path, demos):
  """A judge server with this tokenizer and a 4000-token context (vLLM's max_model_len): the estimate's
  request is refused with vLLM's HTTP 400, the tokenizer's is cut to fit and judged."""
  pair = long_pair(demos)
  config = fast_config()
  config.max_tokens, config.context_tokens = 1024, 4000

  async def main():
    async with judges.serve_in_process(tokenizer=sp_path, max_model_len=4000) as url:
      estimate = judges.make_judge(config, [url])
      config.tokenizer = sp_path
      judge = judges.make_judge(config, [url])
      try:
        return await estimate.compare(*pair, key="k"), await judge.compare(*pair, key="k")
      finally:
        await estimate.close()
        await judge.close()

  refused, judged = asyncio.run(main())
  assert refused.failure_reason == "http_400" and "maximum context length is 4000" in refused.failure_detail
  assert judged.ok, (judged.failure_reason, judged.failure_detail)
  # The answer budget gives way first, down to MIN_ANSWER_TOKENS; then the traces are cut, just enough (without a
  # chat template the count adds 8 per message and 64 per request: a little to spare, not much).
  limit = 4000 - judges.tokens.MIN_ANSWER_TOKENS
  assert limit - 250 <= judged.usage.prompt_tokens <= limit


def test_the_server_counts_over_http_and_its_context_bounds_the_request(hf_dir, demos):
  """`judge.tokenizer = "server"`: vLLM's POST /tokenize on the judge (here the embedded server with a HF
  tokenizer and its chat template): the request is counted as the server renders it, the server's
  max_model_len is the context, and counts are cached."""
  hf = tok.load_tokenizer(hf_dir)
  trace = numbers_trace()
  assert len(hf.encode(trace)) > 1.5 * hygiene.count_tokens(trace)  # this tokenizer too is undercounted
  pair = long_pair(demos)
  context = 5000
  config = fast_config()
  config.max_tokens = 1024

  async def main():
    async with judges.serve_in_process(tokenizer=hf_dir, max_model_len=context) as url:
      async with aiohttp.ClientSession() as s:
        body = {"model": config.model, "messages": messages_of(trace)}
        async with s.post(judges.tokenize_url(url), json=body) as r:
          counted = await r.json()
        async with s.post(url + "/tokenize", json={"prompt": trace, "add_special_tokens": False}) as r:
          text = await r.json()
      estimate = judges.make_judge(config, [url])
      config.tokenizer = "server"
      judge = judges.make_judge(config, [url])
      config.tokenizer = hf_dir
      local = judges.make_judge(config, [url])
      try:
        refused = await estimate.compare(*pair, key="k")
        first = await judge.compare(*pair, key="k")
        asked = judge.fitter.counter.requests
        again = await judge.compare(*pair, key="k")
        return counted, text, refused, first, again, asked, judge.fitter.counter.requests, local
      finally:
        for j in (estimate, judge, local):
          await j.close()

  counted, text, refused, first, again, asked, asked_after, local = asyncio.run(main())
  # The server's count of a request is its chat template's rendering, tokenised; a local tokenizer with the
  # same template counts the same, exactly.
  assert counted["max_model_len"] == context and counted["count"] == len(counted["tokens"])
  assert counted["count"] == len(hf.encode(hf.apply_chat_template(messages_of(trace)))) > text["count"]
  assert counted["count"] == local.fitter.counter.count_messages(messages_of(trace))
  assert text["count"] == len(hf.encode(trace))
  assert refused.failure_reason == "http_400"  # the estimate's request exceeds the context
  for r in (first, again):
    assert r.ok, (r.failure_reason, r.failure_detail)
    # The server's own count: within what the context leaves an answer of MIN_ANSWER_TOKENS (the answer budget gives
    # way first, the traces are cut after), and the server took the request with its clipped max_tokens.
    assert r.usage.prompt_tokens <= context - judges.tokens.MIN_ANSWER_TOKENS
  assert asked > 0 and asked_after == asked  # the second, identical judgment was counted from the cache


def messages_of(trace):
  return judges.load_templates().messages("pairwise", problem="p", reference="r", trace_a=trace, trace_b="b")


def test_a_request_that_cannot_fit_fails_without_a_call(sp_path, demos):
  config = fast_config()
  config.tokenizer, config.max_tokens, config.context_tokens = sp_path, 1024, 700
  r, judge = _compare(config, "http://127.0.0.1:9", long_pair(demos))  # 700 − an answer of 512: the template alone
  assert r.failure_reason == "context" and judge.client.stats.usage.http_requests == 0
  assert "judge.context_tokens" in r.failure_detail and "an answer of 512" in r.failure_detail
  # A context below max_tokens (the default 16,384 against an 8,192-token judge once failed every judgment): the
  # answer budget is what the prompt leaves, and the request is sent (here to a closed port).
  config.max_tokens, config.context_tokens = 4096, 2500
  r, judge = _compare(config, "http://127.0.0.1:9", _pair(demos, "short"))
  assert r.failure_reason == "connection" and judge.client.stats.usage.http_requests >= 1


def test_bad_tokenizer_values_are_errors_naming_the_field(tmp_path):
  config = fast_config()
  for value, words in (
    ("/no/such/tokenizer", "no such file or directory"),
    (str(tmp_path), "neither tokenizer.json nor tokenizer.model"),
  ):
    config.tokenizer = value
    with pytest.raises(ConfigError, match=f"judge.tokenizer: .*{words}"):
      judges.validate_config(config)
  garbage = tmp_path / "broken.model"
  garbage.write_bytes(b"not a sentencepiece model")
  config.tokenizer = str(garbage)
  with pytest.raises(ConfigError, match="judge.tokenizer: cannot load a tokenizer from .*broken.model"):
    _judge(config)
  config.tokenizer, config.context_tokens = "", -1
  with pytest.raises(ConfigError, match="judge.context_tokens"):
    judges.validate_config(config)
  config.context_tokens = 0
  config.server.tokenizer = "server"
  with pytest.raises(ConfigError, match="judge.server.tokenizer"):
    judges.validate_config(config)


async def _serve(app):
  runner = web.AppRunner(app)
  await runner.setup()
  site = web.TCPSite(runner, "127.0.0.1", 0)
  await site.start()
  return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


def test_a_server_without_tokenize_is_an_error_naming_the_field_and_the_url(demos):
  """A judge that is no vLLM (404 at /tokenize) cannot count: the run stops, saying what to set."""
  config = fast_config()
  config.tokenizer = "server"

  async def models(request):
    del request
    return web.json_response({"object": "list", "data": [{"id": config.model, "object": "model"}]})

  async def main():
    app = web.Application()  # an OpenAI-compatible server without /tokenize (404 there)
    app.router.add_get("/v1/models", models)
    runner, url = await _serve(app)
    judge = _judge(config, [url + "/v1"])
    try:
      with pytest.raises(ConfigError) as e:
        await judge.compare(*_pair(demos, "Answer: 1"), key="k")
      config.urls = (url + "/v1",)
      with pytest.raises(ConfigError) as at_start:  # the trainer's start-up check says it before any step
        await asyncio.to_thread(judges.check_judge_urls, config)
      async with judges.serve_in_process() as embedded:  # the embedded judge counts: the check passes
        config.urls = (embedded,)
        await asyncio.to_thread(judges.check_judge_urls, config)
      return str(e.value), str(at_start.value), url
    finally:
      await judge.close()
      await runner.cleanup()

  message, at_start, url = asyncio.run(main())
  assert "judge.tokenizer = 'server'" in message and f"{url}/tokenize" in message and "HTTP 404" in message
  assert "judge.tokenizer = 'server'" in at_start and f"{url}/tokenize: HTTP 404" in at_start


def test_a_server_that_fails_to_count_fails_the_judgment_not_the_run(demos):
  config = fast_config(max_retries=1)
  config.tokenizer = "server"
  asked = []

  async def unavailable(request):
    asked.append(await request.json())
    return web.json_response({"error": {"message": "overloaded"}}, status=503)

  async def main():
    app = web.Application()
    app.router.add_post("/tokenize", unavailable)
    runner, url = await _serve(app)
    judge = _judge(config, [url])
    try:
      return await judge.compare(*_pair(demos, "Answer: 1"), key="k")
    finally:
      await judge.close()
      await runner.cleanup()

  r = asyncio.run(main())
  assert r.failure_reason == "tokenize" and "HTTP 503" in r.failure_detail and len(asked) == 2  # one retry
  assert asked[0] == {"model": config.model, "prompt": "Answer: 1", "add_special_tokens": False}  # vLLM's form


def test_tokenize_urls_sit_at_the_servers_root():
  for base in ("http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/chat/completions"):
    assert judges.tokenize_url(base) == "http://h:8000/tokenize"
  assert judges.tokenize_url("http://h/judge/v1") == "http://h/judge/tokenize"


def test_the_jury_and_the_pointwise_judge_cut_by_the_judges_tokenizer(sp_path, demos):
  sp = tok.load_tokenizer(sp_path)
  config = fast_config()
  config.tokenizer, config.token_budget = sp_path, 800
  d = demos["clean"]

  async def main():
    async with judges.serve_in_process(tokenizer=sp_path) as url:
      config.backend = "pointwise"
      scorer = judges.make_judge(config, [url])
      config.backend = "jury"
      jury = judges.make_judge(config, [url])
      try:
        return await scorer.score(d.prompt, d.example.answer, numbers_trace()), await jury.jury.audit(
          d.prompt, numbers_trace(), d.example.answer
        )
      finally:
        await scorer.close()
        await jury.close()

  scored, verdict = asyncio.run(main())
  assert scored.ok and verdict.ok, (scored.failure_detail, verdict.failure_reason)
  shown = judges.make_judge(config, NOWHERE).jury.fitter.cut_now(numbers_trace())
  assert len(sp.encode(shown)) <= 800 and "tokens omitted" in shown
