"""Tasks by name: prompt formatting, reference answers, verifiers and process checkers.

A task is selected by a config string (a registry, as wherever there are alternatives):
`get_task("arithmetic", config)`. Adding a task touches one file: subclass `Task` and decorate it with
`@register_task("name")`.

Rewards are computed on the host from text; model output is never `eval`ed (see `expressions.py`).
"""

from __future__ import annotations

import abc
from typing import Callable, ClassVar, Iterator, Sequence

import ml_collections

from arena_jax import config_schema as cs

from arena_jax.tasks import arithmetic
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import countdown
from arena_jax.tasks import expressions as ex
from arena_jax.tasks import jsonl
from arena_jax.tasks import process
from arena_jax.tasks import verifiers
from arena_jax.tasks.base import Example

TASK_CLASSES = config_lib.TASK_CLASSES


def register_task(name: str) -> Callable[[type["Task"]], type["Task"]]:
  """Class decorator: makes a `Task` subclass available as `get_task(name)`."""
  return TASK_CLASSES.register(name)


def task_names() -> tuple[str, ...]:
  return tuple(TASK_CLASSES)


def get_task(name: str, config: ml_collections.ConfigDict | None = None) -> "Task":
  """The task `name`, configured by the tasks config (`default_config()` when None)."""
  cls = TASK_CLASSES.get_or_raise(name)
  return cls(config if config is not None else config_lib.default_config())


class Task(abc.ABC):
  """The interface the trainer, the sampler and the judges use.

  Attributes:
    name: the registry name.
    has_process_checker: whether `check_process` works (the built-in tasks).
    config: the whole tasks config; `task_config` its section for this task.
  """

  name: ClassVar[str] = ""
  has_process_checker: ClassVar[bool] = False
  has_train_split: ClassVar[bool] = True  # a task for evaluation only sets False (`tasks.train_task` refuses it)

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config
    self.task_config = config[self.name]

  def prompt(self, example: Example) -> str:
    """The text the policy sees (the task's `prompt_template` around the question)."""
    return self.task_config.prompt_template.format(question=example.question)

  @property
  def chat(self) -> bool:
    """Prompts go through the policy's chat template (`tasks.prompt_format = "chat"`)."""
    return self.config.get("prompt_format", "plain") == "chat"

  def messages(self, example: Example) -> list[dict]:
    """The chat of `example`: the configured system prompt (if any), then `prompt` as the user's message."""
    system = self.config.get("system_prompt", "")
    return ([{"role": "system", "content": system}] if system else []) + [
      {"role": "user", "content": self.prompt(example)}
    ]

  def prompt_texts(self, examples: Sequence[Example], tokenizer) -> list[str]:
    """What the policy is given for each example: `prompt` (plain), or `messages` rendered by the
    tokenizer's chat template with a generation prompt and `tasks.chat_template_kwargs` (chat). Encode
    chat prompts without adding a BOS (`add_bos and not task.chat`): the template writes its own."""
    if not self.chat:
      return [self.prompt(e) for e in examples]
    kwargs = cs.json_object_value(self.config.chat_template_kwargs) if self.config.get("chat_template_kwargs") else {}
    return [tokenizer.apply_chat_template(self.messages(e), add_generation_prompt=True, **kwargs) for e in examples]

  def reference_answer(self, example: Example) -> str:
    """The ground truth that the judge is given (SPEC §4)."""
    return example.answer

  @abc.abstractmethod
  def verify(self, example: Example, completion: str) -> float:
    """The verifier reward R(x, τ) ∈ {0.0, 1.0} (SPEC §1)."""

  def verify_batch(self, examples: Sequence[Example], completions: Sequence[str]) -> list[float]:
    """`verify` over a batch (tasks with slow verifiers parallelise this)."""
    if len(examples) != len(completions):
      raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
    return [self.verify(e, c) for e, c in zip(examples, completions)]

  def check_process(self, example: Example, completion: str) -> process.ProcessReport:
    """Per-step validity and relevance of a completion (built-in tasks only)."""
    raise NotImplementedError(f"the {self.name!r} task has no process checker")

  def process_metrics(
    self,
    examples: Sequence[Example],
    completions: Sequence[str],
    correct: Sequence[float],
    *,
    group_size: int | None = None,
  ) -> dict[str, float]:
    """The process quality of completions (`process.process_metrics`: faithful accuracy, compensating
    errors, bare answers, …); {} without a process checker."""
    return process.process_metrics(self, examples, completions, correct, group_size=group_size)

  def generate(self, split: str) -> Iterator[Example]:
    """The examples of a split, in their stored order (what the TFDS builder writes)."""
    raise NotImplementedError

  def problem_tree(self, example: Example) -> ex.Expr:
    """The expression tree the demonstrations are written from (built-in tasks only)."""
    raise NotImplementedError(f"the {self.name!r} task has no problem tree")

  def close(self):
    """Releases worker processes, if any."""

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


