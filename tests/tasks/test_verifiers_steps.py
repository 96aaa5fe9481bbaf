"""Final-answer extraction, numeric equality and SPEC §8 step segmentation."""

from fractions import Fraction
import re

import pytest

from arena_jax import tasks


@pytest.mark.parametrize(
  "completion, answer",
  [
    ("7 + 5 = 12.\n\nAnswer: 12", "12"),
    ("the result is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
    ("Answer: $\\boxed{7}$.", "7"),
    ("answer: 3\n\nOn second thought \\boxed{4}", "4"),  # the later one wins
    ("\\boxed{4}\n\nAnswer: 3", "3"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # balanced braces
    ("**Answer:** 5", "5"),
    ("Final answer: -2.5", "-2.5"),
    ("no answer here", None),
    ("Answer:   ", None),
  ],
)
def test_extract_answer(completion, answer):
  assert tasks.extract_answer(completion) == answer


@pytest.mark.parametrize(
  "text, value",
  [
    ("12", 12),
    ("-3", -3),
    ("+4", 4),
    ("1,234", 1234),
    ("2.50", Fraction(5, 2)),
    ("7/2", Fraction(7, 2)),
    ("\\frac{7}{2}", Fraction(7, 2)),
    ("\\dfrac{-1}{3}", Fraction(-1, 3)),
    ("$12$", 12),
    ("12.", 12),
    ("1e3", 1000),
    ("−5", -5),
  ],
)
def test_parse_number(text, value):
  assert tasks.parse_number(text) == value


@pytest.mark.parametrize("text", ["x", "1/0", "1,23", "12 apples", "", None, "\\sqrt{2}"])
def test_parse_number_rejects(text):
  assert tasks.parse_number(text) is None


def test_verify_numeric():
  assert tasks.verify_numeric("...\n\nAnswer: 0.5", "1/2") == 1.0
  assert tasks.verify_numeric("\\boxed{32}", "32") == 1.0
  assert tasks.verify_numeric("Answer: 31", "32") == 0.0
  assert tasks.verify_numeric("32 apples", "32") == 0.0  # no stated answer, no reward
  assert tasks.numbers_equal("2.0", "2") and not tasks.numbers_equal("two", "2")


def test_split_follows_the_spec_regex():
  assert tasks.STEP_SPLIT.pattern == r"(?<=[\.\!\?])\s*\n\s*\n+"
  trace = "First, add.\n\nThen multiply!\n  \n\n\nDone?\n\nAnswer: 4"
  assert tasks.split_steps(trace) == ["First, add.", "Then multiply!", "Done?", "Answer: 4"]
  # No end of sentence before the blank line, or a single newline: no split.
  assert tasks.split_steps("a = 1\n\nb = 2.") == ["a = 1\n\nb = 2."]
  assert tasks.split_steps("a = 1.\nb = 2.") == ["a = 1.\nb = 2."]
  assert tasks.split_steps("") == [] and tasks.split_steps("\n\n") == []


def test_mark_steps():
  marked = tasks.mark_steps("7 + 5 = 12.\n\n12 * 3 = 36.\n\nAnswer: 36")
  assert marked == "[STEP-1] 7 + 5 = 12.\n\n[STEP-2] 12 * 3 = 36.\n\n[STEP-3] Answer: 36"
  assert tasks.mark_steps(["a.", "b."]) == "[STEP-1] a.\n\n[STEP-2] b."
  assert tasks.step_ref(0) == "STEP-1"


def test_canonical_solutions_segment_into_exactly_their_steps():
  config = tasks.default_config()
  config.arithmetic.num_train = 200
  task = tasks.get_task("arithmetic", config)
  for example in task.generate("train"):
    steps = tasks.split_steps(example.solution)
    num_ops = len(re.findall(r"[-+*/]", example.expression))
    assert len(steps) == num_ops + 1
    assert all(s.endswith(".") for s in steps[:-1]) and steps[-1] == f"Answer: {example.answer}"
