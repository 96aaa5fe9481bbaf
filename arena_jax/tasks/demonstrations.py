"""SFT demonstrations whose reasoning quality varies in a controlled way, and the tokenizer corpus.

Why: the method only pays off when the trajectories of a reward-non-diverse group differ
in reasoning quality (SPEC §1, §3). A policy warm-started on demonstrations that are sometimes
sloppy produces such groups: all-correct groups that differ in process, all-wrong groups that differ
in how early they go wrong.

Kinds (fractions in `config.sft.fractions`, documented in `config.py`); for `(7 + 5) * 3 - 4`:
  clean          7 + 5 = 12. | 12 * 3 = 36. | 36 - 4 = 32. | Answer: 32
  slip           7 + 5 = 13. | 13 * 3 = 39. | 39 - 4 = 35. | Answer: 35      (error at STEP-1, propagates)
  compensating   7 + 5 = 13. | 13 * 3 = 36. | 36 - 4 = 32. | Answer: 32      (errors at STEP-1, 2; answer right)
  skipped        (7 + 5) * 3 = 36. | 36 - 4 = 32. | Answer: 32
  bare_answer    Answer: 32
  redundant      7 + 5 = 12. | 12 * 1 = 12. | 12 * 3 = 36. | 36 - 4 = 32. | Answer: 32
(" | " stands for the blank line between steps.) Every demonstration is checked by the task's process
checker before it is emitted, so its kind is what the judge will see: a variant that does not come
out as intended (a slip hidden by × 0, a "redundant" step that happens to be relevant) is redrawn,
and a problem that admits no variant of the drawn kind (a one-operation problem has nothing to
compensate) is written clean, and reported with kind "clean".
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Iterable, Iterator

import ml_collections

from arena_jax.tasks import config as config_lib
from arena_jax.tasks import expressions as ex
from arena_jax.tasks import registry
from arena_jax.tasks import solutions
from arena_jax.tasks import steps as steps_lib
from arena_jax.tasks import verifiers
from arena_jax.tasks.base import Example

KINDS = config_lib.DEMO_KINDS
_SLIP_DELTAS = (1, -1, 2, -2, 10, -10)
_ATTEMPTS = 12


@dataclasses.dataclass(frozen=True)
class Demonstration:
  """One SFT example.

  error_step: the earliest invalid step by the process checker (0-based, SPEC §8 segmentation; -1
  if none): the ProcessBench label, so demonstrations double as a process-judging benchmark. (For
  a slip it is the step the slip was written into; a countdown bare answer is itself invalid.)
  """

  task: str
  example: Example
  kind: str
  prompt: str
  completion: str
  error_step: int = -1

  @property
  def text(self) -> str:
    """Prompt and completion: the document the policy is fine-tuned on."""
    return self.prompt + self.completion


def _values_ok(shown, positive: bool) -> bool:
  return all(v.denominator == 1 and (v > 0 if positive else v >= 0) for v in shown.values())


def _parents(root: ex.Expr) -> dict[ex.Expr, ex.Expr]:
  out = {}
  for n in ex.operations(root):
    for c in n.children:
      if not c.is_leaf:
        out[c] = n
  return out


def _variants(kind: str, root: ex.Expr, rng: random.Random, positive: bool):
  """Yields candidates (steps, earliest error step, steps written wrong) of `kind`, in random order."""
  ops = ex.operations(root)
  parents = _parents(root)
  clean_steps, clean = solutions.write_steps(root)
  if kind == "clean":
    yield clean_steps, -1, ()
  elif kind == "bare_answer":
    yield solutions.write_steps(root, bare=True)[0], -1, ()
  elif kind in ("slip", "compensating"):
    candidates = [(n, d) for n in ops for d in _SLIP_DELTAS if kind == "slip" or n in parents]
    rng.shuffle(candidates)
    for node, delta in candidates[:_ATTEMPTS]:
      written = {node: clean[node] + delta}
      wrong = (ops.index(node),)
      if kind == "compensating":
        written[parents[node]] = parents[node].value  # the next step that uses it lands on the right value
        wrong += (ops.index(parents[node]),)
      try:
        steps, shown = solutions.write_steps(root, written=written)
      except ex.ParseError:  # a slip into a zero divisor
        continue
      if _values_ok(shown, positive):
        yield steps, wrong[0], wrong
  elif kind == "skipped":
    candidates = list(parents)
    rng.shuffle(candidates)
    for node in candidates:
      yield solutions.write_steps(root, inline={node})[0], -1, ()
  elif kind == "redundant":
    candidates = []
    f = ex.format_number
    for i, node in enumerate(ops):
      a, b = (c.value if c.is_leaf else clean[c] for c in node.children)
      v = clean[node]
      candidates += [(i, clean_steps[i]), (i, f"{f(v)} * 1 = {f(v)}."), (i, f"{f(v)} + 0 = {f(v)}.")]
      if b != 0 or node.op != "*":  # checking the step backwards
        inverse = {"+": "-", "-": "+", "*": "/", "/": "*"}[node.op]
        candidates.append((i, f"{f(v)} {inverse} {f(b)} = {f(a)}."))
    rng.shuffle(candidates)
    for after, text in candidates[:_ATTEMPTS]:
      yield solutions.write_steps(root, extra=[(after, text)])[0], -1, ()
  else:
    raise ValueError(f"unknown demonstration kind {kind!r}; kinds: {KINDS}")


def _as_intended(kind: str, report, error_step: int, wrong: tuple[int, ...], reference: str) -> bool:
  """Whether the process checker sees a demonstration as the kind it was written to be."""
  right_answer = verifiers.numbers_equal(report.answer, reference)
  if kind == "clean":
    return report.is_clean
  if kind == "bare_answer":
    return report.num_steps == 1 and report.steps[0].kind == "answer" and right_answer
  if kind == "slip":
    return report.first_error_step == error_step and not right_answer and report.num_irrelevant == 0
  if kind == "compensating":
    return report.invalid_steps == wrong and right_answer and report.num_irrelevant == 0
  if kind == "skipped":
    return report.num_invalid == 0 and report.num_irrelevant == 0 and report.num_skipped > 0 and right_answer
  if kind == "redundant":
    return report.num_invalid == 0 and report.num_irrelevant == 1 and report.num_skipped == 0 and right_answer
  raise ValueError(kind)


def write_demonstration(task: registry.Task, example: Example, kind: str, rng: random.Random) -> tuple[str, str, int]:
  """(kind actually written, completion, earliest error step) for one example of a built-in task."""
  root = task.problem_tree(example)
  positive = task.name == "countdown"
  for k in dict.fromkeys((kind, "clean")):  # the drawn kind, else clean
    for steps, error_step, wrong in _variants(k, root, rng, positive):
      completion = steps_lib.join_steps(steps)
      report = task.check_process(example, completion)
      if _as_intended(k, report, error_step, wrong, example.answer):
        return k, completion, report.first_error_step
  raise AssertionError(f"the canonical solution of {example.uid} does not check clean")


def draw_kind(fractions: ml_collections.ConfigDict, rng: random.Random) -> str:
  return rng.choices(KINDS, weights=[fractions[k] for k in KINDS])[0]


def demonstrations(
  config: ml_collections.ConfigDict,
  task_name: str = "arithmetic",
  split: str = "train",
  examples: Iterable[Example] | None = None,
) -> Iterator[Demonstration]:
  """Demonstrations for the examples of a built-in task's split, kinds drawn by `config.sft.fractions`.

  Deterministic: an example's kind and variant depend only on (`config.sft.seed`, its uid), so the
  same problem gets the same demonstration whatever else is in the list.
  """
  with registry.get_task(task_name, config) as task:
    if not task.has_process_checker:
      raise ValueError(f"demonstrations need a built-in task {config_lib.BUILTIN_TASKS}, got {task_name!r}")
    for example in task.generate(split) if examples is None else examples:
      rng = random.Random(f"arena_jax/sft/{config.sft.seed}/{example.uid}")
      kind, completion, error_step = write_demonstration(task, example, draw_kind(config.sft.fractions, rng), rng)
      yield Demonstration(task_name, example, kind, task.prompt(example), completion, error_step)


def sft_demonstrations(config: ml_collections.ConfigDict, split: str = "train") -> Iterator[Demonstration]:
  """The SFT corpus: demonstrations of every task in `config.sft.tasks`, task after task."""
  return itertools.chain.from_iterable(demonstrations(config, name, split) for name in config.sft.tasks)


def corpus(config: ml_collections.ConfigDict, max_examples_per_task: int | None = None) -> Iterator[str]:
  """The text the tokenizer is trained on: prompt + completion documents of the train splits.

  SFT tasks contribute their demonstrations (every kind, so slips and bare answers are tokenised as
  well as clean steps); other corpus tasks (countdown, the OOD task) their canonical solutions, and
  JSONL its questions and answers (and solutions when configured). Test splits never contribute.
  """
  for name in config.corpus_tasks:
    if name in config.sft.tasks:
      docs = (d.text for d in demonstrations(config, name, "train"))
    else:
      with registry.get_task(name, config) as task:
        docs = [
          task.prompt(e) + (e.solution or f"Answer: {e.answer}")
          for e in itertools.islice(task.generate("train"), max_examples_per_task)
        ]
    yield from itertools.islice(docs, max_examples_per_task)
