"""The embedded judge's HTTP server: the OpenAI chat-completions protocol, faults and latency.

Everything must run on one machine with no downloads, so the judge
that the client, the tournaments and the trainer talk to by default is this server, started by
`python -m launch.serve_judge` or from Python (`launcher.py`: a child process or the running event
loop). It serves `POST /v1/chat/completions`, `GET /v1/models`, vLLM's `POST /tokenize` and `GET /health` (plus
`GET /stats`: its counters), binds 127.0.0.1 unless told otherwise, optionally requires a bearer key
(`api_key_env`; on everything but `/health`), rejects bodies over `max_request_bytes` (HTTP 413), bodies
that do not arrive within `read_timeout_s` (408) and every request it cannot read or does not support
(400, naming what is wrong: not JSON, a bad field, `n` ≠ 1, `stream`), and answers with the simulated
judge (`simulated.JudgeLogic`). The judging runs in a pool of `workers` threads, so that a long prompt
never holds up the event loop that reads requests and answers `/health`.

Knobs (`config.server_config()`): the judge's own (noise, position bias, tie band, juror error
rates), a latency model (a distribution, optionally a heavy tail through a median and a 99th
percentile, growth with the prompt and completion tokens, and a bounded number of slots beyond which
requests queue, as on vLLM / SGLang), and faults — HTTP errors (with Retry-After), hangs, dropped
connections, non-JSON bodies, answers without a parseable verdict — and hostile answers (`hostile.py`:
fields of the wrong type, unusable Retry-After, huge answers, decompression bombs), each with a rate,
so clients can be tested against all of them. Answers longer than the request's max_tokens are cut with
finish_reason "length", like a real server. Prompt tokens are counted by `tokenizer` (the estimate
`hygiene.count_tokens` of the messages' contents by default; a tokenizer path: the request as its chat template
renders it, or its contents joined by blank lines without one), the same count for a request's `usage` and for
`/tokenize` (vLLM's: `{"model", "prompt"}` or `{"model", "messages"}` → `{"count", "tokens", "max_model_len"}`;
the estimate has no ids, so its `tokens` are zeros); with `max_model_len`, a request whose prompt tokens plus
max_tokens exceed it gets vLLM's HTTP 400. `style = "reasoning"` answers like a served reasoning LLM:
thinking first (in `reasoning_content` or inline in `<think>`), then the verdict in one of the forms such
models write, sometimes cut mid-thought (`simulated.JudgeLogic.reply`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hmac
import json
import math
import os
import random
import re
import signal
import time
import uuid

import ml_collections
from aiohttp import web

from arena_jax.judges import config as config_lib
from arena_jax.judges import hygiene
from arena_jax.judges.embedded import hostile
from arena_jax.judges.embedded.simulated import JudgeLogic

# The line `serve` prints once it listens; `EmbeddedJudgeServer` (and scripts) read the URL from it.
READY_PATTERN = re.compile(r"arena_jax judge server: serving \S+ on (http://\S+)")


def _error(status: int, message: str, kind: str = "invalid_request_error", headers=None) -> web.Response:
  return web.json_response(
    {"error": {"message": message, "type": kind, "code": status}}, status=status, headers=headers
  )


class _ContextExceeded(ValueError):
  """A request longer than `max_model_len` (answered with vLLM's HTTP 400)."""


class _Server:
  """Request handling, fault injection and counters of one server process."""

  def __init__(self, cfg: ml_collections.ConfigDict):
    self.cfg = cfg
    self.logic = JudgeLogic(cfg)
    self.tokenizer = None
    if cfg.tokenizer:
      from arena_jax import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top  (sentencepiece, on use)

      self.tokenizer = tokenizer_lib.load_tokenizer(os.path.expanduser(cfg.tokenizer))
    self.rng = random.Random(cfg.seed)
    self.api_key = None
    if cfg.api_key_env:
      self.api_key = os.environ.get(cfg.api_key_env)
      if not self.api_key:
        raise ValueError(f"judge.server.api_key_env names {cfg.api_key_env!r}, which is not set in the environment")
    self.counts = {
      "requests": 0,
      "answered": 0,
      "errors": 0,
      "hangs": 0,
      "disconnects": 0,
      "bad_bodies": 0,
      "malformed": 0,
      "truncated": 0,
      "rejected": 0,
      "tokenized": 0,
      "hostile": 0,
      "in_flight": 0,
      "max_in_flight": 0,
      "queued": 0,
      "max_queued": 0,
      "queue_wait_s": 0.0,
      "max_active": 0,
    }
    # Bounded slots (`slots`): a request waits here, FIFO, before its latency starts (asyncio's semaphore
    # wakes its waiters in order); None = unbounded.
    self.slots = asyncio.Semaphore(cfg.slots) if cfg.slots else None
    self.kinds: dict[str, int] = {}
    self.hostile: dict[str, int] = {}
    self.pool = concurrent.futures.ThreadPoolExecutor(cfg.workers, thread_name_prefix="arena-judge")

  def _latency(self) -> float:
    """One answer's base latency in seconds, drawn from the configured distribution."""
    cfg = self.cfg
    mean = cfg.latency_ms / 1000.0
    if mean <= 0:
      return 0.0
    if cfg.latency_p99_ms:  # lognormal through the median and the 99th percentile (z = 2.3263)
      sigma = math.log(cfg.latency_p99_ms / cfg.latency_ms) / 2.3263478740408408
      return self.rng.lognormvariate(math.log(mean), sigma)
    if cfg.latency_dist == "exponential":
      return self.rng.expovariate(1.0 / mean)
    if cfg.latency_dist == "lognormal":
      mu = math.log(mean) - cfg.latency_sigma**2 / 2.0
      return self.rng.lognormvariate(mu, cfg.latency_sigma)
    return mean

  def _token_latency(self, prompt_tokens: int, completion_tokens: int) -> float:
    """What reading the prompt and writing the answer add to the latency, in seconds."""
    return (
      self.cfg.latency_ms_per_prompt_token * prompt_tokens
      + self.cfg.latency_ms_per_completion_token * completion_tokens
    ) / 1000.0

  def _authorised(self, request: web.Request) -> bool:
    if not self.api_key:
      return True
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode(), f"Bearer {self.api_key}".encode())

  async def health(self, request):
    del request
    return web.json_response({"status": "ok"})

  async def stats(self, request):
    if not self._authorised(request):
      return _error(401, "invalid or missing API key", "authentication_error")
    return web.json_response({**self.counts, "kinds": self.kinds, "hostile_kinds": self.hostile})

  async def models(self, request):
    if not self._authorised(request):
      return _error(401, "invalid or missing API key", "authentication_error")
    return web.json_response(
      {"object": "list", "data": [{"id": self.cfg.model, "object": "model", "created": 0, "owned_by": "arena_jax"}]}
    )

  # ── counting: one count for a request's usage and for /tokenize ──

  def _encode(self, text: str) -> list[int]:
    return list(self.tokenizer.encode(text)) if text else []

  def prompt_ids(self, messages: list, *, add_generation_prompt: bool = True, template_kwargs=None) -> list[int]:
    """The prompt of a chat request as token ids (the estimate: one 0 per estimated token; module docstring)."""
    contents = "\n\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))
    if self.tokenizer is None:
      return [0] * hygiene.count_tokens(contents)
    if getattr(self.tokenizer, "chat_template", None):
      rendered = self.tokenizer.apply_chat_template(
        messages, add_generation_prompt=add_generation_prompt, **(template_kwargs or {})
      )
      return self._encode(rendered)
    return self._encode(contents)

  def text_ids(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
    if self.tokenizer is None:
      return [0] * hygiene.count_tokens(text)
    ids = self._encode(text)
    bos = getattr(self.tokenizer, "bos_id", None)
    return [bos] + ids if add_special_tokens and bos is not None else ids

  async def tokenize(self, request: web.Request):
    """vLLM's `POST /tokenize`: `{"model"?, "prompt", "add_special_tokens"?}` or `{"model"?, "messages",
    "add_generation_prompt"?, "chat_template_kwargs"?}` → `{"count", "tokens", "max_model_len"}`."""
    if not self._authorised(request):
      return _error(401, "invalid or missing API key", "authentication_error")
    body = await self._read_json(request)
    if isinstance(body, web.Response):
      return body
    problem = _validate_tokenize(body, self.cfg.model)
    if problem:
      return _error(404 if problem.startswith("model") else 400, problem)
    if "messages" in body:
      work = functools.partial(
        self.prompt_ids,
        body["messages"],
        add_generation_prompt=body.get("add_generation_prompt", True),
        template_kwargs=body.get("chat_template_kwargs"),
      )
    else:
      work = functools.partial(self.text_ids, body["prompt"], add_special_tokens=body.get("add_special_tokens", True))
    try:
      ids = await asyncio.get_running_loop().run_in_executor(self.pool, work)
    except Exception as e:  # pylint: disable=broad-except  (a template that raises is the request's problem)
      return _error(400, f"could not tokenize: {type(e).__name__}: {e}"[:300])
    self.counts["tokenized"] += 1
    answer = {"count": len(ids), "tokens": ids}
    if self.cfg.max_model_len:
      answer["max_model_len"] = self.cfg.max_model_len
    return web.json_response(answer)

  async def chat(self, request: web.Request):
    self.counts["requests"] += 1
    self.counts["in_flight"] += 1
    self.counts["max_in_flight"] = max(self.counts["max_in_flight"], self.counts["in_flight"])
    try:
      if self.slots is None:
        return await self._chat(request)
      await self._take_slot()
      active = self.cfg.slots - self.slots._value  # pylint: disable=protected-access  (held slots, for /stats)
      self.counts["max_active"] = max(self.counts["max_active"], active)
      try:
        return await self._chat(request)
      finally:
        self.slots.release()
    finally:
      self.counts["in_flight"] -= 1

  async def _take_slot(self) -> None:
    """Waits for one of the `slots` (counted in queued / max_queued / queue_wait_s)."""
    c = self.counts
    c["queued"] += 1
    c["max_queued"] = max(c["max_queued"], c["queued"])
    t0 = time.monotonic()
    try:
      await self.slots.acquire()
    finally:
      c["queued"] -= 1
      c["queue_wait_s"] += time.monotonic() - t0

  async def _chat(self, request: web.Request):
    cfg = self.cfg
    # The injected latency is the time to answer, judging included (as for a model server): the work
    # below runs inside it, not on top of it. It starts once the request holds a slot.
    deadline = time.monotonic() + self._latency()
    if not self._authorised(request):
      self.counts["rejected"] += 1
      return _error(401, "invalid or missing API key", "authentication_error")
    body = await self._read_request(request)
    if isinstance(body, web.Response):
      self.counts["rejected"] += 1
      return body
    # Faults, in the order a flaky deployment shows them.
    r = self.rng.random
    if cfg.disconnect_rate and r() < cfg.disconnect_rate:
      self.counts["disconnects"] += 1
      request.transport.close()
      raise asyncio.CancelledError()
    if cfg.error_rate and r() < cfg.error_rate:
      self.counts["errors"] += 1
      status = self.rng.choice(list(cfg.error_statuses))
      headers = {"Retry-After": f"{cfg.retry_after_s:g}"} if cfg.retry_after_s and status in (429, 503) else None
      return _error(status, f"injected fault: HTTP {status}", "server_error", headers)
    if cfg.hang_rate and r() < cfg.hang_rate:
      self.counts["hangs"] += 1
      await asyncio.sleep(cfg.hang_s)
    if cfg.bad_body_rate and r() < cfg.bad_body_rate:
      self.counts["bad_bodies"] += 1
      await _sleep_until(deadline)
      return web.Response(text="<html>502 Bad Gateway</html>", content_type="text/html")
    malformed = bool(cfg.malformed_rate) and r() < cfg.malformed_rate
    hostile_kind = self.rng.choice(cfg.hostile_kinds) if cfg.hostile_rate and r() < cfg.hostile_rate else None
    try:
      # Off the event loop: checking a long trace takes seconds of CPU, and /health must answer meanwhile.
      completion, kind = await asyncio.get_running_loop().run_in_executor(self.pool, self._complete, body, malformed)
    except _ContextExceeded as e:
      self.counts["rejected"] += 1
      return _error(400, str(e), "BadRequestError")
    except Exception as e:  # pylint: disable=broad-except  (a judging bug must not look like a dropped connection)
      self.counts["errors"] += 1
      return _error(500, f"the judge failed on this prompt: {type(e).__name__}: {e}"[:300], "server_error")
    self.kinds[kind] = self.kinds.get(kind, 0) + 1
    self.counts["malformed"] += malformed
    self.counts["truncated"] += completion["choices"][0]["finish_reason"] == "length"
    usage = completion["usage"]
    await _sleep_until(deadline + self._token_latency(usage["prompt_tokens"], usage["completion_tokens"]))
    if hostile_kind is not None:
      self.counts["hostile"] += 1
      self.hostile[hostile_kind] = self.hostile.get(hostile_kind, 0) + 1
      return await hostile.answer(hostile_kind, request, completion, self.rng, cfg.hostile_bytes)
    self.counts["answered"] += 1
    return web.json_response(completion)

  async def _read_request(self, request: web.Request) -> dict | web.Response:
    """The request's JSON body, validated; or the error answer: 408 (the body did not arrive within
    `read_timeout_s`), 413 (too large), 404 (another model), 400 (anything else that is wrong with it)."""
    body = await self._read_json(request)
    if isinstance(body, web.Response):
      return body
    problem = _validate(body, self.cfg.model)
    if problem:
      return _error(404 if problem.startswith("model") else 400, problem)
    return body

  async def _read_json(self, request: web.Request):
    """The request's body as JSON, or the error answer (408, 413, 400)."""
    cfg = self.cfg
    try:
      raw = await asyncio.wait_for(request.read(), cfg.read_timeout_s)
    except asyncio.TimeoutError:
      return _error(408, f"the request body did not arrive within {cfg.read_timeout_s:g} s")
    except web.HTTPRequestEntityTooLarge:
      return _error(413, f"request body larger than {cfg.max_request_bytes} bytes")
    except Exception as e:  # pylint: disable=broad-except  (a body the transport cannot read is the request's fault)
      return _error(400, f"the request body could not be read: {type(e).__name__}")
    try:
      return json.loads(raw)  # bytes: UTF-8 / 16 / 32 detected, whatever the Content-Type's charset claims
    except (ValueError, RecursionError) as e:  # RecursionError: arrays nested thousands deep
      return _error(400, f"the request body is not valid JSON ({type(e).__name__})")

  def _complete(self, body: dict, malformed: bool) -> tuple[dict, str]:
    """(the chat completion answering `body`, the prompt's kind): the judging, run in the worker pool."""
    prompt = "\n\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    prompt_tokens = len(self.prompt_ids(body["messages"], template_kwargs=body.get("chat_template_kwargs")))
    if self.cfg.max_model_len and prompt_tokens + (max_tokens or 0) > self.cfg.max_model_len:
      raise _ContextExceeded(
        f"This model's maximum context length is {self.cfg.max_model_len} tokens. However, you requested "
        f"{prompt_tokens + (max_tokens or 0)} tokens ({prompt_tokens} in the messages, {max_tokens or 0} in the "
        "completion). Please reduce the length of the messages or completion."
      )
    reply = self.logic.reply(prompt, body.get("seed") or 0, malformed=malformed, max_tokens=max_tokens)
    message = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
      message["reasoning_content"] = reply.reasoning
    completion_tokens = hygiene.count_tokens(reply.content or "") + hygiene.count_tokens(reply.reasoning or "")
    logprobs = None
    if body.get("logprobs") and self.cfg.logprobs and reply.content:  # OpenAI's chat form: the first token
      # A letter answer's alternatives are the two labels with the judgment's probabilities; any other answer's
      # first token is certain.
      first = reply.content if reply.top_logprobs else reply.content.split()[0] if reply.content.split() else " "
      alternatives = reply.top_logprobs or ((first, 0.0),)
      top = [{"token": t, "logprob": lp} for t, lp in alternatives[: max(int(body.get("top_logprobs") or 0), 1)]]
      chosen = dict(alternatives).get(first, 0.0)
      logprobs = {"content": [{"token": first, "logprob": chosen, "top_logprobs": top}]}
    return {
      "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
      "object": "chat.completion",
      "created": int(time.time()),
      "model": self.cfg.model,
      "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": logprobs}],
      "usage": {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
      },
    }, reply.kind


