"""The reward modes: the paper's methods and baselines (SPEC §7), selected by `config.reward.mode`.

| mode                 | diverse groups  | non-diverse groups          | judge form |
|----------------------|-----------------|-----------------------------|------------|
| `rlvr`               | verifier        | verifier (Â = 0)            | none       |
| `rlaif`              | pointwise judge | pointwise judge             | pointwise  |
| `arenarl`            | tournament      | tournament                  | pairwise (ArenaRL topology + rank-quantile, no routing) |
| `adaptive_pointwise` | verifier        | pointwise judge             | pointwise  |
| `arena`              | verifier        | round-robin win rate        | pairwise   |
| `arena_live`         | verifier        | live tournament + BT        | pairwise   |

RLVR with dynamic sampling (DAPO) is `rlvr` with `reward.dynamic_sampling=True`: it changes which
groups are trained on, not how they are rewarded. Adding a mode touches this file only: register a
`RewardMode` (STYLE §4).
"""
from __future__ import annotations

import dataclasses

JUDGE_GROUPS = ("none", "non_diverse", "all")
JUDGE_FORMS = (None, "pairwise", "pointwise")
AGGREGATIONS = (None, "win_rate", "bt", "native")


@dataclasses.dataclass(frozen=True)
class RewardMode:
  """How a mode turns a step's samples into rewards.

  Attributes:
    name: the registry name.
    judge_groups: which groups the judge sees: none, the non-diverse ones (routing, SPEC §3) or all.
    judge_form: pairwise tournaments or pointwise rubric scores.
    topology: the default tournament (`arena_jax.arena.SCHEDULERS`); `reward.topology` overrides.
    aggregation: how a tournament becomes rewards: win rate, Bradley–Terry (SPEC §6) or the
      topology's native ranking turned into ArenaRL's rank quantile r_i = 1 − rank_i/(G − 1), whose
      group advantage is ArenaRL's z-scored rank quantile (SPEC §5).
  """

  name: str
  judge_groups: str = "none"
  judge_form: str | None = None
  topology: str | None = None
  aggregation: str | None = None

  def __post_init__(self):
    if self.judge_groups not in JUDGE_GROUPS:
      raise ValueError(f"judge_groups must be one of {JUDGE_GROUPS}, got {self.judge_groups!r}")
    if self.judge_form not in JUDGE_FORMS:
      raise ValueError(f"judge_form must be one of {JUDGE_FORMS}, got {self.judge_form!r}")
    if self.aggregation not in AGGREGATIONS:
      raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
    if (self.judge_groups == "none") != (self.judge_form is None):
      raise ValueError(f"mode {self.name!r}: a judge form goes with judged groups and vice versa")

  @property
  def uses_judge(self) -> bool:
    return self.judge_form is not None

  @property
  def routed(self) -> bool:
    """Diverse groups keep the verifier (SPEC §3)."""
    return self.judge_groups == "non_diverse"


REWARD_MODES: dict[str, RewardMode] = {}


def register_mode(mode: RewardMode) -> RewardMode:
  if mode.name in REWARD_MODES:
    raise ValueError(f"reward mode {mode.name!r} registered twice")
  REWARD_MODES[mode.name] = mode
  return mode


def get_mode(name: str) -> RewardMode:
  if name not in REWARD_MODES:
    raise ValueError(f"unknown reward.mode {name!r}; choose one of {sorted(REWARD_MODES)}")
  return REWARD_MODES[name]


register_mode(RewardMode("rlvr"))
register_mode(RewardMode("rlaif", judge_groups="all", judge_form="pointwise"))
register_mode(RewardMode("arenarl", judge_groups="all", judge_form="pairwise",
                         topology="seeded_single_elimination", aggregation="native"))
register_mode(RewardMode("adaptive_pointwise", judge_groups="non_diverse", judge_form="pointwise"))
register_mode(RewardMode("arena", judge_groups="non_diverse", judge_form="pairwise",
                         topology="round_robin", aggregation="win_rate"))
register_mode(RewardMode("arena_live", judge_groups="non_diverse", judge_form="pairwise",
                         topology="live", aggregation="bt"))
