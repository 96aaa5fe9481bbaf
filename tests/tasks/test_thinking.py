"""A reasoning policy's thinking block: split from the visible answer, skipped by the verifier, counted
when it never closed, and shown to the judge as `judge.trace_view` says (SPEC §9)."""

import pytest

from arena_jax import tasks


@pytest.mark.parametrize(
  "text, visible, thinking, unclosed",
  [
    ("<think>try 3</think>\n\nAnswer: 5", "Answer: 5", "try 3", False),
    ("[THINK]try 3[/THINK]Answer: 5", "Answer: 5", "try 3", False),  # Magistral / Ministral-3
    ("try 3</think>\nAnswer: 5", "Answer: 5", "try 3", False),  # the template opened the block
    ("<thinking>a <think>b</think> c</thinking>Answer: 5", "Answer: 5", "a <think>b</think> c", False),  # nested
    ("Let me see. <think>Answer: 3 and then", "Let me see.", "Answer: 3 and then", True),  # cut while thinking
    ("Step 1.\n\nAnswer: 5", "Step 1.\n\nAnswer: 5", "", False),  # no thinking at all
  ],
)
def test_split_thinking(text, visible, thinking, unclosed):
  assert tasks.split_thinking(text) == tasks.Thinking(visible, thinking, unclosed)


def test_the_verifier_reads_the_answer_after_the_thinking():
  assert tasks.extract_answer("<think>Answer: 3? no, \\boxed{4}</think>\n\nThe answer is 5.") == "5"
  assert tasks.verify_numeric("[THINK]Answer: 3[/THINK]\nAnswer: 5", "5") == 1.0
  assert tasks.verify_numeric("[THINK]Answer: 5[/THINK]\nAnswer: 3", "5") == 0.0  # a draft is not the answer
  # Cut while thinking: no answer, whatever the thinking said (reward 0).
  assert tasks.extract_answer("<think>so the answer is 5. Let me check") is None
  assert tasks.verify_numeric("<think>Answer: 5\n\n5", "5") == 0.0
  # A thinking block left empty of an answer: the visible text alone is read.
  assert tasks.extract_answer("<think>\n17\n</think>") is None
  assert tasks.extract_answer("3 + 4 = 7.\n\nAnswer: 7") == "7"  # no thinking: as before


def test_trace_views():
  text = "<think>scratch: 2 + 2 = 5?</think>\n2 + 3 = 5.\n\nSo 5 * 2 = 10.\n\nAnswer: 10"
  assert tasks.trace_view(text, "full") == text
  assert tasks.trace_view(text, "visible") == "2 + 3 = 5.\n\nSo 5 * 2 = 10.\n\nAnswer: 10"
  assert tasks.trace_view(text, "summary_only") == "Answer: 10"
  assert tasks.trace_view("plain trace\n\nAnswer: 1") == "plain trace\n\nAnswer: 1"  # default: visible
  for view in ("visible", "summary_only"):
    assert tasks.trace_view("<think>never finished", view) == tasks.NO_VISIBLE_ANSWER
  assert tasks.trace_view("<think>never finished", "full") == "<think>never finished"
  with pytest.raises(ValueError, match="trace view must be one of"):
    tasks.trace_view(text, "hidden")