@register_task("arithmetic")
class ArithmeticTask(Task):
  """Multi-step arithmetic; the reward is the final answer only (SPEC §1), the process is the judge's."""

  has_process_checker = True

  def verify(self, example, completion):
    return verifiers.verify_numeric(completion, example.answer)

  def check_process(self, example, completion):
    return process.check_arithmetic(example.expression, example.answer, completion)

  def generate(self, split):
    return arithmetic.generate(self.task_config, split, self.config.seed)

  def problem_tree(self, example):
    return arithmetic.problem_tree(example)


@register_task("arithmetic_shift")
class ArithmeticShiftTask(ArithmeticTask):
  """Arithmetic outside the training distribution (`arithmetic.generate_shift`): the same prompt, verifier
  and process checker as `arithmetic`, problems no training problem could be; a test split only."""

  has_train_split = False

  def prompt(self, example):
    return self.config.arithmetic.prompt_template.format(question=example.question)  # the policy's own convention

  def generate(self, split):
    return arithmetic.generate_shift(self.config.arithmetic, self.task_config, split, self.config.seed)


@register_task("countdown")
class CountdownTask(Task):
  """Countdown; the reward requires a valid derivation of the target (see `countdown.py`)."""

  has_process_checker = True

  def verify(self, example, completion):
    return float(self.check_process(example, completion).answer_correct)

  def check_process(self, example, completion):
    return process.check_countdown(example.numbers, example.answer, completion)

  def generate(self, split):
    return countdown.generate(self.task_config, split, self.config.seed)

  def problem_tree(self, example):
    return countdown.problem_tree(example)


@register_task("jsonl")
class JsonlTask(Task):
  """Users' math data from JSONL; answers compared with math-verify in a worker pool with timeouts.

  Answers that are plain numbers on both sides are compared exactly on the host (no worker round
  trip); everything else goes to `MathVerifyPool`, created on first use (`close()` stops it).
  """

  def __init__(self, config):
    super().__init__(config)
    self._pool = None
    self._splits = None

  @property
  def pool(self):
    if self._pool is None:
      from arena_jax.tasks.math_verify_pool import MathVerifyPool  # pylint: disable=g-import-not-at-top

      c = self.task_config
      self._pool = MathVerifyPool(
        num_workers=c.num_workers, timeout_s=c.timeout_s, max_items_per_worker=c.max_items_per_worker
      )
    return self._pool

  def verify(self, example, completion):
    return self.verify_batch([example], [completion])[0]

  def verify_batch(self, examples, completions):
    if len(examples) != len(completions):
      raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
    rewards = [0.0] * len(examples)
    slow = []
    for i, (e, c) in enumerate(zip(examples, completions)):
      pred = verifiers.extract_answer(c)
      if pred is None:
        continue
      gold_num, pred_num = verifiers.parse_number(e.answer), verifiers.parse_number(pred)
      if gold_num is not None and pred_num is not None:
        rewards[i] = float(gold_num == pred_num)
      else:
        slow.append((i, e.answer, pred))
    if slow:
      results = self.pool.verify([g for _, g, _ in slow], [p for _, _, p in slow])
      for (i, _, _), r in zip(slow, results):
        rewards[i] = r
    return rewards

  def generate(self, split):
    if self._splits is None:
      self._splits = jsonl.load_splits(self.task_config)
    if split not in self._splits:
      raise ValueError(f"tasks.jsonl.{split}_path is not set, so there is no {split} split")
    return iter(self._splits[split])

  def close(self):
    if self._pool is not None:
      self._pool.close()
      self._pool = None
