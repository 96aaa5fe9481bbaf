"""Judges over RPC: client, prompts, pairwise / pointwise / jury backends, the embedded server.

  config      `default_config()` / `validate_config()`: urls, model, client, debiasing, jury, server knobs
  client      `JudgeClient`: async OpenAI-compatible chat completions — load spreading, limits, retries,
              parse retries, explicit failures, token / latency accounting, on-disk cache (a package: one
              module per concern — endpoints, backoff, responses, cache, the start-up probe)
  usage       `Usage`: what a call, a judgment, an audit or a tournament cost (calls, HTTP requests,
              tokens, latency); `+` for sequential work, `Usage.parallel` for concurrent work
  prompts     templates as files (`templates/*.txt`) and the verdict / rubric / flaw parsers
  hygiene     trace neutralisation (verdict tokens, delimiters, step marks) and truncation with a marker
  tokens      the judge's token count (`judge.tokenizer`: the estimate, a local tokenizer, or the server's
              `POST /tokenize`) and traces cut to `token_budget` and the judge's context (`context_tokens`)
  pairwise    `PairwiseJudge.compare` → `JudgeResult` (soft outcome of the first trace, SPEC §4), debiasing
  pointwise   `PointwiseJudge.score` → `ScoreResult` (rubric level in [0, 1], SPEC §7)
  jury        the Reasoning Jury (SPEC §8): Phase 1 jurors, consolidation / deliberation; `JuryJudge`
  metrics     balanced F1, ProcessBench acc1 / acc2 / F1
  tournament  `run_tournament` / `run_tournaments`: arena schedulers against the async judge (SPEC §5)
  backends    judges by name (`make_judge`), `judge_endpoints` (the embedded server when no URL is set),
              `check_judge_urls` (fail fast at start when a configured judge does not answer)
  embedded    the embedded judge server (a package), started when no judge URL is given:
                launcher   `EmbeddedJudgeServer` (a child process) and `serve_in_process` (the running event loop)
                server     its HTTP server (`make_app`, `run_server`; `python -m launch.serve_judge`)
                hostile    the answers of a judge that tries to break its client (`server.hostile_rate`)
                simulated  `JudgeLogic`: the rule-based process judge that it answers with (`checking` checks
                           the traces, `replies` writes the answers)
  formats     `judge.verdict_format`: reasoned (explain, then [[A]]), letter (one letter / word), logprobs (one
              token's probabilities): templates, answer budgets, parsers
  transformers_server  `TransformersJudgeServer`: `transformers serve` of a real model on this machine, started
              and stopped for the run (`judge.serve = "transformers"`)
  files       JSONL batch judging behind `launch/judge_pairs.py` and `launch/jury.py`

Importing this package starts nothing: servers, sessions and event loops are created on use.
"""

from arena_jax.judges import embedded, hygiene, prompts, tokens

# The embedded server's modules stay reachable as `judges.server`, `judges.hostile` and `judges.simulated`.
from arena_jax.judges.embedded import hostile, server, simulated
from arena_jax.judges.backends import (
  BACKENDS,
  check_judge_urls,
  configured_urls,
  judge_endpoints,
  launched_judge_endpoints,
  local_server,
  make_judge,
  make_jury,
  register_backend,
)
from arena_jax.judges.client import (
  ClientStats,
  Completion,
  JudgeClient,
  JudgeClientSettings,
  JudgeUnreachableError,
  ResponseCache,
  TokenizeError,
  backoff_delay,
  chat_completions_url,
  check_endpoints,
  check_logprobs,
  models_url,
  note_context,
  retry_after_seconds,
  served_context,
  split_urls,
  tokenize_url,
)
from arena_jax.judges.config import (
  DEBIAS_MODES,
  JURY_MODES,
  cli_config,
  default_config,
  server_config,
  validate_config,
  validate_server_config,
)
from arena_jax.judges.embedded import EmbeddedJudgeServer, JudgeLogic, make_app, run_server, serve_in_process
from arena_jax.judges import formats
from arena_jax.judges.formats import VERDICT_FORMATS
from arena_jax.judges.transformers_server import JudgeServerError, TransformersJudgeServer
from arena_jax.judges.files import format_jury_metrics, judge_pairs_file, jury_file, jury_metrics
from arena_jax.judges.hygiene import count_tokens, neutralise, sanitize, truncate
from arena_jax.judges.jury import Claim, Jury, JuryJudge, JuryVerdict
from arena_jax.judges.metrics import balanced_f1, processbench_scores, processbench_step_truth, step_detection
from arena_jax.judges.pairwise import JudgeCall, JudgeResult, PairRequest, PairwiseJudge, derive_seed
from arena_jax.judges.pointwise import PointwiseJudge, ScoreRequest, ScoreResult
from arena_jax.judges.prompts import (
  Templates,
  load_templates,
  parse_flaws,
  parse_moderator,
  parse_pairwise,
  parse_positions,
  parse_rating,
  parse_sections,
)
from arena_jax.judges.tournament import TournamentJob, TournamentRun, run_tournament, run_tournaments
from arena_jax.judges.usage import Usage
