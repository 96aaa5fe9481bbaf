"""The effective judged signal of a step: which rows the judge steers, their share of Σ|Â|, and the
distinct traces a routed group gives the judge to rank."""

import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import rl, tasks
from arena_jax.train import step as step_lib


def _signal(mode, verifier, judged, adv):
  out = step_lib.judged_signal(rl.get_mode(mode), jnp.asarray(verifier), jnp.asarray(judged), jnp.asarray(adv))
  return float(out["judge/signal_rows"]), float(out["judge/grad_share"])


VERIFIER = [[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]  # diverse, all-correct, all-wrong
ADV = [[1.0, -1.0, 1.0, -1.0], [0.5, -0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]  # the all-wrong group: one trace


def test_routed_modes_count_the_non_diverse_groups_rows_with_a_signal():
  rows, share = _signal("arena_live", VERIFIER, [False, True, True], ADV)
  assert rows == pytest.approx(2 / 12)  # group 1's two non-zero rows; group 2 was routed but carries nothing
  assert share == pytest.approx(1.0 / 5.0)  # Σ|Â| = 4 (verifier) + 1 (judge)


def test_a_judge_of_every_group_steers_all_and_the_verifier_modes_none():
  assert _signal("rlaif", VERIFIER, [True, True, True], ADV) == pytest.approx((6 / 12, 1.0))
  assert _signal("rlaif", VERIFIER, [False, True, True], ADV) == pytest.approx((2 / 12, 0.2))  # a failed judgment
  assert _signal("rlvr", VERIFIER, [False, False, False], ADV) == (0.0, 0.0)
  assert _signal("arena_live", VERIFIER, [False, True, True], np.zeros((3, 4))) == (0.0, 0.0)  # no signal at all


def test_distinct_traces_count_texts_equal_up_to_whitespace_as_one():
  texts = ["a = 1.\n\nAnswer: 1", "a = 1. Answer: 1", " a  = 1.\tAnswer: 1", "b", "x", "y", "z", "w"]
  assert tasks.distinct_traces(texts, 4).tolist() == [2, 4]  # three spellings of one trace, and "b"
  assert tasks.normalise_trace(texts[0]) == "a = 1. Answer: 1"
