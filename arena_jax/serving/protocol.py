"""The OpenAI request bodies the policy server reads, checked field by field, and the answers it writes.

`parse_chat` / `parse_completion` turn a body into a `Job` (or raise `RequestError`, whose status and message
become an OpenAI-shaped error: `{"error": {"message", "type", "param", "code"}}`). Every field the server reads
is checked for its type and range, naming the field; a field the server does not know is refused, naming it
(the official client sends only the fields it is given), except those it accepts and ignores (`IGNORED`).

Sampling fields: `temperature` (0 = greedy), `top_p`, `top_k` (vLLM's), `max_tokens` (or `max_completion_tokens`),
`n`, `stop` (strings), `seed`, `logprobs` / `top_logprobs` (chat) or `logprobs` (completions: an int), `stream`
(with `stream_options.include_usage`). `chat_template_kwargs` (vLLM's) reach the checkpoint's chat template.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from typing import Any

from arena_jax.serving.engine import Job, SamplingSettings

MAX_TOP_LOGPROBS = 20  # OpenAI's limit
MAX_STOP = 4  # OpenAI's limit on `stop` strings

# Fields that are accepted and have no effect here (their neutral values only where they would change sampling).
IGNORED = {"user", "metadata", "store", "service_tier", "parallel_tool_calls"}
NEUTRAL = {"presence_penalty": 0, "frequency_penalty": 0, "logit_bias": None, "best_of": 1, "suffix": None}


class RequestError(Exception):
  """A request the server refuses: HTTP `status` with an OpenAI-shaped body."""

  def __init__(self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None):
    super().__init__(message)
    self.status, self.param, self.code = status, param, code

  def body(self) -> dict:
    kind = "invalid_request_error" if self.status < 500 else "server_error"
    return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}}


def read_json(raw: bytes) -> dict:
  try:
    body = json.loads(raw)
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise RequestError(f"the request body is not valid JSON ({e})", code="invalid_json") from None
  if not isinstance(body, dict):
    raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
  return body


def _number(body, name, default, *, low=None, high=None, integer=False):
  value = body.get(name, default)
  if value is None:
    return default
  ok = isinstance(value, int) if integer else isinstance(value, (int, float))
  if isinstance(value, bool) or not ok or (not integer and not math.isfinite(value)):
    kind = "an integer" if integer else "a number"
    raise RequestError(f"'{name}' must be {kind}, got {json.dumps(value)[:60]}", param=name, code="invalid_type")
  if (low is not None and value < low) or (high is not None and value > high):
    raise RequestError(f"'{name}' = {value} is out of range [{low}, {high}]", param=name, code="invalid_value")
  return value


def _bool(body, name, default=False) -> bool:
  value = body.get(name, default)
  if value is None:
    return default
  if not isinstance(value, bool):
    raise RequestError(f"'{name}' must be a boolean, got {json.dumps(value)[:60]}", param=name, code="invalid_type")
  return value


def _stop(body) -> tuple[str, ...]:
  value = body.get("stop")
  if value is None:
    return ()
  values = [value] if isinstance(value, str) else value
  if not isinstance(values, list) or not all(isinstance(s, str) and s for s in values) or len(values) > MAX_STOP:
    raise RequestError(
      f"'stop' must be a non-empty string or a list of at most {MAX_STOP} non-empty strings", param="stop"
    )
  return tuple(values)


def _check_fields(body: dict, known: set[str]) -> None:
  for name in body:
    if name in known or name in IGNORED:
      continue
    if name in NEUTRAL:
      if body[name] not in (NEUTRAL[name], None, {}):
        raise RequestError(f"'{name}' is not supported by this server (only {NEUTRAL[name]!r})", param=name)
      continue
    raise RequestError(f"unknown field '{name}'", param=name, code="unknown_field")


_COMMON = {
  "model",
  "temperature",
  "top_p",
  "top_k",
  "max_tokens",
  "max_completion_tokens",
  "n",
  "stop",
  "seed",
  "stream",
  "stream_options",
  "logprobs",
}


@dataclasses.dataclass(frozen=True)
class Limits:
  """What one request may ask for: `max_n` choices, `max_tokens_default` when it names none."""

  max_n: int = 16
  max_tokens_default: int = 512


def _common(body: dict, policy, limits: Limits, prompt_lengths: list[int]) -> dict:
  model = body.get("model")
  if not isinstance(model, str):
    raise RequestError("'model' is required (a string)", param="model", code="invalid_type")
  if model != policy.name:
    raise RequestError(
      f"the model '{model}' does not exist (this server serves '{policy.name}')",
      status=404,
      param="model",
      code="model_not_found",
    )
  temperature = float(_number(body, "temperature", 1.0, low=0, high=2))
  top_p = float(_number(body, "top_p", 1.0, low=0, high=1))
  if top_p == 0:
    raise RequestError("'top_p' must be > 0", param="top_p", code="invalid_value")
  top_k = _number(body, "top_k", -1, low=-1, integer=True)
  n = _number(body, "n", 1, low=1, integer=True)
  if n > limits.max_n:
    raise RequestError(f"'n' = {n} is more than this server's max_n = {limits.max_n}", param="n", code="invalid_value")
  name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
  max_tokens = _number(body, name, None, integer=True)
  if max_tokens is not None and max_tokens < 1:
    raise RequestError(f"'{name}' must be ≥ 1, got {max_tokens}", param=name, code="invalid_value")
  longest = max(prompt_lengths)
  if longest >= policy.context:
    raise RequestError(
      f"the prompt is {longest} tokens; this model's context is {policy.context} tokens",
      param="messages" if "messages" in body else "prompt",
      code="context_length_exceeded",
    )
  if max_tokens is None:
    max_tokens = min(limits.max_tokens_default, policy.context - longest)
  elif longest + max_tokens > policy.context:
    raise RequestError(
      f"this model's context is {policy.context} tokens: the prompt ({longest} tokens) plus {name} = {max_tokens} "
      "exceeds it",
      param=name,
      code="context_length_exceeded",
    )
  seed = _number(body, "seed", None, integer=True)
  stream = _bool(body, "stream")
  options = body.get("stream_options") or {}
  if not isinstance(options, dict) or set(options) - {"include_usage", "continuous_usage_stats"}:
    raise RequestError("'stream_options' must be an object with 'include_usage'", param="stream_options")
  return dict(
    settings=SamplingSettings(temperature, top_p, top_k if top_k > 0 else 0),
    n=n,
    max_tokens=max_tokens,
    seed=seed,
    stop=_stop(body),
    stream=stream,
    include_usage=bool(options.get("include_usage", False)),
  )


def parse_chat(body: dict, policy, limits: Limits) -> Job:
  """A `/v1/chat/completions` body → a `Job` (its one prompt rendered by the checkpoint's chat template)."""
  _check_fields(body, _COMMON | {"messages", "top_logprobs", "chat_template_kwargs"})
  messages = body.get("messages")
  if not isinstance(messages, list) or not messages:
    raise RequestError("'messages' must be a non-empty list", param="messages", code="invalid_type")
  for i, m in enumerate(messages):
    if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), (str, list))):
      raise RequestError(f"messages[{i}] must be an object with 'role' and 'content'", param=f"messages[{i}]")
    if isinstance(m["content"], list):  # content parts: text only
      if not all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in m["content"]
      ):
        raise RequestError(f"messages[{i}].content: only text parts are supported", param=f"messages[{i}]")
  kwargs = body.get("chat_template_kwargs") or {}
  if not isinstance(kwargs, dict):
    raise RequestError("'chat_template_kwargs' must be an object", param="chat_template_kwargs")
  if not policy.has_chat_template:
    raise RequestError(
      f"the model '{policy.name}' has no chat template ({policy.source}); use /v1/completions", param="messages"
    )
  messages = [
    {**m, "content": "".join(p["text"] for p in m["content"]) if isinstance(m["content"], list) else m["content"]}
    for m in messages
  ]
  try:
    text = policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, **kwargs)
  except Exception as e:  # the template's own raise_exception, or a bad message for it
    raise RequestError(f"the chat template refused the messages: {e}", param="messages") from None
  prompt = list(policy.tokenizer.encode(text, add_bos=False))
  want_logprobs = _bool(body, "logprobs")
  top = _number(body, "top_logprobs", 0, low=0, high=MAX_TOP_LOGPROBS, integer=True)
  if top and not want_logprobs:
    raise RequestError("'top_logprobs' needs 'logprobs': true", param="top_logprobs")
  common = _common(body, policy, limits, [len(prompt)])
  return Job(
    id=f"chatcmpl-{uuid.uuid4().hex}",
    kind="chat",
    prompts=[prompt],
    logprobs=top if want_logprobs else None,
    created=int(time.time()),
    **common,
  )


