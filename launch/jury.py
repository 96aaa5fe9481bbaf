"""Audits traces with the Reasoning Jury and scores it where labels exist (SPEC §8).

    python -m launch.jury --jurors http://a:8000/v1,http://b:8000/v1,http://c:8000/v1 \
        --mode consolidation|deliberation --input traces.jsonl --output flaws.jsonl

Input rows: {"problem", "trace" (or "steps"), "reference"?, "label"?, "flawed_steps"?} or
ProcessBench rows {"id", "problem", "steps", "label", "final_answer_correct"}. Output rows: the
consensus flaws (SPEC §8 schema + consensus metadata), flagged steps and the predicted earliest
error. With labels it prints ProcessBench acc1 / acc2 / F1 and step-level balanced F1. Without
--jurors the embedded judge server is started and asked as --judge.jury.num_jurors jurors (each
with its own seed). Every setting is a `--judge.<field>` flag (`arena_jax.judges.default_config()`).
"""

import asyncio
import json

from absl import flags

from arena_jax import cli
from arena_jax import judges

_JURORS = flags.DEFINE_string("jurors", "", "Comma-separated juror base URLs; empty = the embedded server.")
_MODE = flags.DEFINE_enum("mode", None, list(judges.JURY_MODES), "Phase 2 (default: --judge.jury.mode).")
_CONSOLIDATOR = flags.DEFINE_string("consolidator", None, "URL of the consolidator / moderator (default: juror 1).")
_JOB = cli.JsonlJobFlags(
  input_help="JSONL of traces (ours or ProcessBench rows).",
  output_help="JSONL of consensus flaws",
  retry_help="Audit again the rows whose earlier audit failed.",
)
_JUDGE = cli.config_dict_flag("judge", judges.default_config())


def main(argv):
  del argv
  config = _JUDGE.value
  config.backend = "jury"
  if _JURORS.value:
    config.jury.jurors = judges.split_urls(_JURORS.value)
  if _MODE.value:
    config.jury.mode = _MODE.value
  if _CONSOLIDATOR.value is not None:
    config.jury.consolidator = _CONSOLIDATOR.value
  judges.validate_config(config)
  job = _JOB.job_args()  # a missing --input, named before a judge server is started
  with judges.judge_endpoints(config) as urls:
    summary = asyncio.run(judges.jury_file(config, urls=urls, **job))
  if "metrics" in summary:
    print(judges.format_jury_metrics(summary["metrics"]))
  print(json.dumps(summary))


if __name__ == "__main__":
  cli.run(main)
