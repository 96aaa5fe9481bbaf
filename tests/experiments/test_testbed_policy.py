"""The testbed on the demo's real SFT policy: trained from `configs/sft.py` (about ten
minutes on two cores), then evaluated on fixed held-out samples by `experiments.testbed.measure`, the figures
`launch.testbed` reports. The policy is trained once per source key (`tests.cache.source_key`: an edit to the model,
task, tokenizer or SFT code, or to the config, retrains it) into the test cache; the evaluation runs every time.

These are the conditions the study needs from its starting point, not speed: the shifted split must be partly
solved (between 10% and 60%), and the non-diverse groups must differ in process (all-correct groups with a flawed
member, all-wrong groups whose members go wrong at different steps).
"""

import pytest

from tests import cache

# The slow tier: it needs a trained policy (10–15 minutes on two shared cores in a cold cache: more than the
# suite-wide 900 s).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

# Held-out problems per benchmark, G = 8 samples each: enough all-correct groups for a share to mean something
# (launch.testbed on 500 problems: 21 all-correct groups, 0.62 of them with a flawed member; the shifted split at
# 0.46 greedy, 0.23 pass ratio).
NUM_EXAMPLES = 500
# Issue 17's condition: at least 30% of all-correct groups hold a member the judge can prefer the others to.
ALL_CORRECT_FLAWED_FLOOR = 0.30


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
  return cache.testbed_figures(
    "configs/sft.py", "sft_demo", tmp_path_factory.mktemp("testbed") / "data", NUM_EXAMPLES, timeout=2300
  )


def test_the_shifted_split_is_partly_solved_by_the_sft_policy(figures):
  """Item 2: neither dead (countdown's 0) nor solved: a column RL can move either way."""
  assert 0.10 <= figures["shift_greedy_accuracy"] <= 0.60, figures
  assert 0.10 <= figures["shift_mean_pass_ratio"] <= 0.60, figures


def test_the_non_diverse_groups_differ_in_process(figures):
  """Item 0: all-correct groups often hold a flawed member, all-wrong groups spread their first errors, and the
  policy is still a mixed starting point (all three kinds of group occur)."""
  assert figures["frac_all_correct"] * NUM_EXAMPLES >= 12, figures  # enough groups for the share below
  assert figures["all_correct_flawed"] >= ALL_CORRECT_FLAWED_FLOOR, figures
  assert figures["all_wrong_error_spread"] > 0.5, figures
  assert min(figures["frac_all_correct"], figures["frac_all_wrong"], figures["frac_diverse"]) > 0, figures
  assert 0.2 <= figures["mean_pass_ratio"] <= 0.9, figures
