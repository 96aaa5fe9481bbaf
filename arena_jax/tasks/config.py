"""Task and data configuration: `default_config()` and its up-front validation.

Every field is declared once (`TASKS`: default, valid values, meaning; `arena_jax.config_schema`);
`default_config`, `validate_config` and docs/configuration.md derive from it. The fields every task shares are
below; each task's own section (`tasks.arithmetic`, `tasks.choice`, …) is declared by its module in
`kinds/` and added here when it registers (`add_task_section`).

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

import os

import ml_collections

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.registry import Registry

DEFAULT_DATA_DIR = "~/.cache/arena_jax/datasets"
PROMPT_TEMPLATE = "Question: {question}\nSolution:\n"
BUILTIN_TASKS = ("arithmetic", "countdown")
SHIFT_TASK = "arithmetic_shift"  # arithmetic outside the training distribution (evaluation only)
# `Task` classes by name (`tasks.register_task` adds them): the checks below read it when they check.
TASK_CLASSES: Registry[type] = Registry("task")
PROMPT_FORMATS = ("plain", "chat")
DEMO_KINDS = ("clean", "slip", "compensating", "skipped", "bare_answer", "redundant")


def is_template(t) -> bool:
  try:
    return isinstance(t, str) and "{question}" in t and t.format(question="q") is not None
  except (KeyError, IndexError, ValueError):
    return False


def _is_operators(ops) -> bool:
  return isinstance(ops, str) and bool(ops) and not set(ops) - set("+-*/") and len(set(ops)) == len(ops)


def template_field(meaning: str = "How a problem becomes the prompt.", default: str = PROMPT_TEMPLATE) -> cs.Field:
  return field(
    default,
    meaning,
    cs.satisfies("format string with one `{question}`", is_template, "a format string with one {question} field"),
  )


def operators_field(default: str, meaning: str) -> cs.Field:
  return field(
    default,
    meaning,
    cs.satisfies(
      'distinct characters of "+-*/"', _is_operators, "a non-empty string of distinct characters from '+-*/'"
    ),
  )


def share_field(default: float, meaning: str, valid: str = "[0, 1]") -> cs.Field:
  return field(default, meaning, cs.number(0, 1), valid=valid)


FRACTIONS = cs.Section(
  dict(
    clean=share_field(0.5, "Share of canonical solutions.", valid="[0, 1]; the six sum to 1"),
    slip=share_field(0.15, "One arithmetic slip that propagates: the final answer is wrong."),
    compensating=share_field(
      0.1, "One wrong intermediate result \"fixed\" by the next step: the answer is right, the process is not."
    ),
    skipped=share_field(0.1, "One operation folded into the step that uses it."),
    bare_answer=share_field(0.05, "Only `Answer: N`."),
    redundant=share_field(0.1, "The canonical solution plus one valid step that contributes nothing."),
  ),
  exact="kinds",
)

SFT = cs.Section(
  dict(
    # Demonstrations of controlled quality need a problem tree, which only the built-in tasks have.
    tasks=field(
      ("arithmetic",),
      "Tasks whose demonstrations make up the SFT data (countdown stays out: it is the out-of-distribution task).",
      cs.entries_of(BUILTIN_TASKS),
    ),
    seed=field(0, "Seed of each demonstration's kind and variant.", cs.integer(0)),
    fractions=FRACTIONS,
  ),
  title="the demonstrations of the SFT warm start",
)

TASKS = cs.Section(
  dict(
    data_dir=field(
      DEFAULT_DATA_DIR,
      "Where the TFDS datasets (array_record) are built on first use and reused. "
      "The environment variable `ARENA_JAX_DATA_DIR` replaces the default when the config is created.",
      cs.string(nonempty=True, noun="path"),
      factory=lambda: os.environ.get("ARENA_JAX_DATA_DIR", DEFAULT_DATA_DIR),
    ),
    seed=field(0, "Seed of the synthetic problem generators (a different seed is a different dataset).", cs.integer(0)),
    train_task=field(
      "arithmetic",
      "The task trained on: RL prompts and verifier; the task SFT is evaluated on.",
      cs.registered(TASK_CLASSES, where=lambda cls: cls.has_train_split),
    ),
    eval_tasks=field(
      ("arithmetic", SHIFT_TASK, "countdown"),
      "The tasks the run is meant to be evaluated on (checked; listing "
      "jsonl requires a jsonl file). The evaluator reads its own `benchmarks`.",
      cs.entries_of(lambda: sorted(TASK_CLASSES)),
    ),
    corpus_tasks=field(
      ("arithmetic", "countdown"),
      "Tasks whose prompts and demonstrations make up the tokenizer corpus (`tasks.corpus`).",
      cs.entries_of(lambda: sorted(TASK_CLASSES)),
    ),
    prompt_format=field(
      "plain",
      "`plain`: the policy sees the task's `prompt_template` text (the tiny policy); "
      "`chat`: that text as the user message of the checkpoint's own chat template "
      "(`tokenizer.apply_chat_template`, with `system_prompt`), as instruct models expect.",
      cs.one_of(PROMPT_FORMATS),
    ),
    system_prompt=field("", "With prompt_format = chat: the system message (\"\" = none).", cs.string()),
    answer_fallback=field(
      "number_line",
      "How a numeric task (arithmetic, jsonl) reads a completion that states its answer in none of the answer "
      "forms (`Answer: …`, `\\boxed{…}`, \"the answer is …\"): `number_line`, a last line that is only a number; "
      "`last_number`, the last number of the text (\"5 + 6 = 11\" answers 11), for small instruct models that "
      "ignore the format (lm-eval-harness' flexible extract).",
      cs.one_of(("number_line", "last_number")),
    ),
    chat_template_kwargs=field(
      None,
      "With prompt_format = chat: extra variables of the chat template, e.g. "
      "`{\"enable_thinking\": False}` for Qwen3. None = none.",
      cs.optional(cs.json_object()),
      placeholder=object,
    ),
    sft=SFT,
    # Each task's own section, `tasks.<name>`, is added here by its module (`task.register_task`).
  )
)


def add_task_section(name: str, section: cs.Section) -> None:
  """Makes `section` the config section `tasks.<name>` (a task module's knobs; `task.register_task` calls it).

  Every embedding of `TASKS` (`TASKS.but(...)` in the run, SFT and evaluation configs) shares its entries,
  so the section appears in all of them."""
  if name in TASKS.entries and TASKS.entries[name] is not section:
    raise ValueError(f"tasks.{name} is already a config section")
  TASKS.entries[name] = section


def ordered(c: ml_collections.ConfigDict, report: cs.Reporter, lo: str, hi: str) -> None:
  if c[lo] > c[hi]:
    report(lo, f"must be ≤ {report.path(hi)} ({c[hi]}), got {c[lo]}")


@FRACTIONS.rule
def _fractions_sum_to_one(c, report):
  """The six demonstration shares sum to 1."""
  total = sum(c[k] for k in DEMO_KINDS)
  if abs(total - 1.0) > 1e-6:
    report("", f"must sum to 1, got {total:.6g}")


def default_config() -> ml_collections.ConfigDict:
  """The tasks configuration (embed as `config.tasks` of a run config): every declared default."""
  return TASKS.defaults()


def demo_config() -> ml_collections.ConfigDict:
  """The embedded demo's tasks: easier arithmetic (operands 1–15, results ≤ 100, 2–4 operations) and mostly
  clean demonstrations, sized so that the SFT policy is a *mixed* RL starting point whose non-diverse groups
  differ in process (`launch.testbed`; the measurements are noted at the `tasks` field of `arena_jax.train.sft.SFT`).
  SFT and RL of the demo share it."""
  c = default_config()
  c.arithmetic.update(dict(max_operand=15, max_value=100))
  c.sft.fractions.update(dict(clean=0.68, slip=0.03, compensating=0.04, skipped=0.04, bare_answer=0.01, redundant=0.20))
  return c


def validate_config(config: ml_collections.ConfigDict, prefix: str = "tasks") -> ml_collections.ConfigDict:
  """Checks every field once, up front; raises ValueError naming the field and what to change.

  Returns the config, so `validate_config(default_config())` can be used inline.
  """
  return TASKS.validate(config, prefix)
