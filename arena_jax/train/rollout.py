"""The rollout of one RL step: prompts → sampler → verifier → (streamed) judge jobs (SPEC §1, §3, §5, §7).

`Generator.generate` returns a `batch.Pending` step: this host's groups (what it judges) and every host's
(what the update trains on), the generation's cost, and the data iterator's state right after the step's
prompts were drawn (what a checkpoint stores).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from arena_jax import parallel
from arena_jax import rl
from arena_jax import sampling
from arena_jax import tasks
from arena_jax.train import judging
from arena_jax.train.batch import Batch, Generation, Pending


class Generator:
  """Produces a step's groups (SPEC §1, §7): samples G completions per prompt, verifies them on the host,
  refills with reward-diverse groups under dynamic sampling (DAPO), and with `lockstep.live_start` ≠ step_done
  feeds each finished group, or each arrival (speculative, SPEC §5), to the judge while decoding goes on.

  Each host draws the prompts of its own block of the global batch (`iterator`, `block`); the sampler runs on
  every host's prompts at once, and each host verifies and judges its own groups. With `rollout.sample_batch`
  > 0 it runs on them in calls of at most that many prompts, one after another (`calls`): each call holds
  the decode cache of its own rows only, and the samples are those of one call (`Sampler`'s `row_offset`).
  """

  def __init__(self, config, mode, task, iterator, block: slice, sampler, tokenizer, add_bos: bool):
    self.config, self.mode, self.task, self.iterator, self.block = config, mode, task, iterator, block
    self.sampler, self.tokenizer, self.add_bos = sampler, tokenizer, add_bos
    self.b, self.g = config.rollout.prompts_per_step, config.rollout.group_size
    # Prompts to serve before the iterator's next ones: those whose work the asynchronous loop discarded at a
    # stop or held in flight at its checkpoint (`async_loop`), restored from the checkpoint's meta.
    self.requeue: list = []

  def draw(self) -> list:
    """This host's prompts of the next generation batch: requeued ones first, then the iterator's (which
    always yields a whole batch; what a batch does not use stays queued)."""
    n = self.block.stop - self.block.start
    while len(self.requeue) < n:
      self.requeue.extend(next(self.iterator))
    out, self.requeue = self.requeue[:n], self.requeue[n:]
    return out

  def generate(self, step: int, params, judgment: judging.StepJudgment | None = None) -> Pending:
    """Samples G per prompt and verifies; with dynamic sampling, refills with diverse groups (SPEC §7).

    Every host generates as long as any host lacks diverse groups (the sampler is one global program).
    With `lockstep.live_start` ≠ step_done, groups are verified and sent to the judge as they finish
    decoding (`_sample_streaming`), so the step's judgment is already running when this returns.

    `params`: the sampler's copy of the policy (`Sampler.shard_params`, once per step); `judgment`: the
    step's open judgment when it streams (`JudgeRunner.open`), else None.
    """
    rs, pad_id = self.config.reward, self.tokenizer.pad_id
    n_local = self.block.stop - self.block.start
    kept: list[Batch] = []
    gen = Generation()
    while True:
      if gen.batches >= rs.max_gen_batches:
        found = int(parallel.host_sum(np.asarray(min(sum(k.num_groups for k in kept), n_local))))
        raise RuntimeError(
          f"dynamic sampling found only {found} of {self.b} reward-diverse groups in "
          f"reward.max_gen_batches={rs.max_gen_batches} generation batches at step {step}: raise "
          "reward.max_gen_batches, or the policy is (nearly) always all-correct / all-wrong here"
        )
      examples = self.draw()
      rng = jax.random.fold_in(jax.random.fold_in(jax.random.key(self.config.seed), step), gen.batches)
      if judgment is not None:  # no dynamic sampling (a judged mode): one generation batch
        part = self._sample_streaming(params, examples, rng, gen, judgment)
      else:
        t0 = time.perf_counter()
        part = self._sample(params, examples, rng, gen)
        t1 = time.perf_counter()
        part = self.verify(part, gen)
        gen.sample_s, gen.verify_s = gen.sample_s + t1 - t0, gen.verify_s + time.perf_counter() - t1
      kept.append(part.take(self.mode.keep(part.diverse)))
      short = int(parallel.host_sum(np.asarray(int(sum(k.num_groups for k in kept) < n_local))))
      if not self.mode.dynamic_sampling or not short:
        break
    local = Batch.concat(kept, pad_id).take(slice(0, n_local))  # DAPO truncates the surplus
    return Pending(step, local, local.gather(pad_id), gen, self.iterator.state, judgment)

  def prompt_tokens(self, examples) -> tuple[np.ndarray, np.ndarray]:
    """Every host's prompts of one generation batch as the sampler takes them: (tokens, lengths), padded and
    gathered (the sampler runs on all of them). The asynchronous loop decodes its batches from them too."""
    pad_id = self.tokenizer.pad_id
    tok = self.tokenizer
    prompts = tok.encode_batch(self.task.prompt_texts(examples, tok), add_bos=self.add_bos and not self.task.chat)
    tokens, lengths = self.sampler.pad_prompts(prompts)
    return parallel.gather_rows(tokens, pad_id), parallel.gather_rows(lengths)

  def calls(self, num_prompts: int) -> list[slice]:
    """The prompts of each sampler call of a generation batch of `num_prompts` (every host's): all in one,
    or `rollout.sample_batch` at a time."""
    size = self.config.rollout.sample_batch or num_prompts
    return [slice(i, min(i + size, num_prompts)) for i in range(0, num_prompts, size)]

  def _joined(self, outputs: list) -> sampling.SampleOutput:
    """The calls' gathered outputs (`calls`, in order) as one."""
    return outputs[0] if len(outputs) == 1 else sampling.concat_outputs(outputs, self.tokenizer.pad_id)

  def _local(self, examples, out, gen: Generation) -> Batch:
    """This host's groups of a gathered sampler output; counts the generation."""
    gen.batches += 1
    gen.trajectories += self.b * self.g
    gen.tokens += int(out.lengths.sum())  # the gathered outputs: every host's rows
    groups = slice(self.block.start, self.block.stop)
    rows = slice(self.block.start * self.g, self.block.stop * self.g)
    # texts, verifier and diverse are filled by `verify`.
    return Batch(
      list(examples),
      [],
      out.prompt_tokens[groups],
      out.prompt_lengths[groups],
      out.tokens[rows],
      out.logprobs[rows],
      out.lengths[rows],
      out.truncated[rows],
      out.completion_step[rows],
      None,
      None,
    )

  def _sample(self, params, examples, rng, gen: Generation) -> Batch:
    """This host's groups of one generation batch (the sampler runs on every host's prompts)."""
    tokens, lengths = self.prompt_tokens(examples)
    # Row r of a call is row c.start·G + r of the batch: its samples do not depend on the split. Each call
    # is gathered before the next starts, so that one call's decode cache at a time is allocated.
    outputs = [
      parallel.gather(self.sampler(params, (tokens[c], lengths[c]), rng, row_offset=c.start * self.g))
      for c in self.calls(len(tokens))
    ]
    return self._local(examples, self._joined(outputs), gen)

  def _stream(self, params, examples, rng, outputs: list):
    """`Sampler.stream` over a generation batch's calls (`calls`), in order: yields (each chunk, its rows
    indexed in the whole batch; whether decoding goes on after it) and appends each call's output, gathered,
    to `outputs`."""
    tokens, lengths = self.prompt_tokens(examples)
    calls = self.calls(len(tokens))
    for k, c in enumerate(calls):
      offset = c.start * self.g
      chunks = self.sampler.stream(
        params, (tokens[c], lengths[c]), rng, every=self.config.lockstep.stream_every, row_offset=offset
      )
      for chunk in chunks:
        if chunk.output is not None:
          outputs.append(parallel.gather(chunk.output))
        yield dataclasses.replace(chunk, rows=chunk.rows + offset), chunk.output is None or k < len(calls) - 1

  def _sample_streaming(self, params, examples, rng, gen: Generation, judgment: judging.StepJudgment) -> Batch:
    """`_sample` + `verify`, judging while decoding goes on: each finished row of this host's
    groups is decoded and verified when its chunk ends; a group whose last member arrived goes to the
    judge if the mode selects it (`group_done`), or, `speculative`, each arrival joins its group's live
    tournament while the arrivals share one verifier reward and the tournament is abandoned when they
    stop doing so (a chunk's arrivals are verified together: a group they split is not fed first).
    Every host runs the same chunks; each judges its own groups."""
    g, first = self.g, self.block.start
    n_local = self.block.stop - first
    speculative = self.config.lockstep.live_start == "speculative"
    texts: list = [None] * (n_local * g)
    verifier = np.zeros((n_local, g), np.float32)
    steps = np.zeros((n_local, g), np.int64)
    arrived = np.zeros((n_local, g), bool)
    sent: set[int] = set()  # group_done: groups whose routing was decided
    shared: dict[int, float | None] = {}  # speculative: the reward a group's arrivals share (None: abandoned)
    t0, verify_s, outputs = time.perf_counter(), 0.0, []
    for chunk, early in self._stream(params, examples, rng, outputs):
      mine = (chunk.rows >= first * g) & (chunk.rows < self.block.stop * g)
      if not mine.any():
        continue
      tv = time.perf_counter()
      rows = chunk.rows[mine] - first * g
      chunk_texts = self.tokenizer.decode_batch(chunk.tokens[mine], chunk.lengths[mine])
      rewards = self.task.verify_batch([examples[r // g] for r in rows], chunk_texts)
      for r, text, v, step in zip(rows, chunk_texts, rewards, chunk.completion_step[mine]):
        b, i = divmod(int(r), g)
        texts[r], verifier[b, i], steps[b, i], arrived[b, i] = text, v, step, True
      for r in rows:  # arrival order
        b, i = divmod(int(r), g)
        ex = examples[b]
        if speculative:
          # A group whose arrivals so far (this chunk's included) disagree is abandoned, or never started.
          seen = verifier[b][arrived[b]]
          if seen.min() == seen.max() and shared.get(b, 0.0) is not None:
            gen.judged_early += early and b not in shared
            shared[b] = float(seen[0])
            judgment.arrive(first + b, i, texts[r], self.task.judge_question(ex), self.task.reference_answer(ex))
          elif shared.get(b, 0.0) is not None:
            if b in shared:
              judgment.abandon(first + b)
            shared[b] = None
        elif arrived[b].all() and b not in sent:
          sent.add(b)
          if self.mode.select(rl.is_diverse(verifier[b : b + 1]))[0]:
            gen.judged_early += early
            judgment.add(
              judging.GroupJob(
                first + b,
                self.task.judge_question(ex),
                self.task.reference_answer(ex),
                texts[b * g : (b + 1) * g],
                np.lexsort((np.arange(g), steps[b])),
                ex,
              )
            )
      verify_s += time.perf_counter() - tv
    part = self._local(examples, self._joined(outputs), gen)
    part.texts, part.verifier = texts, verifier
    part.diverse = np.asarray(rl.is_diverse(verifier))
    _count_verified(part, gen)
    gen.sample_s += time.perf_counter() - t0 - verify_s
    gen.verify_s += verify_s
    return part

  def verify(self, part: Batch, gen: Generation) -> Batch:
    """Decodes this host's completions; their verifier rewards [n, G] and which groups are reward-diverse
    (SPEC §1)."""
    part.texts = self.tokenizer.decode_batch(part.tokens, part.lengths)
    answers = [e for e in part.examples for _ in range(self.g)]
    part.verifier = np.asarray(self.task.verify_batch(answers, part.texts), np.float32).reshape(-1, self.g)
    part.diverse = np.asarray(rl.is_diverse(part.verifier))
    _count_verified(part, gen)
    return part


def _count_verified(part: Batch, gen: Generation) -> None:
  """Adds this host's verified completions to the generation's counts, summed over hosts: their verifier
  rewards and those that ended inside a thinking block. Every sampling path (`verify`, `_sample_streaming`)
  counts through here, so that no count is kept on one path and forgotten on another."""
  gen.correct += float(parallel.host_sum(np.asarray(part.verifier.sum(), np.float64)))
  # A completion cut while thinking has no answer (reward 0, `tasks.extract_answer`): counted.
  unclosed = sum(tasks.split_thinking(t).unclosed for t in part.texts)
  gen.unclosed_thinking += int(parallel.host_sum(np.asarray(unclosed, np.int64)))
