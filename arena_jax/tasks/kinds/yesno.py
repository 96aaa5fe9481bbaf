"""Yes/no questions: a task added as one module (with its test), the way any new kind is added.

A row is `{"question": str, "answer": "yes" | "no"}` (also true/false, case-insensitive; a JSON bool); other keys
are kept in `Example.extras["row"]`. The reward is 1 iff the completion's final answer (`Answer: yes` or a boxed
word, read after any thinking block as every verifier reads it) says the same. Row kind in
a mixture: `yesno`.
"""

from __future__ import annotations

from arena_jax import config_schema as cs
from arena_jax.tasks import config as config_lib
from arena_jax.tasks import file_task
from arena_jax.tasks import verifiers
from arena_jax.tasks.base import Example, dump_extras, stable_hash
from arena_jax.tasks.task import register_task

NAME = "yesno"
WORDS = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}

YESNO = cs.Section(
  dict(**file_task.file_fields("yes/no questions", prompt_template="{question}\nAnswer yes or no.\n")),
  title="yes/no questions",
)
config_lib.TASKS.rule(file_task.file_rule(NAME))


def word(value) -> str | None:
  """ "yes" / "no" of an answer (a row's or a completion's), None when it is neither."""
  if isinstance(value, bool):
    return "yes" if value else "no"
  if not isinstance(value, str):
    return None
  return WORDS.get(value.strip().strip("*_.!").lower())


@register_task(NAME, YESNO)
class YesNoTask(file_task.FileTask):
  """Yes/no questions; the reward is the final answer's agreement with the row's."""

  what = "yes/no questions"
  row_kind = "yesno"

  def parse_row(self, row, split, line):
    question = file_task.rows.text_field(row, "question")
    if "answer" not in row:
      raise ValueError(f"answer: missing field (fields present: {sorted(row)})")
    answer = word(row["answer"])
    if answer is None:
      raise ValueError(f"answer: must be yes or no (or true / false), got {row['answer']!r:.40}")
    rest = file_task.rows.leftover(row, ("question", "answer", "kind"))
    return Example(
      uid=f"{NAME}-{split}-{line}-{stable_hash(question, 8)}",
      question=question,
      answer=answer,
      extras=dump_extras({"row": rest} if rest else {}),
    )

  def score(self, example, completion):
    said = verifiers.extract_answer(completion, bare_number=False)
    reading = word(said) if said is not None else None
    if reading is None:
      return {"score": 0.0, "reason": "no yes/no answer" if said is None else f"answered {said!r}, not yes or no"}
    return {"score": float(reading == example.answer), "reason": f"answered {reading}"}

  def verify(self, example, completion):
    return self.score(example, completion)["score"]
