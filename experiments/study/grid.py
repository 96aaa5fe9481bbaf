"""The study's run grid (SPEC §7): its presets and defaults, the run groups (the modes, then the judge-quality
ablation's judges), the RL config of each (run group, seed) and of its evaluation, and what a finished run must share
with the study to be reused. The runner (`runner.py`) and the results page (`results.py`) read only these."""

from __future__ import annotations

import json
import shlex

import ml_collections

from arena_jax import rl
from arena_jax.errors import ConfigError
from arena_jax.eval import watch
from configs.common import mode_config
from experiments import stats

# The efficiency tables' reference: the paper measures its savings against RLVR with dynamic sampling
# (SPEC §7, §9).
BASELINE = "rlvr_dapo"
# The accuracy differences' reference: plain RLVR, which gives non-diverse groups no signal at all.
REFERENCE = "rlvr"
# The study's modes: RLVR and Reasoning Arena (offline tournaments and live ones), each judged mode also with a
# reversed judge (the ablation): 25 runs, under `make reproduce`'s two hours on two cores. The other baselines,
# RLVR with dynamic sampling and a judge on every group, take `--study.modes` (any registry names), e.g. ALL_MODES.
STUDY_MODES = ("rlvr", "arena", "arena_live")
ALL_MODES = ("rlvr", "rlvr_dapo", "rlaif", "arena", "arena_live")

# The results pages `study.page` chooses between.
PAGES = ("study", "hard_regime")

# `--study.preset=quick` (`make reproduce-quick`): the same machinery in minutes once the SFT policy exists.
PRESETS = {
  "full": {},
  # The tests' end-to-end run: the tiny smoke policy and shapes (`configs/sft.py:smoke`, `mode_config(m, "smoke")`).
  "smoke": dict(
    modes=("rlvr", "arena_live"),
    seeds=(0,),
    num_steps=2,
    judge_accuracies=(1.0, 0.0),
    ablation_modes=("arena_live",),
    run_arg="smoke",
    sft_config="configs/sft.py:smoke",
    sft_dir="runs/sft_smoke",
    root="runs/study_smoke",
    out_dir="runs/study_smoke/results",
    command="python -m launch.compare --study.preset=smoke",
    eval=dict(num_examples=4, num_samples=2, max_new_tokens=16, batch_size=4),
  ),
  # The hard regime (docs/results/hard_regime.md): the demo's SFT policy on harder problems of its own generator, where
  # most groups are all wrong (RLVR learns nothing from them, dynamic sampling throws them away, Arena-Live's judge
  # ranks them). Held-out curves every `eval_every` steps; the speed to RLVR's final level (`hard.py`).
  "hard": dict(
    modes=("rlvr", "rlvr_dapo", "arena_live"),
    ablation_modes=("arena_live",),
    judge_accuracies=(1.0, 0.0),
    sft_config="configs/sft.py",
    sft_dir="runs/sft_demo",
    # The demo policy on 3–5 operations with operands up to 20 (it was trained on 2–4, up to 15): pass ratio@8 0.158
    # with 53% of the groups all wrong, measured with `launch.testbed` (docs/results/hard_regime.md, "The base").
    arithmetic=dict(min_ops=3, max_ops=5, max_operand=20),
    # A pilot RLVR run of this preset (seed 100, not a study seed; 150 steps, evaluated every 10) rose 0.158 → 0.280
    # in its first 90 steps and 0.280 → 0.303 in the last 60: near its plateau by 150, still rising slowly.
    num_steps=150,
    eval_every=10,
    root="runs/study_hard",
    page="hard_regime",
    command="python -m launch.compare --study.preset=hard",
    eval=dict(num_examples=200, num_samples=8, batch_size=64),
  ),
  "quick": dict(
    seeds=(0, 1),
    num_steps=8,
    judge_accuracies=(1.0, 0.0),
    root="runs/study_quick",
    out_dir="runs/study_quick/results",
    command="make reproduce-quick",
    eval=dict(num_examples=32, num_samples=4, batch_size=32),
  ),
}


