"""Advantages, the adaptive per-group router and the CISPO loss (SPEC §1–§3, §5)."""

from arena_jax.rl.advantages import (
  DIVERSITY_THRESHOLD,
  EPS_STD,
  group_advantages,
  is_diverse,
  rank_quantile_advantages,
  reward_variance,
  route_rewards,
)
from arena_jax.rl.cispo import (
  AGGREGATIONS,
  CispoOutput,
  Weighted,
  cispo_loss,
  completion_mask,
  metric_values,
)
from arena_jax.rl.aggregation import (
  AGGREGATORS,
  Verdicts,
  bt_shrinkage,
  padded_matches,
  register_aggregator,
  shrinkage_factors,
)
from arena_jax.rl.modes import (
  REWARD_MODES,
  JudgeAll,
  RewardMode,
  Routed,
  aggregation_problem,
  get_mode,
  register_mode,
)
