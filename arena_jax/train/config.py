"""The RL run configuration: every field declared once (`RUN`), `base_config()` (its defaults, what
configs/*.py start from) and `validate_config` (SPEC §9 gives the paper's values).

Each field is declared below with its default, the values it accepts and what it means
(`arena_jax.config_schema`); the defaults, the up-front check and docs/configuration.md all derive from
that one declaration. Every field is checked once, up front, before anything is built or compiled; an
error names the field and says what to change (STYLE §2). Checks that relate several fields are the
named rules after the declarations.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import types

import ml_collections

from arena_jax import arena
from arena_jax import config_schema as cs
from arena_jax import parallel
from arena_jax.config_schema import field
from arena_jax.errors import MissingFileError
from arena_jax.judges import config as judges_config
from arena_jax.models import MODEL_CONFIGS, MODEL_DTYPES, QUANTIZATIONS, REMAT_POLICIES
from arena_jax.rl import cispo
from arena_jax.rl import modes as reward_modes
from arena_jax.tasks import config as tasks_config
from arena_jax.train import sharding as train_sharding
from arena_jax.train import workdir as workdir_lib

_MESH = parallel.mesh_config()  # the mesh defaults are `parallel.mesh_config`'s own


def _bool(default: bool, meaning: str) -> cs.Field:
  return field(default, meaning, cs.boolean())


LIVE_STARTS = ("step_done", "group_done", "speculative")


def _uses_judge(c: ml_collections.ConfigDict) -> bool:
  """The judge section matters (and is checked) only for the modes that call a judge."""
  return reward_modes.get_mode(c.reward.mode).uses_judge


RUN = cs.Section(dict(
    seed=field(0, "Seed of sampling (folded with the step and the generation batch), of the tournament schedulers "
               "(folded with step and group) and of `init.random_model`'s initialisation.", cs.integer(0)),
    data_seed=field(0, "Order of the training prompts (`tasks.PromptIterator`); separate from `seed` so that runs "
                    "differing only in `seed` see the same prompts.", cs.integer(0)),
    tasks=tasks_config.TASKS.but(documented_apart=True),
    num_steps=field(80, "Optimizer steps (RL steps) of the run.", cs.integer(1)),

    # Where the policy comes from; the rule `one_policy_source` below wants exactly one of the three.
    init=cs.Section(dict(
        policy_dir=field("", "Start from a policy directory written by SFT (`train_sft`) or `save_policy`. Exactly "
                         "one of `policy_dir`, `hf_path`, `random_model` must be set; `configs/arith_*.py` set "
                         "`policy_dir = \"runs/sft_demo\"` (`make demo`'s SFT policy).", valid='path or ""'),
        hf_path=field("", "Start from a local Hugging Face checkpoint directory (Llama / Mistral / Qwen3 / "
                      "Ministral3 `ForCausalLM`, or `Mistral3ForConditionalGeneration`'s text decoder; FP8 "
                      "dequantised: `models.load_hf`): config.json, safetensors, tokenizer.json or tokenizer.model.",
                      valid='path or ""'),
        random_model=field("", "Tests and smoke runs: a randomly initialised named model (e.g. \"tiny\") with a "
                           "SentencePiece tokenizer trained on the task corpus.",
                           cs.registered(MODEL_CONFIGS, optional=True),
                           when=lambda init: bool(init.random_model)),
        tokenizer_vocab=field(512, "Vocabulary size (an upper bound) of the tokenizer trained for "
                              "`init.random_model`.", cs.integer(16, why="PAD, EOS, BOS, UNK and the digits"),
                              valid="int ≥ 16 (with random_model)", when=lambda init: bool(init.random_model)),
    )),

    # How the policy computes, not what it is: its architecture comes with the policy (`init`).
    model=cs.Section(dict(
        remat=field("none", "Activation rematerialisation of each decoder block in the train step's backward "
                    "pass (`models.REMAT_POLICIES`, `jax.checkpoint` policies): `none` keeps every activation; "
                    "`dots_saveable` keeps the matmul outputs, attention scores included; `minimal` keeps the "
                    "projections and the MLP and recomputes attention (whose probabilities grow with T²); "
                    "`full` keeps each block's input and recomputes the block (≈ one more forward pass). "
                    "Same losses and gradients; less memory for more compute. The sampler never uses it.",
                    cs.one_of(tuple(REMAT_POLICIES))),
        weight_dtype=field("float32", "Storage dtype of the trained weights (the masters) and of the optimizer "
                           "state, whatever the checkpoint stores: a bfloat16 or FP8 checkpoint is upcast on load, "
                           "and checkpoints hold the masters. bfloat16 masters lose every AdamW step smaller than "
                           "half their spacing (≈ 2⁻⁹ of |w|): at lr 4e-7 almost no weight moves, and the first "
                           "update stops the run (`optim.min_changed_share`).", cs.one_of(MODEL_DTYPES)),
        dtype=field("", "Compute dtype of the forward and backward passes and of the sampler's copy of the weights "
                    "(cast from the masters once per step, after the update, on the sampler's layout). \"\" = the "
                    "policy's own (its checkpoint's dtype; float32 for the embedded policies); the real configs "
                    "set bfloat16. Softmax, norms, logits and log-probs are float32 whatever it is.",
                    cs.one_of(("",) + MODEL_DTYPES, valid='"" or ' + ", ".join(MODEL_DTYPES))),
        quantization=field("", "Low-precision matmuls in the train step: `fp8` runs the decoder blocks' projections "
                           "and MLP as FP8 matmuls (e4m3 forward, e5m2 gradients; Qwix, `models.quantization`); "
                           "the masters, the optimizer state and the sampler stay as `weight_dtype` / `dtype` say. "
                           "\"\" = none.", cs.one_of(QUANTIZATIONS, valid='"" or fp8')),
    )),

    rollout=cs.Section(dict(
        prompts_per_step=field(16, "B: prompts, hence groups, per optimizer step.", cs.integer(1)),
        group_size=field(8, "G: samples per prompt. A group needs ≥ 2 samples to have a reward variance (SPEC §1).",
                         cs.integer(2, message="a group needs ≥ 2 samples to have a variance (SPEC §1)")),
        max_new_tokens=field(96, "Completion budget in tokens; a completion cut here is `truncated`.", cs.integer(1)),
        temperature=field(1.0, "Sampling temperature; the behaviour log-probs CISPO needs are recorded at it.",
                          cs.number(0, lo_open=True, message="must be a finite number > 0 for RL sampling")),
        top_k=field(0, "Top-k filtering of the sampler; 0 = off.", cs.integer(0, why="0 = no top-k")),
        top_p=field(1.0, "Nucleus (top-p) filtering of the sampler; 1 = off.", cs.number(0, 1, lo_open=True)),
        stream_every=field(0, "With `reward.live_start` ≠ step_done: decode steps between two reads of the rows "
                           "that finished (each read is one host round trip); 0 = at the end of each of the "
                           "sampler's cache chunks (≤ 4 per call).", cs.integer(0)),
        compact_every=field(16, "Decode steps between two compactions of the sampler's batch: the rows still "
                            "decoding are gathered into a smaller batch (row buckets 2^i, 3·2^i) so that finished "
                            "rows stop costing compute; the samples are the same. Each check is one host round "
                            "trip, each row bucket one more decode program to compile; 0 = off (one program "
                            "decodes every row until the longest ends). `Sampler.compact_every`.", cs.integer(0)),
    )),

    reward=cs.Section(dict(
        mode=field("arena_live", "The reward mode (SPEC §7; docs/reward_modes.md).",
                   cs.registered(reward_modes.REWARD_MODES)),
        topology=field("", "Tournament topology replacing the mode's own (arena, arenarl_baseline: round_robin, arena_live: live, "
                       "arenarl: seeded_single_elimination). Pairwise modes only.",
                       cs.registered(arena.SCHEDULERS, optional=True),
                       when=lambda reward: bool(reward.topology)),
        aggregation=field("", "Aggregation of the judge's verdicts replacing the mode's own, independently of "
                          "the topology (`rl.AGGREGATORS`: win_rate, bt, rank_quantile for pairwise modes; "
                          "pointwise for pointwise ones). E.g. arenarl with topology round_robin and "
                          "aggregation win_rate is the paper's ArenaRL baseline (`arenarl_baseline`).",
                          cs.registered(reward_modes.AGGREGATORS, optional=True),
                          when=lambda reward: bool(reward.aggregation)),
        max_gen_batches=field(8, "Modes with dynamic sampling (`rlvr_dapo`, DAPO): generation batches per step "
                              "before the run stops with an error saying so.", cs.integer(1)),
        bt_l2=field(arena.DEFAULT_L2, "λ, the L2 penalty of the Bradley–Terry fit (SPEC §6).",
                    cs.number(0, lo_open=True, why="SPEC §6")),
        bt_solver=field(arena.DEFAULT_SOLVER, "Bradley–Terry solver (`arena.SOLVERS`, `arena.register_solver`).",
                        cs.registered(arena.SOLVERS)),
        dedupe_traces=field(True, "Judged members of a group whose traces are identical up to whitespace share one "
                            "tournament node (or one rubric score): no judge call between them, one call on behalf "
                            "of all copies, equal rewards; counted in `judge/calls_saved_duplicates`. False = "
                            "every member is judged on its own.", cs.boolean()),
        bt_shrinkage=field(0.0, "κ ≥ 0: multiply each judged trajectory's advantage by z²/(z² + κ), z = its BT "
                           "strength's distance from the group mean in Laplace standard errors, so a trajectory "
                           "within noise of the mean moves little (docs/reward_modes.md). 0 = off. Modes that "
                           "aggregate by Bradley–Terry only.", cs.number(0, why="0 = off")),
        async_lag=field(1, "1: the judge works on step t's groups while step t + 1 samples, and update t waits for "
                        "the judge only if it is slower (`time/judge_wait`); 0: sample, judge, update in turn.",
                        cs.one_of((0, 1), message="must be 0 or 1", valid="0 or 1")),
        live_start=field("step_done", "When a step's judging starts (issue 14). `step_done`: once the whole step "
                         "is generated. `group_done`: a group's judging starts as soon as its last member finishes "
                         "decoding and its routing is known, while other groups still decode (every topology). "
                         "`speculative` (`live` tournaments of routed modes): a group's tournament starts with its "
                         "first arrival and takes each arrival while they all share one verifier reward; it is "
                         "abandoned when a different reward arrives (`judge/calls_wasted`). Modes without a judge "
                         "ignore it.", cs.one_of(LIVE_STARTS)),
        live_pipelined=field(False, "Live tournaments: choose an arrival's opponents from the standings known "
                             "when it arrives, with matches of several arrivals in flight at once, instead of "
                             "waiting for every earlier result (G − 1 judge round trips deep). Verdicts then "
                             "depend on the judge's timing: not bit-reproducible. Pays off when arrivals are "
                             "spread in time (`live_start` ≠ step_done); see benchmarks.tournament_fidelity.",
                             cs.boolean()),
        max_judge_outage_steps=field(10, "Consecutive steps in which every judge call failed before the run stops "
                                     "with an error naming the judge's last answer (0 = never): a judge that "
                                     "is down or misconfigured must not pass for RLVR. Shorter outages are "
                                     "survived: those groups get zero advantage.", cs.integer(0)),
        std_ddof=field(0, "Delta degrees of freedom of the group standard deviation in Â (0 = population std, "
                       "SPEC §1).", cs.integer(0), valid="int in [0, group_size)"),
    ), removed=dict(dynamic_sampling="DAPO is its own reward mode: set reward.mode = 'rlvr_dapo'")),
    # urls () = the embedded judge server on a free loopback port.
    judge=judges_config.JUDGE.but(documented_apart=True, when=_uses_judge),

    loss=cs.Section(dict(
        eps_low=field(1.0, "IS-weight floor 1 − eps_low (SPEC §2); 1.0 = no lower bound.",
                      cs.number(0, 1, why="the IS floor is 1 − eps_low")),
        eps_high=field(4.0, "IS-weight cap 1 + eps_high (SPEC §2); 4.0 = cap 5 as in ScaleRL, verl's example uses "
                       "0.2.", cs.number(0)),
        aggregation=field("token_mean", "`token_mean`: sum over every token of the batch / number of tokens (the "
                          "formula); `seq_mean_token_mean`: mean over sequences of each sequence's token mean.",
                          cs.one_of(cispo.AGGREGATIONS)),
        mask_truncated=_bool(False, "Completions cut at `max_new_tokens` carry no loss."),
        kl_coef=field(0.0, "β of a KL penalty to the initial policy (k3 estimator); 0 = none, as in the paper. > 0 "
                      "keeps a frozen copy of the initial parameters.", cs.number(0)),
    )),

    optim=cs.Section(dict(
        lr=field(1e-4, "Learning rate of AdamW, constant after the warm-up (SPEC §9).", cs.number(0, lo_open=True)),
        warmup_steps=field(5, "Linear warm-up from 0 over this many steps; 0 = none.", cs.integer(0)),
        b1=field(0.9, "Adam β₁.", cs.number(0, 1, hi_open=True, why="Adam's decay rate")),
        b2=field(0.99, "Adam β₂.", cs.number(0, 1, hi_open=True, why="Adam's decay rate")),
        eps=field(1e-8, "Adam ε.", cs.number(0, lo_open=True)),
        weight_decay=field(0.0, "AdamW decoupled weight decay.", cs.number(0)),
        max_grad_norm=field(1.0, "Global-norm gradient clipping; 0 = off.", cs.number(0, why="0 = no clipping")),
        micro_batches=field(1, "Exact gradient accumulation: each update is computed in this many micro-batches "
                            "(losses as (sum, denominator)). prompts_per_step × group_size must split into "
                            "minibatches × micro_batches equal parts.", cs.integer(1)),
        minibatches=field(1, "Optimizer updates per RL step, each on its own slice of the rollout (the later ones "
                          "are off-policy: CISPO's IS weights).", cs.integer(1)),
        min_changed_share=field(0.5, "The first update at the peak learning rate (after `warmup_steps`) with a "
                                "non-zero gradient must change at least this share of the weight elements it moves "
                                "(`update/changed` / `update/moved`); below it the run stops with a line naming "
                                "`optim.lr` and `model.weight_dtype`: the steps round away in the masters' dtype. "
                                "0 = never checked.", cs.number(0, 1)),
    )),

    # Checked against the devices by `parallel.make_meshes` (in `validate_config`, unless check_devices=False).
    mesh=cs.Section(dict(
        data=field(_MESH.data, "Size of the `data` mesh axis: the batch is split, parameters are replicated. data × "
                   "fsdp × tensor = number of devices (all hosts); at most one axis is −1.",
                   valid="int ≥ 1, or −1 = fill"),
        fsdp=field(_MESH.fsdp, "Size of the `fsdp` axis: the batch and the parameters, gradients and optimizer state "
                   "are split (ZeRO-3).", valid="int ≥ 1, or −1 = fill"),
        tensor=field(_MESH.tensor, "Size of the `tensor` axis: heads, KV heads, MLP and vocabulary are split "
                     "(Megatron); keep it within a host.", valid="int ≥ 1, or −1 = fill"),
        sample=field(_MESH.sample, "The sampler's mesh over the same devices; () = the train mesh (docs/tpu.md).",
                     valid="() or (data, fsdp, tensor)"),
        distributed=field(_MESH.distributed, "Call `jax.distributed.initialize()` first (multi-host TPU slices, GPU "
                          "clusters).", valid="bool"),
        rules=field(_MESH.rules, "Overrides of `models.LOGICAL_AXIS_RULES`, e.g. ((\"embed\", None),) to replicate "
                    "embed dimensions.", valid="tuple of (logical axis, mesh axes)"),
    ), factory=parallel.mesh_config),

    checkpoint=cs.Section(dict(
        every=field(20, "Orbax checkpoint every this many steps and at the last step; the judge pipeline drains "
                    "first, so a checkpoint holds no pending work.", cs.integer(1)),
        keep=field(3, "Checkpoints kept (the oldest are deleted).", cs.integer(1)),
    )),
    resume=_bool(False, "Continue from the last checkpoint in `--workdir`. A fresh run (False) refuses a workdir "
                 "that already holds checkpoints."),
    resume_allow_changes=field((), "Guarded fields a resume may change (names among `train.workdir.GUARDED_FIELDS`: "
                               "the mode, task, model and batch shape); a resume that changes any other of them is "
                               "refused, so one log never mixes incompatible runs.",
                               cs.entries_of(workdir_lib.GUARDED_FIELDS)),
    log=cs.Section(dict(
        progress=_bool(True, "A tqdm progress bar (accuracy, loss, routed groups, judge calls)."),
        tensorboard=_bool(True, "TensorBoard event files in `<workdir>/tensorboard` (`metrics.jsonl` is always "
                          "written)."),
        plot=_bool(True, "`<workdir>/curves.png` at the end of the run (`train.plot_curves`)."),
        samples_per_step=field(4, "Completions written per step to `<workdir>/samples.jsonl` and TensorBoard text "
                               "(prompt, completion, verifier reward, trained reward, advantage, judged): what "
                               "the policy wrote, for reading next to the metrics. 0 = none.", cs.integer(0)),
        process_checks=field(64, "Completions per step (whole groups, spread over the step) read by the task's "
                             "process checker for the `process/*` metrics: faithful accuracy, compensating "
                             "errors, bare answers, skipped steps, first-error step of wrong answers. Tasks "
                             "without a checker (JSONL) skip it. 0 = off.", cs.integer(0)),
    )),

    # What launch/aot_compile.py compiles; only the real-model configs (`pod_config`) have it.
    aot=cs.Section(dict(
        model=field("", "The named model config that `launch/aot_compile.py` compiles (the checkpoint's "
                    "architecture).", valid="a name in `models.MODEL_CONFIGS`", checked=False),
        topology=field("", "The TPU topology compiled for (the config argument).",
                       valid="a key of the file's `SLICES`"),  # `pod_config` refuses any other
        prompt_len=field(1024, "The prompt bucket P of the compiled sample and train steps.", valid="int ≥ 1",
                         checked=False),
    ), optional=True),
))


@RUN.rule
def _one_policy_source(c, report):
  """Exactly one of init.policy_dir, init.hf_path and init.random_model is set."""
  i = c.init
  if sum([bool(i.policy_dir), bool(i.hf_path), bool(i.random_model)]) != 1:
    report("init", "set exactly one of init.policy_dir (an SFT policy), init.hf_path (a local HF checkpoint) or "
           f"init.random_model (tests); got policy_dir={i.policy_dir!r}, hf_path={i.hf_path!r}, "
           f"random_model={i.random_model!r}" + (
               "; configs/arith_*.py set policy_dir: add --config.init.policy_dir='' to start from hf_path"
               if i.policy_dir and i.hf_path else ""))


@RUN.rule
def _std_ddof_below_group_size(c, report):
  """reward.std_ddof < rollout.group_size: the group standard deviation needs a positive denominator."""
  if not c.reward.std_ddof < c.rollout.group_size:
    report("reward.std_ddof", f"must be in [0, group_size) = [0, {c.rollout.group_size}), got {c.reward.std_ddof}")


@RUN.rule
def _topology_needs_a_tournament(c, report):
  """reward.topology is set only for pairwise (tournament) modes."""
  mode = reward_modes.get_mode(c.reward.mode)
  if c.reward.topology and mode.judge_form != "pairwise":
    report("reward.topology", f"mode {c.reward.mode!r} has no tournament; leave topology empty")


@RUN.rule
def _shrinkage_needs_bradley_terry(c, report):
  """reward.bt_shrinkage > 0 only for runs whose judge rewards are a Bradley–Terry fit (it needs its errors)."""
  aggregation = c.reward.aggregation or reward_modes.get_mode(c.reward.mode).aggregation
  if c.reward.bt_shrinkage and aggregation != "bt":
    report("reward.bt_shrinkage", f"mode {c.reward.mode!r} does not aggregate by Bradley–Terry "
           f"(aggregation {aggregation!r}): leave bt_shrinkage at 0, or set reward.aggregation='bt'")


@RUN.rule
def _aggregation_reads_the_modes_verdicts(c, report):
  """reward.aggregation reads the verdicts the mode's judge form produces (matches or rubric scores)."""
  if c.reward.aggregation:
    problem = reward_modes.aggregation_problem(reward_modes.get_mode(c.reward.mode), c.reward.aggregation)
    if problem:
      report("reward.aggregation", problem)


