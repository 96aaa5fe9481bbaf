"""Tasks and data: synthetic arithmetic and countdown, JSONL math, verifiers, process checks.

  config        `default_config()` / `validate_config()`: every knob, checked up front
  task          the `Task` interface and `register_task`: what a task module declares
  kinds/        one module per task (its config section, data source, verifier, prompt): arithmetic,
                arithmetic_shift, countdown, jsonl (math rows), choice, code, mixture; found by `registry`
  registry      `get_task(name, config)` → `Task`: prompt, reference answer, verify, check_process
  arithmetic    multi-step arithmetic problems, the in-distribution task; `countdown`: the OOD task
  rows          users' files (JSONL, Parquet) row by row, `on_bad_row`; `file_task`: the file-backed tasks' base
  jsonl         math rows; answers compared by math-verify in `MathVerifyPool` (timeouts)
  verifiers     `extract_answer` (`Answer: …`, `\\boxed{…}`, read after any thinking block), exact numeric equality
  thinking      a reasoning policy's thinking block apart from its visible answer; the judge's `trace_view`
  steps         SPEC §8 step segmentation and `[STEP-x]` marks
  process       per-step validity / relevance reports with juror-style flaws (SPEC §8 severities)
  demonstrations  SFT demonstrations of controlled reasoning quality; `corpus` for the tokenizer
  data          TFDS (array_record) datasets built on first use, read with `tfds.data_source`
  iterator      deterministic, sharded, resumable `PromptIterator`

Importing this package imports neither TFDS nor JAX (both are imported on first use).
"""

from arena_jax.tasks.base import DataError, Example, dump_extras
from arena_jax.tasks.config import DEMO_KINDS, default_config, demo_config, validate_config
from arena_jax.tasks.data import ExampleSource, load_split, prepare
from arena_jax.tasks.demonstrations import Demonstration, corpus, demonstrations, sft_demonstrations
from arena_jax.tasks.expressions import ParseError, evaluate
from arena_jax.tasks.iterator import IteratorState, PromptIterator
from arena_jax.tasks.jsonl import load_jsonl
from arena_jax.tasks.math_verify_pool import MathVerifyPool
from arena_jax.tasks.process import (
  IMPACTS,
  PROCESS_METRICS,
  Flaw,
  ProcessReport,
  StepCheck,
  check_arithmetic,
  check_countdown,
  distinct_traces,
  normalise_trace,
  process_counts,
  process_metrics,
  process_rates,
)
from arena_jax.tasks.task import Task, register_task
from arena_jax.tasks.registry import get_task, task_class, task_names
from arena_jax.tasks.file_task import FileTask
from arena_jax.tasks.rows import RowReport, read_examples
from arena_jax.tasks.kinds.arithmetic import ArithmeticTask
from arena_jax.tasks.kinds.arithmetic_shift import ArithmeticShiftTask
from arena_jax.tasks.kinds.countdown import CountdownTask
from arena_jax.tasks.kinds.jsonl import JsonlTask
from arena_jax.tasks.kinds.choice import ChoiceTask
from arena_jax.tasks.kinds.code import CodeTask
from arena_jax.tasks.kinds.mixture import MixtureTask
from arena_jax.tasks.steps import STEP_SPLIT, mark_steps, split_steps, step_ref
from arena_jax.tasks.thinking import NO_VISIBLE_ANSWER, TRACE_VIEWS, Thinking, split_thinking, trace_view
from arena_jax.tasks.verifiers import extract_answer, numbers_equal, parse_number, verify_numeric
