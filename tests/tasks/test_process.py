"""The process checker: per-step validity and relevance, earliest error, skipped steps, severities."""

import json

from hypothesis import given, settings, strategies as st
import pytest

from arena_jax import tasks
from arena_jax.tasks import expressions as ex
from arena_jax.tasks import solutions
from arena_jax.tasks import steps as steps_lib

EXPR = "(7 + 5) * 3 - 4"


def check(completion, expression=EXPR):
  return tasks.check_arithmetic(expression, ex.format_number(ex.evaluate(expression)), completion)


def lines(*steps):
  return steps_lib.join_steps(steps)


def test_canonical_solution_is_clean():
  r = check(lines("7 + 5 = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"))
  assert r.is_clean and r.answer_correct and r.first_error_step == -1
  assert [s.kind for s in r.steps] == ["compute"] * 3 + ["answer"]
  assert r.num_invalid == r.num_irrelevant == r.num_skipped == 0 and r.flaws == ()
  assert json.loads(r.to_jury_json()) == {"flaws": []}


def test_propagated_slip_is_fatal_at_its_step():
  r = check(lines("7 + 5 = 13.", "13 * 3 = 39.", "39 - 4 = 35.", "Answer: 35"))
  assert not r.answer_correct and r.answer == "35"
  assert r.first_error_step == 0 and r.invalid_steps == (0,)
  assert all(s.relevant for s in r.steps)  # a slip stays on the problem's path
  assert r.steps[0].impact == "fatal" and "is 12, not 13" in r.steps[0].note
  flaw = json.loads(r.to_jury_json())["flaws"][0]
  assert flaw["statement_refs"] == ["STEP-1"] and flaw["impact"] == "fatal"
  assert set(flaw) == {"what_went_wrong", "statement_refs", "impact", "evidence"}


def test_compensating_errors_are_major_with_the_right_answer():
  r = check(lines("7 + 5 = 13.", "13 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"))
  assert r.answer_correct and r.invalid_steps == (0, 1) and r.first_error_step == 0
  assert [s.impact for s in r.steps] == ["major", "major", None, None]


def test_silent_correction_is_valid_and_relevant():
  r = check(lines("7 + 5 = 13.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"))
  assert r.invalid_steps == (0,) and r.num_irrelevant == 0 and r.answer_correct


def test_skipped_steps_and_bare_answers_are_counted():
  r = check(lines("(7 + 5) * 3 = 36.", "36 - 4 = 32.", "Answer: 32"))
  assert r.num_invalid == 0 and r.num_irrelevant == 0 and r.num_skipped == 1 and r.answer_correct
  assert r.steps[0].skipped_ops == 1 and r.steps[0].impact == "minor"
  r = check(lines("12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"))  # uses 7 + 5 without computing it
  assert r.num_skipped == 1 and r.steps[0].skipped_ops == 1 and r.num_invalid == 0
  r = check("Answer: 32")
  assert r.num_steps == 1 and r.num_skipped == 3 and r.answer_correct and r.steps[0].impact == "minor"
  r = check("Answer: 31")
  assert r.invalid_steps == (0,) and r.steps[0].impact == "fatal"


def test_a_blind_flaw_keeps_every_step_valid_and_skips_or_repeats():
  """Issue 32's flaw a verifier cannot see: a skipped operation or a redundant step, with every step holding."""
  from arena_jax.tasks import process

  blind = lambda *steps: process.is_blind_flaw(check(lines(*steps)))
  assert blind("(7 + 5) * 3 = 36.", "36 - 4 = 32.", "Answer: 32")  # skipped
  assert blind("7 + 5 = 12.", "12 * 1 = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32")  # redundant
  assert not blind("7 + 5 = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32")  # clean
  assert not blind("(7 + 5) * 3 = 37.", "37 - 4 = 33.", "Answer: 33")  # skipped, but a slip: the verifier sees it
  assert not process.is_blind_flaw(check("Answer: 32"))  # a bare answer shows nothing to judge


def test_commutative_operands_may_be_swapped():
  r = check(lines("5 + 7 = 12.", "3 * 12 = 36.", "36 - 4 = 32.", "Answer: 32"))
  assert r.is_clean
  r = check(lines("7 + 5 = 12.", "12 * 3 = 36.", "4 - 36 = -32.", "Answer: -32"))
  assert r.steps[2].valid and not r.steps[2].relevant and not r.answer_correct


@pytest.mark.parametrize(
  "extra", ["7 + 5 = 12.", "12 * 1 = 12.", "12 + 0 = 12.", "12 - 5 = 7.", "3 + 4 = 7.", "Let me double-check."]
)
def test_redundant_steps_are_valid_but_irrelevant(extra):
  r = check(lines("7 + 5 = 12.", extra, "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"))
  assert r.num_invalid == 0 and r.irrelevant_steps == (1,) and r.answer_correct
  assert r.steps[1].impact == "minor" and not r.is_clean