@RUN.rule
def _speculative_is_for_live_routing(c, report):
  """reward.live_start = speculative needs a live tournament for routed (non-diverse) groups."""
  mode = reward_modes.get_mode(c.reward.mode)
  topology = c.reward.topology or mode.topology
  if c.reward.live_start == "speculative" and (mode.judge_groups != "non_diverse" or topology != "live"):
    report("reward.live_start", f"'speculative' starts live tournaments before routing is known: it needs a routed "
           f"pairwise mode with topology 'live' (mode {c.reward.mode!r}, topology {topology!r}); use 'group_done'")


@RUN.rule
def _pairwise_modes_get_a_pairwise_judge(c, report):
  """A pairwise mode (a tournament) needs judge.backend = pairwise."""
  mode = reward_modes.get_mode(c.reward.mode)
  if mode.judge_form == "pairwise" and c.judge.backend != "pairwise":
    report("judge.backend", f"mode {c.reward.mode!r} compares pairs: use backend 'pairwise', got {c.judge.backend!r}")


@RUN.rule
def _update_splits_the_rollout(c, report):
  """prompts_per_step × group_size rows split into minibatches × micro_batches equal parts."""
  rows, o = c.rollout.prompts_per_step * c.rollout.group_size, c.optim
  if rows % (o.minibatches * o.micro_batches):
    report("optim.micro_batches", f"prompts_per_step × group_size = {rows} rows must split into minibatches × "
           f"micro_batches = {o.minibatches} × {o.micro_batches} equal parts")


