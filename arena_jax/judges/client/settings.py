"""`JudgeClientSettings`: everything a `JudgeClient` is made with except its URLs, built once from the judge config.

The judge config's declaration (`arena_jax.judges.config`, `JUDGE` and its `client` section) holds every
default: `from_config` maps a config onto the settings field by field, and `defaults` (what a client made
without a config uses) reads them from that same declaration, so no default is restated here. The checks a
client needs at once (concurrency, deadline, `extra_body`) run when settings are made, with the messages a
client gave before.
"""

from __future__ import annotations

import dataclasses
import os

from arena_jax import config_schema

# What every request body carries from the client itself; `extra_body` may not override these (an `n` > 1
# or `stream` would also return what the client cannot read, `max_completion_tokens` outranks max_tokens).
BODY_KEYS_SET_BY_CLIENT = (
  "model",
  "messages",
  "temperature",
  "max_tokens",
  "max_completion_tokens",
  "seed",
  "n",
  "stream",
)
# What `extra_body` (judge.extra_body) accepts: the config declares its field with this very check.
EXTRA_BODY_CHECK = config_schema.json_object(
  reserved=BODY_KEYS_SET_BY_CLIENT,
  why="the client sets these itself from judge.model, temperature, max_tokens and seed, and reads one whole answer",
)
# The settings read from `judge.<name>`; `api_key` comes from the variable `judge.api_key_env` names,
# `rng_seed` (the backoff jitter's) is not configured, and every other field is `judge.client.<name>`.
_FROM_JUDGE = ("model", "temperature", "max_tokens", "seed", "extra_body")
_NOT_FROM_CONFIG = ("api_key", "rng_seed")
_CASTS = {"int": int, "float": float}  # a field annotated `int` / `float` holds one, whatever it was given


@dataclasses.dataclass(frozen=True, kw_only=True)
class JudgeClientSettings:
  """How a `JudgeClient` talks to its judge; each field means what the judge config field of its name
  means (`judge.<name>` or `judge.client.<name>`, docs/judges.md). `extra_body` holds a plain dict ({} for
  none); `api_key` is never shown in a repr."""

  model: str
  api_key: str | None = dataclasses.field(default=None, repr=False)
  temperature: float
  max_tokens: int
  seed: int
  extra_body: dict | None
  concurrency: int
  deadline_s: float
  timeout_s: float
  connect_timeout_s: float
  max_retries: int
  max_parse_retries: int
  max_truncation_retries: int
  backoff_initial_s: float
  backoff_max_s: float
  jitter: float
  max_retry_after_s: float
  failures_before_cooldown: int
  cooldown_s: float
  cache_dir: str
  max_response_bytes: int
  rng_seed: int | None = None

  def __post_init__(self):
    if self.concurrency < 1:
      raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
    if not self.deadline_s > 0:
      raise ValueError(f"deadline_s must be > 0, got {self.deadline_s}")
    extra_body = {}
    if self.extra_body is not None:
      problem = EXTRA_BODY_CHECK.test(self.extra_body)
      if problem:
        raise ValueError(f"extra_body (judge.extra_body): {problem}")
      extra_body = config_schema.json_object_value(self.extra_body)
    object.__setattr__(self, "extra_body", extra_body)  # frozen: set once, here
    for f in dataclasses.fields(self):
      if f.type in _CASTS:
        object.__setattr__(self, f.name, _CASTS[f.type](getattr(self, f.name)))

  @classmethod
  def from_config(cls, config, *, model: str | None = None, **overrides) -> JudgeClientSettings:
    """The settings of a judge config (`judges.default_config()`): `model` (when given) replaces
    `judge.model`, `overrides` replace fields by name; the API key is read from `judge.api_key_env`."""
    values = _config_values(config)
    if model:
      values["model"] = model
    values.update(overrides)
    return cls(**values)

  @classmethod
  def defaults(cls, *, model: str, **overrides) -> JudgeClientSettings:
    """The judge config's declared defaults with `model`, no API key (nothing read from the environment)
    and `overrides` replacing fields by name: the settings of a client made without a config."""
    # Imported here: the config module imports EXTRA_BODY_CHECK from this package to declare judge.extra_body.
    from arena_jax.judges.config import default_config  # pylint: disable=import-outside-toplevel

    values = _config_values(default_config())
    values.update(model=model, api_key=None)
    values.update(overrides)
    return cls(**values)


def _config_values(config) -> dict:
  """Every setting's value in a judge config, by field name."""
  values = {name: config[name] for name in _FROM_JUDGE}
  for f in dataclasses.fields(JudgeClientSettings):
    if f.name not in values and f.name not in _NOT_FROM_CONFIG:
      values[f.name] = config.client[f.name]
  values["api_key"] = os.environ.get(config.api_key_env) if config.api_key_env else None
  return values
