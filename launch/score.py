"""Scores stored completions with a task's verifier, one score and its reason per line (`tasks.scoring`).

    python -m launch.score --task=choice --input=rows.jsonl --output=scores.jsonl
    python -m launch.score --task=code --input=solutions.parquet --output=scores.jsonl --on_bad_row=skip
    python -m launch.score --task=math --input=rows.jsonl --output=scores.jsonl

Each input row is the task's row format (docs/evaluation.md) plus a `completion` string; an `id` is copied
through. Each output line is {"line", "score", "reason"[, "id"]}: the extracted answer, the tests passed or
the limit hit. A choice row's options are read in the order the row lists them (no shuffle). The last line
printed is one JSON object with the row count and the mean score.
"""

import json

from absl import flags

from arena_jax import cli
from arena_jax import fileio
from arena_jax import tasks
from arena_jax.tasks import scoring

_TASK = flags.DEFINE_string("task", None, "choice | code | math, or another file-backed task.", required=True)
_INPUT = flags.DEFINE_string("input", None, "JSONL or Parquet rows, each with a `completion`.", required=True)
_OUTPUT = flags.DEFINE_string("output", None, "Where the scores go (JSONL, written whole).", required=True)
_ON_BAD_ROW = flags.DEFINE_enum("on_bad_row", "error", ["error", "skip"], "A malformed row: stop, or skip it.")
_TASKS = cli.config_dict_flag("tasks", tasks.default_config())


def main(argv):
  del argv
  scored = scoring.score_file(_TASK.value, _INPUT.value, config=_TASKS.value, on_bad_row=_ON_BAD_ROW.value)
  fileio.write_jsonl(_OUTPUT.value, scored)
  passed = sum(s["score"] > 0 for s in scored)
  print(f"scored {len(scored)} rows of {_INPUT.value}: {passed} with a positive score; scores in {_OUTPUT.value}")
  print(json.dumps(scoring.summary(scored)))


if __name__ == "__main__":
  cli.run(main)