def parse_completion(body: dict, policy, limits: Limits) -> Job:
  """A `/v1/completions` body → a `Job`: `prompt` a string, a list of strings, a list of token ids or a list of
  such lists (choice `i·n + j` is prompt i's j-th sample); `logprobs` an int (OpenAI's legacy top count, ≤ 5
  there, ≤ 20 here)."""
  _check_fields(body, _COMMON | {"prompt", "echo"})
  if _bool(body, "echo"):
    raise RequestError("'echo' is not supported by this server", param="echo")
  prompt = body.get("prompt")
  if isinstance(prompt, str):
    texts: list[Any] = [prompt]
  elif isinstance(prompt, list) and prompt and all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
    texts = [prompt]
  elif isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
    texts = prompt
  else:
    raise RequestError("'prompt' must be a string, a list of strings or a list of token ids", param="prompt")
  prompts = []
  for i, p in enumerate(texts):
    if isinstance(p, str):
      ids = list(policy.tokenizer.encode(p, add_bos=policy.add_bos))
    elif all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < policy.config.vocab_size for t in p):
      ids = list(p)
    else:
      raise RequestError(f"prompt[{i}]: token ids must be integers in [0, {policy.config.vocab_size})", param="prompt")
    if not ids:
      raise RequestError(f"prompt[{i}] is empty", param="prompt")
    prompts.append(ids)
  logprobs = _number(body, "logprobs", None, low=0, high=MAX_TOP_LOGPROBS, integer=True)
  common = _common(body, policy, limits, [len(p) for p in prompts])
  if len(prompts) * common["n"] > limits.max_n:
    raise RequestError(
      f"{len(prompts)} prompts × n = {common['n']} is more than this server's max_n = {limits.max_n} completions",
      param="n",
      code="invalid_value",
    )
  return Job(
    id=f"cmpl-{uuid.uuid4().hex}",
    kind="completion",
    prompts=prompts,
    logprobs=logprobs,
    created=int(time.time()),
    **common,
  )


