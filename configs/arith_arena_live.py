"""Reasoning Arena-Live (SPEC §7) on the arithmetic testbed: the run of `make demo`, every field spelled out.

    python -m launch.train --config=configs/arith_arena_live.py --workdir=runs/arena_live
    python -m launch.train --config=configs/arith_arena_live.py:smoke --workdir=/tmp/smoke   # seconds

Read it top to bottom: each line says why the field has its value here. What a field means and which
values it accepts is declared once, in `arena_jax.train.config.RUN` (and the tasks and judge configs it
embeds), and listed in docs/configuration.md; the run checks every field against it before it starts.
The other configs/arith_*.py are this testbed with another reward mode (`with_mode` at the bottom).
"""

import ml_collections

from arena_jax import judges, parallel, tasks
from configs import common


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.seed = 0  # one seed for sampling and tournaments; the study varies it (0, 1, 2)
  c.data_seed = 0  # fixed apart from `seed`, so runs of different seeds see the same prompts
  c.num_steps = 80  # enough steps on two CPU cores for the held-out accuracy to move

  # The policy of `make demo`'s SFT warm start (`python -m launch.sft`), on that policy's own tasks.
  c.init = ml_collections.ConfigDict(
    dict(
      policy_dir="runs/sft_demo",  # the mixed base policy: all-correct, all-wrong and diverse groups
      hf_path="",  # no HF checkpoint: the embedded default downloads nothing
      random_model="",  # random weights are for `:smoke` only
      tokenizer_vocab=512,  # unused with a policy_dir (the policy brings its tokenizer)
    )
  )
  # The RL run must see the tasks the policy was trained on: their difficulty and their held-out split
  # (easier arithmetic than the defaults, so that a few minutes of SFT give a mixed policy whose non-diverse
  # groups differ in process; configs/sft.py).
  c.tasks = tasks.demo_config()

  c.model = ml_collections.ConfigDict(
    dict(
      remat="none",  # a 0.4 M-parameter policy's activations fit: recomputing them would only cost time
      weight_dtype="float32",  # float32 masters and AdamW moments: no update rounds away
      dtype="",  # compute in the policy's own dtype (float32 for the embedded policy)
      quantization="",  # no FP8 matmuls: a CPU only emulates them
      attention="auto",  # the platform's kernel: the xla reference on the CPU
      # Full-parameter training: a 0.4 M-parameter policy's AdamW state is nothing to save (rank > 0: LoRA)
      lora=ml_collections.ConfigDict(dict(rank=0, alpha=32.0, targets=r".*(attn|mlp)")),
    )
  )
  c.rollout = ml_collections.ConfigDict(
    dict(
      prompts_per_step=16,  # B: enough groups per step for some to be non-diverse every step
      group_size=8,  # G = 8 as in the paper: a group has a reward variance to route on (SPEC §1)
      max_new_tokens=96,  # the longest demo solution (4 operations) fits with room to spare
      temperature=1.0,  # sample the policy itself: CISPO's behaviour log-probs are at T = 1
      top_k=0,  # no truncation of the sampling distribution ...
      top_p=1.0,  # ... so the log-probs are the policy's
      compact_every=16,  # finished rows stop costing compute: the live ones move to a smaller batch
      sample_batch=0,  # the step's 16 prompts in one sampler call
      decode_cache="dense",  # 96-token budgets: each row's whole cache is allocated at the prefill
      max_staleness=0,  # the lock-step loop; k ≥ 1: the asynchronous one, trajectories at most k updates stale
      pack_tokens=0,  # the update's rows unpacked: one [prompt | completion] row each (train.packing when > 0)
    )
  )

  c.reward = ml_collections.ConfigDict(
    dict(
      mode="arena_live",  # diverse groups keep the verifier; non-diverse ones go to live tournaments
      topology="",  # the mode's own: `live` (3G − 6 judge calls per group, SPEC §5)
      aggregation="",  # the mode's own: `bt` (Bradley–Terry, SPEC §6); independent of the topology
      max_gen_batches=8,  # only modes with dynamic sampling generate more than one batch per step
      bt_l2=0.1,  # λ of the Bradley–Terry fit: finite strengths even for a player that never lost
      bt_solver="newton",  # the objective is strictly convex for λ > 0: Newton is exact in a few steps
      dedupe_traces=True,  # identical completions share one tournament node: no call between copies
      bt_shrinkage=0.0,  # off: advantages are the z-scored BT rewards, however uncertain the strengths
      live_pipelined=False,  # an arrival's opponents wait for every earlier result: reproducible verdicts
      max_judge_outage_steps=10,  # a judge failing every call for 10 steps in a row stops the run
      std_ddof=0,  # population std of a group's rewards, as in GRPO (SPEC §1)
    )
  )
  # The loop: lock-step, the judge one step behind (pipelined); `rollout.max_staleness` ≥ 1 would run the
  # asynchronous one instead.
  c.lockstep = ml_collections.ConfigDict(
    dict(
      judge_lag=1,  # judge step t while step t + 1 samples: judging hides behind generation
      live_start="step_done",  # judging starts when the step is generated (group_done / speculative: earlier)
      stream_every=0,  # with live_start ≠ step_done: look for finished rows at each cache chunk's end
    )
  )
  c.async_loop = ml_collections.ConfigDict(
    dict(
      push_every=16,  # new weights reach the sampler every 16 decode steps
      judge_backlog=0,  # at most (k + 1) × the host's prompts per step in the judge
      late_judgment="wait",  # a judgment late for its last admissible step is waited for
    )
  )
  # The embedded judge (urls = ()): a rule-based process judge on a free loopback port, started and stopped by
  # the run; the client, jury and server knobs keep their defaults (docs/configuration.md, judge section).
  c.judge = judges.default_config()
  c.judge.update(
    dict(
      backend="pairwise",  # live tournaments compare two traces at a time
      urls=(),  # () = the embedded judge; a real one is a tuple of OpenAI-compatible URLs
      margin=0.4,  # a win scores 0.9, a tie 0.5: decisive verdicts, yet not a hard 0/1 (SPEC §4)
      debias="random",  # a seeded random order per pair cancels position bias at no extra calls
      temperature=0.0,  # the same question gets the same verdict (retries change the seed)
      max_tokens=2048,  # a verdict with its quoted evidence fits
      token_budget=4096,  # the demo's traces are short: none is cut
      transcripts=1.0,  # every judge call on disk (launch.inspect renders them): small at this size
      transcripts_max_mb=1024,  # a bound per host; the oldest transcript parts go first
    )
  )

  c.loss = ml_collections.ConfigDict(
    dict(
      eps_low=1.0,  # no lower clip of the IS weight (CISPO, SPEC §2) ...
      eps_high=4.0,  # ... and a cap of 5, as in ScaleRL
      aggregation="token_mean",  # the formula: every token of the batch weighs the same
      mask_truncated=False,  # a completion cut at 96 tokens has no answer, so reward 0: that is signal too
      kl_coef=0.0,  # no KL penalty, as in the paper (and no frozen copy of the policy in memory)
    )
  )
  c.optim = ml_collections.ConfigDict(
    dict(
      lr=1e-4,  # a 0.4 M-parameter policy moves in 80 steps at this rate (the paper's 8B: 4e-7)
      warmup_steps=5,  # the first updates see the noisiest advantages
      b1=0.9,
      b2=0.99,  # Adam's usual decay rates; b2 = 0.99 adapts within the run's 80 steps
      eps=1e-8,  # Adam's usual ε
      weight_decay=0.0,  # RL from a warm start: nothing to regularise towards zero
      max_grad_norm=1.0,  # one bad batch cannot undo the SFT policy
      micro_batches=1,  # the 16 × 8 rows of a step fit in memory at once
      minibatches=1,  # one on-policy update per step
      min_changed_share=0.5,  # stop if the first update at the peak lr leaves most weights it moves unchanged
    )
  )
  # FSDP over every local device; one device on the demo's CPU.
  c.mesh = parallel.mesh_config(data=1, fsdp=-1, tensor=1)
  c.checkpoint = ml_collections.ConfigDict(
    dict(
      every=20,  # four checkpoints in 80 steps for the evaluator to watch
      keep=3,  # the last three, enough to resume and compare
      save_merged=False,  # LoRA runs only: the merged weights beside the adapters
    )
  )
  c.resume = False  # a fresh run refuses a workdir that already holds checkpoints
  c.resume_allow_changes = ()  # a resume may not change the mode, task, model or batch shape
  c.log = ml_collections.ConfigDict(
    dict(
      progress=True,  # a progress bar with accuracy, loss, routed groups and judge calls
      tensorboard=True,  # event files next to metrics.jsonl
      plot=True,  # curves.png at the end: what `make demo` shows
      samples_per_step=4,  # four completions per step in samples.jsonl: what the policy wrote
      process_checks=64,  # completions per step read by the process checker (process/* metrics)
    )
  )
  c.wandb = ml_collections.ConfigDict(
    dict(
      project="",  # "" = no Weights & Biases; a project name logs there (the `wandb` extra)
      entity="",  # the account's default entity
      name="",  # the workdir's name
      mode="online",  # or "offline": kept in <workdir>/wandb for `wandb sync`
      tags=(),
      tables=True,  # the inspector's tables (groups, judge calls, samples) at the end of the run
    )
  )
  return common.variant(c, arg)


def with_mode(mode: str, arg: str | None = None) -> ml_collections.ConfigDict:
  """This testbed with reward mode `mode` (and the mode's own topology): every configs/arith_<mode>.py is this
  config in another mode, so the runs differ from Reasoning Arena-Live in how they reward, nothing else (SPEC §7)."""
  c = get_config(arg)
  c.reward.mode = mode
  return c
