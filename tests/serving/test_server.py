"""`arena_jax.serving`: the OpenAI-compatible policy server, through the official `openai` client and raw
HTTP, on a tiny random policy with a byte-level BPE tokenizer and a chat template (compiles in seconds). The real
model's server is in tests/real_model/test_smoke.py."""

import concurrent.futures
import http.client
import json
import os
import threading
import time
import urllib.parse

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import models, serving
from arena_jax.sampling import Sampler
from arena_jax.tokenizer import load_tokenizer
from tests.tokenizer_fixtures import write_bpe_tokenizer

openai = pytest.importorskip("openai", reason="the `serve` extra: pip install -e '.[serve]'")

TEMPLATE = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONTEXT = 160


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
  path = tmp_path_factory.mktemp("tok")
  write_bpe_tokenizer(
    path,
    vocab_size=300,
    special_tokens=["<|endoftext|>", "<|im_end|>", "<|im_start|>"],
    config={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": TEMPLATE},
  )
  tokenizer = load_tokenizer(path)
  config = models.ModelConfig(
    vocab_size=320, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=64
  )
  params = models.pure_params(models.init_model(config, jax.random.key(0)))
  return serving.ServedPolicy(
    name="tiny", config=config, params=params, tokenizer=tokenizer, add_bos=False, context=CONTEXT, source=str(path)
  )


@pytest.fixture(scope="module")
def server(policy):
  with serving.PolicyServer(policy, max_rows=8, window_s=0.3, stream_every=4, limits=serving.Limits(max_n=4)) as s:
    yield s


@pytest.fixture(scope="module")
def client(server):
  return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


def _chat(client, content="Problem: compute 3 + 4.", **kw):
  return client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": content}], **kw)


def _prompt(policy, content="Problem: compute 3 + 4."):
  text = policy.tokenizer.apply_chat_template([{"role": "user", "content": content}])
  return list(policy.tokenizer.encode(text, add_bos=False))


def _greedy(policy, prompt, n):
  """The model's own greedy continuation of `prompt` (n tokens), and the float64 log-softmax at each position.
  Every forward runs at one length, CONTEXT (one compile): the attention is causal, so the padding after the
  last token changes no position before it."""
  model = serving.engine.model_from_params(policy.config, policy.params)
  forward = jax.jit(lambda t: model(t))

  def logits(tokens):
    padded = np.zeros((1, CONTEXT), np.int32)
    padded[0, : len(tokens)] = tokens
    return np.asarray(forward(padded), np.float64)[0, : len(tokens)]

  tokens = list(prompt)
  for _ in range(n):
    tokens.append(int(np.argmax(logits(tokens)[-1])))
  out = logits(tokens)
  top = out.max(-1, keepdims=True)
  return tokens[len(prompt) :], out - top - np.log(np.exp(out - top).sum(-1, keepdims=True))


def _post(server, path, body: bytes | str, *, read=True):
  u = urllib.parse.urlsplit(server.url)
  conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
  conn.request(
    "POST", path, body=body if isinstance(body, bytes) else body.encode(), headers={"Content-Type": "application/json"}
  )
  r = conn.getresponse()
  if not read:
    return conn, r
  out = r.status, json.loads(r.read())
  conn.close()
  return out


def _stats(server):
  u = urllib.parse.urlsplit(server.url)
  conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
  conn.request("GET", "/stats")
  out = json.loads(conn.getresponse().read())
  conn.close()
  return out


def test_models_lists_the_policy_with_its_context(client):
  (card,) = client.models.list().data
  assert card.id == "tiny" and card.model_extra["max_model_len"] == CONTEXT
  assert client.models.retrieve("tiny").id == "tiny"


def test_a_chat_completion_is_the_chat_templated_prompt_sampled(client, policy):
  r = _chat(client, max_tokens=12, temperature=0)
  (choice,) = r.choices
  prompt = _prompt(policy)
  assert r.usage.prompt_tokens == len(prompt)
  # All 12 tokens when cut at the budget; fewer when the model stopped itself.
  assert (r.usage.completion_tokens == 12) if choice.finish_reason == "length" else (r.usage.completion_tokens < 12)
  assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
  assert choice.finish_reason in ("stop", "length") and choice.message.role == "assistant"
  # Greedy: the same request gives the same text; and the text is the model's own greedy continuation.
  assert _chat(client, max_tokens=12, temperature=0).choices[0].message.content == choice.message.content
  tokens, _ = _greedy(policy, prompt, r.usage.completion_tokens)
  assert policy.tokenizer.decode(tokens, stop_at_eos=False) == choice.message.content


def test_n_max_tokens_and_seed(client):
  r = _chat(client, n=3, max_tokens=8, temperature=1.0, seed=7)
  assert [c.index for c in r.choices] == [0, 1, 2]
  assert all(c.finish_reason == "length" for c in r.choices if len(c.message.content) > 0)
  assert r.usage.completion_tokens <= 3 * 8
  again = _chat(client, n=3, max_tokens=8, temperature=1.0, seed=7)
  assert [c.message.content for c in again.choices] == [c.message.content for c in r.choices]
  other = _chat(client, n=3, max_tokens=8, temperature=1.0, seed=8)
  assert [c.message.content for c in other.choices] != [c.message.content for c in r.choices]


def test_stop_strings_cut_the_text(client):
  full = _chat(client, max_tokens=24, temperature=0).choices[0].message.content
  assert len(full) > 4
  stop = full[2:4]
  r = _chat(client, max_tokens=24, temperature=0, stop=[stop])
  assert r.choices[0].message.content == full[: full.index(stop)]
  assert r.choices[0].finish_reason == "stop"


def test_streaming_gives_the_same_text_in_pieces_and_the_usage(client):
  whole = _chat(client, max_tokens=20, temperature=0)
  chunks = list(_chat(client, max_tokens=20, temperature=0, stream=True, stream_options={"include_usage": True}))
  pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
  assert "".join(pieces) == whole.choices[0].message.content
  assert len([p for p in pieces if p]) >= 2  # several deltas: decoded as it went (stream_every = 4 tokens)
  assert chunks[0].choices[0].delta.role == "assistant"
  assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
  assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_logprobs_are_the_models_own(client, policy):
  r = _chat(client, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3)
  content = r.choices[0].logprobs.content
  assert len(content) == r.usage.completion_tokens
  prompt = _prompt(policy)
  ids, logp = _greedy(policy, prompt, len(content))
  for k, entry in enumerate(content):
    at = len(prompt) - 1 + k
    # float32 logits over 320 entries: the log-softmax agrees to a few ulps of the largest logit.
    assert entry.logprob == pytest.approx(logp[at, ids[k]], abs=1e-4)
    assert len(entry.top_logprobs) == 3
    assert entry.top_logprobs[0].logprob == pytest.approx(np.sort(logp[at])[-1], abs=1e-4)  # greedy: the top one
    assert [t.logprob for t in entry.top_logprobs] == sorted((t.logprob for t in entry.top_logprobs), reverse=True)


def test_completions_take_several_prompts_and_legacy_logprobs(client, policy):
  r = client.completions.create(model="tiny", prompt=["Problem: 1 + 2", "Step 1:"], n=2, max_tokens=5, logprobs=2)
  assert len(r.choices) == 4 and [c.index for c in r.choices] == [0, 1, 2, 3]
  for c in r.choices:
    assert len(c.logprobs.tokens) == len(c.logprobs.token_logprobs) == len(c.logprobs.top_logprobs)
    assert all(len(t) <= 2 for t in c.logprobs.top_logprobs)
  ids = policy.tokenizer.encode("Problem: 1 + 2", add_bos=False)
  assert client.completions.create(model="tiny", prompt=ids, max_tokens=3, temperature=0).usage.prompt_tokens == len(
    ids
  )


def test_concurrent_requests_share_one_sampler_call_and_get_their_solo_answers(client, server):
  questions = [f"Problem: compute {a} + 2." for a in range(4)]
  solo = [_chat(client, q, max_tokens=10, temperature=0).choices[0].message.content for q in questions]
  before = _stats(server)
  barrier = threading.Barrier(4)

  def ask(q):
    barrier.wait()
    return _chat(client, q, max_tokens=10, temperature=0).choices[0].message.content

  with concurrent.futures.ThreadPoolExecutor(4) as pool:
    together = list(pool.map(ask, questions))
  after = _stats(server)
  assert together == solo  # batching changes nothing in a greedy answer
  assert after["batches"] - before["batches"] < 4  # 4 requests in fewer calls: some shared one
  assert after["largest_batch"] >= 2


def test_seeded_requests_share_a_call_and_each_draws_its_own_numbers(client, server):
  seeds = [11, 12, 13]
  solo = [_chat(client, max_tokens=10, seed=s).choices[0].message.content for s in seeds]
  assert len(set(solo)) > 1  # different seeds, different samples
  before = _stats(server)
  barrier = threading.Barrier(len(seeds))

  def ask(seed):
    barrier.wait()
    return _chat(client, max_tokens=10, seed=seed).choices[0].message.content

  with concurrent.futures.ThreadPoolExecutor(len(seeds)) as pool:
    together = list(pool.map(ask, seeds))
  assert _stats(server)["batches"] - before["batches"] < len(seeds)  # some shared a call
  assert together == solo  # each request's rows drew from its own seed, wherever they sat in the call


def test_row_keys_make_a_rows_samples_independent_of_its_neighbours(policy):
  sampler = Sampler(config=policy.config, max_new_tokens=8, num_samples=2, pad_id=policy.pad_id)
  prompts = [[5, 6, 7], [8, 9], [10]]
  keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(3), i))(jnp.arange(6))
  together = sampler(policy.params, prompts, keys).tokens
  for b in range(3):
    alone = sampler(policy.params, prompts[b : b + 1], keys[2 * b : 2 * b + 2]).tokens
    np.testing.assert_array_equal(np.asarray(together)[2 * b : 2 * b + 2], np.asarray(alone))
  with pytest.raises(ValueError, match="5 row keys for 3 prompts"):
    sampler(policy.params, prompts, keys[:5])