# ─────────────────────────────────────── answers ───────────────────────────────────────


def _chat_logprobs(entries: list[dict] | None) -> dict | None:
  if entries is None:
    return None
  return {"content": entries, "refusal": None}


def _legacy_logprobs(entries: list[dict] | None) -> dict | None:
  """OpenAI's `/v1/completions` logprobs: tokens, token_logprobs, top_logprobs (dicts), text_offset."""
  if entries is None:
    return None
  offsets, at = [], 0
  for e in entries:
    offsets.append(at)
    at += len(e["token"])
  return {
    "tokens": [e["token"] for e in entries],
    "token_logprobs": [e["logprob"] for e in entries],
    "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]} for e in entries],
    "text_offset": offsets,
  }


def usage(job: Job) -> dict:
  prompt = sum(len(p) for p in job.prompts)
  completion = sum(len(c.tokens) for c in job.choices)
  return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def response(job: Job, model: str) -> dict:
  """The non-streamed answer of a finished job."""
  if job.kind == "chat":
    choices = [
      {
        "index": i,
        "message": {"role": "assistant", "content": c.text},
        "logprobs": _chat_logprobs(c.logprob_entries),
        "finish_reason": c.finish_reason,
      }
      for i, c in enumerate(job.choices)
    ]
    obj = "chat.completion"
  else:
    choices = [
      {"index": i, "text": c.text, "logprobs": _legacy_logprobs(c.logprob_entries), "finish_reason": c.finish_reason}
      for i, c in enumerate(job.choices)
    ]
    obj = "text_completion"
  return {
    "id": job.id,
    "object": obj,
    "created": job.created,
    "model": model,
    "system_fingerprint": None,
    "choices": choices,
    "usage": usage(job),
  }


def stream_chunk(job: Job, model: str, index: int, text: str | None, finish: str | None, *, first=False, entries=None):
  """One server-sent event's object: a choice's new text (and, at its end, its finish reason and log-probs)."""
  if job.kind == "chat":
    delta: dict = {}
    if first:
      delta["role"] = "assistant"
    if text is not None:
      delta["content"] = text
    choice = {"index": index, "delta": delta, "logprobs": _chat_logprobs(entries), "finish_reason": finish}
    obj = "chat.completion.chunk"
  else:
    choice = {"index": index, "text": text or "", "logprobs": _legacy_logprobs(entries), "finish_reason": finish}
    obj = "text_completion"
  return {"id": job.id, "object": obj, "created": job.created, "model": model, "choices": [choice]}


def usage_chunk(job: Job, model: str) -> dict:
  obj = "chat.completion.chunk" if job.kind == "chat" else "text_completion"
  return {"id": job.id, "object": obj, "created": job.created, "model": model, "choices": [], "usage": usage(job)}
