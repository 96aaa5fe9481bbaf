"""Judge backends by name (a registry, selected by `judge.backend`) and where the judge runs.

    with judges.judge_endpoints(config) as urls:          # the embedded server when config.urls is ()
      judge = judges.make_judge(config, urls)             # config.backend: pairwise | pointwise | jury
      ...
      await judge.close()

  pairwise   `PairwiseJudge`: compare(problem, reference, first, second) → JudgeResult (SPEC §4)
  pointwise  `PointwiseJudge`: score(problem, reference, trace) → ScoreResult (rubric, SPEC §7)
  jury       `JuryJudge`: score(...) → ScoreResult from the Reasoning Jury's consensus flaws (SPEC §8)

Adding a backend touches one file: a factory `(config, urls) -> judge` decorated with
`@register_backend("name")`; the config check reads the registry (`BACKENDS`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator, Sequence

from arena_jax.judges import config as config_lib
from arena_jax.judges.client import JudgeClient, check_endpoints, check_logprobs, check_tokenize, split_urls
from arena_jax.judges.jury import Jury, JuryJudge
from arena_jax.judges.pairwise import PairwiseJudge
from arena_jax.judges.pointwise import PointwiseJudge
from arena_jax.judges.embedded import EmbeddedJudgeServer
from arena_jax.judges.transformers_server import TransformersJudgeServer

BACKENDS = config_lib.BACKENDS  # where the config check (`judge.backend`) reads the names


def register_backend(name: str):
  """Decorator: registers a judge factory `(config, urls) -> judge` under `name`."""
  return BACKENDS.register(name)


def _urls(config, urls) -> tuple[str, ...]:
  urls = split_urls(urls if urls is not None else config.urls)
  if not urls:
    raise ValueError(
      "judge.urls is empty: give judge URLs, or wrap the code in `with judges.judge_endpoints(config) "
      "as urls:` to start the embedded judge server"
    )
  return urls


@register_backend("pairwise")
def _pairwise(config, urls):
  return PairwiseJudge(JudgeClient.from_config(config, _urls(config, urls)), config)


@register_backend("pointwise")
def _pointwise(config, urls):
  return PointwiseJudge(JudgeClient.from_config(config, _urls(config, urls)), config)


def make_jury(config, urls: Sequence[str] | None = None, *, mode: str | None = None) -> Jury:
  """A `Jury` from the config: one client per `jury.jurors` URL, or `num_jurors` jurors sharing `urls`."""
  j = config.jury
  if j.jurors:
    models = list(j.juror_models) or [config.model] * len(j.jurors)
    jurors = [JudgeClient.from_config(config, [u], model=m) for u, m in zip(j.jurors, models)]
  else:
    shared = JudgeClient.from_config(config, _urls(config, urls))
    jurors = [shared] * j.num_jurors
  moderator = JudgeClient.from_config(config, [j.consolidator]) if j.consolidator else None
  return Jury(jurors, config, moderator=moderator, mode=mode)


@register_backend("jury")
def _jury(config, urls):
  return JuryJudge(make_jury(config, urls), config)


def make_judge(config, urls: Sequence[str] | str | None = None):
  """The judge of `config.backend` (validated first) talking to `urls` (default `config.urls`)."""
  config_lib.validate_config(config)
  return BACKENDS[config.backend](config, urls)


@contextlib.contextmanager
def judge_endpoints(config) -> Iterator[tuple[str, ...]]:
  """The judge URLs of `config`, or those of an embedded server started for the block (the embedded default:
  one machine, no downloads)."""
  with launched_judge_endpoints(config) as urls:
    yield urls()


@contextlib.contextmanager
def launched_judge_endpoints(config) -> Iterator[Callable[[], tuple[str, ...]]]:
  """`judge_endpoints` in two steps: the embedded server (when `config` names no URL) is launched at entry,
  and the yielded function waits for it and returns the URLs, so that a trainer builds its policy while the
  server's process starts."""
  needs = not config.urls and not (config.backend == "jury" and config.jury.jurors)
  if not needs:
    yield lambda: tuple(config.urls)
    return
  server = local_server(config)
  server.launch()
  checked = []

  def ready() -> tuple[str, ...]:
    urls = (server.wait_ready(),)
    if not checked and config.get("verdict_format") == "logprobs" and config.client.startup_check_s > 0:
      # a server that ignores logprobs would fail every judgment: stop now
      check_logprobs(urls, model=config.model, timeout_s=max(config.client.startup_check_s, 60.0))
    checked.append(True)
    return urls

  try:
    yield ready
  finally:
    server.stop()


def local_server(config):
  """The judge server that `config.serve` names, not yet started: the embedded one (`config.server`'s knobs) or
  `transformers serve` of `config.serve_model` (`TransformersJudgeServer`), serving `config.model`."""
  if config.get("serve", "embedded") == "transformers":
    return TransformersJudgeServer(
      config.serve_model, name=config.model, port=config.serve_port, startup_timeout_s=config.serve_startup_s
    )
  return EmbeddedJudgeServer(config.server, model=config.model)


def configured_urls(config) -> tuple[str, ...]:
  """Every judge URL `config` names for its backend: `urls`, or a jury's jurors and consolidator."""
  urls = list(split_urls(config.urls))
  if config.backend == "jury":
    urls += list(config.jury.jurors) + ([config.jury.consolidator] if config.jury.consolidator else [])
  return tuple(dict.fromkeys(urls))  # once each, in order


def check_judge_urls(config) -> None:
  """Fails fast, within `client.startup_check_s`, when a configured judge URL does not answer.

  Nothing to check when `config` names no URL: the embedded server is started (and waited for) by
  `judge_endpoints`. Raises `JudgeUnreachableError` naming each URL that did not answer or does not
  serve `config.model`, and (`judge.tokenizer = "server"`) `ConfigError` naming each without `/tokenize`.
  """
  api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
  timeout_s = config.client.startup_check_s
  check_endpoints(configured_urls(config), api_key=api_key, timeout_s=timeout_s, model=config.model)
  if config.get("tokenizer") == "server":  # every URL must count, or every judgment would fail (`judges.tokens`)
    check_tokenize(configured_urls(config), model=config.model, api_key=api_key, timeout_s=timeout_s)
  if config.get("verdict_format") == "logprobs" and timeout_s > 0:  # every URL must return them, or all fail
    check_logprobs(configured_urls(config), model=config.model, api_key=api_key, timeout_s=max(timeout_s, 60.0))
