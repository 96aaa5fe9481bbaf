"""The asynchronous RL loop: `rollout.max_staleness` = k ≥ 1 (docs/architecture.md "The asynchronous loop";
SPEC §2 for the importance weights that make it correct).

The sampler works ahead of the update on the same devices, interleaved on one thread: the update of step s
is dispatched (jitted, not waited for) and the sampler's next decode segments run while it computes. Every
`async_loop.push_every` decode steps the sampler hands back its finished rows and takes the newest weights
(in-flight updates, as in PipelineRL): each token carries the policy version that chose it, and its recorded
behaviour log-prob is that version's, which is what CISPO's ratio needs (a trajectory written by two
versions is corrected token by token).

Versions count updates: version v = the parameters after v optimizer steps, so step s updates version s.
A trajectory's staleness at step s is s − (the version of its first token); the invariant is
**staleness ≤ k for every trained trajectory**. Three rules keep it, and a fourth fixes the order of the work:

1. The sampler starts a generation batch only when every group of it can be trained within k updates of
   the version it starts under (`_may_start`: the groups already waiting fill the next steps first).
2. A step takes the oldest waiting groups first; a group that would exceed k (possible only when dynamic
   sampling draws more than it keeps) is dropped, counted in `gen/groups_stale`.
3. A routed group whose judgment is not back by its last admissible step is waited for, or under
   `async_loop.late_judgment = zero_advantage` cancelled and trained with zero advantage (`judge/groups_late`).
4. An update just dispatched is taken back only after the sampler's turn: one decode segment (starting the
   next batch first when rule 1 allows it), or none when the sampler has nothing to do. On a TPU the update
   outlasts many segments anyway; on a fast CPU it could finish before the sampler moved, and whether a run
   works ahead at all would depend on the machine's speed.

Batches fill from finished groups: a step is assembled from the first `prompts_per_step` groups (per host:
its block's share) that are ready — verified, and, when the mode routes them to the judge, judged. Under
dynamic sampling (`rlvr_dapo`) a non-diverse group is discarded on arrival, so its generation is paid for;
under the judged modes it goes to the judge as soon as its last member finishes (a one-group tournament or
rubric scoring on the judge's loop, `judging.JudgeRunner`), with at most `async_loop.judge_backlog` groups in the
judge at once.

Faults. A checkpoint is written after the step's update, as in the lock-step loop; its meta records, besides
the iterator's state, the prompts of every group still in flight (waiting, in the judge, being decoded) and
those drawn but not started (`requeue`, per host). A resumed run serves them first: no prompt is lost or
drawn twice, no step is lost or applied twice (the optimizer state holds the step). SIGTERM / SIGINT: the
update in flight is finished, checkpointed, and the rest is discarded (its prompts requeued). Multi-host:
every decision of the loop is agreed by a sum over hosts before it is taken, so every host runs the same
sampler segments and updates in the same order; each host judges and assembles its own block's groups.

Each step's metrics add (docs/architecture.md lists them): `staleness/mean`, `staleness/max` and the
histogram `staleness/<i>` (the share of the step's trajectories of staleness i, 0 ≤ i ≤ k), the tokens'
share of older versions (`stale_token_share`) and the importance weights' distance from 1 on them and on the
fresh ones (`ratio_dev/stale`, `ratio_dev/fresh`), `gen/versions_per_trajectory`, `time/judge_wait` (the
loop idle, waiting for judgments), `judge/backlog`, `judge/groups_skipped`, `gen/groups_stale`. A step's
`gen/*` counts and `accuracy` cover the groups it trained and those discarded since the previous step.
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from arena_jax import parallel
from arena_jax import rl
from arena_jax import tasks
from arena_jax.train import judging
from arena_jax.train import step as step_lib
from arena_jax.train.batch import Batch, Generation, Pending

IDLE_S = 0.002  # the loop's sleep while only the judge can make progress


def example_to_json(ex: tasks.Example) -> dict:
  return {**dataclasses.asdict(ex), "numbers": list(ex.numbers)}


def example_from_json(d: dict) -> tasks.Example:
  return tasks.Example(**{**d, "numbers": tuple(d.get("numbers", ()))})


@dataclasses.dataclass
class Arrival:
  """One finished group of this host on its way to an update."""

  seq: int  # arrival order on this host
  part: Batch  # the group (one prompt, G completions, verified)
  version: int  # the policy version of its first tokens (the oldest: later ones can only be newer)
  versions: np.ndarray  # [G, N] the version of each token
  finished_at: float
  gen_index: int = 0  # its generation batch (the judge's seed and transcripts are keyed by it)
  group: int = 0  # its index among every host's groups of that batch
  judgment: judging.StepJudgment | None = None  # routed: its judging, once sent
  job: judging.GroupJob | None = None  # routed, waiting for a place in the judge
  skipped: bool = False  # routed, but trained unjudged (the judge's backlog was full: zero_advantage)


class InFlight(NamedTuple):
  """The step whose update is dispatched and not yet read back (`AsyncLoop._dispatch` → `_finish`)."""

  pending: Pending
  rewards: step_lib.StepRewards
  metrics: dict  # the rewards' metrics; the update's and the step's are added when it is read back
  values: list  # the update's metrics, device values still being computed (`Trainer.dispatch_update`)
  fill: list  # the packed rows' fill of each minibatch
  staleness: np.ndarray  # [groups] of this host: step − the version of each group's first tokens
  versions: np.ndarray  # [trajectories] of this host: the policy versions that wrote each
  dispatched_at: float  # perf_counter when its rewards were computed (the update's time starts there)


class Judgments:
  """The judgments of a step's groups as one step judgment (what `rewards.Rewarder` reads): each group was
  judged on its own, under its generation batch's index; here they take their positions in the step."""

  def __init__(self, parts: list[tuple[int, judging.StepJudgment]]):
    self.parts = parts  # (the group's index in the step's batch, its judgment)
    done = [j.finished_at for _, j in parts if j.finished_at is not None]
    self.finished_at = max(done) if done else None
    started = [j.started_at for _, j in parts if j.started_at is not None]
    self.started_at = min(started) if started else None

  def result(self, timeout: float | None = None) -> judging.JudgeOutcome:
    del timeout  # every part is back (or was cut) before the step is assembled
    out = judging.JudgeOutcome([])
    for index, judgment in self.parts:
      out.extend(judgment.result(), index)  # every field of the outcome (`JudgeOutcome.extend`)
    return out


