"""Reading what a judge sends, defensively: whatever arrives, the client sees a completion or a failure.

Answers are capped at `max_response_bytes` on the wire and after decompression (the client inflates gzip /
deflate itself, `read_answer`), every field the client reads is checked for its type (`completion_fields`;
a surprise is a failed judgment, `bad_response`), and a parser that raises on an answer makes it
`unparseable` (`safe_parse`): no answer can raise out of `JudgeClient.chat`. A `/tokenize` answer is read
the same way (`count_fields`).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import aiohttp

# Encodings the client decodes itself, within `max_response_bytes` (aiohttp's own decoder inflates a whole
# network chunk at once, so a small compressed answer could still take hundreds of MB).
ACCEPT_ENCODING = "gzip, deflate"


def safe_parse(parse, content) -> tuple[Any, str]:
  """(parse(content) or None, what the parser raised): an answer the parser chokes on is one without a verdict.
  `content` is the answer's text, or (a logprobs request) its first token's alternatives, a tuple."""
  if not isinstance(content, (str, tuple)) or (parse is None and not isinstance(content, str)):
    return None, ""
  if parse is None:
    return content, ""
  try:
    return parse(content), ""
  except Exception as e:  # pylint: disable=broad-except  (a judge's text must not stop training, whatever it holds)
    return None, f"{type(e).__name__}: {e}"[:100]


class BadAnswer(ValueError):
  """An HTTP answer the client will not read (too large, badly encoded, not a chat completion)."""


async def read_answer(resp: aiohttp.ClientResponse, limit: int) -> bytes:
  """The body of `resp`, decoded, at most `limit` bytes on the wire and after decompression.

  Raises:
    BadAnswer: a larger body (by its Content-Length or as it arrives), a larger inflated body (a
      decompression bomb stops at `limit` + 1 bytes), an encoding other than ACCEPT_ENCODING's.
  """
  declared = resp.content_length
  if declared is not None and declared > limit:
    raise BadAnswer(f"an answer of {declared} bytes exceeds client.max_response_bytes={limit}")
  raw = bytearray()
  async for chunk in resp.content.iter_chunked(1 << 16):
    raw += chunk
    if len(raw) > limit:
      raise BadAnswer(f"the answer exceeds client.max_response_bytes={limit} bytes")
  encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
  if encoding in ("", "identity"):
    return bytes(raw)
  if encoding not in ("gzip", "x-gzip", "deflate"):
    raise BadAnswer(f"Content-Encoding {encoding[:40]!r} was not asked for (Accept-Encoding: {ACCEPT_ENCODING})")
  # gzip, or zlib-wrapped deflate (auto-detected by 32 + MAX_WBITS); raw deflate as some servers send it.
  wbits = 32 + zlib.MAX_WBITS if encoding != "deflate" or raw[:1] == b"\x78" else -zlib.MAX_WBITS
  inflater = zlib.decompressobj(wbits)
  try:
    out = inflater.decompress(bytes(raw), limit + 1)
  except zlib.error as e:
    raise BadAnswer(f"a {encoding} body that does not inflate: {e}") from None
  if len(out) > limit or inflater.unconsumed_tail:
    raise BadAnswer(f"the answer inflates past client.max_response_bytes={limit} bytes ({len(raw)} on the wire)")
  return out


def _count(usage: dict, name: str) -> int:
  value = usage.get(name)
  if value is None:
    return 0
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**53:
    raise BadAnswer(f"usage.{name} is {str(value)[:40]!r}, not a token count")
  return int(value)


def completion_fields(raw: bytes) -> dict:
  """The fields the client reads from a chat-completions answer, each checked for its type.

  Returns {content, reasoning, finish_reason: str | None, prompt_tokens, completion_tokens: int}.
  `reasoning` is `message.reasoning_content` or `message.reasoning` (vLLM / SGLang reasoning parsers).

  Raises:
    BadAnswer: naming the first field that is missing or of the wrong type (a failed judgment, reason
      `bad_response`; whatever a judge sends, the trainer only ever sees a failed judgment).
  """
  try:
    body = json.loads(raw)
  except (ValueError, RecursionError) as e:  # RecursionError: JSON nested thousands deep
    raise BadAnswer(f"not JSON: {type(e).__name__}") from None
  if not isinstance(body, dict):
    raise BadAnswer(f"the body is a JSON {type(body).__name__}, not an object")
  choices = body.get("choices")
  if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
    raise BadAnswer("choices is not a non-empty list of objects")
  choice = choices[0]
  message = choice.get("message")
  if not isinstance(message, dict):
    raise BadAnswer("choices[0].message is not an object")
  fields = {
    "content": message.get("content"),
    "reasoning_content": message.get("reasoning_content"),
    "reasoning": message.get("reasoning"),
    "finish_reason": choice.get("finish_reason"),
  }
  for key, value in fields.items():
    if value is not None and not isinstance(value, str):
      where = "choices[0]." if key == "finish_reason" else "choices[0].message."
      raise BadAnswer(f"{where}{key} is a {type(value).__name__}, not a string")
  out = {
    "content": fields["content"],
    "reasoning": fields["reasoning_content"] or fields["reasoning"],
    "finish_reason": fields["finish_reason"],
  }
  usage = body.get("usage")
  if usage is None:
    usage = {}
  if not isinstance(usage, dict):
    raise BadAnswer(f"usage is a {type(usage).__name__}, not an object")
  out["prompt_tokens"], out["completion_tokens"] = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
  out["top_logprobs"] = first_token_logprobs(choice.get("logprobs"))
  return out


def first_token_logprobs(logprobs: Any) -> tuple[tuple[str, float], ...] | None:
  """The first answer token's alternatives, `((token, logprob), …)`, from an OpenAI `choices[0].logprobs`
  (chat: `{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}, …]}, …]}`), or None when
  the answer holds none (a server that ignores `logprobs`, as `transformers serve` does). The chosen token
  counts among them when a server leaves it out of its own top list."""
  if not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list) or not logprobs["content"]:
    return None
  first = logprobs["content"][0]
  if not isinstance(first, dict):
    raise BadAnswer("choices[0].logprobs.content[0] is not an object")
  entries = list(first.get("top_logprobs") or []) + [first]
  out = {}
  for entry in entries:
    token, logprob = (entry.get("token"), entry.get("logprob")) if isinstance(entry, dict) else (None, None)
    if not isinstance(token, str) or isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
      raise BadAnswer("choices[0].logprobs.content[0] holds an entry without a string token and a number logprob")
    out.setdefault(token, float(logprob))
  return tuple(out.items())


def count_fields(raw: bytes) -> dict | None:
  """`{"count", "max_model_len"}` of a `/tokenize` answer (vLLM: count, max_model_len, tokens), or None when
  it holds no count."""
  try:
    body = json.loads(raw)
  except (ValueError, RecursionError):
    return None
  if not isinstance(body, dict):
    return None
  count = body.get("count")
  if not (isinstance(count, int) and not isinstance(count, bool)) and isinstance(body.get("tokens"), list):
    count = len(body["tokens"])
  if not isinstance(count, int) or isinstance(count, bool) or count < 0:
    return None
  context = body.get("max_model_len")
  context = context if isinstance(context, int) and not isinstance(context, bool) and context > 0 else None
  return {"count": count, "max_model_len": context}
