"""Hostile answers of the embedded judge: what a broken or malicious judge sends (`judge.server.hostile_*`).

The faults of `server.py` (HTTP errors, hangs, dropped connections, non-JSON bodies) are those of a flaky
deployment. These are the answers that a judge could send to break its client rather than fail: each
is a well-formed HTTP answer whose contents are not what the protocol promises. The client must turn
every one into a failed judgment (docs/judges.md, "What the trainer guarantees"); the reliability tests
and `benchmarks.soak` serve them at `hostile_rate`.

  wrong_types      a 200 completion with one field of an unexpected type (usage a string, a token count
                   that is text or negative, content a list, finish_reason an object, message a string,
                   choices an object)
  bad_retry_after  a 429 / 503 whose Retry-After (or retry-after-ms) is no usable number: NaN, infinity,
                   negative, text, an overflowing number, a date in year 9999
  huge             a 200 completion padded to `hostile_bytes`, with its Content-Length or chunked
  bomb             a gzip body of a few KB that inflates to a `hostile_bytes` completion
  deep             a 200 body of JSON arrays nested 100,000 deep (a recursion bomb for JSON parsers)
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import random

from aiohttp import web

from arena_jax.judges.config import HOSTILE_KINDS  # declared beside the knob that picks them

# (path into the completion, the value put there): one is drawn per `wrong_types` answer.
WRONG_TYPES = (
  (("usage",), "many"),
  (("usage", "prompt_tokens"), "12k"),
  (("usage", "completion_tokens"), -5),
  (("usage", "completion_tokens"), {"n": 3}),
  (("choices", 0, "message", "content"), [{"type": "text", "text": "[[A]]"}]),
  (("choices", 0, "finish_reason"), {"reason": "stop"}),
  (("choices", 0, "message", "reasoning_content"), 42),
  (("choices", 0, "message"), "[[A]]"),
  (("choices",), {"0": "[[A]]"}),
)
RETRY_AFTERS = (
  {"Retry-After": "nan"},
  {"Retry-After": "inf"},
  {"Retry-After": "-30"},
  {"Retry-After": "soon"},
  {"Retry-After": "1e400"},
  {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
  {"retry-after-ms": "NaN"},
  {"retry-after-ms": "-1e9"},
  {"Retry-After": ""},
)


def _put(tree, path, value):
  for key in path[:-1]:
    tree = tree[key]
  tree[path[-1]] = value


def _padded(completion: dict, size: int) -> bytes:
  """The JSON of `completion` with its content padded by spaces to about `size` bytes (still a completion)."""
  body = copy.deepcopy(completion)
  message = body["choices"][0]["message"]
  message["content"] = " " * max(size, 0) + (message.get("content") or "")
  return json.dumps(body).encode("utf-8")


@functools.lru_cache(maxsize=4)
def _bomb(size: int) -> bytes:
  """A gzip body that inflates to a padded completion of `size` bytes (spaces compress ~1000:1)."""
  template = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "[[A]]"}, "finish_reason": "stop"}]}
  return gzip.compress(_padded(template, size), compresslevel=9)


async def answer(
  kind: str, request: web.Request, completion: dict, rng: random.Random, size: int
) -> web.StreamResponse:
  """The hostile answer of `kind` to `request`, made from the honest `completion` it replaces."""
  if kind == "wrong_types":
    body = copy.deepcopy(completion)
    path, value = rng.choice(WRONG_TYPES)
    _put(body, path, value)
    return web.json_response(body)
  if kind == "bad_retry_after":
    status = rng.choice((429, 503))
    return web.json_response(
      {"error": {"message": "come back later", "code": status}}, status=status, headers=rng.choice(RETRY_AFTERS)
    )
  if kind == "huge":
    data = _padded(completion, size)
    if rng.random() < 0.5:
      return web.Response(body=data, content_type="application/json")  # with its Content-Length
    response = web.StreamResponse(headers={"Content-Type": "application/json"})  # chunked: no length ahead
    await response.prepare(request)
    for i in range(0, len(data), 1 << 16):
      await response.write(data[i : i + (1 << 16)])
    await response.write_eof()
    return response
  if kind == "bomb":
    return web.Response(body=_bomb(size), headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
  if kind == "deep":
    return web.Response(body=b"[" * 100_000 + b"]" * 100_000, content_type="application/json")
  raise ValueError(f"unknown hostile answer {kind!r}; kinds: {HOSTILE_KINDS}")
