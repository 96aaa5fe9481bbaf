"""The embedded judge: an OpenAI-compatible judge server that needs no model, for runs with no judge URL.

Everything must run on one machine with no downloads, so when `judge.urls` is empty the trainer starts
this server (`judges.judge_endpoints`); `python -m launch.serve_judge` serves it on its own, and tests and
benchmarks start it with faults, latency and hostile answers of their choice.

  launcher   `EmbeddedJudgeServer` (a child process) and `serve_in_process` (the running event loop);
             `merged_config`: `server_config()` plus keyword overrides, validated
  server     the HTTP server (`make_app`, `start`, `serve`, `run_server`): the protocol, faults and latency
  hostile    the answers of a judge that tries to break its client (`server.hostile_rate`; tests, soak)
  simulated  `JudgeLogic`: the rule-based process judge that the server answers with
  checking   the judge's own step-by-step check of a trace (the tasks' process checkers, or a generic one)
  replies    how the judge writes what it decided: the plain and reasoning styles, malformed and cut answers

The judge client (`arena_jax.judges.client`) does not import this package.
"""

from arena_jax.judges.embedded import checking, hostile, replies, server, simulated
from arena_jax.judges.embedded.launcher import EmbeddedJudgeServer, merged_config, serve_child, serve_in_process
from arena_jax.judges.embedded.server import READY_PATTERN, make_app, run_server
from arena_jax.judges.embedded.simulated import JudgeLogic