def test_malformed_and_missing_answers():
  r = check(lines("7 + = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"))
  assert r.invalid_steps == (0,) and r.steps[0].impact == "major"
  r = check(lines("7 + 5 = 12.", "12 * 3 = 36."))
  assert r.answer is None and not r.answer_correct
  assert any(f.impact == "fatal" and f.step is None for f in r.flaws)
  r = check(lines("7 + 5 = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 33"))
  assert r.invalid_steps == (3,) and "does not match the last result 32" in r.steps[3].note
  r = check(lines("7 + 5 = 12.", "Answer: twelve"))
  assert r.steps[1].kind == "answer" and not r.steps[1].valid


def test_steps_are_the_spec_segments_also_when_marked_or_loosely_written():
  text = lines("7 + 5 = 13.", "13 * 3 = 39.", "39 - 4 = 35.", "Answer: 35")
  marked = tasks.mark_steps(text)
  assert check(marked).invalid_steps == check(text).invalid_steps == (0,)
  # Words around an equation, a missing final period, unicode operators: all read.
  r = check(lines("First, 7 + 5 = 12.", "Then 12 × 3 = 36.", "Finally 36 − 4 = 32", "Answer: 32"))
  assert r.num_invalid == 0 and r.num_irrelevant == 0
  # Two equations in one paragraph are one SPEC §8 step: one report entry, validity of both.
  r = check("7 + 5 = 12.\n12 * 3 = 37.\n\n37 - 4 = 33.\n\nAnswer: 33")
  assert r.num_steps == 3 and r.invalid_steps == (0,)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**6), which=st.integers(0, 10**6), delta=st.sampled_from([-10, -2, -1, 1, 2, 3, 10]))
def test_an_injected_slip_is_flagged_at_its_step(seed, which, delta):
  config = tasks.default_config()
  config.seed = seed
  config.arithmetic.update(num_train=3, num_test=1)
  task = tasks.get_task("arithmetic", config)
  example = list(task.generate("train"))[which % 3]
  steps = steps_lib.split_steps(example.solution)
  k = which % (len(steps) - 1)
  lhs, rhs = steps[k].rstrip(".").split(" = ")
  steps[k] = f"{lhs} = {int(rhs) + delta}."  # the later steps still use the right value
  report = task.check_process(example, steps_lib.join_steps(steps))
  answer_step = len(steps) - 1
  # A slip in the last operation also leaves the stated answer unsupported by the steps.
  assert report.invalid_steps == ((k, answer_step) if k == answer_step - 1 else (k,))
  assert report.first_error_step == k and report.num_irrelevant == 0 and report.answer_correct
  # The same slip, propagated: later steps are right given what was written, the answer is wrong.
  root = ex.parse(example.expression)
  node = ex.operations(root)[k]
  _, clean = solutions.write_steps(root)
  try:
    propagated, _ = solutions.write_steps(root, written={node: clean[node] + delta})
  except ex.ParseError:
    return
  report = task.check_process(example, steps_lib.join_steps(propagated))
  assert report.first_error_step == k and report.invalid_steps == (k,)


# ─────────────────────────────────────────── countdown ───────────────────────────────────────────


def cd(completion, numbers=(3, 7, 25, 2), target=46):
  return tasks.check_countdown(numbers, target, completion)


def test_countdown_canonical_and_expression_answers():
  r = cd(lines("25 - 3 = 22.", "22 * 2 = 44.", "44 + 7 = 51.", "Answer: 51"), target=51)
  assert r.is_clean
  assert cd("Answer: (25 - 3) * 2 + 2", numbers=(3, 2, 25, 2)).answer_correct
  assert not cd("Answer: (25 - 3) * 2 + 2").answer_correct  # 2 is given only once
  assert not cd("Answer: 25 + 21").answer_correct  # 21 is not given


def test_countdown_rules():
  # A number used twice: invalid at that step.
  r = cd(lines("25 - 3 = 22.", "22 * 2 = 44.", "44 + 2 = 46.", "Answer: 46"))
  assert r.invalid_steps == (2,) and "not available" in r.steps[2].note and not r.answer_correct
  # An intermediate result is used up too.
  r = cd(lines("3 + 7 = 10.", "10 + 10 = 20.", "Answer: 20"), target=20)
  assert r.invalid_steps == (1,)
  # A dead end is valid but irrelevant; the derivation still counts.
  r = cd(lines("3 * 7 = 21.", "25 - 2 = 23.", "23 * 2 = 46.", "Answer: 46"), numbers=(3, 7, 25, 2, 2))
  assert r.answer_correct and r.irrelevant_steps == (0,) and r.num_invalid == 0
  # A bare answer derives nothing.
  r = cd("Answer: 46")
  assert not r.answer_correct and r.invalid_steps == (0,)
  # Steps that reach another number.
  r = cd(lines("25 + 3 = 28.", "28 + 7 = 35.", "Answer: 35"))
  assert not r.answer_correct and r.invalid_steps == (2,)


