"""Multiple choice (GPQA-style): its config section and `Task`; the letters are read by `choice_format`.

A row is `{"question": str, "options": [str, …] (2–10), "answer": 0-based index, letter or the option's text}`;
other keys are kept in `Example.extras["row"]`. With `shuffle` (the default) the options are put in an order
fixed by (tasks.seed, the question), and the correct letter follows its option, so a policy cannot learn a
position; `launch.score` reads a row's options in the order the row lists them. The prompt lists the options
A, B, … and asks for `Answer: X`; `choice_format.extract_letter` reads a boxed letter, an answer line, "(C)",
"**C**", "C) <text>", the option's text, the last explicit answer after reasoning; two different final
letters, or none, score 0. Pass ratio@n is the evaluator's. Row kind in a mixture: `choice`.
"""

from __future__ import annotations

from arena_jax import config_schema as cs
from arena_jax.config_schema import field
from arena_jax.tasks import choice_format
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import file_task
from arena_jax.tasks.base import Example, dump_extras, stable_hash
from arena_jax.tasks.task import register_task

NAME = "choice"
ROW_KEYS = ("question", "options", "answer")

CHOICE = cs.Section(
  dict(
    **file_task.file_fields("multiple-choice questions", prompt_template="{question}\n"),
    shuffle=field(
      True,
      "Shuffle each question's options, in an order fixed by (tasks.seed, the question); the correct letter "
      "follows its option.",
      cs.boolean(),
    ),
  ),
  title="multiple-choice questions (GPQA-style): rows of a question, its options and the answer",
)
config_lib.TASKS.rule(file_task.file_rule(NAME))


def parse_choice_row(row: dict, *, uid: str, shuffle: bool, seed: int) -> Example:
  """The Example of one choice row (options and the correct index in `extras`); ValueError("field: problem")."""
  question = _question(row)
  if "options" not in row:
    raise ValueError(f"options: missing field (fields present: {sorted(row)})")
  if "answer" not in row:
    raise ValueError(f"answer: missing field (fields present: {sorted(row)})")
  try:
    index = choice_format.normalise_answer(row["options"], row["answer"])
  except ValueError as e:
    message = str(e)
    raise ValueError(message if message.startswith(("answer", "options")) else f"options: {message}") from None
  options = [" ".join(str(o).split()) for o in row["options"]]
  if shuffle:
    options, index = choice_format.shuffle(options, index, seed=seed, key=question)
  extras = {"options": options, "correct": index}
  rest = {k: v for k, v in row.items() if k not in ROW_KEYS and k != "kind"}
  if rest:
    extras["row"] = rest
  return Example(uid=uid, question=question, answer=choice_format.LETTERS[index], extras=dump_extras(extras))


def _question(row: dict) -> str:
  if "question" not in row:
    raise ValueError(f"question: missing field (fields present: {sorted(row)})")
  q = row["question"]
  if not isinstance(q, str) or not q.strip():
    raise ValueError(f"question: must be a non-empty string, got {q!r:.60}")
  return q.strip()


@register_task(NAME, CHOICE)
class ChoiceTask(file_task.FileTask):
  """Multiple-choice questions: the reward is the final letter's correctness (SPEC §1), read robustly."""

  what = "multiple-choice questions"
  row_kind = "choice"

  def parse_row(self, row, split, line):
    uid = f"{NAME}-{split}-{line}-{stable_hash(str(row.get('question', '')), 8)}"
    return parse_choice_row(row, uid=uid, shuffle=self.task_config.shuffle, seed=self.config.seed)

  def prompt(self, example):
    text = choice_format.prompt_text(example.question, example.meta["options"])
    return self.task_config.prompt_template.format(question=text)

  def judge_question(self, example):
    return f"{example.question}\n\n{choice_format.render_options(example.meta['options'])}"

  def reference_answer(self, example):
    options = example.meta["options"]
    return f"{example.answer}) {options[example.meta['correct']]}"

  def score(self, example, completion):
    reward, reason = choice_format.score(completion, example.meta["options"], example.meta["correct"])
    return {"score": reward, "reason": reason}

  def verify(self, example, completion):
    return self.score(example, completion)["score"]
