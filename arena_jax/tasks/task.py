"""The `Task` interface and its registration: what a task module declares, in one place.

A task is one module in `arena_jax/tasks/kinds/` (found there by `registry`, so adding one edits no other
file). The module declares everything about its task:

    SECTION = cs.Section(dict(num_test=field(...), prompt_template=...), title="…")   # tasks.<name>

    @register_task("yesno", SECTION)
    class YesNoTask(Task):
      def generate(self, split): ...          # its data source: the examples of a split, in order
      def prompt(self, example): ...          # its prompt (default: `prompt_template` around the question)
      def verify(self, example, completion): ...   # its verifier, R(x, τ) ∈ {0, 1} (SPEC §1)

`register_task` puts the class in the registry that `tasks.train_task`, `tasks.eval_tasks` and
`get_task` read, and its config section into `tasks.<name>`; the TFDS builder of its data is made from
the class (`tfds_builders.builder_class`), so there is no builder to write either. What a kind needs beyond
the shared `Example` fields goes into `Example.extras` (options, tests, metadata): no schema change.
"""

from __future__ import annotations

import abc
from typing import Callable, ClassVar, Iterator, Sequence

import ml_collections

from arena_jax import config_schema as cs
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import process
from arena_jax.tasks.base import Example

TASK_CLASSES = config_lib.TASK_CLASSES


def register_task(name: str, section: cs.Section | None = None) -> Callable[[type["Task"]], type["Task"]]:
  """Class decorator: makes a `Task` subclass `get_task(name)`, and its `section` (the task's knobs) the
  config section `tasks.<name>`. A subclass registered under a new name without a section of its own
  reuses its parent's section (`Task.section_name`)."""

  def wrap(cls: type[Task]) -> type[Task]:
    if section is None and not cls.section_name:
      raise ValueError(f"task {name!r} has no config section: pass one to register_task")
    cls = TASK_CLASSES.register(name)(cls)  # refuses a second task of one name before anything else changes
    if section is not None:
      config_lib.add_task_section(name, section)
      cls.section_name = name
    return cls

  return wrap


class Task(abc.ABC):
  """The interface the trainer, the sampler, the evaluator and the judges use.

  Attributes:
    name: the registry name (`register_task` sets it).
    section_name: the config section of its knobs, `tasks.<section_name>` (its own name unless it shares one).
    has_process_checker: whether `check_process` works (the built-in synthetic tasks).
    has_train_split: False for a task that exists for evaluation only (`tasks.train_task` refuses it).
    depends_on: other task sections whose settings change this task's data (the TFDS key includes them).
    tfds_name: the name of its stored dataset ("" = `arena_<name>`).
    config: the whole tasks config; `task_config` its section for this task.
  """

  name: ClassVar[str] = ""
  section_name: ClassVar[str] = ""
  has_process_checker: ClassVar[bool] = False
  has_train_split: ClassVar[bool] = True
  depends_on: ClassVar[tuple[str, ...]] = ()
  tfds_name: ClassVar[str] = ""
  # Fields of the section that change how problems are shown or scored, not which problems there are: left
  # out of the stored dataset's key, so changing them reuses the data on disk.
  not_data: ClassVar[tuple[str, ...]] = ("prompt_template",)

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config
    self.task_config = config[self.section_name]

  # ── data ──

  @abc.abstractmethod
  def generate(self, split: str) -> Iterator[Example]:
    """The examples of a split, in their stored order (what its TFDS dataset holds)."""

  @classmethod
  def splits(cls, config: ml_collections.ConfigDict) -> tuple[str, ...]:
    """The non-empty splits the tasks `config` defines for this task (default: `num_train` / `num_test` > 0)."""
    c = config[cls.section_name]
    return tuple(s for s in ("train", "test") if c.get(f"num_{s}", 0) > 0)

  @classmethod
  def empty_split(cls, split: str) -> str:
    """Why `split` is empty, naming the field that would fill it."""
    return f"tasks.{cls.section_name}.num_{split} is 0"

  @classmethod
  def data_params(cls, config: ml_collections.ConfigDict) -> dict:
    """What the task's stored data depends on, as JSON-able values: the key of its TFDS dataset."""
    section = {k: v for k, v in config[cls.section_name].to_dict().items() if k not in cls.not_data}
    params = {"seed": config.seed, cls.section_name: section}
    for other in cls.depends_on:
      params[other] = {k: v for k, v in config[other].to_dict().items() if k != "prompt_template"}
    return params

  # ── prompts ──

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

  # ── what the judge is given (SPEC §4) ──

  def judge_question(self, example: Example) -> str:
    """The problem as the judge reads it (a choice question with its lettered options)."""
    return example.question

  def reference_answer(self, example: Example) -> str:
    """The ground truth that the judge is given (SPEC §4)."""
    return example.answer

  # ── rewards ──

  @abc.abstractmethod
  def verify(self, example: Example, completion: str) -> float:
    """The verifier reward R(x, τ) ∈ {0.0, 1.0} (SPEC §1)."""

  def verify_batch(self, examples: Sequence[Example], completions: Sequence[str]) -> list[float]:
    """`verify` over a batch (tasks with slow verifiers parallelise this)."""
    _same_length(examples, completions)
    return [self.verify(e, c) for e, c in zip(examples, completions)]

  def score(self, example: Example, completion: str) -> dict:
    """The verifier's reward with its reason, for `launch.score` and stored completions:
    {"score": R, "reason": what the verifier read or ran}. Tasks with a richer reading override it."""
    return {"score": float(self.verify(example, completion)), "reason": ""}

  def score_batch(self, examples: Sequence[Example], completions: Sequence[str]) -> list[dict]:
    """`score` over a batch (tasks with slow verifiers parallelise this)."""
    _same_length(examples, completions)
    return [self.score(e, c) for e, c in zip(examples, completions)]

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

  def problem_tree(self, example: Example):
    """The expression tree the demonstrations are written from (built-in tasks only)."""
    raise NotImplementedError(f"the {self.name!r} task has no problem tree")

  def close(self):
    """Releases worker processes, if any."""

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _same_length(examples, completions) -> None:
  if len(examples) != len(completions):
    raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
