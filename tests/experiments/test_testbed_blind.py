"""The study's testbed on its real SFT policy: trained from `configs/sft.py:blind` (6000 steps,
ten minutes or more on two shared cores), then evaluated on fixed held-out samples by `experiments.testbed.measure`,
the figures `launch.testbed` reports (docs/results/testbed.md). Trained once per source key into the test cache, as
the demo's policy is (test_testbed_policy.py); the evaluation runs every time.

Issue 32's two conditions for the judge to have something to act on:
  (a) a flaw the verifier cannot see (every step valid, an operation skipped or a step redundant) in ≥ 30% of the
      samples at the RL rollout's temperature;
  (b) routed (non-diverse) groups that differ: ≥ 5 distinct traces per group of 8.
"""

import pytest

from tests import cache

# The slow tier: it needs a trained policy (a 6000-step SFT in a cold cache: more than the suite-wide 900 s).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

NUM_EXAMPLES = 500  # held-out problems, G = 8 samples each: 4000 samples for the rates below
BLIND_FLAW_FLOOR = 0.30  # condition (a)
DISTINCT_FLOOR = 5.0  # condition (b), of G = 8


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
  return cache.testbed_figures(
    "configs/sft.py:blind", "sft_blind", tmp_path_factory.mktemp("testbed_blind") / "data", NUM_EXAMPLES, timeout=2300
  )


def test_routed_groups_hold_distinct_traces(figures):
  """Condition (b): the judge's groups are not copies of one trace (the judge's deduplication sees them as one)."""
  assert figures["distinct_per_non_diverse_group"] >= DISTINCT_FLOOR, figures


def test_the_policy_is_a_mixed_starting_point_with_the_flaw_the_verifier_cannot_see(figures):
  """All three kinds of group occur (RL has diverse groups to learn from and non-diverse ones to route), and the
  blind flaw is there for the judge at all, in most of the right answers."""
  assert min(figures["frac_all_correct"], figures["frac_all_wrong"], figures["frac_diverse"]) > 0, figures
  assert 0.2 <= figures["mean_pass_ratio"] <= 0.9, figures
  assert figures["blind_flaw_rate"] >= 0.4 * figures["mean_pass_ratio"], figures


@pytest.mark.xfail(strict=True, reason="condition (a) missed: docs/results/testbed.md has the measured rate")
def test_the_flaw_the_verifier_cannot_see_is_common(figures):
  """Condition (a): ≥ 30% of the samples. Missed by every candidate measured so far (the policy slips at T = 1, and
  a trace with a slip is not blind); strict, so that a testbed that meets it turns this into a failure to update."""
  assert figures["blind_flaw_rate"] >= BLIND_FLAW_FLOOR, figures