def test_countdown_compensating_error_earns_nothing():
  r = cd(lines("25 - 3 = 23.", "23 * 2 = 44.", "44 + 2 = 46.", "Answer: 46"), numbers=(3, 2, 25, 2))
  assert r.invalid_steps == (0, 1) and not r.answer_correct and r.steps[0].impact == "fatal"
  task = tasks.get_task("countdown")
  example = tasks.Example(uid="x", question="q", answer="46", numbers=(3, 2, 25, 2), expression="(25 - 3) * 2 + 2")
  assert task.verify(example, lines("25 - 3 = 23.", "23 * 2 = 44.", "44 + 2 = 46.", "Answer: 46")) == 0.0
  assert task.verify(example, lines("25 - 3 = 22.", "22 * 2 = 44.", "44 + 2 = 46.", "Answer: 46")) == 1.0


def test_check_process_never_evaluates_model_output():
  hostile = "__import__('os').system('echo pwned') = 0.\n\nAnswer: 32"
  r = check(hostile)
  assert r.invalid_steps == (0,)
  with pytest.raises(NotImplementedError):
    tasks.get_task("jsonl").check_process(None, "")


def test_repeated_answer_lines_after_skipped_operations_do_not_crash():
  # Seen in RL: a sampled trace that skips the last operation and states two answers made the
  # checker raise KeyError (HTTP 500 from the embedded judge). The second answer is judged too.
  from arena_jax import tasks as tasks_lib

  trace = "9 + 9 = 18.\n\n9 * 4 = 36.\n\n36 + 36 = 92.\n\nAnswer: 8.\n\nAnswer: 86"
  report = tasks_lib.check_arithmetic("8 + 9 + (3 + 9 * 4)", "56", trace)
  assert not report.answer_correct
  assert report.first_error_step >= 0


def test_process_metrics_of_a_hand_labelled_set():
  """Issue 17's process metrics on completions whose labels are known by construction (EXPR = 32)."""
  labelled = [  # (completion, verifier reward)
    (lines("7 + 5 = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"), 1.0),  # clean
    (lines("7 + 5 = 13.", "13 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"), 1.0),  # compensating errors
    ("Answer: 32", 1.0),  # bare answer
    (lines("(7 + 5) * 3 = 36.", "36 - 4 = 32.", "Answer: 32"), 1.0),  # a skipped operation
    (lines("7 + 5 = 12.", "12 * 3 = 36.", "36 - 4 = 31.", "Answer: 31"), 0.0),  # wrong at step index 2
    (lines("7 + 5 = 13.", "13 * 3 = 39.", "39 - 4 = 35.", "Answer: 35"), 0.0),  # wrong at step index 0
    (lines("7 + 5 = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"), 1.0),  # clean
    (lines("7 + 5 = 12.", "12 * 3 = 36.", "36 - 4 = 32.", "Answer: 32"), 1.0),  # clean
  ]
  reports = [check(c) for c, _ in labelled]
  rewards = [r for _, r in labelled]
  rates = tasks.process_rates(tasks.process_counts(reports, rewards))
  assert rates == pytest.approx(
    {
      "faithful_accuracy": 5 / 8,  # clean ×3, bare, skipped: right with no invalid step
      "compensating_rate": 1 / 8,
      "flawed_correct_rate": 3 / 8,  # compensating, bare, skipped
      "bare_answer_rate": 1 / 8,
      "skipped_rate": 2 / 8,  # the bare answer skips every operation too
      "redundant_rate": 0.0,
      "blind_flaw_rate": 1 / 8,  # the skipped operation (a bare answer shows nothing to judge)
      "first_error_step_wrong": (2 + 0) / 2,
    }
  )
  assert set(rates) == set(tasks.PROCESS_METRICS)
  # Hosts add their counts: two halves summed give the whole.
  halves = [tasks.process_counts(reports[:4], rewards[:4]), tasks.process_counts(reports[4:], rewards[4:])]
  assert tasks.process_rates({k: halves[0][k] + halves[1][k] for k in halves[0]}) == pytest.approx(rates)
  # Groups of 4: group 0 is all correct with flawed members, group 1 mixed → one all-correct group, flawed.
  from arena_jax.tasks import process

  groups = process.group_process_metrics(reports, rewards, 4)
  assert groups == {"all_correct_flawed": 1.0}  # no all-wrong group: no spread to report
  wrong = [reports[4], reports[5]]
  assert process.group_process_metrics(wrong, [0.0, 0.0], 2)["all_wrong_error_spread"] == pytest.approx(1.0)
  # A bare wrong answer errs at its only step; right answers alone leave nothing to average.
  assert tasks.process_rates(tasks.process_counts([check("Answer: 31")], [0.0]))["first_error_step_wrong"] == 0.0
  assert "first_error_step_wrong" not in tasks.process_rates(tasks.process_counts(reports[:1], [1.0]))
