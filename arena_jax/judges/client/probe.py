"""The start-up check: every judge URL answers before training starts (`check_endpoints`).

A judge that is down at start is a configuration error, while one that fails mid-run costs only the
judgments it drops, which are counted. So before training starts the run fails fast, naming each URL,
when a judge does not answer `GET /v1/models` with a model list (a 404 there is a wrong URL), does not
list `judge.model` or rejects the key.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Sequence

from arena_jax.errors import ConfigError, UserError
from arena_jax.judges.client.backoff import RETRYABLE_STATUSES
from arena_jax.judges.client.endpoints import chat_completions_url, models_url, split_urls, tokenize_url
from arena_jax.judges.client.responses import BadAnswer, completion_fields


class JudgeUnreachableError(UserError, ConnectionError):
  """A configured judge endpoint did not answer before training started (see `check_endpoints`)."""


# What judges said their context is (base URL → tokens): vLLM lists `max_model_len` with each model in
# `/v1/models` (read by `check_endpoints`); a server the run starts itself notes its model's (`note_context`).
_SERVED_CONTEXTS: dict[str, int] = {}


def note_context(url: str, tokens: int) -> None:
  """Records that the judge at `url` holds `tokens` of context (read by `served_context`)."""
  _SERVED_CONTEXTS[url.rstrip("/")] = int(tokens)


def served_context(urls: Sequence[str]) -> int | None:
  """The smallest context that any of `urls` said it has, or None when none said."""
  known = [_SERVED_CONTEXTS[u.rstrip("/")] for u in urls if u.rstrip("/") in _SERVED_CONTEXTS]
  return min(known) if known else None


def _probe(base: str, headers: dict, deadline: float, interval_s: float, model: str | None) -> str | None:
  """None once `base` answers `GET /v1/models` with a model list (listing `model`, when it lists any);
  else why not.

  A 5xx, 408 or 429 proves an OpenAI-compatible server is listening there, busy or failing: that is the
  client's business once training runs. Any other 4xx, or a 200 that is not a model list, means this is
  not the API the client will call (a wrong path or port: every judgment would get the same 404), and a
  rejected key or a model list without `model` would fail every judgment too: these are final at once.
  """
  # No proxies, as for the aiohttp session (trust_env=False): the check must see what training will see.
  opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
  request = urllib.request.Request(models_url(base), headers=headers, method="GET")
  reason = "no attempt"
  while True:
    remaining = deadline - time.monotonic()
    try:
      with opener.open(request, timeout=max(min(remaining, 10.0), 0.05)) as resp:
        body = resp.read(1 << 20)
      _note_listed_context(base, body, model)
      return _model_missing(body, model)
    except urllib.error.HTTPError as e:
      if e.code in (401, 403):
        return (
          f"HTTP {e.code}: the judge rejected the API key (set the env var named by judge.api_key_env "
          "to the key the server expects)"
        )
      if 400 <= e.code < 500 and e.code not in RETRYABLE_STATUSES:
        return (
          f"HTTP {e.code} at {models_url(base)}: no OpenAI-compatible API answers at this path (judge.urls "
          "takes a base URL such as http://host:8000 or http://host:8000/v1)"
        )
      return None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:  # refused, DNS, timeout
      reason = f"{type(getattr(e, 'reason', e)).__name__}: {getattr(e, 'reason', e)}"
    if time.monotonic() + interval_s >= deadline:
      return reason
    time.sleep(interval_s)


def _note_listed_context(base: str, body: bytes, model: str | None) -> None:
  """Records the `max_model_len` that a `/v1/models` answer gives for `model` (vLLM does), if any."""
  try:
    for entry in json.loads(body).get("data") or ():
      n = entry.get("max_model_len") if isinstance(entry, dict) else None
      if isinstance(n, int) and not isinstance(n, bool) and n > 0 and (not model or entry.get("id") == model):
        note_context(base, n)
        return
  except (ValueError, AttributeError, TypeError, RecursionError):
    return


def check_logprobs(urls: str | Sequence[str], *, model: str, api_key: str | None = None, timeout_s: float = 60.0):
  """With `judge.verdict_format = "logprobs"`: fails at start, naming each URL, when a judge's answer to a
  one-token request with `logprobs` holds none (`transformers serve` ignores them; vLLM, llama.cpp's server and
  hosted APIs return them). Other failures are left to the run.

  Raises:
    ConfigError: naming judge.verdict_format, the URLs and the formats that need no logprobs.
  """
  urls = split_urls(urls)
  if not urls or timeout_s <= 0:
    return
  headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
  body = {
    "model": model,
    "messages": [{"role": "user", "content": "Answer with one letter, A or B."}],
    "max_tokens": 1,
    "temperature": 0.0,
    "logprobs": True,
    "top_logprobs": 5,
  }
  data = json.dumps(body).encode("utf-8")
  opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

  def probe(base: str) -> str | None:
    request = urllib.request.Request(chat_completions_url(base), data=data, headers=headers, method="POST")
    try:
      with opener.open(request, timeout=timeout_s) as resp:
        fields = completion_fields(resp.read(1 << 20))
    except urllib.error.HTTPError as e:
      return f"HTTP {e.code} to a request with logprobs" if e.code in (400, 422) else None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError, BadAnswer):
      return None  # not answering at all is the models check's business
    return None if fields["top_logprobs"] else "its answer holds no logprobs"

  with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
    reasons = list(pool.map(probe, urls))
  bad = [f"{u} ({r})" for u, r in zip(urls, reasons) if r is not None]
  if bad:
    raise ConfigError(
      f"judge.verdict_format = 'logprobs', but the judge at {', '.join(bad)} returns no logprobs (transformers "
      "serve ignores them; vLLM, llama.cpp's server and hosted APIs return them): use judge.verdict_format = "
      "'letter' (one letter, a win or a loss) or 'reasoned'"
    )


def _model_missing(body: bytes, model: str | None) -> str | None:
  """Why an OpenAI `/v1/models` answer rules the endpoint out (it is not a model list, or lists models but
  not `model`), or None."""
  try:
    listed = json.loads(body).get("data")
    ids = [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
  except (ValueError, AttributeError, TypeError, RecursionError):
    text = " ".join(body[:80].decode("utf-8", "replace").split())
    return f"HTTP 200 but not an OpenAI model list ({text!r}...): is this the judge's API?"
  if not model:
    return None
  # Servers name one model several ways (Ollama's "llama3:latest" for "llama3", "models/…" prefixes).
  names = {i.removeprefix("models/").removesuffix(":latest") for i in ids}
  if not ids or model in ids or model.removeprefix("models/").removesuffix(":latest") in names:
    return None
  return f"it does not serve judge.model={model!r}; it serves {', '.join(repr(i) for i in ids[:10])}"


def check_endpoints(
  urls: str | Sequence[str],
  *,
  api_key: str | None = None,
  timeout_s: float = 10.0,
  interval_s: float = 0.5,
  model: str | None = None,
) -> None:
  """Waits up to `timeout_s` for every judge URL to answer `GET /v1/models` and, when it lists its
  models, to list `model`.

  A judge that is down *before* training starts, or serves another model, is a configuration error (a
  typo, a server not launched, a firewall, a wrong `judge.model`): the run fails at once, naming each URL
  and why, instead of dropping every judgment of every step. Refused connections are retried every
  `interval_s` until the deadline, so a server that is still binding its port gets the whole window. A
  judge that dies *mid-run* is handled by the trainer (failed matches dropped and counted; zero
  advantage for all-failed groups).

  Raises:
    JudgeUnreachableError: listing the URLs that failed the check, and why.
  """
  urls = split_urls(urls)
  if not urls or timeout_s <= 0:
    return
  headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
  deadline = time.monotonic() + timeout_s
  with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
    reasons = list(pool.map(lambda u: _probe(u, headers, deadline, interval_s, model), urls))
  bad = [f"  {u} ({models_url(u)}): {r}" for u, r in zip(urls, reasons) if r is not None]
  if bad:
    raise JudgeUnreachableError(
      f"{len(bad)} of {len(urls)} judge URL(s) failed the start-up check (within {timeout_s:g} s):\n"
      + "\n".join(bad)
      + "\nStart the judge server(s), fix judge.urls or judge.model, or leave judge.urls "
      "empty for the embedded judge (judge.client.startup_check_s sets this wait; 0 skips the check)."
    )


def check_tokenize(urls: str | Sequence[str], *, model: str, api_key: str | None = None, timeout_s: float = 10.0):
  """With `judge.tokenizer = "server"`: fails at start, naming each URL, when a judge answers vLLM's
  `POST /tokenize` with 404 / 405 / 501 (it has none: every count, hence every judgment, would fail).
  Other failures are left to the run (a count that fails fails its judgment only).

  Raises:
    ConfigError: naming judge.tokenizer and the URLs without the endpoint.
  """
  urls = split_urls(urls)
  if not urls or timeout_s <= 0:
    return
  headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
  data = json.dumps({"model": model, "prompt": "ping", "add_special_tokens": False}).encode("utf-8")
  opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

  def probe(base: str) -> str | None:
    request = urllib.request.Request(tokenize_url(base), data=data, headers=headers, method="POST")
    try:
      with opener.open(request, timeout=timeout_s) as resp:
        resp.read(1 << 16)
    except urllib.error.HTTPError as e:
      return f"HTTP {e.code}" if e.code in (404, 405, 501) else None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
      return None  # not answering at all is the models check's business
    return None

  with concurrent.futures.ThreadPoolExecutor(len(urls)) as pool:
    reasons = list(pool.map(probe, urls))
  bad = [f"  {tokenize_url(u)}: {r}" for u, r in zip(urls, reasons) if r is not None]
  if bad:
    raise ConfigError(
      "judge.tokenizer = 'server': these judges do not count tokens (vLLM's POST /tokenize):\n"
      + "\n".join(bad)
      + "\nSet judge.tokenizer to the judge's tokenizer (a tokenizer.json, its directory or a SentencePiece "
      ".model) or to '' (the estimate)."
    )