def base_config() -> ml_collections.ConfigDict:
  """Every declared default: the arithmetic testbed with `arena_live` rewards, no policy source yet
  (configs/*.py set one, and whatever else they change)."""
  return RUN.defaults()


def load_config_module(path: str | os.PathLike) -> types.ModuleType:
  """A config file as a module, loaded by path as `--config=path` loads it (configs/ is no package, so
  one config file reaches another, such as configs/common.py, this way)."""
  path = pathlib.Path(path)
  spec = importlib.util.spec_from_file_location(f"_config_{path.stem}", path)
  if spec is None or not path.is_file():
    raise MissingFileError(f"no config file at {str(path)!r}")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def load_config_file(path: str | os.PathLike, arg: str | None = None) -> ml_collections.ConfigDict:
  """`get_config(arg)` of a config file (what `--config=path:arg` does), for code outside absl mains."""
  return load_config_module(path).get_config(arg)


DEFAULT_POLICY_DIR = "runs/sft_demo"  # where `make demo`'s SFT warm start writes its policy


def mode_config(mode: str, arg: str | None = None, **reward) -> ml_collections.ConfigDict:
  """`base_config()` with `reward.mode = mode` (and `reward` overrides), starting from the SFT policy.

  `arg` (the config file's argument, e.g. `--config=configs/arith_rlvr.py:smoke`):
    None / ""   the arithmetic testbed from `make demo`'s SFT policy
    "smoke"     tiny shapes and a random policy: seconds on a CPU, for tests
  configs/arith_*.py are the same testbed, spelled out field by field in configs/arith_arena_live.py.
  """
  c = base_config()
  c.reward.mode = mode
  for k, v in reward.items():
    c.reward[k] = v
  c.init.policy_dir = DEFAULT_POLICY_DIR
  c.tasks = tasks_config.demo_config()  # the SFT policy's tasks: its difficulty and its held-out split
  c.judge.max_tokens = 2048  # the embedded judge's verdicts are short (the default budget is a reasoning judge's)
  if arg == "smoke":
    smoke(c)
  elif arg:
    raise ValueError(f"unknown config argument {arg!r}; use none or 'smoke'")
  return c


