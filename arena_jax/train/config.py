"""The RL run configuration: every field declared once (`RUN`), `base_config()` (its defaults, what
configs/*.py start from) and `validate_config` (SPEC §9 gives the paper's values). The presets built on it
(the testbed, the smoke variant, the TPU slices) live with the configs, in configs/common.py and configs/pod.py.

Each field is declared below with its default, the values it accepts and what it means
(`arena_jax.config_schema`); the defaults, the up-front check and docs/configuration.md all derive from
that one declaration. Every field is checked once, up front, before anything is built or compiled; an
error names the field and says what to change. Checks that relate several fields are the
named rules of `train.config_rules`.
"""

from __future__ import annotations

import re

import ml_collections

from arena_jax import arena
from arena_jax import config_schema as cs
from arena_jax import parallel
from arena_jax.config_schema import field
from arena_jax.judges import config as judges_config
from arena_jax.models import ATTENTION_CHOICES, MODEL_CONFIGS, MODEL_DTYPES, QUANTIZATIONS, REMAT_POLICIES
from arena_jax.models.lora import DEFAULT_TARGETS as LORA_TARGETS
from arena_jax.rl import cispo
from arena_jax.rl import modes as reward_modes
from arena_jax.tasks import config as tasks_config
from arena_jax.train import config_rules
from arena_jax.train import sharding as train_sharding
from arena_jax.train import workdir as workdir_lib

_MESH = parallel.mesh_config()  # the mesh defaults are `parallel.mesh_config`'s own


def _is_regex(v) -> bool:
  if not isinstance(v, str) or not v:
    return False
  try:
    re.compile(v)
  except re.error:
    return False
  return True


def _bool(default: bool, meaning: str) -> cs.Field:
  return field(default, meaning, cs.boolean())


LIVE_STARTS = ("step_done", "group_done", "speculative")


def _uses_judge(c: ml_collections.ConfigDict) -> bool:
  """The judge section matters (and is checked) only for the modes that call a judge."""
  return reward_modes.get_mode(c.reward.mode).uses_judge


# Fields that moved (the loops' scheduling flags, now one section per loop): a config or a command line that
# still sets one fails naming the new field (`config_schema.Section.moved`). `rollout.max_staleness`, the switch
# between the two loops, stays where the design names it.
MOVED = {
  "rollout.stream_every": "lockstep.stream_every",
  "reward.async_lag": "lockstep.judge_lag",
  "reward.live_start": "lockstep.live_start",
  "rollout.push_every": "async_loop.push_every",
  "reward.judge_backlog": "async_loop.judge_backlog",
  "reward.late_judgment": "async_loop.late_judgment",
}

