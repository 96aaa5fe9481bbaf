"""The run config: one declaration per field (`arena_jax.config_schema`), the config files built on it, and
the checks derived from it."""

import math
import pathlib
import re

import ml_collections
import pytest

from arena_jax import config_schema as cs
from arena_jax import rl
import configs
from arena_jax.train import config as train_config
from configs.common import mode_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARITH = sorted((ROOT / "configs").glob("arith_*.py"))


def test_base_config_is_every_declared_default():
  c = train_config.base_config()
  assert c == train_config.RUN.defaults()
  assert c.reward.mode == "arena_live" and "dynamic_sampling" not in c.reward
  c.init.random_model = "tiny"
  train_config.validate_config(c, check_devices=False)


@pytest.mark.parametrize("path", ARITH, ids=lambda p: p.stem)
@pytest.mark.parametrize("arg", [None, "smoke"])
def test_each_arith_file_is_the_testbed_the_study_runs(path, arg):
  """configs/arith_<mode>.py (what `make demo` and `launch.train` run) equals `mode_config(<mode>)` (what the
  study runs): configs/arith_arena_live.py spells the testbed out, the others change the mode only."""
  c = configs.get_config(path, arg)
  assert c.reward.mode == path.stem[len("arith_") :]
  assert c == mode_config(c.reward.mode, arg)
  train_config.validate_config(c, check_devices=False)


def test_an_unknown_config_argument_is_refused():
  with pytest.raises(ValueError, match="unknown config argument 'huge'"):
    configs.get_config("arith_rlvr", "huge")


def test_a_removed_field_says_what_replaced_it():
  c = mode_config("rlvr", "smoke")
  c.reward.dynamic_sampling = True
  with pytest.raises(ValueError, match=r"config\.reward\.dynamic_sampling: no longer exists: .*'rlvr_dapo'"):
    train_config.validate_config(c, check_devices=False)


@pytest.mark.parametrize("old, new", sorted(train_config.MOVED.items()))
def test_a_moved_field_names_its_new_place(old, new):
  """The loops' scheduling fields moved to one section per loop: a config still setting one is refused
  naming the new field, and the new one is declared."""
  c = train_config.base_config()
  (section, name), (new_section, new_name) = old.split("."), new.split(".")
  c[section][name] = c[new_section][new_name]  # its default: only the place is wrong
  with pytest.raises(ValueError, match=re.escape(f"config.{old}: moved to config.{new}")):
    train_config.validate_config(c, check_devices=False)
  assert cs.moved_to(old) == new


def test_reward_modes_are_read_from_the_registry_when_checked(monkeypatch):
  c = mode_config("brand_new_mode", "smoke")
  with pytest.raises(ValueError, match=r"config\.reward\.mode: unknown reward mode 'brand_new_mode'; choose one of"):
    train_config.validate_config(c, check_devices=False)

  class BrandNew(type(rl.REWARD_MODES["rlvr"])):
    name = "brand_new_mode"

  rl.register_mode(BrandNew)
  try:
    train_config.validate_config(c, check_devices=False)
  finally:
    rl.REWARD_MODES.unregister("brand_new_mode")


@pytest.mark.parametrize(
  "path, value, match",
  [
    ("num_steps", True, r"config\.num_steps: must be an integer ≥ 1, got True"),
    ("optim.lr", math.inf, r"config\.optim\.lr: must be a finite number > 0, got inf"),
    ("reward.std_ddof", 4, r"config\.reward\.std_ddof: must be in \[0, group_size\) = \[0, 4\), got 4"),
    ("init.policy_dir", "runs/x", r"config\.init: set exactly one of"),
    ("reward.topology", "swiss", None),  # a pairwise mode may replace its topology
    ("reward.bt_shrinkage", -0.5, r"config\.reward\.bt_shrinkage: must be a finite number ≥ 0"),
    ("reward.bt_shrinkage", 1.0, None),
    ("reward.aggregation", "win_rate", None),  # and, independently, its aggregation
    (
      "reward.aggregation",
      "pointwise",
      r"config\.reward\.aggregation: 'pointwise' reads pointwise verdicts but "
      r"mode 'arena_live' is pairwise; use one of \['bt', 'rank_quantile', 'win_rate'\]",
    ),
    ("reward.aggregation", "mean", r"config\.reward\.aggregation: .*'mean'"),
  ],
)
def test_field_and_cross_field_checks(path, value, match):
  c = mode_config("arena_live", "smoke")
  *parents, name = path.split(".")
  node = c
  for p in parents:
    node = node[p]
  node[name] = value
  if match is None:
    train_config.validate_config(c, check_devices=False)
  else:
    with pytest.raises(ValueError, match=match):
      train_config.validate_config(c, check_devices=False)