BAD = [
  ({"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "model_not_found"),
  ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": -3}, 400, "max_tokens"),
  ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "n": 5}, 400, "max_n"),
  ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, 400, "temperature"),
  ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "colour": 3}, 400, "colour"),
  ({"model": "tiny", "messages": [{"role": "user", "content": "7 " * 400}]}, 400, "context"),
  ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": CONTEXT}, 400, "context"),
  ({"model": "tiny", "messages": "hello"}, 400, "messages"),
  ({"model": "tiny", "prompt": "x", "max_tokens": 2, "echo": True}, 400, "echo"),
]


@pytest.mark.parametrize("body,status,named", BAD, ids=[b[2] + str(i) for i, b in enumerate(BAD)])
def test_a_bad_request_gets_an_openai_error_and_the_server_goes_on(server, client, body, status, named):
  path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
  got, answer = _post(server, path, json.dumps(body))
  assert got == status
  assert set(answer["error"]) >= {"message", "type", "code"} and named in json.dumps(answer["error"])
  assert _chat(client, max_tokens=2).choices  # still serving


def test_malformed_json_and_the_openai_client_see_the_errors(server, client):
  status, answer = _post(server, "/v1/chat/completions", b"{not json")
  assert status == 400 and answer["error"]["code"] == "invalid_json"
  with pytest.raises(openai.NotFoundError, match="does not exist"):
    client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
  with pytest.raises(openai.BadRequestError, match="max_n"):
    _chat(client, n=9)


