"""Tasks and data: synthetic arithmetic and countdown, JSONL math, verifiers, process checks.

  config        `default_config()` / `validate_config()`: every knob, checked up front
  registry      `get_task(name, config)` → `Task`: prompt, reference answer, verify, check_process
  arithmetic    multi-step arithmetic, the in-distribution task; `countdown`: the OOD task
  jsonl         users' math data; answers compared by math-verify in `MathVerifyPool` (timeouts)
  verifiers     `extract_answer` (`Answer: …`, `\\boxed{…}`, read after any thinking block), exact numeric equality
  thinking      a reasoning policy's thinking block apart from its visible answer; the judge's `trace_view`
  steps         SPEC §8 step segmentation and `[STEP-x]` marks
  process       per-step validity / relevance reports with juror-style flaws (SPEC §8 severities)
  demonstrations  SFT demonstrations of controlled reasoning quality; `corpus` for the tokenizer
  data          TFDS (array_record) datasets built on first use, read with `tfds.data_source`
  iterator      deterministic, sharded, resumable `PromptIterator`

Importing this package imports neither TFDS nor JAX (both are imported on first use).
"""

from arena_jax.tasks.base import DataError, Example
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
  process_counts,
  process_metrics,
  process_rates,
)
from arena_jax.tasks.registry import (
  ArithmeticTask,
  CountdownTask,
  JsonlTask,
  Task,
  get_task,
  register_task,
  task_names,
)
from arena_jax.tasks.steps import STEP_SPLIT, mark_steps, split_steps, step_ref
from arena_jax.tasks.thinking import NO_VISIBLE_ANSWER, TRACE_VIEWS, Thinking, split_thinking, trace_view
from arena_jax.tasks.verifiers import extract_answer, numbers_equal, parse_number, verify_numeric
