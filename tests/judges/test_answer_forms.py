"""The embedded judge reads a trace's final answer in the forms the task verifier reads (SPEC §1, §4)."""

import pytest

from arena_jax import judges
from arena_jax.arena import Verdict

T = judges.load_templates()
ARITH = "Question: Compute (7 + 5) * 3 - 4.\nSolution:\n"
WORK = "7 + 5 = 12.\n\n12 * 3 = 36.\n\n36 - 4 = 32."
CLEAN = f"{WORK}\n\nAnswer: 32"
SPIDERS = "How many legs do 3 spiders have?"
ENDINGS = ["The answer is 32.", "**Answer:** 32", "Final answer: 32", "\\boxed{32}", "Answer: 32", "32"]


def pair(problem, reference, a, b):
  kind, content, _ = judges.JudgeLogic(judges.server_config()).answer(
    T.render("pairwise", problem=problem, reference=reference, trace_a=a, trace_b=b), seed=0
  )
  assert kind == "pairwise"
  return judges.parse_pairwise(content)


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_right_answer_in_any_common_form_ties_with_answer_line(ending):
  assert pair(ARITH, "32", f"{WORK}\n\n{ending}", CLEAN) == Verdict.TIE
  assert pair(ARITH, "32", CLEAN, f"{WORK}\n\n{ending}") == Verdict.TIE


@pytest.mark.parametrize("ending", [e.replace("32", "24") for e in ENDINGS])
def test_unknown_problems_read_the_answer_in_any_common_form(ending):
  right = f"Each spider has 8 legs, and 3 * 8 = 24.\n\n{ending}"
  wrong = "Each spider has 7 legs, and 3 * 7 = 21.\n\nAnswer: 21"
  assert pair(SPIDERS, "24", right, wrong) == Verdict.FIRST_WINS
  assert pair(SPIDERS, "24", wrong, right) == Verdict.SECOND_WINS


def test_the_judge_says_which_answer_it_read():
  prompt = T.render(
    "pointwise",
    problem=SPIDERS,
    reference="24",
    rubric=judges.prompts.rubric_text((0, 1)),
    trace="Each spider has 8 legs, and 3 * 8 = 24.\n\nThe answer is 24.",
  )
  kind, content, _ = judges.JudgeLogic(judges.server_config()).answer(prompt, seed=0)
  assert kind == "pointwise" and "final answer 24 (right)" in content