async def _sleep_until(deadline: float) -> None:
  wait = deadline - time.monotonic()
  if wait > 0:
    await asyncio.sleep(wait)


def _validate(body, model: str) -> str | None:
  """What is wrong with a chat-completions request body, or None (then the judging can read every field
  it uses without a surprise)."""
  if not isinstance(body, dict):
    return "the request body must be a JSON object"
  if body.get("model") not in (None, model):
    return f"model {_short(body.get('model'))} does not exist; this server serves {model!r}"
  messages = body.get("messages")
  if (
    not isinstance(messages, list)
    or not messages
    or not all(
      isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), (str, type(None)))
      for m in messages
    )
  ):
    return "messages must be a non-empty list of {role: string, content: string} objects"
  for name, lo in (("max_tokens", 1), ("max_completion_tokens", 1), ("seed", -(2**63))):
    v = body.get(name)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not lo <= v < 2**63):
      return f"{name} must be an integer in [{lo}, 2^63), got {_short(v)}"
  t = body.get("temperature")
  if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 2):
    return f"temperature must be a number in [0, 2], got {_short(t)}"
  n = body.get("n")
  if n is not None and (isinstance(n, bool) or n != 1):
    return f"n={_short(n)} is not supported: this server returns one choice per request (send n=1 or no n)"
  stream = body.get("stream")
  if stream not in (None, False):
    return (
      f"stream={_short(stream)} is not supported: this server returns whole answers (send stream=false or no stream)"
    )
  return None