# TPU slice → train mesh (data, fsdp, tensor; −1 = fill), sampler mesh (() = the same), micro-batches of
# the 512-row update of `pod_config`, and the train step's activation rematerialisation (`model.remat`).
# Each line is checked by launch/aot_compile.py (`make aot`; docs/tpu.md).
POD_SLICES = {
    # 8 chips × 95 GiB (v5p-16, 2 hosts): FSDP over 2, heads over the 4 chips of a host; 4 rows per micro-batch.
    # The activations fit: no recomputation.
    "v5p:2x2x2": dict(mesh=(1, -1, 4), sample=(), micro_batches=128, remat="none"),
    # 64 chips × 16 GiB (v5litepod-64, 16 hosts): training splits heads 16 ways (a v5e holds the activations
    # of one 3072-token row only with 2 heads per chip); sampling splits the 8 KV heads 8 ways.
    "v5e:8x8": dict(mesh=(1, -1, 16), sample=(1, -1, 8), micro_batches=128, remat="none"),
    # 16 chips × 16 GiB (v5litepod-16, 4 hosts): holds the train step only by recomputing each block in the
    # backward pass from its input (without remat: 16.75 GiB per chip at best; recomputing only attention,
    # `minimal`: 16.12 GiB); heads over the 4 chips of a host, FSDP over the 4 hosts, one row per chip and
    # micro-batch.
    "v5e:4x4": dict(mesh=(1, -1, 4), sample=(1, -1, 8), micro_batches=128, remat="full"),
    # 8 chips × 32 GiB (v4-16, 2 hosts): heads over all 8 chips, one row per micro-batch.
    "v4:2x2x2": dict(mesh=(1, 1, 8), sample=(), micro_batches=512, remat="none"),
}