RUN = cs.Section(
  dict(
    seed=field(
      0,
      "Seed of sampling (folded with the step and the generation batch), of the tournament schedulers "
      "(folded with step and group) and of `init.random_model`'s initialisation.",
      cs.integer(0),
    ),
    data_seed=field(
      0,
      "Order of the training prompts (`tasks.PromptIterator`); separate from `seed` so that runs "
      "differing only in `seed` see the same prompts.",
      cs.integer(0),
    ),
    tasks=tasks_config.TASKS.but(documented_apart=True),
    num_steps=field(80, "Optimizer steps (RL steps) of the run.", cs.integer(1)),
    # Where the policy comes from; the rule `one_policy_source` below wants exactly one of the three.
    init=cs.Section(
      dict(
        policy_dir=field(
          "",
          "Start from a policy directory written by SFT (`train_sft`) or `save_policy`. Exactly "
          "one of `policy_dir`, `hf_path`, `random_model` must be set; `configs/arith_*.py` set "
          "`policy_dir = \"runs/sft_demo\"` (`make demo`'s SFT policy).",
          valid='path or ""',
        ),
        hf_path=field(
          "",
          "Start from a local Hugging Face checkpoint directory (Llama / Mistral / Qwen2 / Qwen3 / "
          "Ministral3 `ForCausalLM`, or `Mistral3ForConditionalGeneration`'s text decoder; FP8 "
          "dequantised: `models.load_hf`): config.json, safetensors, tokenizer.json or tokenizer.model.",
          valid='path or ""',
        ),
        random_model=field(
          "",
          "Tests and smoke runs: a randomly initialised named model (e.g. \"tiny\") with a "
          "SentencePiece tokenizer trained on the task corpus.",
          cs.registered(MODEL_CONFIGS, optional=True),
          when=lambda init: bool(init.random_model),
        ),
        tokenizer_vocab=field(
          512,
          "Vocabulary size (an upper bound) of the tokenizer trained for `init.random_model`.",
          cs.integer(16, why="PAD, EOS, BOS, UNK and the digits"),
          valid="int ≥ 16 (with random_model)",
          when=lambda init: bool(init.random_model),
        ),
      )
    ),
    # How the policy computes, not what it is: its architecture comes with the policy (`init`).
    model=cs.Section(
      dict(
        remat=field(
          "none",
          "Activation rematerialisation of each decoder block in the train step's backward "
          "pass (`models.REMAT_POLICIES`, `jax.checkpoint` policies): `none` keeps every activation; "
          "`dots_saveable` keeps the matmul outputs, attention scores included; `minimal` keeps the "
          "projections and the MLP and recomputes attention (whose probabilities grow with T²); "
          "`full` keeps each block's input and recomputes the block (≈ one more forward pass). "
          "Same losses and gradients; less memory for more compute. The sampler never uses it.",
          cs.one_of(tuple(REMAT_POLICIES)),
        ),
        weight_dtype=field(
          "float32",
          "Storage dtype of the trained weights (the masters) and of the optimizer "
          "state, whatever the checkpoint stores: a bfloat16 or FP8 checkpoint is upcast on load, "
          "and checkpoints hold the masters. bfloat16 masters lose every AdamW step smaller than "
          "half their spacing (≈ 2⁻⁹ of |w|): at lr 4e-7 almost no weight moves, and the first "
          "update stops the run (`optim.min_changed_share`).",
          cs.one_of(MODEL_DTYPES),
        ),
        dtype=field(
          "",
          "Compute dtype of the forward and backward passes and of the sampler's copy of the weights "
          "(cast from the masters once per step, after the update, on the sampler's layout). \"\" = the "
          "policy's own (its checkpoint's dtype; float32 for the embedded policies); the real configs "
          "set bfloat16. Softmax, norms, logits and log-probs are float32 whatever it is.",
          cs.one_of(("",) + MODEL_DTYPES, valid='"" or ' + ", ".join(MODEL_DTYPES)),
        ),
        quantization=field(
          "",
          "Low-precision matmuls in the train step: `fp8` runs the decoder blocks' projections "
          "and MLP as FP8 matmuls (e4m3 forward, e5m2 gradients; Qwix, `models.quantization`); "
          "the masters, the optimizer state and the sampler stay as `weight_dtype` / `dtype` say. "
          "\"\" = none.",
          cs.one_of(QUANTIZATIONS, valid='"" or fp8'),
        ),
        attention=field(
          "auto",
          "The attention kernel of the full-sequence passes (the train step's forward and backward, "
          "the sampler's prefill, the log-prob passes; `models.attention`): `splash` = Pallas splash "
          "attention (TPU; Pallas interpret mode elsewhere, slow, for tests), `cudnn` = cuDNN flash "
          "attention through `jax.nn.dot_product_attention` (GPU), `xla` = the plain reference (float32 "
          "scores of the whole [T, T] block). `auto` picks by the platform: splash on TPU, cudnn on GPU, "
          "xla on the CPU. Same values within float32 round-off.",
          cs.one_of(ATTENTION_CHOICES),
        ),
        # LoRA (`models.lora`): off at rank 0.
        lora=cs.Section(
          dict(
            rank=field(
              0,
              "LoRA rank r (Qwix adapters, `models.lora`); 0 = full-parameter training. With r > 0 the base "
              "weights are frozen: only the adapters are trained, in the optimizer state and in the "
              "checkpoints, the sampler decodes the merged weights (W + (α/r)·A·B, merged once per step) "
              "and the KL reference (`loss.kl_coef`) is the base model.",
              cs.integer(0),
            ),
            alpha=field(32.0, "LoRA alpha α: the adapters' output is scaled by α / r.", cs.number(0.0, lo_open=True)),
            targets=field(
              LORA_TARGETS,
              "A regex over module paths (`layers/<i>/attn`, `layers/<i>/mlp`): every projection of a "
              "matched module gets an adapter. The default adapts every projection of every block (PEFT's "
              '"all-linear" but the output head); r"layers/\\d+/attn" adapts attention alone.',
              cs.satisfies("regex", _is_regex, "a regular expression"),
            ),
          )
        ),
      )
    ),
    rollout=cs.Section(
      dict(
        prompts_per_step=field(16, "B: prompts, hence groups, per optimizer step.", cs.integer(1)),
        group_size=field(
          8,
          "G: samples per prompt. A group needs ≥ 2 samples to have a reward variance (SPEC §1).",
          cs.integer(2, message="a group needs ≥ 2 samples to have a variance (SPEC §1)"),
        ),
        max_new_tokens=field(96, "Completion budget in tokens; a completion cut here is `truncated`.", cs.integer(1)),
        temperature=field(
          1.0,
          "Sampling temperature; the behaviour log-probs CISPO needs are recorded at it.",
          cs.number(0, lo_open=True, message="must be a finite number > 0 for RL sampling"),
        ),
        top_k=field(0, "Top-k filtering of the sampler; 0 = off.", cs.integer(0, why="0 = no top-k")),
        top_p=field(1.0, "Nucleus (top-p) filtering of the sampler; 1 = off.", cs.number(0, 1, lo_open=True)),
        compact_every=field(
          16,
          "Decode steps between two compactions of the sampler's batch: the rows still "
          "decoding are gathered into a smaller batch (row buckets 2^i, 3·2^i) so that finished "
          "rows stop costing compute; the samples are the same. Each check is one host round "
          "trip, each row bucket one more decode program to compile; 0 = off (one program "
          "decodes every row until the longest ends). `Sampler.compact_every`.",
          cs.integer(0),
        ),
        pack_tokens=field(
          0,
          "L > 0: the update packs each micro-batch's completions, each with its own unpadded "
          "prompt, into rows of L tokens (`train.packing`: first-fit decreasing per batch shard, "
          "segment ids, positions restarting per sequence) instead of one [P | N] row per "
          "completion; the loss is the same. Must hold the longest prompt + max_new_tokens; each "
          "bucket of packed rows is one more update program to compile. 0 = off.",
          cs.integer(0, why="0 = off"),
        ),
        sample_batch=field(
          0,
          "Prompts per sampler call: a step's `prompts_per_step` prompts are decoded in calls of at "
          "most this many (their samples are the same: a row's random stream depends on its index in "
          "the step, `Sampler.row_offset`), so that the decode cache of one call fits the chips at "
          "long budgets. 0 = all in one call.",
          cs.integer(0),
        ),
        decode_cache=field(
          "dense",
          "The sampler's completion cache: `dense` allocates every row's whole budget at the "
          "prefill; `growing` allocates cache chunks as decoding reaches them and compacts finished "
          "rows away at each chunk's end, so that its memory follows the live tokens. Same samples. "
          "`Sampler.decode_cache`.",
          cs.one_of(("dense", "growing")),
        ),
        max_staleness=field(
          0,
          "k: the asynchronous loop (`train.async_loop`, docs/architecture.md \"The asynchronous loop\") when "
          "≥ 1. The sampler works ahead of the update, new weights reach it between decode segments, and "
          "every trajectory is trained at most k updates after the policy version that began it; batches "
          "fill from finished groups. 0 = the lock-step loop (`lockstep`); the asynchronous loop's own knobs are "
          "`async_loop`.",
          cs.integer(0, why="0 = the lock-step loop"),
        ),
      )
    ),
    reward=cs.Section(
      dict(
        mode=field(
          "arena_live", "The reward mode (SPEC §7; docs/reward_modes.md).", cs.registered(reward_modes.REWARD_MODES)
        ),
        topology=field(
          "",
          "Tournament topology replacing the mode's own (arena, arenarl_baseline: round_robin, arena_live: live, "
          "arenarl: seeded_single_elimination). Pairwise modes only.",
          cs.registered(arena.SCHEDULERS, optional=True),
          when=lambda reward: bool(reward.topology),
        ),
        aggregation=field(
          "",
          "Aggregation of the judge's verdicts replacing the mode's own, independently of "
          "the topology (`rl.AGGREGATORS`: win_rate, bt, rank_quantile for pairwise modes; "
          "pointwise for pointwise ones). E.g. arenarl with topology round_robin and "
          "aggregation win_rate is the paper's ArenaRL baseline (`arenarl_baseline`).",
          cs.registered(reward_modes.AGGREGATORS, optional=True),
          when=lambda reward: bool(reward.aggregation),
        ),
        max_gen_batches=field(
          8,
          "Modes with dynamic sampling (`rlvr_dapo`, DAPO): generation batches per step "
          "before the run stops with an error saying so.",
          cs.integer(1),
        ),
        bt_l2=field(
          arena.DEFAULT_L2,
          "λ, the L2 penalty of the Bradley–Terry fit (SPEC §6).",
          cs.number(0, lo_open=True, why="SPEC §6"),
        ),
        bt_solver=field(
          arena.DEFAULT_SOLVER,
          "Bradley–Terry solver (`arena.SOLVERS`, `arena.register_solver`).",
          cs.registered(arena.SOLVERS),
        ),
        dedupe_traces=field(
          True,
          "Judged members of a group whose traces are identical up to whitespace share one "
          "tournament node (or one rubric score): no judge call between them, one call on behalf "
          "of all copies, equal rewards; counted in `judge/calls_saved_duplicates`. False = "
          "every member is judged on its own.",
          cs.boolean(),
        ),
        bt_shrinkage=field(
          0.0,
          "κ ≥ 0: multiply each judged trajectory's advantage by z²/(z² + κ), z = its BT "
          "strength's distance from the group mean in Laplace standard errors, so a trajectory "
          "within noise of the mean moves little (docs/reward_modes.md). 0 = off. Modes that "
          "aggregate by Bradley–Terry only.",
          cs.number(0, why="0 = off"),
        ),
        live_pipelined=field(
          False,
          "Live tournaments: choose an arrival's opponents from the standings known "
          "when it arrives, with matches of several arrivals in flight at once, instead of "
          "waiting for every earlier result (G − 1 judge round trips deep). Verdicts then "
          "depend on the judge's timing: not bit-reproducible. Pays off when arrivals are "
          "spread in time (`lockstep.live_start` ≠ step_done); see benchmarks.tournament_fidelity.",
          cs.boolean(),
        ),
        max_judge_outage_steps=field(
          10,
          "Consecutive steps in which every judge call failed before the run stops "
          "with an error naming the judge's last answer (0 = never): a judge that "
          "is down or misconfigured must not pass for RLVR. Shorter outages are "
          "survived: those groups get zero advantage.",
          cs.integer(0),
        ),
        std_ddof=field(
          0,
          "Delta degrees of freedom of the group standard deviation in Â (0 = population std, SPEC §1).",
          cs.integer(0),
          valid="int in [0, group_size)",
        ),
      ),
      removed=dict(dynamic_sampling="DAPO is its own reward mode: set reward.mode = 'rlvr_dapo'"),
    ),
    # The loops that run the stages, one section each: the lock-step loop (`train.trainer`), unless
    # `rollout.max_staleness` ≥ 1 selects the asynchronous one (`train.async_loop`).
    lockstep=cs.Section(
      dict(
        judge_lag=field(
          1,
          "1 (pipelined): the judge works on step t's groups while step t + 1 samples, and update t waits for "
          "the judge only if it is slower (`time/judge_wait`); 0 (sync): sample, judge, update in turn.",
          cs.one_of((0, 1), message="must be 0 or 1", valid="0 or 1"),
        ),
        live_start=field(
          "step_done",
          "When a step's judging starts. `step_done`: once the whole step "
          "is generated. `group_done`: a group's judging starts as soon as its last member finishes "
          "decoding and its routing is known, while other groups still decode (every topology). "
          "`speculative` (`live` tournaments of routed modes): a group's tournament starts with its "
          "first arrival and takes each arrival while they all share one verifier reward; it is "
          "abandoned when a different reward arrives (`judge/calls_wasted`). Modes without a judge "
          "ignore it.",
          cs.one_of(LIVE_STARTS),
        ),
        stream_every=field(
          0,
          "With `live_start` ≠ step_done: decode steps between two reads of the rows "
          "that finished (each read is one host round trip); 0 = at the end of each of the "
          "sampler's cache chunks (≤ 4 per call).",
          cs.integer(0),
        ),
      ),
      title="the lock-step loop: sync (judge_lag 0) or pipelined (judge_lag 1); `rollout.max_staleness` = 0",
    ),
    async_loop=cs.Section(
      dict(
        push_every=field(
          16,
          "With `rollout.max_staleness` ≥ 1: decode steps per segment of the sampler working ahead; between two "
          "segments it takes the newest weights (in-flight updates) and hands back its finished rows. 0 = "
          "no in-flight updates: new weights reach the sampler only when it starts a generation batch.",
          cs.integer(0, why="0 = weights only between generation batches"),
        ),
        judge_backlog=field(
          0,
          "Groups this host keeps in the judge at once; a routed group that "
          "finishes when it is full waits for a free place, or under `late_judgment = zero_advantage` is "
          "trained unjudged (zero advantage, counted in `judge/groups_skipped`). 0 = (k + 1) × this host's "
          "prompts per step.",
          cs.integer(0, why="0 = (max_staleness + 1) × prompts per host"),
        ),
        late_judgment=field(
          "wait",
          "When a routed group's judgment is not back by the last update "
          "that may train it (k updates after its policy version), or the judge's backlog is full: `wait` "
          "(the update waits, at most `judge.step_deadline_s` when set, `time/judge_wait`) or "
          "`zero_advantage` (its judgment is cancelled and it trains with zero advantage, `judge/groups_late`, "
          "`judge/groups_skipped`). A group is never dropped unnoticed.",
          cs.one_of(("wait", "zero_advantage")),
        ),
      ),
      title="the asynchronous loop, with `rollout.max_staleness` ≥ 1 (docs/architecture.md \"The asynchronous loop\")",
    ),
    # urls () = the embedded judge server on a free loopback port.
    judge=judges_config.JUDGE.but(documented_apart=True, when=_uses_judge),
    loss=cs.Section(
      dict(
        eps_low=field(
          1.0,
          "IS-weight floor 1 − eps_low (SPEC §2); 1.0 = no lower bound.",
          cs.number(0, 1, why="the IS floor is 1 − eps_low"),
        ),
        eps_high=field(
          4.0, "IS-weight cap 1 + eps_high (SPEC §2); 4.0 = cap 5 as in ScaleRL, verl's example uses 0.2.", cs.number(0)
        ),
        aggregation=field(
          "token_mean",
          "`token_mean`: sum over every token of the batch / number of tokens (the "
          "formula); `seq_mean_token_mean`: mean over sequences of each sequence's token mean.",
          cs.one_of(cispo.AGGREGATIONS),
        ),
        mask_truncated=_bool(False, "Completions cut at `max_new_tokens` carry no loss."),
        kl_coef=field(
          0.0,
          "β of a KL penalty to the initial policy (k3 estimator); 0 = none, as in the paper. > 0 "
          "keeps a frozen copy of the initial parameters.",
          cs.number(0),
        ),
      )
    ),
    optim=cs.Section(
      dict(
        lr=field(1e-4, "Learning rate of AdamW, constant after the warm-up (SPEC §9).", cs.number(0, lo_open=True)),
        warmup_steps=field(5, "Linear warm-up from 0 over this many steps; 0 = none.", cs.integer(0)),
        b1=field(0.9, "Adam β₁.", cs.number(0, 1, hi_open=True, why="Adam's decay rate")),
        b2=field(0.99, "Adam β₂.", cs.number(0, 1, hi_open=True, why="Adam's decay rate")),
        eps=field(1e-8, "Adam ε.", cs.number(0, lo_open=True)),
        weight_decay=field(0.0, "AdamW decoupled weight decay.", cs.number(0)),
        max_grad_norm=field(1.0, "Global-norm gradient clipping; 0 = off.", cs.number(0, why="0 = no clipping")),
        micro_batches=field(
          1,
          "Exact gradient accumulation: each update is computed in this many micro-batches "
          "(losses as (sum, denominator)). prompts_per_step × group_size must split into "
          "minibatches × micro_batches equal parts.",
          cs.integer(1),
        ),
        minibatches=field(
          1,
          "Optimizer updates per RL step, each on its own slice of the rollout (the later ones "
          "are off-policy: CISPO's IS weights).",
          cs.integer(1),
        ),
        min_changed_share=field(
          0.5,
          "The first update at the peak learning rate (after `warmup_steps`) with a "
          "non-zero gradient must change at least this share of the weight elements it moves "
          "(`update/changed` / `update/moved`); below it the run stops with a line naming "
          "`optim.lr` and `model.weight_dtype`: the steps round away in the masters' dtype. "
          "0 = never checked.",
          cs.number(0, 1),
        ),
      )
    ),
    # Checked against the devices by `parallel.make_meshes` (in `validate_config`, unless check_devices=False).
    mesh=cs.Section(
      dict(
        data=field(
          _MESH.data,
          "Size of the `data` mesh axis: the batch is split, parameters are replicated. data × "
          "fsdp × tensor = number of devices (all hosts); at most one axis is −1.",
          valid="int ≥ 1, or −1 = fill",
        ),
        fsdp=field(
          _MESH.fsdp,
          "Size of the `fsdp` axis: the batch and the parameters, gradients and optimizer state are split (ZeRO-3).",
          valid="int ≥ 1, or −1 = fill",
        ),
        tensor=field(
          _MESH.tensor,
          "Size of the `tensor` axis: heads, KV heads, MLP and vocabulary are split (Megatron); keep it within a host.",
          valid="int ≥ 1, or −1 = fill",
        ),
        sample=field(
          _MESH.sample,
          "The sampler's mesh over the same devices; () = the train mesh (docs/tpu.md). With `sample_devices`, "
          "its shape over those devices (() = (N, 1, 1)).",
          valid="() or (data, fsdp, tensor)",
        ),
        sample_devices=field(
          _MESH.sample_devices,
          "N > 0: the sampler runs on the last N devices, the trainer on the others (data × fsdp × tensor "
          "of the rest), so that the asynchronous loop (`rollout.max_staleness` ≥ 1) samples while the update "
          "runs; the new weights are copied across once per version. One process only. 0 = the sampler "
          "uses the train mesh's devices.",
          cs.integer(0, why="0 = the train mesh's devices"),
        ),
        distributed=field(
          _MESH.distributed,
          "Call `jax.distributed.initialize()` first (multi-host TPU slices, GPU clusters).",
          valid="bool",
        ),
        rules=field(
          _MESH.rules,
          "Overrides of `models.LOGICAL_AXIS_RULES`, e.g. ((\"embed\", None),) to replicate embed dimensions.",
          valid="tuple of (logical axis, mesh axes)",
        ),
      ),
      factory=parallel.mesh_config,
    ),
    checkpoint=cs.Section(
      dict(
        every=field(
          20,
          "Orbax checkpoint every this many steps and at the last step; the judge pipeline drains "
          "first, so a checkpoint holds no pending work.",
          cs.integer(1),
        ),
        keep=field(3, "Checkpoints kept (the oldest are deleted).", cs.integer(1)),
        save_merged=_bool(
          False,
          "With `model.lora.rank` > 0: each checkpoint also holds the merged weights (base + adapters), as "
          "its item `merged`, which `launch.serve`, `launch.eval` and `launch.export` read without the base. "
          "Off: checkpoints hold the adapters alone (and their moments), and readers merge them onto the base "
          "the run recorded in `<workdir>/lora.json`.",
        ),
      )
    ),
    resume=_bool(
      False,
      "Continue from the last checkpoint in `--workdir`. A fresh run (False) refuses a workdir "
      "that already holds checkpoints.",
    ),
    resume_allow_changes=field(
      (),
      "Guarded fields a resume may change (names among `train.workdir.GUARDED_FIELDS`: "
      "the mode, task, model and batch shape); a resume that changes any other of them is "
      "refused, so one log never mixes incompatible runs.",
      cs.entries_of(workdir_lib.GUARDED_FIELDS),
    ),
    log=cs.Section(
      dict(
        progress=_bool(True, "A tqdm progress bar (accuracy, loss, routed groups, judge calls)."),
        tensorboard=_bool(
          True, "TensorBoard event files in `<workdir>/tensorboard` (`metrics.jsonl` is always written)."
        ),
        plot=_bool(True, "`<workdir>/curves.png` at the end of the run (`train.plot_curves`)."),
        samples_per_step=field(
          4,
          "Completions written per step to `<workdir>/samples.jsonl` and TensorBoard text "
          "(prompt, completion, verifier reward, trained reward, advantage, judged): what "
          "the policy wrote, for reading next to the metrics. 0 = none.",
          cs.integer(0),
        ),
        process_checks=field(
          64,
          "Completions per step (whole groups, spread over the step) read by the task's "
          "process checker for the `process/*` metrics: faithful accuracy, compensating "
          "errors, bare answers, skipped steps, first-error step of wrong answers. Tasks "
          "without a checker (JSONL) skip it. 0 = off.",
          cs.integer(0),
        ),
      )
    ),
    # Weights & Biases (`arena_jax.train.tracking`, the `wandb` extra): off unless a project is named.
    wandb=cs.Section(
      dict(
        project=field(
          "",
          "The W&B project the run logs to (metrics, the config, curves, samples and the judge's tables); "
          '"" = no W&B. Needs the `wandb` extra: pip install -e \'.[wandb]\'.',
          cs.string(),
        ),
        entity=field("", "The W&B entity (team or user); \"\" = the account's default.", cs.string()),
        name=field("", "The run's display name; \"\" = the workdir's name.", cs.string()),
        mode=field(
          "online",
          "`online` (synced as it runs), `offline` (kept in `<workdir>/wandb`, synced later with `wandb sync`; "
          "no network needed) or `disabled`.",
          cs.one_of(("online", "offline", "disabled")),
        ),
        tags=field(
          (),
          "Tags of the W&B run.",
          cs.satisfies(
            "tuple of strings",
            lambda v: isinstance(v, (tuple, list)) and all(isinstance(t, str) for t in v),
            "a tuple of strings",
          ),
        ),
        tables=_bool(
          True,
          "At the end of the run, the inspector's tables as W&B tables: the groups (verifier and judge "
          "rewards, advantages), every judge call (pair, order, verdict, outcome, latency) and the samples.",
        ),
      )
    ),
    # What launch/aot_compile.py compiles; only the real-model configs (`pod_config`) have it.
    aot=cs.Section(
      dict(
        model=field(
          "",
          "The named model config that `launch/aot_compile.py` compiles (the checkpoint's architecture).",
          valid="a name in `models.MODEL_CONFIGS`",
          checked=False,
        ),
        topology=field(
          "", "The TPU topology compiled for (the config argument).", valid="a key of the file's `SLICES`"
        ),  # `pod_config` refuses any other
        prompt_len=field(
          1024, "The prompt bucket P of the compiled sample and train steps.", valid="int ≥ 1", checked=False
        ),
      ),
      optional=True,
    ),
  ),
  rules=list(config_rules.RULES),
  moved=MOVED,
)


def base_config() -> ml_collections.ConfigDict:
  """Every declared default: the arithmetic testbed with `arena_live` rewards, no policy source yet
  (configs/*.py set one, and whatever else they change)."""
  return RUN.defaults()


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
  train_sharding.check_train_batch(
    rows // o.minibatches, o.micro_batches, train_mesh, parallel.axis_rules(c.mesh.rules)
  )
