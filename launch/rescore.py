"""Re-judges a run's stored judge calls with another judge and reports how the two agree (SPEC §4–§6).

    python -m launch.rescore --workdir=runs/arena_live --judge_url=http://other-judge:8000/v1
    python -m launch.rescore --workdir=runs/arena_live --judge.server.noise=2   # the embedded judge, noisier
    python -m launch.rescore --workdir=... --judge_url=... --judge.template_dir=my_templates --step=10-20

Replays every stored pairwise call of the run's judge transcripts (`judge.transcripts` > 0) in the order
the run's judge saw it, and prints a table — verdicts of each judge, verdict agreement and Cohen's κ,
Kendall τ between the two judges' Bradley–Terry strengths per group, each judge's first-shown win rate
(position bias) — and, last, one JSON line with the figures (`arena_jax.report.rescore`). Without
--judge_url the embedded judge server is started with the `--judge.server.*` settings. Every judge
setting is a `--judge.<field>` flag (`arena_jax.judges.default_config()`); `debias` is ignored (the
run's presentation orders are replayed).
"""

import json

from absl import flags

from arena_jax import cli
from arena_jax import judges
from arena_jax import report
from arena_jax.report import inspector

_WORKDIR = flags.DEFINE_string("workdir", None, "The RL run directory (with judge transcripts).", required=True)
_URL = flags.DEFINE_string(
  "judge_url",
  "",
  "Comma-separated URLs of the judge to compare; empty = start the embedded server (its settings: --judge.server.*).",
)
_STEP = flags.DEFINE_string("step", None, "Only these steps: 40, 10,20 or 10-20 (default: every stored step).")
_MAX_CALLS = flags.DEFINE_integer(
  "max_calls", None, "Re-judge only the first that many stored calls (a cheap look before paying for all of them)."
)
_JUDGE = cli.config_dict_flag("judge", judges.default_config())


def main(argv):
  del argv
  config = judges.cli_config(_JUDGE.value, _URL.value)
  with judges.judge_endpoints(config) as urls:
    result = report.rescore(
      _WORKDIR.value, config, urls, steps=inspector.parse_ints(_STEP.value, "step"), max_calls=_MAX_CALLS.value
    )
  print(result.table())
  print(json.dumps(result.summary()))


if __name__ == "__main__":
  cli.run(main)
