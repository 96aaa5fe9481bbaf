"""The policy's OpenAI-compatible HTTP server (aiohttp): `/v1/models`, `/v1/chat/completions`, `/v1/completions`.

    with serving.PolicyServer(serving.load_served_policy("pretrained:smollm2-135m-instruct")) as server:
      client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")

Also `GET /health`, `GET /stats` (the engine's batches and the requests in flight) and vLLM's `POST /tokenize`, so
that this project's judge client (`arena_jax.judges.JudgeClient`) checks its prompts against the served context
as it does against vLLM: the policy can be its own judge.

A bad request gets an OpenAI-shaped JSON error with a 4xx (`protocol.RequestError`) and the server goes on; a
failure while sampling answers 500 to that batch's requests only. A client that disconnects (mid-stream, or
while waiting for a whole answer) cancels its request: its rows end at the running call's next chunk.
`python -m launch.serve` runs it from the command line.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time

from aiohttp import web

from arena_jax.errors import UserError
from arena_jax.serving import protocol
from arena_jax.serving.engine import Engine

READY_LINE = "arena_jax policy server: serving {name} on {url}"


def _error(e: protocol.RequestError) -> web.Response:
  return web.json_response(e.body(), status=e.status)


class _Handlers:
  def __init__(self, engine: Engine, limits: protocol.Limits, max_request_bytes: int):
    self.engine, self.policy, self.limits = engine, engine.policy, limits
    self.max_request_bytes = max_request_bytes
    self.started = int(time.time())

  def _model_card(self) -> dict:
    p = self.policy
    return {
      "id": p.name,
      "object": "model",
      "created": self.started,
      "owned_by": "arena_jax",
      "root": p.source,
      "max_model_len": p.context,  # vLLM's field: the judge client reads a served context from it
    }

  async def health(self, request):
    return web.json_response({"status": "ok"})

  async def stats(self, request):
    return web.json_response({**self.engine.stats, **self.engine.active()})

  async def models(self, request):
    return web.json_response({"object": "list", "data": [self._model_card()]})

  async def model(self, request):
    if request.match_info["model"] != self.policy.name:
      return _error(
        protocol.RequestError(
          f"the model '{request.match_info['model']}' does not exist", status=404, param="model", code="model_not_found"
        )
      )
    return web.json_response(self._model_card())

  async def _body(self, request) -> dict:
    try:
      raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
      raise protocol.RequestError(
        f"the request body is over {self.max_request_bytes} bytes", status=413, code="request_too_large"
      ) from None
    return protocol.read_json(raw)

  async def tokenize(self, request):
    """vLLM's `/tokenize`: {"model", "prompt"} or {"model", "messages"} → {"count", "tokens", "max_model_len"}."""
    try:
      body = await self._body(request)
      if body.get("model", self.policy.name) != self.policy.name:
        raise protocol.RequestError(f"the model '{body.get('model')}' does not exist", status=404, param="model")
      tok = self.policy.tokenizer
      if "messages" in body:
        if not self.policy.has_chat_template:
          raise protocol.RequestError("this model has no chat template", param="messages")
        text = tok.apply_chat_template(body["messages"], add_generation_prompt=body.get("add_generation_prompt", True))
        ids = tok.encode(text, add_bos=False)
      elif isinstance(body.get("prompt"), str):
        ids = tok.encode(body["prompt"], add_bos=self.policy.add_bos and body.get("add_special_tokens", True))
      else:
        raise protocol.RequestError("'prompt' (a string) or 'messages' is required", param="prompt")
    except protocol.RequestError as e:
      return _error(e)
    ids = [int(i) for i in ids]
    return web.json_response({"count": len(ids), "tokens": ids, "max_model_len": self.policy.context})

  async def chat(self, request):
    return await self._generate(request, protocol.parse_chat)

  async def completions(self, request):
    return await self._generate(request, protocol.parse_completion)

  async def _generate(self, request, parse):
    try:
      job = parse(await self._body(request), self.policy, self.limits)
    except protocol.RequestError as e:
      return _error(e)
    self.engine.submit(job, asyncio.get_running_loop())
    try:
      if job.stream:
        return await self._stream(request, job)
      while True:
        event = await job.events.get()
        if event[0] == "error":
          return _error(protocol.RequestError(event[1], status=500, code="sampling_failed"))
        if event[0] == "done":
          return web.json_response(protocol.response(job, self.policy.name))
    except (asyncio.CancelledError, ConnectionResetError):
      self.engine.cancel(job)  # the client has gone: free its rows
      raise

  async def _stream(self, request, job):
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    model, first = self.policy.name, set()

    async def send(obj) -> None:
      await response.write(f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode())

    while True:
      event = await job.events.get()
      if event[0] == "error":
        await send(protocol.RequestError(event[1], status=500, code="sampling_failed").body())
        break
      if event[0] == "done":
        if job.include_usage:
          await send(protocol.usage_chunk(job, model))
        break
      _, index, text, finish, entries = event
      await send(protocol.stream_chunk(job, model, index, text, finish, first=index not in first, entries=entries))
      first.add(index)
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def make_app(engine: Engine, *, limits: protocol.Limits | None = None, max_request_bytes: int = 8 << 20):
  """The aiohttp application serving `engine`'s policy."""
  handlers = _Handlers(engine, limits or protocol.Limits(), max_request_bytes)
  app = web.Application(client_max_size=max_request_bytes)
  app.router.add_get("/health", handlers.health)
  app.router.add_get("/stats", handlers.stats)
  app.router.add_get("/v1/models", handlers.models)
  app.router.add_get("/v1/models/{model}", handlers.model)
  app.router.add_post("/v1/chat/completions", handlers.chat)
  app.router.add_post("/v1/completions", handlers.completions)
  app.router.add_post("/tokenize", handlers.tokenize)
  return app


