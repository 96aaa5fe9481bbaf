"""The RL trainer: Reasoning Arena and its baselines end to end (docs/architecture.md, "The loop"; SPEC §1–§7).

The step's stages are `Trainer` methods, each stage's work in its own module (below); `train()` at the bottom
runs them top-down, one phase under each `# ====` banner (set-up, build, restore, judge, step loop, finish).

One step, in the order of the `Trainer` methods that do it, and the module each stage lives in:

    generate (`rollout.Generator`: sampler in jit, verifier on the host)
      → judge (`judging.JudgeRunner`: the mode's groups, in the background)
      → rewards (`rewards.Rewarder`: aggregate the verdicts: Bradley–Terry fit in jit, win rate, rank, rubric)
      → update (`step`: jit: the masked per-group router, group advantages, CISPO, AdamW)
      → record (`step_metrics.StepReporter`: metrics, samples, transcript row) → log → checkpoint

The data that flows between them is `batch.Batch` / `batch.Pending`; the starting policy is
`policy_io.initial_policy`.

With `lockstep.live_start` = group_done / speculative, `generate` streams (`Sampler.stream`): each finished
row is verified on arrival and its group goes to the judge as soon as it can, so judging starts
while other groups still decode. `judge.step_deadline_s` bounds how long the update waits for its rewards.

With `lockstep.judge_lag = 1` the judge works on step t's groups while step t+1 generates; the update
of step t then waits for the judge only if it is slower than generation (`time/judge_wait`). Step t's
completions were sampled with the parameters before update t − 1; CISPO's importance weights against
the recorded behaviour log-probs account for that staleness (SPEC §2). At every checkpoint the
pipeline drains (the step's own judgment is awaited before saving), so a checkpoint holds no pending
work and a resumed run continues exactly as the uninterrupted one would.

Multi-host (docs/tpu.md): each host draws, verifies and judges the groups of its own block of the
global batch; the arrays every update needs are gathered, so every host holds the whole step.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from arena_jax import arena
from arena_jax import judges
from arena_jax import models
from arena_jax import parallel
from arena_jax import rl
from arena_jax import tasks
from arena_jax.sampling import RandomSampling, Sampler
from arena_jax.errors import UserError, WorkdirError
from arena_jax.train import async_loop
from arena_jax.train import checkpoint as checkpoint_lib
from arena_jax.train import judging
from arena_jax.train import packing
from arena_jax.train import rewards as rewards_lib
from arena_jax.train import rollout as rollout_lib
from arena_jax.train import sharding as train_sharding
from arena_jax.train import transcripts as transcripts_lib
from arena_jax.train import step as step_lib
from arena_jax.train import workdir as workdir_lib
from arena_jax.train.batch import Pending
from arena_jax.train.checkpoint import CheckpointError, Checkpointer
from arena_jax.train.config import validate_config
from arena_jax.train import tracking
from arena_jax.train.metrics import MetricsWriter
from arena_jax.train.plot import plot_curves
from arena_jax.train.policy_io import LORA_FILE, initial_policy, write_lora_spec, write_policy_spec
from arena_jax.train.rewards import JudgeOutageError  # noqa: F401  (raised by the loop; callers catch it here)
from arena_jax.train.step_metrics import StepReporter


class NonFiniteLossError(UserError, FloatingPointError):
  """The loss went NaN or infinite; the message names the last good checkpoint and what to change."""


class Trainer:
  """The pieces of one run and the arrows of one step; `train()` below is the loop.

  `config` must have passed `validate_config` (train() does it once, before anything is built).
  """

  def __init__(self, config, workdir: str):
    self.config, self.workdir = config, workdir
    self.mode = rl.get_mode(config.reward.mode, aggregation=config.reward.aggregation)
    self.topology = config.reward.topology or self.mode.topology
    r = config.rollout
    self.b, self.g = r.prompts_per_step, r.group_size

    # ==================================================================================================
    # Data: each host draws its own block of the global batch, in an order of its own seed.
    # ==================================================================================================
    self.task = tasks.get_task(config.tasks.train_task, config.tasks)
    self.block = parallel.host_block(self.b)
    self.iterator = tasks.PromptIterator(
      tasks.load_split(config.tasks, config.tasks.train_task, "train"),
      self.block.stop - self.block.start,
      seed=config.data_seed,
    )

    # ==================================================================================================
    # Mesh and policy (float32 masters by default, placed on the train mesh), then the sampler.
    # ==================================================================================================
    self.mesh, sample_mesh = parallel.make_meshes(config.mesh)
    rules = parallel.axis_rules(config.mesh.rules)
    self.policy = initial_policy(config, workdir, self.mesh, rules)
    tok = self.policy.tokenizer
    if parallel.is_main_process():  # what checkpoint-driven evaluation needs besides the params
      write_policy_spec(workdir, self.policy.config, tok, add_bos=self.policy.add_bos, tasks_config=config.tasks)
    # Topologies that compare against an anchor need one member of each group decoded greedily (SPEC §5).
    anchored = self.mode.judge_form == "pairwise" and arena.SCHEDULERS[self.topology].needs_anchor
    # The sampler decodes a copy of the masters in the compute dtype, cast once per step (`shard_params`).
    self.sampler = Sampler(
      config=models.sampling_config(self.policy.config).replace(attention=config.model.attention),
      max_new_tokens=r.max_new_tokens,
      num_samples=self.g,
      method=RandomSampling(temperature=r.temperature, top_k=r.top_k or None, top_p=r.top_p),
      stop_tokens=(tok.eos_id,),
      pad_id=tok.pad_id,
      mesh=sample_mesh,
      rules=rules,
      greedy_first=anchored,
      compact_every=r.compact_every,
      decode_cache=r.decode_cache,
    )

    # ==================================================================================================
    # Optimizer, train state and the update's program.
    # ==================================================================================================
    # What the update reads of the config, taken once: its program's key and all that its tracing reads.
    self.update_spec = step_lib.UpdateSpec.from_config(config, temperature=self.sampler.logprob_temperature)
    self.optimizer = self.update_spec.optimizer()
    self.schedule = step_lib.make_schedule(config.optim)
    packed = r.pack_tokens > 0  # packed update rows (`train.packing`): one block per micro-batch and batch shard
    # The asynchronous loop marks the tokens an older policy sampled (`Rollout.stale`): reported, not trained on.
    self.stale = config.rollout.max_staleness > 0
    # LoRA (`model.lora.rank` > 0, `models.lora`): the state trains adapters on the frozen base.
    self.lora = self.update_spec.lora
    self.shardings = train_sharding.train_shardings(
      self.policy.config, self.optimizer, self.mesh, rules, packed=packed, stale=self.stale, lora=self.lora
    )
    self.batch_shards = parallel.batch_shards(self.mesh, rules)
    use_ref = self.update_spec.use_reference
    # Only the update rematerialises (`model.remat`) and quantizes (`model.quantization`); both programs use
    # `model.attention`'s kernel.
    update_model = self.policy.config.replace(
      remat=config.model.remat, quantization=config.model.quantization, attention=config.model.attention
    )
    if self.lora is not None:
      # The base is never donated (the state holds the adapters): the update's ref_params, the policy's frozen
      # weights and its KL reference at once, without a copy.
      self.ref_params = jax.device_put(self.policy.params, self.shardings.base)
      adapters = models.init_adapters(models.lora_template(update_model, self.lora), seed=config.seed)
      self.state = train_sharding.init_train_state(adapters, self.optimizer, self.shardings)
      self._merge = jax.jit(functools.partial(models.merge_adapters, spec=self.lora), out_shardings=self.shardings.base)
      if parallel.is_main_process():
        write_lora_spec(workdir, self.lora, config)
    else:
      if parallel.is_main_process() and os.path.exists(os.path.join(workdir, LORA_FILE)):
        os.remove(os.path.join(workdir, LORA_FILE))  # a full run's checkpoints are no adapters: readers must know
      # A frozen copy, placed like the params: the live params are donated to the update.
      self.ref_params = (
        jax.device_put(jax.tree.map(jnp.copy, self.policy.params), self.shardings.state.params) if use_ref else None
      )
      self.state = train_sharding.init_train_state(self.policy.params, self.optimizer, self.shardings)
    # An equal run in this process (same spec, model, mesh and layout) reuses the program (`program_cache`).
    self.update_fn = train_sharding.shared_train_step_fn(
      self.update_spec, update_model, self.mesh, rules, shardings=self.shardings, packed=packed, stale=self.stale
    )
    self.checkpointer = Checkpointer(
      os.path.join(workdir, "checkpoints"), keep=config.checkpoint.keep, cleanup_tmp=True
    )

    # ==================================================================================================
    # The stages around the update: the rollout, the rewards of its judgment, the step's report.
    # ==================================================================================================
    self.generator = rollout_lib.Generator(
      config, self.mode, self.task, self.iterator, self.block, self.sampler, tok, self.policy.add_bos
    )
    self.rewarder = rewards_lib.Rewarder(config, self.mode, self.block, self.checkpointer.directory)
    self.reporter = StepReporter(config, self.mode, self.task, self.block, tok, self.schedule, self.topology)
    self.verified_steps: set[int] = set()  # restored and verified, or saved (finite) by this process
    self.judge_runner: judging.JudgeRunner | None = None  # train() starts it (a judged mode), after the restore
    self.transcripts: transcripts_lib.TranscriptWriter | None = None  # train() opens it (judge.transcripts > 0)
    self.update_checked = False  # `step.check_update_moves` ran (at the first update at the peak lr)
    self.history: list[dict] = []

  # ── restore and save ──

  def restore(self) -> int:
    """The step to start from: 0, or with `resume` the newest checkpoint that restores and passes
    verification (`Checkpointer.restore`: manifest, finite values), its state and data order restored.

    Newer steps that fail are reported with the reason and set aside as `<step>.damaged` (kept on disk),
    so the resumed run can save those steps again. When no step restores nothing is moved and the run
    stops with CheckpointError listing each step's reason.
    """
    latest = self.checkpointer.latest_step()
    if not self.config.resume and latest is not None:
      raise WorkdirError(
        f"{self.checkpointer.directory} already holds checkpoints up to step {latest}: pass "
        "--config.resume=True to continue that run, or choose a new --workdir"
      )
    if not self.config.resume or latest is None:
      return 0
    # Each device reads only its shards, onto this run's mesh (which may differ from the saving run's).
    target = train_sharding.abstract_train_state(self.policy.config, self.optimizer, self.shardings, lora=self.lora)
    bad: list[tuple[int, str]] = []
    for step in reversed(self.checkpointer.all_steps()):
      reason = None
      try:
        state, meta = self.checkpointer.restore(step, target)
        self.iterator.restore(meta["iterator"])
      except CheckpointError as e:
        reason = str(e)
      except (KeyError, TypeError, ValueError) as e:  # a meta record that is not this code's
        reason = f"checkpoint step {step} in {self.checkpointer.directory}: its meta is unusable ({e!r:.200})"
      # Every host must take the same step: one host's failure fails the step for all.
      if int(parallel.host_sum(np.asarray(int(reason is not None)))):
        bad.append((step, reason or f"checkpoint step {step}: another host could not restore it"))
        continue
      self.state = state
      self.verified_steps.add(step)
      # The asynchronous loop's work in flight at the checkpoint (`async_loop`): served before the iterator's.
      requeue = meta.get("requeue") or []
      if requeue:
        self.generator.requeue = [async_loop.example_from_json(d) for d in requeue[jax.process_index()]]
      if bad:
        self._set_aside(bad, step)
      print(f"resumed from step {step} ({self.checkpointer.directory})", flush=True)
      return int(step)
    raise CheckpointError(
      f"no checkpoint in {self.checkpointer.directory} restores: "
      + "; ".join(r for _, r in bad)
      + ". Nothing was moved; start a new run in a fresh --workdir (or restore the files from a copy)"
    )

  def _set_aside(self, bad: list[tuple[int, str]], good: int) -> None:
    """Reports the newer steps that failed and renames them `<step>.damaged` (main process)."""
    for step, reason in bad:
      moved = self.checkpointer.set_aside(step) if parallel.is_main_process() else "<step>.damaged"
      msg = (
        f"{reason}: falling back to step {good}, the newest checkpoint that restores and verifies; "
        f"the damaged step was moved to {moved}"
      )
      print(msg, flush=True)
    parallel.barrier("checkpoint_set_aside")
    self.checkpointer.reload()

  def save(self, step: int, iterator_state, extra: dict | None = None) -> None:
    """Checkpoint after `step` optimizer steps; `iterator_state` = the iterator right after that step's
    prompts were drawn (with judge_lag = 1 the next step's may already have been drawn); `extra`: more
    meta (the asynchronous loop's `requeue`)."""
    meta = {
      "step": step,
      "iterator": iterator_state.to_dict(),
      "seed": self.config.seed,
      "config": self.config.to_json_best_effort(),
      **(extra or {}),
    }
    bad = checkpoint_lib.non_finite_leaves(self.state)
    if bad:  # the update made the state non-finite although its loss was finite: never save that
      raise NonFiniteLossError(
        f"the train state after step {step} holds non-finite values ({', '.join(bad[:3])}); it was not saved. "
        + self.good_checkpoint_hint()
      )
    merged = self.policy_params() if self.lora is not None and self.config.checkpoint.save_merged else None
    self.checkpointer.save(step, self.state, meta, merged=merged)
    self.verified_steps.add(step)

  def time_to_save(self, step: int) -> bool:
    """Is it time to checkpoint after `step` updates: every `checkpoint.every` and at the last step (both loops;
    a stop saves too)."""
    return step % self.config.checkpoint.every == 0 or step == self.config.num_steps

  def good_checkpoint_hint(self) -> str:
    """Names the newest checkpoint that passed verification (restored by this process, or saved by it
    with finite values) and whose files still match their manifest, and how to resume from it."""
    ckpt = self.checkpointer
    ckpt.reload()
    for step in sorted(self.verified_steps & set(ckpt.all_steps()), reverse=True):
      if checkpoint_lib.manifest_problem(ckpt.step_dir(step)) is None:
        return (
          f"The last verified checkpoint is step {step} in {ckpt.directory}; lower optim.lr or check the "
          "rewards, then resume from it with --config.resume=True"
        )
    return (
      f"No checkpoint in {ckpt.directory} passed verification in this run: lower optim.lr or check the "
      "rewards and start again in a fresh --workdir"
    )

  # ── generate → verify ──

  @property
  def streams(self) -> bool:
    """Judging starts while the step decodes (`lockstep.live_start` ≠ step_done, a judged mode)."""
    return self.mode.uses_judge and self.config.lockstep.live_start != "step_done" and self.judge_runner is not None

  def generate(self, step: int) -> Pending:
    """Step `step`'s groups (`rollout.Generator.generate`), sampled from a compute-dtype copy of the current
    policy (`Sampler.shard_params`, cast once per step after the last update)."""
    judgment = self.judge_runner.open(step, self.g) if self.streams else None
    return self.generator.generate(step, self.sampler.shard_params(self.policy_params()), judgment)

  def policy_params(self):
    """The policy's weights now: the trained params, or a LoRA run's base with its adapters merged in (once per
    step, one jitted program: W + (α/r)·A·B, laid out like the base). The sampler decodes the merged weights: see
    benchmarks/lora_sampling.py for merged against applied on the fly."""
    if self.lora is None:
      return self.state.params
    return self._merge(self.ref_params, self.state.params)

  # ── judge → rewards ──

  def judge(self, pending: Pending) -> None:
    """Sends this host's groups that the mode judges to the judge, in the background (with
    `lockstep.live_start` ≠ step_done they were sent during `generate`: this closes the step's judgment)."""
    if self.judge_runner is None:
      return
    if pending.judgment is not None:  # streamed: every judged group was sent as it finished decoding
      pending.judgment.close()
      return
    local = pending.local
    jobs = []
    for i in np.flatnonzero(self.mode.select(local.diverse)):
      order = np.lexsort((np.arange(self.g), local.completion_step[i * self.g : (i + 1) * self.g]))  # arrival
      ex = local.examples[i]
      jobs.append(
        judging.GroupJob(
          self.block.start + int(i),
          self.task.judge_question(ex),
          self.task.reference_answer(ex),
          local.texts[i * self.g : (i + 1) * self.g],
          order,
          ex,
        )
      )
    pending.judgment = self.judge_runner.submit(pending.step, jobs, self.g)

  def rewards(self, pending: Pending) -> tuple[step_lib.StepRewards, dict]:
    """The step's `StepRewards` (`rewards.Rewarder`), placed for the update (replicated: they are small)."""
    rewards, m = self.rewarder(pending)
    return jax.device_put(rewards, self.shardings.replicated), m

  # ── update (advantages inside) ──

  def update(self, pending: Pending, rewards: step_lib.StepRewards) -> dict:
    """`optim.minibatches` jitted updates, each routing and computing the advantages of its rows in the
    jit (SPEC §1–§3) before the CISPO loss and the AdamW step."""
    return self.update_values(pending, *self.dispatch_update(pending, rewards))

  def dispatch_update(self, pending: Pending, rewards: step_lib.StepRewards, stale=None) -> tuple[list, list]:
    """Starts the step's updates (jitted, dispatched without waiting: the asynchronous loop samples
    meanwhile); returns their metrics as device values and the packed rows' fill. `stale`: the staleness mask
    [rows, N] of the asynchronous loop (`Rollout.stale`)."""
    rollout = pending.batch.rollout()
    if stale is not None:
      rollout = rollout._replace(stale=np.asarray(stale, bool))
    parts = self.config.optim.minibatches
    pack_tokens = self.config.rollout.pack_tokens
    values, fill = [], []
    for k in range(parts):
      mb = jax.tree.map(lambda x: x.reshape((parts, -1) + x.shape[1:])[k], rollout)
      if pack_tokens:  # on the host, identically on every host (each holds the whole step)
        mb = packing.pack_rollout(
          jax.tree.map(np.asarray, mb),
          pack_tokens=pack_tokens,
          micro_batches=self.config.optim.micro_batches,
          shards=self.batch_shards,
        )
        fill.append(packing.packed_fill(mb.packed))
      self.state, v = self.update_fn(
        self.state, jax.device_put(mb, self.shardings.rollout), self.ref_params, rewards, np.int32(k)
      )
      values.append(v)
    return values, fill

  def update_values(self, pending: Pending, values: list, fill: list) -> dict:
    """The dispatched updates' metrics (`dispatch_update`), read back (waiting for them); checks the loss
    and, at the first update at the peak learning rate, that the weights moved."""
    values = [parallel.read_replicated(v) for v in values]
    parts = self.config.optim.minibatches
    rows = {k: values[0].pop(k) for k in list(values[0]) if k.startswith("rows/")}  # the same in every minibatch
    for v in values[1:]:
      for k in rows:
        del v[k]
    out = {k: float(np.mean([v[k] for v in values])) for k in values[0]}
    out.update(rows)
    if fill:  # the share of the packed rows' slots that hold tokens (the rest is padding): to tune pack_tokens
      out["update/pack_fill"] = float(np.mean(fill))
    if not math.isfinite(out["loss"]):
      raise NonFiniteLossError(
        f"non-finite loss {out['loss']} at step {pending.step + 1} (metrics.jsonl holds every step before it). "
        + self.good_checkpoint_hint()
      )
    o = self.config.optim
    lr = float(self.schedule(pending.step * parts))  # the first update of the step
    if not self.update_checked and lr >= o.lr * (1 - 1e-6):  # warm-up steps are small by design
      self.update_checked = step_lib.check_update_moves(
        values[0], lr=lr, optim=o, weight_dtype=self.policy.config.param_dtype, step=pending.step + 1
      )
    return out

  def apply(self, pending: Pending) -> tuple[dict, list[dict]]:
    """rewards → update for a generated step; returns the step's metrics and a sample of its completions."""
    t0 = time.perf_counter()
    rewards, m = self.rewards(pending)
    t1 = time.perf_counter()
    m.update(self.update(pending, rewards))
    t2 = time.perf_counter()
    gen = pending.generation
    return self.step_metrics(pending, rewards, m, update_s=t2 - t1, step_s=t2 - t0 + gen.sample_s + gen.verify_s)

  def step_metrics(
    self, pending: Pending, rewards: step_lib.StepRewards, m: dict, *, update_s: float, step_s: float
  ) -> tuple[dict, list[dict]]:
    """The step's metrics and sample of completions (`step_metrics.StepReporter`); writes its transcript row."""
    return self.reporter(pending, rewards, m, update_s=update_s, step_s=step_s, transcripts=self.transcripts)


class _StopFlag:
  """SIGTERM / SIGINT set a flag; the loop checkpoints at the end of the step and exits cleanly."""

  def __init__(self):
    self.requested = False  # this process got a signal
    self.now = False  # some process got one (set by `poll`): every host stops at the same step
    self._previous = {}

  def poll(self) -> bool:
    self.now = bool(parallel.host_sum(np.asarray(int(self.requested))))
    return self.now

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGTERM, signal.SIGINT):
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def _handle(self, signum, frame):
    del frame
    self.requested = True
    print(f"\nreceived signal {signum}: finishing this step, saving a checkpoint, then stopping", flush=True)

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)