def _validate_tokenize(body, model: str) -> str | None:
  """What is wrong with a `/tokenize` request body (vLLM's two forms), or None."""
  if not isinstance(body, dict):
    return "the request body must be a JSON object"
  if body.get("model") not in (None, model):
    return f"model {_short(body.get('model'))} does not exist; this server serves {model!r}"
  if "messages" in body:
    messages = body["messages"]
    if not isinstance(messages, list) or not all(
      isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), (str, type(None)))
      for m in messages
    ):
      return "messages must be a list of {role: string, content: string} objects"
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
      return f"chat_template_kwargs must be an object, got {_short(kwargs)}"
  elif not isinstance(body.get("prompt"), str):
    return "the body needs a prompt (a string) or messages (a list)"
  for name in ("add_special_tokens", "add_generation_prompt"):
    if name in body and not isinstance(body[name], bool):
      return f"{name} must be true or false, got {_short(body[name])}"
  return None


def _short(value) -> str:
  """`repr(value)` cut for an error message (a request may hold megabytes)."""
  text = repr(value)
  return text if len(text) <= 80 else text[:77] + "..."


def make_app(cfg: ml_collections.ConfigDict) -> web.Application:
  """The aiohttp application of the embedded judge (validated `server_config()` knobs)."""
  config_lib.validate_server_config(cfg)
  server = _Server(cfg)
  app = web.Application(client_max_size=cfg.max_request_bytes)
  app.router.add_get("/health", server.health)
  app.router.add_get("/stats", server.stats)
  app.router.add_get("/v1/models", server.models)
  app.router.add_post("/v1/chat/completions", server.chat)
  app.router.add_post("/tokenize", server.tokenize)

  async def stop_workers(app):
    del app
    server.pool.shutdown(wait=False, cancel_futures=True)

  app.on_cleanup.append(stop_workers)
  return app