def test_a_client_that_disconnects_mid_stream_frees_its_rows(server, client):
  body = {"model": "tiny", "messages": [{"role": "user", "content": "Problem"}], "max_tokens": 120, "stream": True}
  body["temperature"] = 1.0  # unlikely to stop before its budget
  before = _stats(server)
  conn, response = _post(server, "/v1/chat/completions", json.dumps(body), read=False)
  assert response.status == 200
  assert response.readline().startswith(b"data: ")  # the first chunk arrived
  conn.sock.shutdown(2)
  conn.close()
  deadline = time.monotonic() + 60
  while time.monotonic() < deadline:
    now = _stats(server)
    if now["cancelled"] > before["cancelled"] and now["running"] == 0 and now["queued"] == 0:
      break
    time.sleep(0.1)
  else:
    pytest.fail(f"the disconnected stream still holds its rows: {now}")
  assert _chat(client, max_tokens=2).choices  # and the server goes on


def test_a_policy_without_a_chat_template_serves_completions_only(policy):
  bare = type(policy.tokenizer).__new__(type(policy.tokenizer))
  bare.__dict__.update(policy.tokenizer.__dict__, chat_template=None)
  plain = serving.ServedPolicy(**{**policy.__dict__, "tokenizer": bare, "name": "plain"})
  with serving.PolicyServer(plain) as s:
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="no chat template.*use /v1/completions"):
      c.chat.completions.create(model="plain", messages=[{"role": "user", "content": "x"}])
    assert c.completions.create(model="plain", prompt="Problem", max_tokens=2).choices


@pytest.mark.slow  # a run directory's restore and programs
def test_an_rl_run_directory_serves_its_latest_or_a_given_checkpoint(rlvr_run):
  workdir = rlvr_run[0]  # checkpoints at steps 2 and 3; a SentencePiece policy: completions only
  latest = serving.load_served_policy(workdir)
  second = serving.load_served_policy(workdir, step=2)
  assert (latest.step, second.step, latest.name) == (3, 2, os.path.basename(workdir))
  assert not all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(latest.params), jax.tree.leaves(second.params)))
  with pytest.raises(FileNotFoundError, match="no finalised step 7"):
    serving.load_served_policy(workdir, step=7)
  with serving.PolicyServer(latest) as s:
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
    r = c.completions.create(model=latest.name, prompt="Problem: compute 2 + 3.", max_tokens=4, temperature=0)
    assert r.usage.completion_tokens <= 4 and r.choices[0].finish_reason in ("stop", "length")