class _Batch:
  """One generation batch being decoded (every host's prompts, this host's groups collected as they finish)."""

  def __init__(self, loop: "AsyncLoop", index: int, examples: list):
    self.loop, self.index, self.examples = loop, index, examples
    gen, g = loop.generator, loop.g
    n_local = loop.n_local
    tokens, lengths = gen.prompt_tokens(examples)
    self.prompt_tokens, self.prompt_lengths = tokens, lengths
    n = loop.config.rollout.max_new_tokens
    rows = n_local * g
    self.tokens = np.zeros((rows, n), np.int32)
    self.logprobs = np.zeros((rows, n), np.float32)
    self.lengths = np.zeros(rows, np.int32)
    self.truncated = np.zeros(rows, bool)
    self.steps = np.zeros(rows, np.int64)
    self.versions = np.zeros((rows, n), np.int32)
    self.texts: list = [None] * rows
    self.verifier = np.zeros((n_local, g), np.float32)
    self.arrived = np.zeros((n_local, g), bool)
    self.emitted = np.zeros(n_local, bool)
    rng = jax.random.fold_in(jax.random.fold_in(jax.random.key(loop.config.seed), index), 0)
    self.chunks = self._chunks(rng)

  def _chunks(self, rng):
    """Every call's chunks (`Generator.calls`), each call with its own record of the versions it used."""
    loop, g = self.loop, self.loop.g
    for c in loop.generator.calls(len(self.prompt_tokens)):
      params = loop.sampler_params()
      log = [(0, loop.sampler_version)]  # (first completion position, version): the prefill's is position 0

      def refresh(first, log=log):
        if not loop.config.async_loop.push_every or loop.sampler_version == loop.version:
          return None
        params = loop.sampler_params()
        log.append((first, loop.sampler_version))
        return params

      stream = loop.sampler.stream(
        params,
        (self.prompt_tokens[c], self.prompt_lengths[c]),
        rng,
        every=loop.config.async_loop.push_every,
        row_offset=c.start * g,
        refresh=refresh,
      )
      for chunk in stream:
        yield chunk, c.start * g, log

  def advance(self) -> bool:
    """Decodes one segment; returns False when the batch is done."""
    loop = self.loop
    t0 = time.perf_counter()
    try:
      chunk, offset, log = next(self.chunks)
    except StopIteration:
      return False
    t1 = time.perf_counter()
    loop.interval.sample_s += t1 - t0
    g, first = loop.g, loop.block.start
    rows = chunk.rows + offset
    mine = (rows >= first * g) & (rows < loop.block.stop * g)
    if mine.any():
      local = rows[mine] - first * g
      starts = np.asarray([p for p, _ in log])
      vers = np.asarray([v for _, v in log], np.int32)
      position_version = vers[np.searchsorted(starts, np.arange(self.tokens.shape[1]), side="right") - 1]
      tokens, lengths = chunk.tokens[mine], chunk.lengths[mine]
      texts = loop.tokenizer.decode_batch(tokens, lengths)
      rewards = np.asarray(loop.task.verify_batch([self.examples[r // g] for r in local], texts), np.float32)
      self.tokens[local], self.logprobs[local] = tokens, chunk.logprobs[mine]
      self.lengths[local], self.truncated[local] = lengths, chunk.truncated[mine]
      self.steps[local], self.versions[local] = chunk.completion_step[mine], position_version
      self.verifier.reshape(-1)[local], self.arrived.reshape(-1)[local] = rewards, True
      for j, r in enumerate(local):
        self.texts[r] = texts[j]
      for b in np.flatnonzero(self.arrived.all(-1) & ~self.emitted):
        self.emitted[b] = True
        loop.arrive(self._group(int(b)))
      loop.interval.verify_s += time.perf_counter() - t1
    return True

  def _group(self, b: int) -> Arrival:
    loop, g = self.loop, self.loop.g
    rows = slice(b * g, (b + 1) * g)
    gb = loop.block.start + b  # its prompt among every host's
    part = Batch(
      [self.examples[b]],
      self.texts[rows],
      self.prompt_tokens[gb : gb + 1],
      self.prompt_lengths[gb : gb + 1],
      self.tokens[rows],
      self.logprobs[rows],
      self.lengths[rows],
      self.truncated[rows],
      self.steps[rows],
      self.verifier[b : b + 1],
      np.asarray(rl.is_diverse(self.verifier[b : b + 1])),
    )
    versions = self.versions[rows]
    return Arrival(loop.next_seq(), part, int(versions[:, 0].min()), versions, time.perf_counter(), self.index, gb)

  def unstarted(self) -> list:
    """The prompts of this host whose groups have not finished (requeued at a stop or a checkpoint)."""
    return [ex for b, ex in enumerate(self.examples) if not self.emitted[b]]


class AsyncLoop:
  """Runs steps [start, num_steps) of `trainer` asynchronously (module docstring). `log_step(step, m,
  samples)` writes a step's metrics; `stop` is the loop's `_StopFlag`."""

  def __init__(self, trainer, log_step, stop):
    self.trainer, self.log_step, self.stop = trainer, log_step, stop
    c = self.config = trainer.config
    self.generator, self.sampler, self.mode = trainer.generator, trainer.sampler, trainer.mode
    self.task, self.tokenizer, self.block = trainer.task, trainer.policy.tokenizer, trainer.block
    self.g, self.k = trainer.g, c.rollout.max_staleness
    self.n_local = self.block.stop - self.block.start
    self.backlog_limit = c.async_loop.judge_backlog or (self.k + 1) * self.n_local
    self.ready: list[Arrival] = []
    self.judging: list[Arrival] = []  # sent to the judge, not back
    self.queued: list[Arrival] = []  # routed, waiting for a place in the judge (late_judgment = wait)
    self.current: _Batch | None = None
    self.gen_index = 0
    self._seq = 0
    self.version = 0
    self.sampler_version = -1
    self._sampler_params = None
    self.interval = Generation()  # what was generated and discarded since the last step
    self.discarded: list[Batch] = []
    self.counters = dict(stale=0, skipped=0)
    self.judge_wait = 0.0
    self.inflight: InFlight | None = None
    self.sampler_turn = False  # set at each dispatch: rule 4 of the module docstring
    self.last_end = time.perf_counter()

  # ── the sampler's weights ──

  def sampler_params(self):
    """The sampler's copy of the newest weights (cast and placed by `Sampler.shard_params`; never the train
    state's own buffers, which the next update donates)."""
    if self.sampler_version != self.version:
      params = self.sampler.shard_params(self.trainer.policy_params())  # a LoRA run's: merged onto the base
      own = {id(x) for x in jax.tree.leaves(self.trainer.state.params)}
      self._sampler_params = jax.tree.map(lambda x: jnp.copy(x) if id(x) in own else x, params)
      self.sampler_version = self.version
    return self._sampler_params

  def next_seq(self) -> int:
    self._seq += 1
    return self._seq

  # ── arrivals and the judge ──

  def arrive(self, a: Arrival) -> None:
    """A group finished: discarded (dynamic sampling, non-diverse), ready, or routed to the judge."""
    diverse = a.part.diverse
    if not self.mode.keep(diverse)[0]:
      self.discarded.append(a.part)
      return
    if self.trainer.judge_runner is None or not self.mode.select(diverse)[0]:
      self.ready.append(a)
      return
    ex = a.part.examples[0]
    order = np.lexsort((np.arange(self.g), a.part.completion_step))
    a.job = judging.GroupJob(
      a.group,
      self.task.judge_question(ex),
      self.task.reference_answer(ex),
      a.part.texts,
      order,
      ex,
    )
    self.queued.append(a)
    self._feed_judge()

  def _feed_judge(self) -> None:
    """Moves the judgments that came back to `ready`, and sends queued groups while the backlog has room."""
    back = [a for a in self.judging if a.judgment.done()]
    if back:
      self.judging = [a for a in self.judging if not a.judgment.done()]
      self.ready.extend(back)
    while self.queued:
      if len(self.judging) >= self.backlog_limit:
        if self.config.async_loop.late_judgment != "zero_advantage":
          return
        a = self.queued.pop(0)  # no place in the judge: trained unjudged (its advantage is zero)
        a.skipped, a.job = True, None
        self.counters["skipped"] += 1
        self.ready.append(a)
        continue
      a = self.queued.pop(0)
      a.judgment = self.trainer.judge_runner.submit(a.gen_index, [a.job], self.g)
      a.job = None
      self.judging.append(a)

  def _resolve_due(self, step: int, waited: float) -> bool:
    """Groups in (or waiting for) the judge that `step` is the last update allowed to train: True when the
    step must wait for them. Under zero_advantage (or past `judge.step_deadline_s` of waiting) their
    judgments are cancelled (`judge/groups_late`) and they train unjudged."""
    due = [a for a in self.judging + self.queued if a.version + self.k <= step]
    if not due:
      return False
    deadline = self.config.judge.step_deadline_s
    if self.config.async_loop.late_judgment == "wait" and not (deadline and waited >= deadline):
      return True
    for a in due:
      if a.judgment is not None:
        a.judgment.result(timeout=0.0)  # cancels what is still running: counted late
        self.judging.remove(a)
      else:
        self.queued.remove(a)
        a.skipped, a.job = True, None
        self.counters["skipped"] += 1
      self.ready.append(a)
    return False

  # ── the sampler's pace ──

  def outstanding(self) -> int:
    """This host's groups kept for training and not yet trained."""
    return len(self.ready) + len(self.judging) + len(self.queued)

  def _may_start(self) -> bool:
    """A new generation batch may start: its groups, queued behind the waiting ones, are all trained by the
    update k versions after the current one (rule 1 of the module docstring), and some step still needs them."""
    next_step = self.version + (self.inflight is not None)
    needed = (self.config.num_steps - next_step) * self.n_local
    if self.outstanding() >= needed:
      return False
    room = (self.k - (next_step - self.version) + 1) * self.n_local
    return self.outstanding() + self.n_local <= room

  # ── steps ──

  def _assemble(self, step: int) -> list[Arrival] | None:
    """The oldest ready groups of this host for `step`, or None when it has too few (rule 2)."""
    fresh = [a for a in self.ready if step - a.version <= self.k]
    self.counters["stale"] += len(self.ready) - len(fresh)
    self.discarded += [a.part for a in self.ready if step - a.version > self.k]
    self.ready = sorted(fresh, key=lambda a: (a.version, a.seq))
    if len(self.ready) < self.n_local:
      return None
    return self.ready[: self.n_local]

  def _dispatch(self, step: int, groups: list[Arrival]) -> None:
    """Rewards (the judgments are back), then the update, dispatched without waiting."""
    t = self.trainer
    # The sampler's copy of version `step`, taken before the update is dispatched: `trainer.state` then names the
    # update's (future) output, and the sampler must go on with the version it has, without waiting for it.
    self.sampler_params()
    self.ready = self.ready[len(groups) :]
    local = Batch.concat([a.part for a in groups], self.tokenizer.pad_id)
    gen = self._generation(groups)
    stale = np.concatenate([a.versions < step for a in groups])
    judgment = None
    if t.judge_runner is not None:
      judgment = Judgments([(self.block.start + i, a.judgment) for i, a in enumerate(groups) if a.judgment is not None])
    pending = Pending(step, local, local.gather(self.tokenizer.pad_id), gen, None, judgment)
    pending.generated_at = max(a.finished_at for a in groups)
    t0 = time.perf_counter()
    rewards, m = t.rewards(pending)
    values, fill = t.dispatch_update(pending, rewards, parallel.gather_rows(stale))
    staleness = np.asarray([step - a.version for a in groups], np.int64)
    # The policy versions that wrote each trajectory (> 1: new weights arrived while it was decoded).
    versions = np.asarray(
      [len(np.unique(a.versions[j, : max(int(n), 1)])) for a in groups for j, n in enumerate(a.part.lengths)],
      np.float64,
    )
    self.inflight = InFlight(pending, rewards, m, values, fill, staleness, versions, t0)
    self.sampler_turn = True  # rule 4: the sampler decodes a segment before this update is taken back

  def _generation(self, groups: list[Arrival]) -> Generation:
    """The step's `Generation`: the groups it trains and those discarded since the last step (every host's)."""
    parts = [a.part for a in groups] + self.discarded
    self.discarded = []
    local = np.asarray(
      [
        len(parts) * self.g,
        sum(int(p.lengths.sum()) for p in parts),
        sum(int(tasks.split_thinking(t).unclosed) for p in parts for t in p.texts),
      ],
      np.int64,
    )
    trajectories, tokens, unclosed = (int(x) for x in parallel.host_sum(local))
    correct = float(parallel.host_sum(np.asarray(sum(float(p.verifier.sum()) for p in parts), np.float64)))
    iv = self.interval
    self.interval = Generation()
    return Generation(
      batches=iv.batches,
      trajectories=trajectories,
      tokens=tokens,
      correct=correct,
      unclosed_thinking=unclosed,
      sample_s=iv.sample_s,
      verify_s=iv.verify_s,
    )

  def _finish(self) -> bool:
    """Reads the update in flight back, records the step; True when the run must stop after it."""
    t = self.trainer
    f, self.inflight = self.inflight, None
    pending, m, staleness, versions = f.pending, f.metrics, f.staleness, f.versions
    m.update(t.update_values(pending, f.values, f.fill))
    t1 = time.perf_counter()
    gen = pending.generation
    update_s = t1 - f.dispatched_at
    m, samples = t.step_metrics(pending, f.rewards, m, update_s=update_s, step_s=update_s + gen.sample_s + gen.verify_s)
    self.version = pending.step + 1
    hist = np.bincount(staleness, minlength=self.k + 1)[: self.k + 1]
    total = parallel.host_sum(
      np.concatenate(
        [
          hist,
          [staleness.sum(), len(staleness), versions.sum(), len(versions), self.counters["stale"]],
          [self.counters["skipped"], len(self.judging) + len(self.queued)],
        ]
      ).astype(np.float64)
    )
    hist_sum, rest = total[: self.k + 1], total[self.k + 1 :]
    top = max(parallel.gather_json(int(staleness.max())))  # over hosts
    m.update({f"staleness/{i}": float(hist_sum[i] / max(rest[1], 1)) for i in range(self.k + 1)})
    m["staleness/mean"] = float(rest[0] / max(rest[1], 1))
    m["staleness/max"] = top
    m["gen/versions_per_trajectory"] = float(rest[2] / max(rest[3], 1))
    m["gen/groups_stale"] = int(rest[4])
    m["judge/groups_skipped"] = int(rest[5])
    m["judge/backlog"] = int(rest[6])
    m["time/judge_wait"] = self.judge_wait
    self.counters = dict(stale=0, skipped=0)
    self.judge_wait = 0.0
    now = time.perf_counter()
    m["time/wall"] = now - self.last_end
    self.last_end = now
    step = pending.step + 1
    self.log_step(step, m, samples)
    stopping = self.stop.poll()
    if t.time_to_save(step) or stopping:
      t.save(step, t.iterator.state, {"requeue": self.requeue_json()})
    return stopping

  def requeue_json(self) -> list:
    """Every host's prompts of the work in flight, in the order they are to be served again (gathered)."""
    waiting = sorted(self.ready + self.judging + self.queued, key=lambda a: (a.version, a.seq))
    mine = [a.part.examples[0] for a in waiting]
    if self.current is not None:
      mine += self.current.unstarted()
    mine += self.generator.requeue
    return parallel.gather_json([example_to_json(ex) for ex in mine])

  # ── the loop ──

  def run(self, start: int) -> None:
    c = self.config
    self.version = start
    waited_since = None
    while self.version < c.num_steps:
      self._feed_judge()
      step = self.version + (self.inflight is not None)  # the step the waiting groups fill next
      # Every decision below is agreed over hosts (one sum), so every host takes the same branch.
      # Rule 4: an update just dispatched is taken only after the sampler's turn (one decode segment, or nothing
      # for it to do), so the work ahead never hinges on how fast this machine finished the update.
      update_done = (
        self.inflight is not None
        and not self.sampler_turn
        and all(x.is_ready() for x in jax.tree.leaves(self.inflight.values) if isinstance(x, jax.Array))
      )
      can_dispatch = False
      groups = None
      if self.inflight is None and step < c.num_steps:
        waited = 0.0 if waited_since is None else time.perf_counter() - waited_since
        if not self._resolve_due(step, waited):
          groups = self._assemble(step)
          can_dispatch = groups is not None
      may_start = self.current is None and self._may_start()
      agreed = parallel.host_sum(np.asarray([update_done, can_dispatch, may_start], np.int64))
      hosts = jax.process_count()
      if agreed[0] == hosts:
        if self._finish():
          return
        continue
      if agreed[1] == hosts:
        waited_since = None
        self._dispatch(step, groups)
        continue
      if self.current is not None:
        self.sampler_turn = False
        if not self.current.advance():
          self.current = None
        continue
      if agreed[2] == hosts:
        self.gen_index += 1
        self.interval.batches += 1
        self.current = _Batch(self, self.gen_index - 1, self.generator.draw())
        continue
      self.sampler_turn = False  # the sampler has nothing to do: its turn passes
      if self.inflight is not None:  # only the update can make progress: wait for it
        jax.block_until_ready(self.inflight.values)
        continue
      # Only the judge can make progress.
      waited_since = waited_since or time.perf_counter()
      t0 = time.perf_counter()
      time.sleep(IDLE_S)
      self.judge_wait += time.perf_counter() - t0