def study_config() -> ml_collections.ConfigDict:
  """The study `launch/compare.py` runs (`--study.<field>` overrides a field)."""
  c = ml_collections.ConfigDict()
  c.preset = "full"  # a key of PRESETS: its values replace the defaults not set by hand
  c.modes = STUDY_MODES
  c.seeds = (0, 1, 2, 3, 4)
  # Long enough that all-correct groups should dominate the routed groups late in training (the regime where
  # the judge has something to do); the results' routing table shows whether they did.
  c.num_steps = 120
  # The ablation: verdict accuracy on pairs that differ in process, the honest judge (1, the modes' own
  # runs) and a reversed one (0: every such verdict the wrong way round), the judge's effect in both directions.
  c.judge_accuracies = (1.0, 0.0)
  c.ablation_modes = ("arena", "arena_live")  # the judged modes the ablation runs at each accuracy
  c.final_fraction = 0.1  # the end-of-training routing figures average the last 10% of steps (≥ 5)
  # min_pairs: fewer paired seeds than this get the mean difference only, no interval and no star (`experiments.stats`).
  c.bootstrap = ml_collections.ConfigDict(dict(num_resamples=10_000, level=0.95, seed=0, min_pairs=stats.MIN_PAIRS))
  c.root = "runs/study"  # one workdir per (mode or ablation judge, seed)
  c.out_dir = "docs/results"
  # The shared SFT base (trained first from `sft_config` if missing): the study's testbed, the demo's tasks with
  # demonstrations whose flaws the verifier cannot see (`configs/sft.py:blind`, docs/results/testbed.md).
  c.sft_dir = "runs/sft_blind"
  c.sft_config = "configs/sft.py:blind"  # `path[:arg]`; a relative path is read from the repository root
  c.run_arg = ""  # each run is `mode_config(mode, run_arg)`: "" the testbed, "smoke" tiny shapes
  c.max_staleness = 0  # every run's `rollout.max_staleness`: ≥ 1 trains with the asynchronous loop (0: lock-step)
  # countdown (far out of distribution, 0 for every policy so far) can be added to `benchmarks`.
  c.eval = ml_collections.ConfigDict(
    dict(
      benchmarks=("arithmetic", "arithmetic_shift"), num_examples=200, num_samples=8, max_new_tokens=96, batch_size=64
    )
  )
  c.command = "make reproduce"
  # The training and held-out problems' generator (`tasks.arithmetic`): 0 keeps the mode config's value.
  c.arithmetic = ml_collections.ConfigDict(dict(min_ops=0, max_ops=0, max_operand=0, max_value=0))
  # Held-out evaluations every this many steps, besides the final one (0: the final one only): the curves and the
  # speed to RLVR's level of the hard page.
  c.eval_every = 0
  # The benchmarks of the evaluations before the final one (which has every benchmark of `eval.benchmarks`): the
  # curves read the held-out pass ratio, and the out-of-distribution split costs as much again.
  c.curve_benchmarks = ("arithmetic",)
  # RLVR's level (`hard.py`): its mean held-out pass ratio over the evaluations in this final fraction of steps.
  c.level_fraction = 0.25
  c.page = "study"  # "study": README.md and study.json; "hard_regime": hard_regime.md/.json/.png (`hard.py`)
  return c


def apply_preset(study, keep=()) -> ml_collections.ConfigDict:
  """A copy of `study` with its preset's values, except the fields (dotted paths) in `keep`, e.g. those the
  command line set (`config_flags.get_override_values`)."""
  if study.preset not in PRESETS:
    raise ConfigError(f"study.preset: {study.preset!r} is not a preset; choose from {tuple(PRESETS)}")
  out = ml_collections.ConfigDict(study.to_dict())
  for key, value in PRESETS[study.preset].items():
    for sub, v in value.items() if isinstance(value, dict) else [(None, value)]:
      path = key if sub is None else f"{key}.{sub}"
      if path not in keep:
        if sub is None:
          out[key] = v
        else:
          out[key][sub] = v
  return out


def name_command(study, overrides, args) -> ml_collections.ConfigDict:
  """`study` with `command` the command line that ran it (`python -m launch.compare` and `args`) when that line
  changed more than the preset: the page then says how it was made (another seeds' run, say), not the preset's
  own command. An override that gives the preset's own value changes nothing; a `--study.command` of the caller's
  wins."""
  plain = apply_preset(ml_collections.ConfigDict({**study_config().to_dict(), "preset": study.preset}))

  def value(config, path):
    for key in path.split("."):
      config = config[key]
    return config.to_dict() if isinstance(config, ml_collections.ConfigDict) else config

  changed = {path for path in overrides - {"preset"} if value(study, path) != value(plain, path)}
  if "command" not in overrides and changed:
    study = ml_collections.ConfigDict(study.to_dict())
    study.command = shlex.join(["python", "-m", "launch.compare", *args])
  return study


def ablation_name(mode: str, accuracy: float) -> str:
  """The run group of `mode` with a judge of verdict accuracy `accuracy` (the mode itself at 1)."""
  return mode if accuracy >= 1 else f"{mode}@acc{accuracy:g}"


def variants(study) -> dict[str, tuple[str, float | None]]:
  """{run group: (reward mode, judge verdict accuracy or None for the mode's own judge)}: the modes, then the
  ablation's judges, mode by mode (accuracy 1 is the mode's own run, trained once)."""
  out = {m: (m, None) for m in study.modes}
  for mode in study.ablation_modes:
    for acc in study.judge_accuracies:
      out.setdefault(ablation_name(mode, acc), (mode, None if acc >= 1 else acc))
  return out


