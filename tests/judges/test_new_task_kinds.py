"""The embedded judge on multiple-choice and code groups: the same OpenAI protocol and prompt,
a choice trace's letter read as the choice verifier reads it, a code trace's program checked for syntax."""

import pathlib

from arena_jax import judges
from arena_jax import tasks
from arena_jax.arena import Verdict

T = judges.load_templates()
SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "arena_jax" / "tasks" / "samples"


def pair(problem, reference, a, b):
  kind, content, _ = judges.JudgeLogic(judges.server_config()).answer(
    T.render("pairwise", problem=problem, reference=reference, trace_a=a, trace_b=b), seed=0
  )
  assert kind == "pairwise"
  return judges.parse_pairwise(content)


def _choice_task():
  c = tasks.default_config()
  c.choice.test_path = str(SAMPLES / "choice_sample.jsonl")
  return tasks.get_task("choice", c)


def test_a_choice_group_is_judged_by_its_final_letter():
  task = _choice_task()
  e = next(task.generate("test"))
  problem, reference = task.judge_question(e), task.reference_answer(e)
  wrong_letter = next(x for x in "ABCD" if x != e.answer)
  right = f"Weighing the options, {e.answer} fits.\n\n**Answer:** ({e.answer})"
  wrong = f"Option {wrong_letter} is my pick.\n\nAnswer: {wrong_letter}"
  assert pair(problem, reference, right, wrong) == Verdict.FIRST_WINS
  assert pair(problem, reference, wrong, right) == Verdict.SECOND_WINS
  undecided = f"Either {e.answer} or {wrong_letter}.\n\nAnswer: {e.answer} or {wrong_letter}"  # two letters: no answer
  assert pair(problem, reference, right, undecided) == Verdict.FIRST_WINS


def test_a_code_trace_that_does_not_parse_loses_and_nothing_runs(tmp_path):
  marker = tmp_path / "ran"
  good = "Read n, print n squared.\n\n```python\nn = int(input())\nprint(n * n)\n```"
  # The judge parses programs; it never runs one (the marker file would appear).
  broken = f"```python\nopen({str(marker)!r}, 'w').write('x')\nprint(n n)\n```"
  problem = "Read an integer n and print n squared."
  assert pair(problem, "", good, broken) == Verdict.FIRST_WINS
  assert pair(problem, "", broken, good) == Verdict.SECOND_WINS
  runs = f"```python\nopen({str(marker)!r}, 'w').write('x')\n```"
  assert pair(problem, "", good, runs) == Verdict.TIE
  assert not marker.exists()