def test_shrinkage_needs_a_bradley_terry_mode():
  c = mode_config("arena", "smoke", bt_shrinkage=1.0)  # win rates: no standard errors
  with pytest.raises(ValueError, match=r"reward\.bt_shrinkage: mode 'arena' does not aggregate by Bradley–Terry"):
    train_config.validate_config(c, check_devices=False)
  c.reward.aggregation = "bt"  # the same mode with its aggregation replaced has errors to shrink by
  train_config.validate_config(c, check_devices=False)


def test_an_aggregation_needs_a_judged_mode():
  c = mode_config("rlvr", "smoke")
  c.reward.aggregation = "win_rate"
  with pytest.raises(ValueError, match=r"config\.reward\.aggregation: mode 'rlvr' calls no judge"):
    train_config.validate_config(c, check_devices=False)


def test_a_rlvr_run_leaves_the_judge_unchecked():
  """The judge section is checked only for modes that call a judge (as the trainer reads it only then)."""
  c = mode_config("rlvr", "smoke")
  c.judge.margin = 0.7
  train_config.validate_config(c, check_devices=False)
  c.reward.mode = "arena_live"
  with pytest.raises(ValueError, match=r"config\.judge\.margin"):
    train_config.validate_config(c, check_devices=False)


# ───────────────────────────────────── the schema itself ─────────────────────────────────────

SECTION = cs.Section(
  dict(
    n=cs.field(2, "A count.", cs.integer(1)),
    rate=cs.field(0.5, "A share.", cs.number(0, 1, hi_open=True)),
    name=cs.field("", "Optional name.", cs.one_of(("a", "b")), when=lambda c: bool(c.name)),
    limit=cs.field(None, "Optional limit.", cs.optional(cs.integer(1)), placeholder=int),
    parts=cs.Section(dict(x=cs.field(0.5, "x.", cs.number(0)), y=cs.field(0.5, "y.", cs.number(0))), exact="parts"),
  )
)


@SECTION.rule
def _n_above_limit(c, report):
  """n ≤ limit when a limit is set."""
  if c.limit is not None and c.n > c.limit:
    report("n", f"must be ≤ {report.path('limit')} ({c.limit}), got {c.n}")


def test_defaults_checks_and_documentation_come_from_one_declaration():
  c = SECTION.defaults()
  assert c.to_dict() == {"n": 2, "rate": 0.5, "name": "", "limit": None, "parts": {"x": 0.5, "y": 0.5}}
  assert SECTION.validate(c, "cfg") is c
  assert {p: f.describe() for p, f in SECTION.fields().items()} == {
    "n": "int ≥ 1",
    "rate": "[0, 1)",
    "name": "one of a, b",
    "limit": "None or int ≥ 1",
    "parts.x": "≥ 0",
    "parts.y": "≥ 0",
  }
  assert cs.rule_docs(SECTION) == [("n_above_limit", "n ≤ limit when a limit is set.")]
  assert cs.table([("n", 2, SECTION.entries["n"])])[-1] == "| `n` | `2` | int ≥ 1 | A count. |"


@pytest.mark.parametrize(
  "change, message",
  [
    (dict(n=0), "cfg.n: must be an integer ≥ 1, got 0"),
    (dict(n=2.0), "cfg.n: must be an integer ≥ 1, got 2.0"),
    (dict(rate=1.0), "cfg.rate: must be a finite number in [0, 1), got 1.0"),
    (dict(rate=math.nan), "cfg.rate: must be a finite number in [0, 1), got nan"),
    (dict(name="c"), "cfg.name: must be one of ('a', 'b'), got 'c'"),
    (dict(limit=0), "cfg.limit: must be an integer ≥ 1, got 0"),
    (dict(limit=1), "cfg.n: must be ≤ cfg.limit (1), got 2"),
  ],
)
def test_each_bad_value_names_its_field(change, message):
  c = ml_collections.ConfigDict(SECTION.defaults().to_dict(), type_safe=False)
  c.update(change)
  with pytest.raises(ValueError) as info:
    SECTION.validate(c, "cfg")
  assert str(info.value) == message


def test_missing_and_extra_keys_are_named():
  c = SECTION.defaults()
  c.parts.z = 1.0
  with pytest.raises(ValueError, match=r"cfg\.parts: must have exactly the parts \('x', 'y'\)"):
    SECTION.validate(c, "cfg")
  c = SECTION.defaults()
  del c["rate"]
  with pytest.raises(ValueError, match=r"cfg\.rate: missing field"):
    SECTION.validate(c, "cfg")
