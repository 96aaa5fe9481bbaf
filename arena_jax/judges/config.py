"""Judge configuration: `default_config()` and its up-front validation (issue #5; SPEC §4, §7, §8).

One `ml_collections.ConfigDict` carries everything a judge needs: where it is (OpenAI-compatible
base URLs, or none for the embedded server), how the client talks to it (timeouts, retries,
concurrency, cache), what it is asked (backend, templates, token budget, sampling), how verdicts
become rewards (soft margin m, order debiasing) and, for the embedded server, its simulated
behaviour (noise, position bias, latency, faults, juror errors).

`validate_config` checks every field once, before anything starts, and names the field to change.
"""
from __future__ import annotations

import math
import os

import ml_collections

from arena_jax.tasks import IMPACTS

BACKEND_NAMES = ("pairwise", "pointwise", "jury")
DEBIAS_MODES = ("none", "random", "both")
JURY_MODES = ("consolidation", "deliberation", "vote")
LATENCY_DISTS = ("fixed", "exponential", "lognormal")
DEFAULT_MODEL = "arena-judge"


def server_config() -> ml_collections.ConfigDict:
  """Knobs of the embedded judge server (`launch/serve_judge.py`, `judges.EmbeddedJudgeServer`)."""
  return ml_collections.ConfigDict(dict(
      host="127.0.0.1",           # loopback only unless a user deliberately widens it
      port=0,                     # 0 = any free port (announced on stdout when ready)
      model=DEFAULT_MODEL,        # the one model id it serves (`/v1/models`); other ids get 404
      api_key_env="",             # name of an env var holding the key clients must send; "" = open
      max_request_bytes=4 << 20,  # larger request bodies get HTTP 413
      seed=0,                     # decorrelates servers; verdict noise is keyed by (seed, request seed, content)
      # Pairwise judging: A beats B when its penalty (invalid + irrelevant steps, see below) is lower.
      noise=0.0,                  # logistic noise scale on the penalty difference, in steps
      position_bias=0.0,          # added in favour of the trace shown first (A), in steps
      tie_band=0.5,               # |difference| <= tie_band is a tie [[C]]
      skip_weight=0.5,            # penalty per operation done without being shown
      answer_weight=1.0,          # penalty for a wrong (or missing) final answer
      verdict_first=False,        # state the verdict before quoting evidence (as some judges do)
      emit_reasoning=False,       # also return `reasoning_content`, like a vLLM reasoning parser
      # Latency of every answer: fixed, exponential or lognormal with mean latency_ms.
      latency_ms=0.0,             # time to answer, the judging included (so 100 ms = 100 ms at any load)
      latency_dist="fixed",
      latency_sigma=0.5,          # lognormal shape
      # Fault injection (probabilities per request).
      error_rate=0.0,             # answer with an HTTP error drawn from error_statuses
      error_statuses=(500, 503, 429),
      retry_after_s=0.0,          # Retry-After sent with 429/503 (0 = none)
      hang_rate=0.0,              # sleep hang_s before answering (clients should time out)
      hang_s=30.0,
      disconnect_rate=0.0,        # drop the connection without an answer
      bad_body_rate=0.0,          # HTTP 200 whose body is not JSON
      malformed_rate=0.0,         # a well-formed completion whose text has no parseable verdict
      # Juror mode (Reasoning Jury, SPEC §8): errors per juror, decorrelated by the request seed.
      miss_rate=0.0,              # a real flaw is not reported
      false_alarm_rate=0.0,       # a clean step is reported as flawed
      debate_miss_rate=0.0,       # in deliberation / consolidation review: a real flaw is not confirmed
      debate_false_alarm_rate=0.0,  # ... a false claim is confirmed
  ))