def check_study(study) -> None:
  """Refuses a study that cannot run, naming the field."""
  if study.preset not in PRESETS:
    raise ConfigError(f"study.preset: {study.preset!r} is not a preset; choose from {tuple(PRESETS)}")
  if isinstance(study.ablation_modes, str):
    raise ConfigError(f"study.ablation_modes: {study.ablation_modes!r} is one name; give a tuple of reward modes")
  unknown = [m for m in (*study.modes, *study.ablation_modes) if m not in rl.REWARD_MODES]
  if unknown:
    raise ConfigError(
      f"study.modes / study.ablation_modes: {unknown} are not reward modes; choose from {tuple(rl.REWARD_MODES)}"
    )
  if not study.seeds:
    raise ConfigError("study.seeds: no seed; give at least one (two for intervals)")
  bad = [a for a in study.judge_accuracies if not 0 <= a <= 1]
  if bad:
    raise ConfigError(f"study.judge_accuracies: {bad} are not verdict accuracies in [0, 1]")
  blind = [m for m in study.ablation_modes if not rl.REWARD_MODES[m].uses_judge]
  if study.judge_accuracies and blind:
    raise ConfigError(
      f"study.ablation_modes: {blind} use no judge; the ablation varies the judge's "
      "accuracy (e.g. arena_live), or set study.judge_accuracies=()"
    )
  if not 0 < study.final_fraction <= 1:
    raise ConfigError(f"study.final_fraction: {study.final_fraction} is not in (0, 1]")
  if study.eval_every < 0 or (study.eval_every and study.num_steps % study.eval_every):
    raise ConfigError(
      f"study.eval_every: {study.eval_every} does not divide study.num_steps={study.num_steps}; choose a divisor "
      "(or 0: the final evaluation only)"
    )
  if study.page not in PAGES:
    raise ConfigError(f"study.page: {study.page!r} is not a results page; choose from {PAGES}")
  if study.page == "hard_regime" and (not study.eval_every or REFERENCE not in study.modes):
    raise ConfigError(
      f"study.page: the hard_regime page needs curves (study.eval_every > 0) and the reference run group "
      f"{REFERENCE!r} in study.modes"
    )
  unknown = [b for b in study.curve_benchmarks if b not in study.eval.benchmarks]
  if study.eval_every and (unknown or not study.curve_benchmarks):
    raise ConfigError(
      f"study.curve_benchmarks: {tuple(study.curve_benchmarks)} must be some of study.eval.benchmarks "
      f"{tuple(study.eval.benchmarks)}"
    )
  if not 0 < study.level_fraction <= 1:
    raise ConfigError(f"study.level_fraction: {study.level_fraction} is not in (0, 1]")
  bad = [k for k, v in study.arithmetic.items() if v < 0]
  if bad:
    raise ConfigError(f"study.arithmetic.{bad[0]}: {study.arithmetic[bad[0]]} is negative (0 keeps the mode's value)")


def run_config(mode_name: str, seed: int, study, judge_accuracy: float | None = None) -> ml_collections.ConfigDict:
  """The RL config of one run: `mode_config(mode_name)` from the shared SFT base, the study's length and seed;
  with `judge_accuracy`, the embedded judge reverses a share 1 − judge_accuracy of its verdicts on pairs that
  differ in process (`judge.server.flip_rate`)."""
  c = mode_config(mode_name, study.run_arg or None)
  c.init.policy_dir, c.init.random_model = study.sft_dir, ""  # the shared SFT base, whatever the mode config says
  c.seed = seed
  c.data_seed = 0
  c.num_steps = study.num_steps
  c.checkpoint.every = study.eval_every or study.num_steps
  c.checkpoint.keep = study.num_steps // c.checkpoint.every  # every evaluated checkpoint stays
  c.tasks.arithmetic.update(arithmetic_overrides(study))
  c.log.progress = False
  c.log.tensorboard = False
  c.rollout.max_staleness = study.max_staleness
  if judge_accuracy is not None:
    c.judge.server.flip_rate = 1.0 - judge_accuracy
  return c


def arithmetic_overrides(study) -> dict:
  """The fields of `study.arithmetic` that replace the mode config's (`tasks.arithmetic`): those set (non-zero)."""
  return {k: v for k, v in study.arithmetic.items() if v}


def run_setup(study, judge_accuracy: float | None) -> dict:
  """What a finished run must share with the study to be reused on a restart (beyond its mode and seed)."""
  setup = {
    "num_steps": study.num_steps,
    "sft_dir": study.sft_dir,
    "judge_accuracy": judge_accuracy,
    "eval": study.eval.to_dict(),
  }
  # (Each absent at its default, so that runs finished before the field existed are reused.)
  if study.max_staleness:
    setup["max_staleness"] = study.max_staleness
  if study.eval_every:
    setup["eval_every"] = study.eval_every
    setup["curve_benchmarks"] = list(study.curve_benchmarks)
  if arithmetic_overrides(study):
    setup["arithmetic"] = arithmetic_overrides(study)
  return json.loads(json.dumps(setup))  # as eval_final.json holds it (tuples become lists)


def eval_config(study, tasks_config) -> ml_collections.ConfigDict:
  """The evaluation of every run's final checkpoint: `watch.default_config()` with `study.eval`."""
  c = watch.default_config()
  c.tasks = tasks_config
  for k, v in study.eval.items():
    c[k] = v
  return c
