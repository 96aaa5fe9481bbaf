"""Tournaments among the trajectories of a group and their aggregation into rewards (SPEC §4–§6)."""

from arena_jax.arena.bradley_terry import (
  DEFAULT_L2,
  DEFAULT_SOLVER,
  ERRORS,
  LAPLACE_SCALE,
  SOLVERS,
  bt_rewards,
  fit_bradley_terry,
  fit_bradley_terry_host,
  fit_bradley_terry_scipy,
  laplace_covariance_host,
  min_max_normalise,
  register_solver,
  standard_errors,
)
from arena_jax.arena.outcomes import (
  DEFAULT_MARGIN,
  Match,
  Verdict,
  check_margin,
  flip_outcome,
  mirror_matches,
  outcome_to_verdict,
  verdict_to_outcome,
)
from arena_jax.arena import tournaments
from arena_jax.arena.tournaments import (
  SCHEDULERS,
  Scheduler,
  expected_calls,
  make_scheduler,
  play,
  register_scheduler,
)

# Test and benchmark helper, exported here as before; it lives in arena.testing.
from arena_jax.arena.testing import strength_judge