MATH_SYSTEM_PROMPT = ("Solve the problem step by step, concisely. End with the final answer on its own line as "
                      "'Answer: <answer>'.")


def pod_config(topology: str | None, *, model: str, hf_path: str, source: str,
               slices: dict = POD_SLICES, chat_template_kwargs: dict | None = None) -> ml_collections.ConfigDict:
  """Reasoning Arena-Live at the paper's scale (SPEC §9) on the TPU slice `topology` (a key of `slices`).

  Shared by configs/real_*.py, which differ only in the policy: `model` (the named `ModelConfig` that
  launch/aot_compile.py compiles) and `hf_path` (its checkpoint). 64 prompts × G = 8 samples of up to
  2048 new tokens per step, prompts padded to 1024 tokens. Paths and URLs are placeholders of the shape
  of the real ones, overridden on the command line. `source` names the config file in errors. Prompts go
  through the checkpoint's own chat template with a math system prompt (`chat_template_kwargs`, e.g.
  Qwen3's `enable_thinking`, reach the template).
  """
  if topology == "smoke":
    return real_smoke(pod_config(None, model=model, hf_path=hf_path, source=source, slices=slices,
                                 chat_template_kwargs=chat_template_kwargs))
  topology = topology or "v5p:2x2x2"
  if topology not in slices:
    raise ValueError(f"{source}: no settings for topology {topology!r}; use one of {sorted(slices)} "
                     "(or add a line to its SLICES and check it with launch/aot_compile.py)")
  slice_ = slices[topology]
  c = base_config()
  c.reward.mode = "arena_live"

  # The HF checkpoint on the workers' local disk (or a gcsfuse mount); every host reads it.
  c.init.hf_path = hf_path
  c.tasks.train_task = "jsonl"
  c.tasks.eval_tasks = ("jsonl",)
  c.tasks.jsonl.train_path = "/mnt/disks/data/stem_rl_train.jsonl"
  c.tasks.jsonl.test_path = "/mnt/disks/data/aime_2025.jsonl"
  c.tasks.jsonl.num_workers = 16
  # Instruct checkpoints are prompted in their own chat format (tokenizer_config.json / chat_template.jinja).
  c.tasks.prompt_format = "chat"
  c.tasks.system_prompt = MATH_SYSTEM_PROMPT
  c.tasks.chat_template_kwargs = chat_template_kwargs

  # The judge: DeepSeekMath-V2 (SPEC §9) behind vLLM or SGLang, one URL per server (docs/tpu.md).
  c.judge.urls = ("http://judge-0:8000/v1", "http://judge-1:8000/v1")
  c.judge.model = "deepseek-ai/DeepSeek-Math-V2"
  c.judge.token_budget = 16_384       # traces are long: keep 16k tokens of each (with a marker)
  c.judge.max_tokens = 8192
  c.judge.client.concurrency = 128

  # compact_every = 0: `make aot` proves the memory of the uncompacted decode program only (a compaction
  # briefly holds the old and the new cache).
  c.rollout.update(dict(prompts_per_step=64, group_size=8, max_new_tokens=2048, temperature=1.0, compact_every=0))
  c.optim.update(dict(lr=4e-7, warmup_steps=10, micro_batches=slice_["micro_batches"], minibatches=1))  # SPEC §9
  c.num_steps = 500
  c.checkpoint.every = 25
  c.mesh = parallel.mesh_config(*slice_["mesh"], sample=slice_["sample"], distributed=True)
  c.model.remat = slice_["remat"]
  # float32 masters and AdamW moments under bfloat16 compute: at lr 4e-7 a bfloat16 weight would not move.
  c.model.update(dict(weight_dtype="float32", dtype="bfloat16"))
  # What launch/aot_compile.py compiles: the named model of the checkpoint and the prompt bucket.
  c.aot = RUN.entries["aot"].defaults()
  c.aot.update(dict(model=model, topology=topology))
  return c


