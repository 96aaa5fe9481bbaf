"""Task and data configuration: `default_config()` and its up-front validation (issue #4).

The defaults are sized for the embedded default (a few-M-parameter policy trained on two CPU
cores): 2–4 operations on operands up to 20, solutions of 3–6 short steps.

Demonstration kinds (`sft.fractions`, must sum to 1; see `demonstrations.py`):
  clean          the canonical solution;
  slip           one arithmetic slip that propagates: the final answer is wrong;
  compensating   one wrong intermediate result, "fixed" by the next step that uses it (that step's
                 equation is wrong too): the final answer is right, the process is not;
  skipped        one operation folded into the step of the operation that uses it;
  bare_answer    only `Answer: N`;
  redundant      the canonical solution plus one valid step that contributes nothing.
"""
from __future__ import annotations

import math
import os

import ml_collections

DEFAULT_DATA_DIR = "~/.cache/arena_jax/datasets"
PROMPT_TEMPLATE = "Question: {question}\nSolution:\n"
BUILTIN_TASKS = ("arithmetic", "countdown")
TASK_NAMES = BUILTIN_TASKS + ("jsonl",)
DEMO_KINDS = ("clean", "slip", "compensating", "skipped", "bare_answer", "redundant")


def default_config() -> ml_collections.ConfigDict:
  """The tasks configuration (embed as `config.tasks` of a run config)."""
  c = ml_collections.ConfigDict()
  # Where the TFDS datasets are built on first use and reused afterwards; ARENA_JAX_DATA_DIR overrides.
  c.data_dir = os.environ.get("ARENA_JAX_DATA_DIR", DEFAULT_DATA_DIR)
  c.seed = 0
  c.train_task = "arithmetic"
  c.eval_tasks = ("arithmetic", "countdown")  # countdown is the out-of-distribution task

  c.arithmetic = ml_collections.ConfigDict(dict(
      min_ops=2, max_ops=4,              # operations per problem
      min_operand=1, max_operand=20,     # operand range (inclusive)
      max_value=400,                     # every intermediate result lies in [0, max_value]
      operators="+-*",                   # any of "+-*/" (division only when exact)
      num_train=20000, num_test=500,
      test_fraction=0.1,                 # share of the problem space hashed into the test split
      prompt_template=PROMPT_TEMPLATE,
  ))
  c.countdown = ml_collections.ConfigDict(dict(
      min_numbers=3, max_numbers=4,      # how many numbers are given
      min_number=1, max_number=20,
      min_target=10, max_target=200,
      max_value=500,                     # every intermediate result lies in [1, max_value]
      operators="+-*/",                  # intermediate results stay positive integers
      num_train=2000, num_test=500,
      test_fraction=0.1,
      prompt_template=PROMPT_TEMPLATE,
  ))
  c.jsonl = ml_collections.ConfigDict(dict(
      train_path="", test_path="",       # local JSONL files; "" = split not used
      question_field="question", answer_field="answer",
      solution_field="",                 # optional worked solutions (for SFT), "" = none
      dedup=True,                        # drop train rows whose question is also in test
      prompt_template=PROMPT_TEMPLATE,
      num_workers=2,                     # math-verify worker processes
      timeout_s=10.0,                    # per-answer limit: a pathological answer scores 0
      max_items_per_worker=2000,         # recycle workers (sympy caches grow)
  ))
  c.sft = ml_collections.ConfigDict(dict(
      tasks=("arithmetic",),             # countdown stays out of SFT: it is the OOD task
      seed=0,
      fractions=ml_collections.ConfigDict({k: v for k, v in zip(
          DEMO_KINDS, (0.5, 0.15, 0.1, 0.1, 0.05, 0.1))}),
  ))
  # Tasks whose prompts and demonstrations make up the tokenizer corpus (`corpus`).
  c.corpus_tasks = ("arithmetic", "countdown")
  return c


def demo_config() -> ml_collections.ConfigDict:
  """The embedded demo's tasks: easier arithmetic (operands ≤ 10, results ≤ 100, 2–4 operations) and
  mostly clean demonstrations, so that a two-minute SFT gives a *mixed* base policy (see
  configs/sft.py for the measurements behind these values). SFT and RL of the demo share it."""
  c = default_config()
  c.arithmetic.update(dict(max_operand=10, max_value=100))
  c.sft.fractions.update(dict(clean=0.88, slip=0.03, compensating=0.03, skipped=0.02, bare_answer=0.01, redundant=0.03))
  return c


def _fail(path: str, message: str):
  raise ValueError(f"{path}: {message}")


def _int(c, prefix, name, lo=None, hi=None):
  v = c[name]
  if isinstance(v, bool) or not isinstance(v, int):
    _fail(f"{prefix}.{name}", f"must be an integer, got {v!r}")
  if lo is not None and v < lo:
    _fail(f"{prefix}.{name}", f"must be >= {lo}, got {v}")
  if hi is not None and v > hi:
    _fail(f"{prefix}.{name}", f"must be <= {hi}, got {v}")
  return v


def _range(c, prefix, lo_name, hi_name, lo=None):
  a, b = _int(c, prefix, lo_name, lo), _int(c, prefix, hi_name, lo)
  if a > b:
    _fail(f"{prefix}.{lo_name}", f"must be <= {prefix}.{hi_name} ({b}), got {a}")


