"""The shipped sample benchmarks: five named benchmarks of three kinds, every file written by this project.

    python -m launch.eval --workdir=runs/x --suite=configs/eval/samples.py

sample_math (20 math rows), sample_choice (20 four-option questions), sample_code (10 problems with tests),
beside the testbed's own arithmetic and arithmetic_shift. They are small: for trying the evaluation and its
Table 1 layout end to end, not for comparing policies.
"""

import pathlib

import ml_collections

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "arena_jax" / "tasks" / "samples"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg
  return ml_collections.ConfigDict(
    dict(
      data_root=str(SAMPLES),
      suite=dict(
        sample_math=dict(task="jsonl", path="math_sample.jsonl"),
        sample_choice=dict(task="choice", path="choice_sample.jsonl"),
        sample_code=dict(task="code", path="code_sample.jsonl", ks=(1, 5)),
      ),
      benchmarks=("sample_math", "sample_choice", "sample_code", "arithmetic", "arithmetic_shift"),
    )
  )