async def _start(app, host: str, port: int) -> tuple[web.AppRunner, str]:
  # handler_cancellation: a client that disconnects while waiting for a whole answer cancels its handler, which
  # cancels its job (`_generate`).
  runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True, shutdown_timeout=2.0)
  await runner.setup()
  try:
    await web.TCPSite(runner, host, port, backlog=1024).start()
  except OSError as e:
    await runner.cleanup()
    raise UserError(f"port={port}: cannot listen on {host}:{port} ({e.strerror or e})") from None
  bound_host, bound_port = runner.addresses[0][:2]
  return runner, f"http://{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}"


class PolicyServer:
  """The server on a thread of its own (tests, notebooks, benchmarks): `start()` → its URL; `stop()`; a context
  manager. `port` 0 picks a free one."""

  def __init__(self, policy, *, host: str = "127.0.0.1", port: int = 0, limits=None, **engine_options):
    self.policy, self.host, self.port = policy, host, port
    self.limits, self.engine_options = limits, engine_options
    self.url = ""
    self.engine: Engine | None = None
    self._loop: asyncio.AbstractEventLoop | None = None
    self._thread: threading.Thread | None = None

  def start(self) -> str:
    self.engine = Engine(self.policy, **self.engine_options)
    ready, failure = threading.Event(), []

    def run():
      loop = asyncio.new_event_loop()
      self._loop = loop
      try:
        self._runner, self.url = loop.run_until_complete(
          _start(make_app(self.engine, limits=self.limits), self.host, self.port)
        )
      except BaseException as e:  # noqa: BLE001 — handed to start()'s caller
        failure.append(e)
        ready.set()
        return
      ready.set()
      loop.run_forever()
      loop.run_until_complete(self._runner.cleanup())
      loop.close()

    self._thread = threading.Thread(target=run, name="arena_jax-policy-server", daemon=True)
    self._thread.start()
    ready.wait()
    if failure:
      self.engine.close()
      raise failure[0]
    return self.url

  def stop(self) -> None:
    if self._loop is not None:
      self._loop.call_soon_threadsafe(self._loop.stop)
      self._thread.join(timeout=30)
      self._loop = None
    if self.engine is not None:
      self.engine.close()
      self.engine = None

  def __enter__(self) -> "PolicyServer":
    self.start()
    return self

  def __exit__(self, *exc) -> None:
    self.stop()


async def serve_forever(engine: Engine, *, host: str, port: int, limits=None) -> None:
  """Serves until SIGINT / SIGTERM; prints `READY_LINE` once it listens (`launch/serve.py`)."""
  runner, url = await _start(make_app(engine, limits=limits), host, port)
  print(READY_LINE.format(name=engine.policy.name, url=url), flush=True)
  stop = asyncio.Event()
  loop = asyncio.get_running_loop()
  for sig in (signal.SIGINT, signal.SIGTERM):
    loop.add_signal_handler(sig, stop.set)
  try:
    await stop.wait()
  finally:
    await runner.cleanup()
    engine.close()