def _fraction(c, prefix, name):
  v = c[name]
  if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1:
    _fail(f"{prefix}.{name}", f"must be a number in (0, 1), got {v!r}")


def _operators(c, prefix):
  ops = c.operators
  if not isinstance(ops, str) or not ops or set(ops) - set("+-*/") or len(set(ops)) != len(ops):
    _fail(f"{prefix}.operators", f"must be a non-empty string of distinct characters from '+-*/', got {ops!r}")


def _template(c, prefix):
  t = c.prompt_template
  try:
    ok = isinstance(t, str) and "{question}" in t and t.format(question="q") is not None
  except (KeyError, IndexError, ValueError):
    ok = False
  if not ok:
    _fail(f"{prefix}.prompt_template", f"must be a format string with one {{question}} field, got {t!r}")


def validate_config(config: ml_collections.ConfigDict, prefix: str = "tasks") -> ml_collections.ConfigDict:
  """Checks every field once, up front; raises ValueError naming the field and what to change.

  Returns the config, so `validate_config(default_config())` can be used inline.
  """
  if not isinstance(config.data_dir, str) or not config.data_dir:
    _fail(f"{prefix}.data_dir", f"must be a non-empty path, got {config.data_dir!r}")
  _int(config, prefix, "seed", 0)
  if config.train_task not in TASK_NAMES:
    _fail(f"{prefix}.train_task", f"must be one of {TASK_NAMES}, got {config.train_task!r}")
  for name in config.eval_tasks:
    if name not in TASK_NAMES:
      _fail(f"{prefix}.eval_tasks", f"entries must be among {TASK_NAMES}, got {name!r}")

  p = f"{prefix}.arithmetic"
  a = config.arithmetic
  _range(a, p, "min_ops", "max_ops", lo=1)
  _range(a, p, "min_operand", "max_operand", lo=0)
  _int(a, p, "max_value", lo=max(1, a.max_operand))
  _operators(a, p)
  _int(a, p, "num_train", 0)
  _int(a, p, "num_test", 0)
  _fraction(a, p, "test_fraction")
  _template(a, p)

  p = f"{prefix}.countdown"
  d = config.countdown
  _range(d, p, "min_numbers", "max_numbers", lo=2)
  _range(d, p, "min_number", "max_number", lo=1)
  _range(d, p, "min_target", "max_target", lo=1)
  _int(d, p, "max_value", lo=d.max_target)
  _operators(d, p)
  _int(d, p, "num_train", 0)
  _int(d, p, "num_test", 0)
  _fraction(d, p, "test_fraction")
  _template(d, p)

  p = f"{prefix}.jsonl"
  j = config.jsonl
  for name in ("question_field", "answer_field"):
    if not isinstance(j[name], str) or not j[name]:
      _fail(f"{p}.{name}", f"must be a non-empty field name, got {j[name]!r}")
  if not isinstance(j.solution_field, str):
    _fail(f"{p}.solution_field", f"must be a field name or '', got {j.solution_field!r}")
  _template(j, p)
  _int(j, p, "num_workers", 1)
  _int(j, p, "max_items_per_worker", 1)
  if not isinstance(j.timeout_s, (int, float)) or isinstance(j.timeout_s, bool) or not 0 < j.timeout_s < math.inf:
    _fail(f"{p}.timeout_s", f"must be a positive number of seconds, got {j.timeout_s!r}")
  uses_jsonl = config.train_task == "jsonl" or "jsonl" in config.eval_tasks
  if uses_jsonl:
    if not j.train_path and not j.test_path:
      _fail(f"{p}.train_path", "the jsonl task is selected but neither train_path nor test_path is set")
    if config.train_task == "jsonl" and not j.train_path:
      _fail(f"{p}.train_path", "must name a JSONL file when train_task is 'jsonl'")
    for name in ("train_path", "test_path"):
      path = j[name]
      if path and not os.path.isfile(os.path.expanduser(path)):
        _fail(f"{p}.{name}", f"no such file: {path!r}")

  p = f"{prefix}.sft"
  for name in config.sft.tasks:
    if name not in BUILTIN_TASKS:  # demonstrations of controlled quality need a problem tree
      _fail(f"{p}.tasks", f"entries must be among {BUILTIN_TASKS}, got {name!r}")
  _int(config.sft, p, "seed", 0)
  fr = config.sft.fractions
  if set(fr.keys()) != set(DEMO_KINDS):
    _fail(f"{p}.fractions", f"must have exactly the kinds {DEMO_KINDS}, got {tuple(fr.keys())}")
  for k in DEMO_KINDS:  # (`not 0 <= x <= 1` refuses nan too, which the sum below would report naming no field)
    if not isinstance(fr[k], (int, float)) or isinstance(fr[k], bool) or not 0 <= fr[k] <= 1:
      _fail(f"{p}.fractions.{k}", f"must be a number in [0, 1], got {fr[k]!r}")
  total = sum(fr[k] for k in DEMO_KINDS)
  if abs(total - 1.0) > 1e-6:
    _fail(f"{p}.fractions", f"must sum to 1, got {total:.6g}")
  for name in config.corpus_tasks:
    if name not in TASK_NAMES:
      _fail(f"{prefix}.corpus_tasks", f"entries must be among {TASK_NAMES}, got {name!r}")
  return config