def default_config() -> ml_collections.ConfigDict:
  """The judges configuration (embed as `config.judge` of a run config)."""
  c = ml_collections.ConfigDict()
  c.backend = "pairwise"          # registry name: pairwise | pointwise | jury (STYLE §4)
  c.urls = ()                     # OpenAI-compatible base URLs (load is spread); () = embedded server
  c.model = DEFAULT_MODEL         # the judge's model id (vLLM/SGLang: the served model name)
  c.api_key_env = "ARENA_JUDGE_API_KEY"  # env var with the bearer token ("" or unset = none)
  c.seed = 0                      # presentation orders and request seeds derive from it
  c.margin = 0.4                  # soft margin m (SPEC §4)
  c.debias = "random"             # none | random (seeded order per query) | both (average both orders)
  c.temperature = 0.0             # sent explicitly with every request
  c.max_tokens = 2048             # per answer; an answer cut at the limit counts as unparseable
  c.token_budget = 4096           # per trace, approximate tokens; longer traces are truncated with a marker
  c.tail_fraction = 0.25          # share of the budget kept from the end of a truncated trace
  c.template_dir = ""             # directory with <name>.txt files overriding the built-in templates
  c.rubric_levels = (0.0, 0.5, 1.0)  # pointwise rubric scores, normalised to [0, 1] (SPEC §7)
  c.client = ml_collections.ConfigDict(dict(
      concurrency=64,             # in-flight requests per endpoint
      timeout_s=300.0,            # per attempt, whole request
      connect_timeout_s=10.0,
      max_retries=4,              # transport retries: connection errors, 408/409/429, 5xx, timeouts
      max_parse_retries=2,        # extra requests (next seed) when an answer cannot be parsed
      backoff_initial_s=0.5,      # exponential backoff: initial * 2^k, capped, minus up to `jitter` of it
      backoff_max_s=8.0,
      jitter=0.25,
      max_retry_after_s=60.0,     # honour Retry-After up to this; a longer one is a final failure
      failures_before_cooldown=3,  # consecutive failures that take an endpoint out of rotation ...
      cooldown_s=5.0,             # ... for this long (while another endpoint is healthy)
      startup_check_s=10.0,       # every URL must answer GET /v1/models within this before training (0 = skip)
      cache_dir="",               # on-disk answer cache keyed by the request ("" = off)
  ))
  c.jury = ml_collections.ConfigDict(dict(
      jurors=(),                  # one base URL per juror; () = `urls` (or the embedded server) for each
      juror_models=(),            # model id per juror; () = `model`
      num_jurors=3,               # used when `jurors` is ()
      mode="consolidation",       # consolidation | deliberation (SPEC §8 Phase 2) | vote (Phase-1 majority)
      consolidator="",            # URL of the consolidating / moderating judge; "" = the first juror's
      max_rounds=8,               # deliberation turns (moderator + one juror each)
      stall_rounds=2,             # stop after this many turns that change no stance
      quorum=0,                   # agreeing jurors that make a claim consensus; 0 = a strict majority
      error_min_impact="major",   # flaws at least this severe mark a step as an error (ProcessBench)
      severity_weights=ml_collections.ConfigDict(dict(neutral=0.0, minor=0.1, major=0.4, fatal=1.0)),
  ))
  c.server = server_config()
  return c


def _fail(path: str, message: str):
  raise ValueError(f"{path}: {message}")


def _number(c, prefix, name, lo=None, hi=None, *, lo_open=False, integer=False):
  v = c[name]
  kinds = (int,) if integer else (int, float)
  if isinstance(v, bool) or not isinstance(v, kinds) or (not integer and not math.isfinite(v)):
    _fail(f"{prefix}.{name}", f"must be {'an integer' if integer else 'a finite number'}, got {v!r}")
  if lo is not None and (v <= lo if lo_open else v < lo):
    _fail(f"{prefix}.{name}", f"must be {'>' if lo_open else '>='} {lo}, got {v!r}")
  if hi is not None and v > hi:
    _fail(f"{prefix}.{name}", f"must be <= {hi}, got {v!r}")
  return v


def _choice(c, prefix, name, choices):
  if c[name] not in choices:
    _fail(f"{prefix}.{name}", f"must be one of {choices}, got {c[name]!r}")


def _urls(c, prefix, name):
  urls = c[name]
  if isinstance(urls, str):
    _fail(f"{prefix}.{name}", f"must be a tuple of URLs (split a comma-separated string), got {urls!r}")
  for u in urls:
    if not isinstance(u, str) or not u.startswith(("http://", "https://")):
      _fail(f"{prefix}.{name}", f"entries must be http(s):// URLs, got {u!r}")


def _string(c, prefix, name, *, empty_ok=True):
  if not isinstance(c[name], str) or (not empty_ok and not c[name]):
    _fail(f"{prefix}.{name}", f"must be a {'' if empty_ok else 'non-empty '}string, got {c[name]!r}")