class _Chrono:
  """The wall-clock time between two steps' records, overlap included (`time/wall`)."""

  def __init__(self):
    self.last = time.perf_counter()

  def lap(self) -> float:
    now = time.perf_counter()
    elapsed, self.last = now - self.last, now
    return elapsed


class _StepLog:
  """The log phase of a step (both loops): its metrics and samples written, kept in `history`, on the progress bar."""

  def __init__(self, writer: MetricsWriter, progress, history: list, mode):
    self.writer, self.progress, self.history, self.mode = writer, progress, history, mode

  def __call__(self, step: int, m: dict, samples: list) -> None:
    self.writer.write(step, m)
    self.writer.write_samples(step, samples)
    self.history.append({"step": step, **m})
    if self.progress is not None:
      self.progress.update(1)
      post = {"acc": f"{m['accuracy']:.2f}", "loss": f"{m['loss']:.3f}"}
      if self.mode.uses_judge:
        post.update(routed=f"{m['groups/routed']:.2f}", calls=m["judge/calls"])
      self.progress.set_postfix(post)


def _check_resume(config, workdir: str) -> None:
  """With `resume`, refuses a config that changes what the workdir's run trains (`workdir.GUARDED_FIELDS`);
  read from the newest checkpoint whose meta reads, before anything is built or written."""
  directory = os.path.join(workdir, "checkpoints")
  if not config.resume or not os.path.isdir(directory):
    return
  ckpt = Checkpointer(directory)
  try:
    for step in reversed(ckpt.all_steps()):
      try:
        meta = ckpt.read_meta(step)
      except CheckpointError:
        continue  # restore() reports it (and falls back past it)
      workdir_lib.check_resume_config(meta.get("config") if isinstance(meta, dict) else None, config, workdir)
      return
  finally:
    ckpt.close()