async def start(cfg: ml_collections.ConfigDict, *, shutdown_timeout: float) -> tuple[web.AppRunner, str]:
  """Starts the app of `cfg` on the running event loop; (its runner, to `cleanup()`, and its URL)."""
  # keepalive_timeout also closes a connection whose request line and headers have not arrived by then (a
  # slow client holding a socket); `_read_request` bounds the body.
  runner = web.AppRunner(
    make_app(cfg),
    access_log=None,
    handle_signals=False,
    shutdown_timeout=shutdown_timeout,
    keepalive_timeout=cfg.read_timeout_s,
  )
  await runner.setup()
  await web.TCPSite(runner, cfg.host, cfg.port, backlog=2048).start()
  host, port = runner.addresses[0][:2]
  return runner, f"http://{f'[{host}]' if ':' in host else host}:{port}"


async def _watch_parent(parent_pid: int, stop: asyncio.Event, interval_s: float = 0.5) -> None:
  """Sets `stop` once the process that started this server is gone (its child gets a new parent).

  A trainer killed with SIGKILL (a preempted VM, the OOM killer) cannot stop its embedded judge; without
  this the orphan would keep its port and CPU for good.
  """
  while os.getppid() == parent_pid:
    await asyncio.sleep(interval_s)
  stop.set()


async def serve(cfg: ml_collections.ConfigDict, stop: asyncio.Event | None = None, *, parent_pid: int = 0) -> None:
  """Serves until `stop` is set (or SIGINT / SIGTERM, or process `parent_pid` ends when it is not 0);
  prints one ready line with the URL to stdout."""
  runner, url = await start(cfg, shutdown_timeout=5.0)
  print(f"arena_jax judge server: serving {cfg.model} on {url}", flush=True)
  stop = stop or asyncio.Event()
  loop = asyncio.get_running_loop()
  for sig in (signal.SIGINT, signal.SIGTERM):
    try:
      loop.add_signal_handler(sig, stop.set)
    except (NotImplementedError, RuntimeError):  # not the main thread / platform
      pass
  watcher = asyncio.ensure_future(_watch_parent(parent_pid, stop)) if parent_pid else None
  try:
    await stop.wait()
  finally:
    if watcher is not None:
      watcher.cancel()
    await runner.cleanup()


def run_server(cfg: ml_collections.ConfigDict, *, parent_pid: int = 0) -> None:
  """Serves `cfg` until stopped (blocking): `launch/serve_judge.py` and `EmbeddedJudgeServer`'s child process."""
  asyncio.run(serve(cfg, parent_pid=parent_pid))
