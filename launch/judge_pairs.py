"""Judges a JSONL file of trace pairs with an OpenAI-compatible judge (SPEC §4).

    python -m launch.judge_pairs --judge_url http://h1:8000/v1,http://h2:8000/v1 \
        --input pairs.jsonl --output verdicts.jsonl [--judge.model=...] [--judge.debias=both]

Input rows: {"problem", "reference", "trace_a", "trace_b"[, "id"]}. Output rows: {"row", "id",
"verdict" (A / B / tie / null), "outcome" (soft score of trace_a, SPEC §4), "judge_text" (the judge's
words), "judge_text_order" (which input trace its "Trace A" is), "failure_reason", ...}, in input order.
Resumable: rows already in the output are skipped (--retry_failed judges failed ones again). Without --judge_url
the embedded judge server is started for the run. Every judge setting is a `--judge.<field>` flag
(`arena_jax.judges.default_config()`).
"""

import asyncio
import json

from absl import flags

from arena_jax import cli
from arena_jax import judges

_URL = flags.DEFINE_string("judge_url", "", "Comma-separated judge base URLs; empty = start the embedded server.")
_JOB = cli.JsonlJobFlags(
  input_help="JSONL with problem, reference, trace_a, trace_b.",
  output_help="JSONL of verdicts",
  retry_help="Judge again the rows whose earlier judgment failed.",
)
_JUDGE = cli.config_dict_flag("judge", judges.default_config())


def main(argv):
  del argv
  config = judges.cli_config(_JUDGE.value, _URL.value)
  job = _JOB.job_args()  # a missing --input, named before a judge server is started
  with judges.judge_endpoints(config) as urls:
    summary = asyncio.run(judges.judge_pairs_file(config, urls=urls, **job))
  print(json.dumps(summary))


if __name__ == "__main__":
  cli.run(main)