# ==============================================================================================================
# The loop
# ==============================================================================================================


def train(config, workdir: str) -> dict:
  """Runs RL from `config` in `workdir`; returns a summary (steps, last metrics, paths).

  One pass from top to bottom, in phases under banners (as big_vision's `train()`): set-up, build, restore, the
  judge, the step loop (generate → judge → rewards → update → log → checkpoint), finish. The step loop is the
  lock-step one here, or with `rollout.max_staleness` ≥ 1 the asynchronous one (`async_loop.AsyncLoop`).
  """
  c = config
  # ============================================================================================================
  # Set-up: fail fast, before the policy is loaded or anything compiles.
  # ============================================================================================================
  parallel.initialize(c.mesh.distributed)  # multi-host: before anything touches the devices
  validate_config(c)
  tracking.check_available(c)  # W&B asked for without its package: a one-line error naming the extra
  mode = rl.get_mode(c.reward.mode)
  if mode.uses_judge:
    judges.check_judge_urls(c.judge)  # a configured judge that does not answer stops the run now
  main = parallel.is_main_process()
  with contextlib.ExitStack() as run:
    if main:  # one trainer per workdir, for its whole life (released by the kernel however the process ends)
      run.callback(workdir_lib.WorkdirLock(workdir).acquire().release)
    _check_resume(c, workdir)
    # A mode that judges launches the embedded judge (when no URL is configured) now: its process imports while
    # the policy is built, and `judge_urls()` waits for it only when the loop starts.
    endpoints = judges.launched_judge_endpoints(c.judge) if mode.uses_judge else contextlib.nullcontext(tuple)
    judge_urls = run.enter_context(endpoints)

    # ==========================================================================================================
    # Build: data, mesh, policy, sampler, optimizer and the update's program (`Trainer`).
    # ==========================================================================================================
    trainer = Trainer(c, workdir)

    # ==========================================================================================================
    # Restore: the newest checkpoint that verifies (with `resume`); the logs continue from its step.
    # ==========================================================================================================
    start = trainer.restore()
    tracker = tracking.open_tracker(c, workdir, resume=bool(c.resume), enabled=main)  # W&B, when a project is named
    run.callback(lambda: tracker is not None and tracker.abort())  # a run that fails ends it too
    writer = MetricsWriter(
      workdir, resume_step=start if c.resume else None, tensorboard=c.log.tensorboard, enabled=main, tracker=tracker
    )
    if mode.uses_judge and c.judge.transcripts > 0:
      trainer.transcripts = transcripts_lib.open_for_run(
        c, workdir, mode=mode.name, topology=trainer.topology, start_step=start
      )
    progress = (
      tqdm(total=c.num_steps, initial=start, desc=f"RL {mode.name}", unit="step", dynamic_ncols=True)
      if c.log.progress and main
      else None
    )
    log_step = _StepLog(writer, progress, trainer.history, mode)
    chrono = _Chrono()
    try:
      with _StopFlag() as stop:
        # ======================================================================================================
        # The judge: each host sends its own groups to its share of the servers.
        # ======================================================================================================
        if mode.uses_judge:
          trainer.judge_runner = judging.JudgeRunner(
            c.judge,
            parallel.host_judge_urls(judge_urls()),
            mode,
            topology=trainer.topology,
            seed=c.seed,
            dedupe=c.reward.dedupe_traces,
            transcripts=trainer.transcripts,
            live_pipelined=c.reward.live_pipelined,
          )

        # ======================================================================================================
        # The step loop: generate → judge → rewards → update → log → checkpoint.
        # ======================================================================================================
        if c.rollout.max_staleness:  # the sampler works ahead, at most k updates stale (`async_loop`)
          async_loop.AsyncLoop(trainer, log_step, stop).run(start)
        else:  # lock-step: step t is applied while step t + 1's judgment may still run (lockstep.judge_lag = 1)
          pending = None  # generated, judged in the background, not yet applied
          for step in range(start, c.num_steps):
            current = trainer.generate(step)  # sample → verify (→ judge as groups finish, with live_start)
            trainer.judge(current)  # route → judge, in the background
            if pending is not None and _record(trainer, pending, log_step, chrono, stop):
              break  # `current` is dropped: a resume regenerates it from the saved iterator state
            pending = current
            # The pipeline drains: in turn (judge_lag = 0), before a checkpoint, at the last step, at a stop.
            if c.lockstep.judge_lag == 0 or trainer.time_to_save(step + 1) or stop.poll():
              pending = None
              if _record(trainer, current, log_step, chrono, stop):
                break
    finally:
      if trainer.judge_runner is not None:
        trainer.judge_runner.close()
      if trainer.transcripts is not None:
        trainer.transcripts.close()  # after the judge: its last groups are queued by then
      if progress is not None:
        progress.close()
      writer.close()
      trainer.checkpointer.close()

    # ==========================================================================================================
    # Finish: the summary, and the curves.
    # ==========================================================================================================
    summary = {
      "workdir": workdir,
      "steps": trainer.history[-1]["step"] if trainer.history else start,
      "last": trainer.history[-1] if trainer.history else {},
      "interrupted": stop.now,
    }
    if c.log.plot and trainer.history and main:
      summary["plot"] = plot_curves(workdir)
    if tracker is not None:
      tracker.finish(summary)
    return summary


def _record(trainer: Trainer, pending: Pending, log_step: _StepLog, chrono: _Chrono, stop: _StopFlag) -> bool:
  """A generated step's rewards → update → log → checkpoint (lock-step loop); True when the run must stop after it."""
  stop.poll()  # a signal on any host stops every host after this step (the loop stays in lockstep)
  m, samples = trainer.apply(pending)
  m["time/wall"] = chrono.lap()  # wall-clock between optimizer steps (overlap included)
  step = pending.step + 1
  log_step(step, m, samples)
  if trainer.time_to_save(step) or stop.now:
    trainer.save(step, pending.iterator_after)
  return stop.now
