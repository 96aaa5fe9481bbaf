"""The reproduction study (`make reproduce`): the reward modes of SPEC §7 side by side on the arithmetic testbed.

Every run starts from the same SFT policy, sees the same prompts in the same order (`data_seed`),
trains for the same number of optimizer steps, and differs only in its reward mode and its seed
(sampling and judge), so two runs of one seed are a pair. The modes are reward-mode registry names
(`arena_jax.rl.REWARD_MODES`), each run `mode_config(name)` of `configs.common`. The
judge-quality ablation adds runs of each of `study.ablation_modes` whose embedded judge reverses a
share 1 − a of its verdicts on pairs that differ in process (`judge.server.flip_rate`), one per verdict
accuracy a of `study.judge_accuracies`; a = 1 is the plain mode's own run, a = 0 a reversed judge (every
decisive verdict between traces of different penalty the wrong way round: the effect in the other
direction). The runs go one after another, so their wall-clock times are comparable. Finished runs are
skipped when the study is restarted (their final checkpoint and evaluation exist); a finished run of another
setup (length, SFT base, judge, evaluation) in the same root is refused rather than mixed in.

Presets (`--study.preset`): `full` (`make reproduce`, the defaults below), `quick` (`make
reproduce-quick`: 2 seeds, a few steps, a small evaluation, written under runs/study_quick; a smoke run of
the machinery, not evidence) and `smoke` (the tests' end-to-end run: tiny policy and shapes, seconds a run). A
field set on the command line keeps its value under a preset.

`write_results` turns the runs into `docs/results/`: what the mechanism predicts, whether its condition
held (all-correct groups the majority of routed groups by the end), the accuracy and process table (in
and out of distribution, mean ± std over seeds: the paper's Table 1), every mode's paired difference
from RLVR with a bootstrap interval (`experiments.stats`), the judge-quality ablation, the efficiency
table (Table 2 and Fig. 5, SPEC §9), curves (training accuracy, faithful accuracy and the all-correct
share over steps; Fig. 1, SPEC §1) and `study.json` with every run's numbers.

The package, split where one extends it: `grid.py` (the presets, the run groups and each run's config),
`runner.py` (`run_study`), `metrics.py` (what the results read off a run's metrics.jsonl), `results.py`
(`write_results`: one step per table of the page), `plots.py` (its figures) and `hard.py` (the hard regime's page,
`--study.preset=hard`: held-out curves and the speed to RLVR's level).
"""

from experiments.study.grid import (
  ALL_MODES,
  BASELINE,
  PRESETS,
  REFERENCE,
  STUDY_MODES,
  ablation_name,
  apply_preset,
  check_study,
  eval_config,
  name_command,
  run_config,
  run_setup,
  study_config,
  variants,
)
from experiments.study.hard import write_hard_results
from experiments.study.results import READING_FILE, write_results
from experiments.study.runner import run_study


def write_page(study, runs: dict) -> str:
  """The results page `study.page` names: the study's README.md (`write_results`) or the hard regime's
  (`write_hard_results`); returns its markdown."""
  return write_hard_results(study, runs) if study.page == "hard_regime" else write_results(study, runs)