def validate_server_config(s: ml_collections.ConfigDict, prefix: str = "judge.server"):
  """Checks the embedded server's knobs (see `server_config`); raises ValueError naming the field."""
  _string(s, prefix, "host", empty_ok=False)
  _number(s, prefix, "port", 0, 65535, integer=True)
  _string(s, prefix, "model", empty_ok=False)
  _string(s, prefix, "api_key_env")
  _number(s, prefix, "max_request_bytes", 1024, integer=True)
  _number(s, prefix, "seed", 0, integer=True)
  for name in ("noise", "tie_band", "skip_weight", "answer_weight", "latency_ms", "latency_sigma",
               "retry_after_s", "hang_s"):
    _number(s, prefix, name, 0.0)
  _number(s, prefix, "position_bias")
  _choice(s, prefix, "latency_dist", LATENCY_DISTS)
  for name in ("error_rate", "hang_rate", "disconnect_rate", "bad_body_rate", "malformed_rate", "miss_rate",
               "false_alarm_rate", "debate_miss_rate", "debate_false_alarm_rate"):
    _number(s, prefix, name, 0.0, 1.0)
  if not s.error_statuses or any(isinstance(v, bool) or not isinstance(v, int) or not 400 <= v <= 599
                                 for v in s.error_statuses):
    _fail(f"{prefix}.error_statuses", f"must be a non-empty tuple of HTTP error codes, got {s.error_statuses!r}")
  for name in ("verdict_first", "emit_reasoning"):
    if not isinstance(s[name], bool):
      _fail(f"{prefix}.{name}", f"must be True or False, got {s[name]!r}")
  return s


def validate_config(config: ml_collections.ConfigDict, prefix: str = "judge") -> ml_collections.ConfigDict:
  """Checks every field once, up front; raises ValueError naming the field and what to change."""
  _choice(config, prefix, "backend", BACKEND_NAMES)
  _urls(config, prefix, "urls")
  _string(config, prefix, "model", empty_ok=False)
  _string(config, prefix, "api_key_env")
  _number(config, prefix, "seed", 0, integer=True)
  _number(config, prefix, "margin", 0.0, 0.5)
  _choice(config, prefix, "debias", DEBIAS_MODES)
  _number(config, prefix, "temperature", 0.0, 2.0)
  _number(config, prefix, "max_tokens", 1, integer=True)
  _number(config, prefix, "token_budget", 16, integer=True)
  _number(config, prefix, "tail_fraction", 0.0, 0.9)
  _string(config, prefix, "template_dir")
  if config.template_dir and not os.path.isdir(os.path.expanduser(config.template_dir)):
    _fail(f"{prefix}.template_dir", f"no such directory: {config.template_dir!r}")
  levels = config.rubric_levels
  if (len(levels) < 2 or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in levels)
      or len(set(levels)) != len(levels)):
    _fail(f"{prefix}.rubric_levels", f"must be >= 2 distinct numbers, got {levels!r}")

  p = f"{prefix}.client"
  cl = config.client
  _number(cl, p, "concurrency", 1, integer=True)
  _number(cl, p, "timeout_s", 0.0, lo_open=True)
  _number(cl, p, "connect_timeout_s", 0.0, lo_open=True)
  _number(cl, p, "max_retries", 0, integer=True)
  _number(cl, p, "max_parse_retries", 0, integer=True)
  _number(cl, p, "backoff_initial_s", 0.0)
  _number(cl, p, "backoff_max_s", cl.backoff_initial_s)
  _number(cl, p, "jitter", 0.0, 1.0)
  _number(cl, p, "max_retry_after_s", 0.0)
  _number(cl, p, "failures_before_cooldown", 1, integer=True)
  _number(cl, p, "cooldown_s", 0.0)
  _number(cl, p, "startup_check_s", 0.0)
  _string(cl, p, "cache_dir")

  p = f"{prefix}.jury"
  j = config.jury
  _urls(j, p, "jurors")
  if j.juror_models and j.jurors and len(j.juror_models) != len(j.jurors):
    _fail(f"{p}.juror_models", f"must be () or name one model per juror ({len(j.jurors)}), got {j.juror_models!r}")
  _number(j, p, "num_jurors", 1, integer=True)
  _choice(j, p, "mode", JURY_MODES)
  _string(j, p, "consolidator")
  if j.consolidator:
    _urls(ml_collections.ConfigDict({"consolidator": (j.consolidator,)}), p, "consolidator")
  _number(j, p, "max_rounds", 0, integer=True)
  _number(j, p, "stall_rounds", 1, integer=True)
  num = len(j.jurors) or j.num_jurors
  _number(j, p, "quorum", 0, num, integer=True)
  _choice(j, p, "error_min_impact", IMPACTS)
  if set(j.severity_weights.keys()) != set(IMPACTS):
    _fail(f"{p}.severity_weights", f"must have exactly the impacts {IMPACTS}, got {tuple(j.severity_weights.keys())}")
  for k in IMPACTS:
    _number(j.severity_weights, f"{p}.severity_weights", k, 0.0)
  validate_server_config(config.server, f"{prefix}.server")
  return config
