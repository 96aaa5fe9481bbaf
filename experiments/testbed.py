"""The testbed condition, measured on an SFT policy's own groups (`launch/testbed.py`): whether its non-diverse
groups differ in process.

The paper's mechanism can only act where reward-non-diverse groups differ in process (SPEC §1, §3): an
all-correct group of G samples needs a flawed member (compensating error, skipped or redundant step, bare
answer) for the judge to prefer the clean ones against, and an all-wrong group needs members that go
wrong at different steps. `measure` trains (or reuses, the SFT cache) a policy and reports, on held-out
arithmetic with G = `DEMO_EVAL` samples per problem at the RL rollout's temperature:

  all_correct_flawed       share of all-correct groups with a flawed member      (target ≥ 0.30)
  all_wrong_error_spread   mean std of the first-error step inside all-wrong groups (target > 0)
  blind_flaw_rate          share of samples with a flaw the verifier cannot see: every step valid, an
                           operation skipped or a step redundant (condition (a), docs/results/testbed.md: target ≥ 0.30)
  distinct_per_non_diverse_group  distinct traces per non-diverse group of G, the groups the router sends
                           the judge (condition (b), docs/results/testbed.md: target ≥ 5 of 8)
  frac_all_correct / frac_all_wrong / frac_diverse, greedy_accuracy, mean_pass_ratio: whether the policy
                           is still a mixed RL starting point
  process metrics          faithful accuracy, flawed_correct_rate, ... (`tasks.process_rates`)
  shift_*                  the same policy on the out-of-distribution split (`arithmetic_shift`, item 2)
  demo_kinds               the share of each kind among the demonstrations actually written

The figures come from `experiments.demo.eval_config` and `arena_jax.eval.watch.evaluate_params`: the
same evaluation `make demo` prints.
"""

from __future__ import annotations

import collections
import itertools
import time

import ml_collections

from arena_jax import tasks
from arena_jax.eval import watch
from arena_jax.train import load_policy, train_sft
from experiments import demo

# The figures of the report line, per benchmark (the rest of `evaluate`'s metrics stay in `full`).
KEYS = (
  "greedy_accuracy",
  "mean_pass_ratio",
  "pass@8",
  "frac_all_correct",
  "frac_all_wrong",
  "frac_diverse",
  "all_correct_flawed",
  "all_wrong_error_spread",
  "faithful_accuracy",
  "flawed_correct_rate",
  "compensating_rate",
  "skipped_rate",
  "redundant_rate",
  "blind_flaw_rate",
  "distinct_per_non_diverse_group",
  "bare_answer_rate",
  "first_error_step_wrong",
  "mean_response_length",
)


def demo_kind_shares(tasks_config: ml_collections.ConfigDict, num: int = 2000) -> dict[str, float]:
  """Share of each kind among the first `num` train demonstrations as written (after fallbacks to clean)."""
  counts = collections.Counter(d.kind for d in itertools.islice(tasks.demonstrations(tasks_config), num))
  total = sum(counts.values())
  return {k: counts[k] / total for k in tasks.DEMO_KINDS}


def measure(
  sft_config: ml_collections.ConfigDict,
  policy_dir: str,
  *,
  num_examples: int = 200,
  temperature: float = 1.0,
  max_new_tokens: int = 96,
  train: bool = True,
) -> dict:
  """Trains the SFT policy into `policy_dir` (or reuses it, when it holds one of an equal config) and returns
  the testbed figures of its groups (module docstring), the shifted split's figures with a `shift_` prefix.

  train=False evaluates the policy already in `policy_dir` as it is (on `sft_config.tasks`'s problems), even
  when it was trained with another config (a policy of an older version, say).
  """
  t0 = time.time()
  summary = train_sft(sft_config, policy_dir) if train else {"cached": True}
  policy = load_policy(policy_dir)
  ec = demo.eval_config(
    sft_config.tasks.copy_and_resolve_references(),
    num_examples=num_examples,
    temperature=temperature,
    max_new_tokens=max_new_tokens,
    samples_per_benchmark=0,
  )
  results = watch.evaluate_params(
    policy.model, policy.config, policy.tokenizer, ec, add_bos=policy.add_bos, progress=False
  )
  out = {
    "policy_dir": policy_dir,
    "sft_cached": bool(summary.get("cached")),
    "sft_steps": sft_config.num_steps,
    "fractions": dict(sft_config.tasks.sft.fractions),
    "demo_kinds": {k: round(v, 3) for k, v in demo_kind_shares(sft_config.tasks).items()},
    "num_examples": num_examples,
    "group_size": ec.num_samples,
  }
  for prefix, bench in (("", "arithmetic"), ("shift_", "arithmetic_shift")):
    out.update({prefix + k: round(v, 4) for k, v in results.get(bench, {}).items() if k in KEYS})
  out["minutes"] = round((time.time() - t0) / 60, 2)
  return out