def real_smoke(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A real-size run config (`pod_config`) at smoke size, every code path kept: the HF checkpoint import
  (`init.hf_path`: point it at a tiny checkpoint of the same architecture), its chat template, JSONL math
  data verified by math-verify (`tasks.jsonl.*_path`), the judge client over HTTP (the embedded judge
  server when `judge.urls` is ()), the sharded trainer (tensor 2 × FSDP over the other devices: CPU devices
  with `XLA_FLAGS=--xla_force_host_platform_device_count=4` or more). 2 steps of 4 prompts × 4 samples."""
  c.judge.urls = ()
  c.judge.model = judges_config.DEFAULT_MODEL  # the embedded server serves only this name
  c.judge.token_budget, c.judge.max_tokens, c.judge.client.concurrency = 1024, 1024, 16
  c.tasks.jsonl.num_workers = 1
  c.rollout.update(dict(prompts_per_step=4, group_size=4, max_new_tokens=16))
  c.optim.update(dict(micro_batches=1, minibatches=1, warmup_steps=1))
  c.num_steps, c.checkpoint.every = 2, 2
  c.mesh = parallel.mesh_config(1, -1, 2)
  c.log.progress = c.log.tensorboard = c.log.plot = False
  return c


def smoke(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Shrinks a config to seconds on a CPU: random tiny policy, 2 steps of 4 groups × 4 samples."""
  c.init.policy_dir = ""
  c.init.random_model = "tiny"
  c.init.tokenizer_vocab = 256
  c.num_steps = 2
  c.rollout.prompts_per_step = 4
  c.rollout.group_size = 4
  c.rollout.max_new_tokens = 16
  c.checkpoint.every = 2
  c.log.progress = False
  c.log.tensorboard = False
  c.log.plot = False
  c.tasks.arithmetic.num_train = 256
  c.tasks.arithmetic.num_test = 32
  return c


def validate_config(c: ml_collections.ConfigDict, *, check_devices: bool = True) -> None:
  """Checks every declared field of the run config once (`RUN` and its rules); raises ValueError naming
  the first bad field (see module docstring).

  Then, unless `check_devices=False`, the mesh against the devices this process sees (parallel.py's errors
  name config.mesh.*) and the update's rows against the mesh's batch shards, both before anything is built
  or compiled. `check_devices=False` is for configs written for another machine (a TPU slice checked on a
  laptop; `launch/aot_compile.py` checks against the target topology).
  """
  RUN.validate(c, "config")
  if not check_devices:
    return
  r, o = c.rollout, c.optim
  rows = r.prompts_per_step * r.group_size
  parallel.process_batch_size(r.prompts_per_step)  # every host draws the same number of prompts
  train_mesh, _ = parallel.make_meshes(c.mesh)
  train_sharding.check_train_batch(rows // o.minibatches, o.micro_batches, train_mesh,
                                   parallel.axis_rules(c.mesh.rules))
