"""Tournament schedulers among the G trajectories of one group (SPEC §5).

A new topology is one module: a `Scheduler` subclass registered with `@register_scheduler("name")`
that declares its closed form of judge calls (`calls_formula`, the `expected_calls` classmethod) beside
its schedule; importing it here registers it, and the config checks, docs/judges.md's cost table and
the tests read it from `SCHEDULERS`. The protocol every scheduler follows (`next_matches` / `record` /
`observed`, stages and rounds, failed judgments) is in `base`.

  base          `Scheduler`, `SCHEDULERS` / `register_scheduler`, argument checks, `make_scheduler`,
                `expected_calls`, `play` (a synchronous driver)
  ranking       `average_ranks`, `rank_quantile` (ArenaRL's rank reward)
  round_robin   round_robin, anchor
  live          live; `arrival_quota`, `leaderboard_positions`
  information   live_info, info_budget; `pair_information`, `choose_informative_pairs`
  elimination   seeded_single_elimination, double_elimination; `bracket_order`
  swiss         swiss

Topologies (calls = judge calls of a full tournament without failures):

  name                        calls                     rounds              native score (higher = better)
  round_robin                 G(G−1)/2                  1                   win rate over observed matches
  live                        Σ_k min(k, 3) = 3G−6      G−1                 BT θ of the observed matches
  anchor                      G−1                       1                   s(τ_i, anchor); anchor 1/2
  seeded_single_elimination   2G−2                      1 + ⌈log₂G⌉         rank quantile 1 − rank/(G−1)
  double_elimination          2G−2 (+G−1 seeding)       see class           rank quantile
  swiss                       ⌈log₂G⌉·⌊G/2⌋             ⌈log₂G⌉             rank quantile
  live_info                   3G−6 (as live)            G−1                 BT θ of the observed matches
  info_budget                 budget (default 3G−6)     ⌈budget/⌊G/2⌋⌉      BT θ of the observed matches

The simulated `strength_judge` of the tests and benchmarks lives in `arena_jax.arena.testing`; it is
re-exported here so that the old `tournaments.strength_judge` keeps working.
"""

from arena_jax.arena.tournaments.base import (
  SCHEDULERS,
  Judge,
  Pair,
  Scheduler,
  expected_calls,
  make_scheduler,
  play,
  register_scheduler,
)
from arena_jax.arena.tournaments.ranking import average_ranks, rank_quantile

# The topology modules: importing them registers their topologies in SCHEDULERS, in this order (the
# registry's iteration order, as it was when they shared one module).
from arena_jax.arena.tournaments.round_robin import Anchor, RoundRobin
from arena_jax.arena.tournaments.live import Live, arrival_quota, leaderboard_positions
from arena_jax.arena.tournaments.information import (
  InfoBudget,
  LiveInfo,
  choose_informative_pairs,
  pair_information,
)
from arena_jax.arena.tournaments.elimination import DoubleElimination, SeededSingleElimination, bracket_order
from arena_jax.arena.tournaments.swiss import Swiss
from arena_jax.arena.testing import strength_judge
