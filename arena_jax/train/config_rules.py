"""The named cross-field rules of the RL run config (`train.config.RUN`): each relates fields of several sections
and reports the one to change (`config_schema.Reporter`); docs/configuration.md lists them by name and docstring.

Here, apart from the declarations (`train.config`), because a new rule is what one adds when two fields stop being
independent; they run in this order, after every field passed its own check.
"""

from __future__ import annotations

from arena_jax.rl import modes as reward_modes


def one_policy_source(c, report):
  """Exactly one of init.policy_dir, init.hf_path and init.random_model is set."""
  i = c.init
  if sum([bool(i.policy_dir), bool(i.hf_path), bool(i.random_model)]) != 1:
    report(
      "init",
      "set exactly one of init.policy_dir (an SFT policy), init.hf_path (a local HF checkpoint) or "
      f"init.random_model (tests); got policy_dir={i.policy_dir!r}, hf_path={i.hf_path!r}, "
      f"random_model={i.random_model!r}"
      + (
        "; configs/arith_*.py set policy_dir: add --config.init.policy_dir='' to start from hf_path"
        if i.policy_dir and i.hf_path
        else ""
      ),
    )


def std_ddof_below_group_size(c, report):
  """reward.std_ddof < rollout.group_size: the group standard deviation needs a positive denominator."""
  if not c.reward.std_ddof < c.rollout.group_size:
    report("reward.std_ddof", f"must be in [0, group_size) = [0, {c.rollout.group_size}), got {c.reward.std_ddof}")


def topology_needs_a_tournament(c, report):
  """reward.topology is set only for pairwise (tournament) modes."""
  mode = reward_modes.get_mode(c.reward.mode)
  if c.reward.topology and mode.judge_form != "pairwise":
    report("reward.topology", f"mode {c.reward.mode!r} has no tournament; leave topology empty")


def shrinkage_needs_bradley_terry(c, report):
  """reward.bt_shrinkage > 0 only for runs whose judge rewards are a Bradley–Terry fit (it needs its errors)."""
  aggregation = c.reward.aggregation or reward_modes.get_mode(c.reward.mode).aggregation
  if c.reward.bt_shrinkage and aggregation != "bt":
    report(
      "reward.bt_shrinkage",
      f"mode {c.reward.mode!r} does not aggregate by Bradley–Terry "
      f"(aggregation {aggregation!r}): leave bt_shrinkage at 0, or set reward.aggregation='bt'",
    )


def aggregation_reads_the_modes_verdicts(c, report):
  """reward.aggregation reads the verdicts the mode's judge form produces (matches or rubric scores)."""
  if c.reward.aggregation:
    problem = reward_modes.aggregation_problem(reward_modes.get_mode(c.reward.mode), c.reward.aggregation)
    if problem:
      report("reward.aggregation", problem)


def speculative_is_for_live_routing(c, report):
  """lockstep.live_start = speculative needs a live tournament for routed (non-diverse) groups."""
  mode = reward_modes.get_mode(c.reward.mode)
  topology = c.reward.topology or mode.topology
  if c.lockstep.live_start == "speculative" and (mode.judge_groups != "non_diverse" or topology != "live"):
    report(
      "lockstep.live_start",
      f"'speculative' starts live tournaments before routing is known: it needs a routed "
      f"pairwise mode with topology 'live' (mode {c.reward.mode!r}, topology {topology!r}); use 'group_done'",
    )


def async_loop_judges_finished_groups(c, report):
  """rollout.max_staleness ≥ 1 judges each group once it has finished: live_start = speculative is lock-step's."""
  if c.rollout.max_staleness and c.lockstep.live_start == "speculative":
    report(
      "lockstep.live_start",
      "the asynchronous loop (rollout.max_staleness ≥ 1) sends each routed group to the judge the moment its "
      "last member finishes; 'speculative' is the lock-step loop's: use 'group_done' or 'step_done'",
    )


def pairwise_modes_get_a_pairwise_judge(c, report):
  """A pairwise mode (a tournament) needs judge.backend = pairwise."""
  mode = reward_modes.get_mode(c.reward.mode)
  if mode.judge_form == "pairwise" and c.judge.backend != "pairwise":
    report("judge.backend", f"mode {c.reward.mode!r} compares pairs: use backend 'pairwise', got {c.judge.backend!r}")


def update_splits_the_rollout(c, report):
  """prompts_per_step × group_size rows split into minibatches × micro_batches equal parts."""
  rows, o = c.rollout.prompts_per_step * c.rollout.group_size, c.optim
  if rows % (o.minibatches * o.micro_batches):
    report(
      "optim.micro_batches",
      f"prompts_per_step × group_size = {rows} rows must split into minibatches × "
      f"micro_batches = {o.minibatches} × {o.micro_batches} equal parts",
    )


def packed_rows_hold_a_whole_completion(c, report):
  """rollout.pack_tokens > 0 must hold a full-budget completion and its prompt (≥ 1 token): a sequence never
  splits across packed rows."""
  r = c.rollout
  if r.pack_tokens and r.pack_tokens <= r.max_new_tokens:
    report(
      "rollout.pack_tokens",
      f"{r.pack_tokens} cannot hold a prompt + a completion of max_new_tokens = {r.max_new_tokens} tokens: use at "
      "least the longest prompt + max_new_tokens, or 0 (no packing)",
    )


def lora_is_not_quantized(c, report):
  """model.lora.rank > 0 trains adapters on frozen weights; model.quantization (FP8 matmuls of the trained weights)
  is for full-parameter runs: both rewrite the same projections through Qwix."""
  if c.model.lora.rank and c.model.quantization:
    report(
      "model.quantization",
      f"{c.model.quantization!r} with model.lora.rank = {c.model.lora.rank}: FP8 training and LoRA adapters are not "
      "combined; leave model.quantization empty with LoRA",
    )


RULES = (
  one_policy_source,
  std_ddof_below_group_size,
  topology_needs_a_tournament,
  shrinkage_needs_bradley_terry,
  aggregation_reads_the_modes_verdicts,
  speculative_is_for_live_routing,
  async_loop_judges_finished_groups,
  pairwise_modes_get_a_pairwise_judge,
  update_splits_the_rollout,
  packed_rows_hold_a_whole_completion,
  lora_is_not_quantized,
)
