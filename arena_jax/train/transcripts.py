"""Judge transcripts: every judge call of a run on disk, compressed and size-bounded (SPEC §3–§5, §7).

The reward of a judged group is whatever the judge decided; the transcripts are the audit trail: which
groups went to the judge, who played whom in which order, what the judge answered and why, and what the
policy was then trained with. `launch.inspect` renders them as HTML; `read_transcripts` gives one row
per judge call (what re-judging a stored pair needs).

Files: `<workdir>/transcripts/s<start step>-<unix ms>-h<host>-<part>.jsonl.gz`, gzip-compressed JSONL,
one file per writer session (a run, or a resume of it) and host, a new part every `SEGMENT_BYTES` of
compressed data; parts are deleted oldest first once the host's total exceeds `judge.transcripts_max_mb`
(the latest steps are kept). Two kinds of row:

  group  one judged group of one step: its problem, traces, every match and every call (below); written
         by the judge thread when the group's tournament (or its scores) is complete, for a
         `judge.transcripts` fraction of the groups (sampled by a hash of (seed, step, group), so a
         recorded group is always a whole tournament).
  step   one row per step (process 0): every group's router decision, verifier rewards, judge rewards,
         final rewards and advantages (what the policy was trained with).
  session  one row when a run (or a resume) starts (process 0): the reward mode, topology, the judge's
         request settings (model, temperature, max_tokens, seed, debias, margin, token budget, extra body)
         and the template texts, so that a call's exact request is its template rendered with the texts
         as shown plus these settings and the call's seed (`session_row`).

Writing is off the training and judge threads: rows (or functions that build them from the judge's
results) go into a bounded queue that a writer thread builds, serialises,
compresses and appends with a sync flush after each batch, so the file is readable up to the last
flushed row while the run is going on, and a kill mid-write loses at most the rows in flight: the
readers stop at a torn row. A resumed run starts a new session; rows that the crashed session wrote
for steps after the resumed checkpoint are superseded (skipped by the readers), like the metrics log.
A full queue drops rows rather than stall training, and counts them (`TranscriptWriter.dropped`).

Step numbers are those of `metrics.jsonl` (the first optimizer step is 1); group indices are the
group's position in the step's batch (every host's groups, in host order).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import queue
import re
import threading
import time
import zlib
from typing import Callable, Iterator, Sequence

from absl import logging
import jax
import numpy as np

from arena_jax import judges
from arena_jax import parallel
from arena_jax.arena.outcomes import Verdict

DIRNAME = "transcripts"
SEGMENT_BYTES = 64 << 20
QUEUE_ROWS = 4096
_NAME = re.compile(r"^s(\d+)-(\d+)-h(\d+)-(\d+)\.jsonl\.gz$")
_CANONICAL = {Verdict.FIRST_WINS: "first", Verdict.TIE: "tie", Verdict.SECOND_WINS: "second"}
_SHOWN = {Verdict.FIRST_WINS: "A", Verdict.TIE: "tie", Verdict.SECOND_WINS: "B"}


def transcripts_dir(workdir: str) -> str:
  return os.path.join(os.fspath(workdir), DIRNAME)


def sampled(fraction: float, seed: int, step: int, group: int) -> bool:
  """Whether group `group` of step `step` is recorded at `fraction` (0 = none, 1 = all)."""
  if fraction >= 1.0:
    return True
  if fraction <= 0.0:
    return False
  return judges.derive_seed(seed, "transcripts", step, group) < fraction * 0x80000000


def clear(workdir: str) -> None:
  """Removes the transcripts of an earlier run (a fresh run in an old workdir starts fresh logs)."""
  for path in glob.glob(os.path.join(transcripts_dir(workdir), "*.jsonl.gz")):
    os.remove(path)


class TranscriptWriter:
  """Appends transcript rows from any thread; a writer thread compresses and writes them (module docstring).

  `fraction`: the `judge.transcripts` share of judged groups recorded; `max_bytes`: this host's bound
  on the compressed files (the oldest parts are deleted beyond it); `start_step`: the step this session
  starts after (0, or the resumed checkpoint's step); `session`: the session's start time in ms, the
  same on every host of a multi-host run (a later session supersedes an earlier one's later steps).
  """

  def __init__(
    self,
    workdir: str,
    *,
    fraction: float,
    seed: int = 0,
    max_bytes: int = 1 << 30,
    start_step: int = 0,
    session: int | None = None,
    host: int = 0,
    segment_bytes: int = SEGMENT_BYTES,
    queue_rows: int = QUEUE_ROWS,
  ):
    self.fraction, self.seed = float(fraction), int(seed)
    self.max_bytes, self.segment_bytes = int(max_bytes), int(segment_bytes)
    self.directory = transcripts_dir(workdir)
    os.makedirs(self.directory, exist_ok=True)
    session = int(time.time() * 1000) if session is None else int(session)
    self._prefix = f"s{int(start_step):08d}-{session:013d}-h{int(host):03d}"
    self._part = 0
    self._file = None
    self._compressor = None
    self._bytes = 0  # compressed bytes in the current part
    self.written = self.dropped = 0
    self.error: BaseException | None = None
    self._queue: queue.Queue = queue.Queue(queue_rows)
    self._thread = threading.Thread(target=self._work, name="arena-transcripts", daemon=True)
    self._thread.start()

  def sampled(self, step: int, group: int) -> bool:
    return sampled(self.fraction, self.seed, step, group)

  def put(self, row: dict | Callable[[], dict]) -> None:
    """Queues one row, or a function that builds it on the writer thread (never blocks: a full queue
    drops the row and counts it)."""
    try:
      self._queue.put_nowait(row)
    except queue.Full:
      if not self.dropped:
        logging.warning(
          "judge transcripts: the writer thread is %d rows behind (a slow disk?): rows are dropped "
          "rather than slow training down (TranscriptWriter.dropped counts them)",
          self._queue.maxsize,
        )
      self.dropped += 1

  def close(self) -> None:
    """Writes what is queued, ends the current part and stops the thread."""
    if self._thread.is_alive():
      self._queue.put(None)
      self._thread.join()

  # ── the writer thread ──

  def _work(self) -> None:
    done = False
    while not done:
      rows = [self._queue.get()]
      while True:  # everything queued by now goes out with one flush
        try:
          rows.append(self._queue.get_nowait())
        except queue.Empty:
          break
      done = rows[-1] is None or None in rows
      try:
        self._write([r for r in rows if r is not None])
      except Exception as e:  # pylint: disable=broad-except  (a full disk must not stop training)
        if self.error is None:
          logging.warning(
            "judge transcripts: writing to %s failed (%s: %s); the run goes on, its transcripts "
            "have gaps (TranscriptWriter.dropped counts the rows lost)",
            self.directory,
            type(e).__name__,
            e,
          )
        self.error, self.dropped = e, self.dropped + len(rows)
    self._end_part()

  def _write(self, rows: list[dict]) -> None:
    if not rows:
      return
    if self._file is None:
      self._file = open(os.path.join(self.directory, f"{self._prefix}-{self._part:05d}.jsonl.gz"), "ab")
      self._compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip stream
    rows = [r() if callable(r) else r for r in rows]
    data = "".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in rows).encode("utf-8")
    out = self._compressor.compress(data) + self._compressor.flush(zlib.Z_SYNC_FLUSH)
    self._file.write(out)
    self._file.flush()
    self._bytes += len(out)
    self.written += len(rows)
    if self._bytes >= self.segment_bytes:
      self._end_part()
      self._part += 1
      self._bound()

  def _end_part(self) -> None:
    if self._file is not None:
      self._file.write(self._compressor.flush(zlib.Z_FINISH))
      self._file.close()
      self._file, self._compressor, self._bytes = None, None, 0

  def _bound(self) -> None:
    """Deletes this host's oldest parts while their total exceeds `max_bytes` (the latest part stays)."""
    host = self._prefix.rsplit("-", 1)[1]
    mine = sorted((p for p in _parts(self.directory) if os.path.basename(p).split("-")[2] == host), key=_order)
    sizes = [os.path.getsize(p) for p in mine]
    while len(mine) > 1 and sum(sizes) > self.max_bytes:
      os.remove(mine.pop(0))
      sizes.pop(0)


def open_for_run(config, workdir: str, *, mode: str, topology: str | None, start_step: int) -> TranscriptWriter:
  """The writer of a training run (every host calls it): a fresh run clears an earlier run's transcripts;
  every host's files carry one session name; process 0 writes the session row."""
  main = parallel.is_main_process()
  if main and not config.resume:
    clear(workdir)  # a fresh run starts fresh transcripts, as it does a fresh metrics log
  parallel.barrier("transcripts")
  session = parallel.gather_json(int(time.time() * 1000))[0]  # process 0's clock names the session
  writer = TranscriptWriter(
    workdir,
    fraction=config.judge.transcripts,
    seed=config.seed,
    max_bytes=config.judge.transcripts_max_mb << 20,
    start_step=start_step,
    session=session,
    host=jax.process_index(),
  )
  if main:
    writer.put(session_row(config.judge, mode=mode, topology=topology, start_step=start_step))
  return writer


def _json_default(v):
  if isinstance(v, (np.integer, np.floating, np.bool_)):
    return v.item()
  if isinstance(v, np.ndarray):
    return v.tolist()
  raise TypeError(f"not JSON serialisable: {type(v).__name__}")


# ─────────────────────────────────────────── building rows ───────────────────────────────────────────

_REQUEST_FIELDS = (
  "backend",
  "model",
  "temperature",
  "max_tokens",
  "seed",
  "debias",
  "margin",
  "token_budget",
  "tokenizer",
  "context_tokens",
  "tail_fraction",
  "template_dir",
  "extra_body",
  "verdict_format",
)


def session_row(judge_config, *, mode: str, topology: str | None, start_step: int) -> dict:
  """The row that opens a session: what every request of the run was made of besides its texts and seed."""
  templates = judges.load_templates(judge_config.template_dir)
  settings = {k: judge_config.get(k, "reasoned" if k == "verdict_format" else None) for k in _REQUEST_FIELDS}
  verdict_format = judges.formats.get(settings["verdict_format"])
  if settings["extra_body"] is not None:
    settings["extra_body"] = json.loads(json.dumps(dict(settings["extra_body"]), default=str))
  return {
    "kind": "session",
    "start_step": int(start_step),
    "mode": mode,
    "topology": topology,
    "judge": settings,
    # The templates of the run's verdict format, under their kind: what a re-judging tool renders.
    "templates": {name: templates.texts[verdict_format.template(name)] for name in ("pairwise", "pointwise")},
  }


def call_record(call: judges.JudgeCall, kind: str, players: Sequence[int]) -> dict:
  """One judge request: what it was shown (`order_shown`: the members in the order shown, A first) and said."""
  c, u = call.completion, call.completion.usage
  parsed = c.parsed if c.ok else None
  if kind == "pairwise" and isinstance(parsed, float):  # the logprobs format: P(A) of the order shown
    verdict = round(parsed, 6)
  elif kind == "pairwise":
    verdict = _SHOWN.get(parsed) if parsed is not None else None
  else:
    verdict = float(parsed) if parsed is not None else None
  return {
    "order_shown": list(reversed(players)) if call.swapped else list(players),
    "answer": c.content,
    "reasoning": c.reasoning,
    "finish_reason": c.finish_reason,
    "top_logprobs": [list(t) for t in c.top_logprobs] if c.top_logprobs else None,  # the logprobs format
    "verdict_shown": verdict,
    "failure_reason": c.failure_reason,
    "failure_detail": c.failure_detail or "",
    "latency_s": round(u.latency_s, 4),
    "prompt_tokens": u.prompt_tokens,
    "completion_tokens": u.completion_tokens,
    "http_requests": u.http_requests,
    "parse_attempts": c.parse_attempts,
    "endpoint": c.endpoint,
    "status": c.status,
    "seed": c.seed,
    "cached": c.cached,
  }


def _group_base(judge, step: int, job, kind: str, **extra) -> dict:
  """The fields every group row shares: the texts as the policy wrote them and as the judge saw them."""
  problem, reference = judge.clean_context(job.problem, job.reference)
  shown = [judge.clean(t) for t in job.traces]
  example = getattr(job, "example", None)
  return {
    "kind": "group",
    "form": kind,
    "step": int(step),
    "group": int(job.index),
    "problem": job.problem,
    "reference": job.reference,
    "traces": list(job.traces),
    "shown": {
      "problem": problem,
      "reference": reference,
      # None where the trace was shown as written (most traces): no second copy on disk
      "traces": [s if s != t else None for s, t in zip(shown, job.traces)],
    },
    "example": dataclasses.asdict(example) if dataclasses.is_dataclass(example) else None,
    **extra,
  }


def pairwise_group_row(judge, step: int, job, run, topology: str, representatives=None, node_of=None) -> dict:
  """The group row of a finished tournament (`judges.TournamentRun`); `step` counted from 1.

  With duplicates sharing a node (`judging.Nodes`), the tournament's players are nodes: matches are
  written between their representative members, `copy_of[m]` names the member that played for member m,
  and `run` is None when the group was one trajectory G times (no call was needed).
  """
  g = len(job.traces)
  reps = list(range(g)) if representatives is None else [int(r) for r in representatives]
  node_of = np.arange(g) if node_of is None else np.asarray(node_of)
  matches, ranking = [], None
  for i, j, r in run.results if run is not None else ():
    i, j = reps[int(i)], reps[int(j)]
    matches.append(
      {
        "i": i,
        "j": j,
        "outcome": r.outcome,
        "verdict": _CANONICAL.get(r.verdict) if r.verdict is not None else None,
        "failure_reason": r.failure_reason,
        "failure_detail": r.failure_detail or "",
        "calls": [call_record(c, "pairwise", (i, j)) for c in r.calls],
      }
    )
  if run is not None and run.scheduler.native_ranking() is not None:
    ranking = np.asarray(run.scheduler.native_ranking(), float)[node_of].tolist()
  return _group_base(
    judge,
    step,
    job,
    "pairwise",
    topology=topology,
    arrival_order=[int(a) for a in job.arrival_order],
    native_ranking=ranking,
    matches=matches,
    copy_of=[reps[int(n)] for n in node_of],
  )


def pointwise_group_row(judge, step: int, job, results, representatives=None, node_of=None) -> dict:
  """The group row of a group's rubric scores (one `ScoreResult` per distinct trace: a copy carries its
  representative's score and no calls of its own, `copy_of` names the representative)."""
  g = len(job.traces)
  reps = list(range(g)) if representatives is None else [int(r) for r in representatives]
  node_of = list(range(g)) if node_of is None else [int(n) for n in node_of]
  scores = []
  for m, n in enumerate(node_of):
    r = results[n]
    scores.append(
      {
        "member": m,
        "score": r.score,
        "failure_reason": r.failure_reason,
        "failure_detail": r.failure_detail or "",
        "calls": [call_record(c, "pointwise", (m,)) for c in r.calls] if reps[n] == m else [],
      }
    )
  return _group_base(judge, step, job, "pointwise", scores=scores, copy_of=[reps[n] for n in node_of])


# ─────────────────────────────────────────── reading ───────────────────────────────────────────


def _parts(directory: str) -> list[str]:
  return [p for p in glob.glob(os.path.join(directory, "*.jsonl.gz")) if _NAME.match(os.path.basename(p))]


def _order(path: str) -> tuple[int, int, int, int]:
  start, started, host, part = (int(x) for x in _NAME.match(os.path.basename(path)).groups())
  return started, host, part, start


def _read_part(path: str) -> Iterator[dict]:
  """The rows of one part; a part still being written, or torn by a kill, ends at its last whole row."""
  decompressor = zlib.decompressobj(31)
  pending = b""
  try:
    with open(path, "rb") as f:
      while True:
        chunk = f.read(1 << 20)
        if not chunk:
          break
        try:
          pending += decompressor.decompress(chunk)
        except zlib.error:
          break  # torn mid-stream: the rows before are whole
        *lines, pending = pending.split(b"\n")
        for line in lines:
          row = _parse(line)
          if row is not None:
            yield row
  except FileNotFoundError:
    return  # deleted by the size bound while we read


def _parse(line: bytes) -> dict | None:
  try:
    row = json.loads(line)
  except ValueError:
    return None
  return row if isinstance(row, dict) else None


def read_rows(workdir: str, *, kind: str | None = None, step: int | None = None) -> Iterator[dict]:
  """The raw rows (`kind` "group" or "step", or both), oldest session first; rows superseded by a
  resume (steps after the step a later session started from) are skipped."""
  paths = sorted(_parts(transcripts_dir(workdir)), key=_order)
  starts = [(_order(p)[0], _order(p)[3]) for p in paths]  # (session start time, start step)
  for path, (started, _) in zip(paths, starts):
    later = [s for t, s in starts if t > started]
    cutoff = min(later) if later else None
    for row in _read_part(path):
      if kind is not None and row.get("kind") != kind:
        continue
      s = row.get("step")
      if cutoff is not None and isinstance(s, int) and s > cutoff:
        continue
      if step is not None and s != step:
        continue
      yield row


def read_groups(workdir: str, step: int | None = None) -> Iterator[dict]:
  """The group rows (one judged group of one step each; schema in `read_transcripts`)."""
  return read_rows(workdir, kind="group", step=step)


def read_steps(workdir: str, step: int | None = None) -> Iterator[dict]:
  """The step rows: {"step", "mode", "topology", "task", "group_size", "groups": [{"group", "diverse",
  "routed", "judged", "verifier" [G], "judge" [G], "reward" [G], "advantage" [G]}]}."""
  return read_rows(workdir, kind="step", step=step)


def read_transcripts(workdir: str, step: int | None = None) -> Iterator[dict]:
  """One dict per judge call of the run (of step `step` only, when given), in the order written.

  Every row carries what re-judging its pair needs:

    step, group         the optimizer step (as in metrics.jsonl, from 1) and the group's index in it
    form                "pairwise" or "pointwise"
    problem, reference  as the judge was shown them (after trace hygiene; "(not given)" without one)
    call                0, or 1 for the second order of a `debias=both` pair
    endpoint, seed, latency_s, prompt_tokens, completion_tokens, http_requests, parse_attempts,
    status, cached      the request: where it went and what it cost (the seed is the last one sent)
    answer, reasoning, finish_reason   the judge's answer text and its separate reasoning (or None)
    verdict_shown       pairwise: "A", "B" or "tie" as the judge saw the order (`judge.verdict_format =
                        logprobs`: P(A), a number); pointwise: the score
    top_logprobs        the logprobs format: the first answer token's alternatives [[token, logprob], ...]
    failure_reason, failure_detail     None / "" on success, else the client's reason ("timeout",
                        "http_503", "unparseable", "truncated", "deadline", ...)
  pairwise rows also:
    i, j                the canonical pair: member i is `trace_first`, j `trace_second`
    trace_first, trace_second   the two traces as shown (hygiene and token budget applied)
    order_shown         the members in the order shown, A first ([i, j] or [j, i])
    swapped             order_shown == [j, i]
    verdict             the pair's canonical verdict: "first", "second", "tie", or None when failed
    outcome             the pair's soft score of member i (SPEC §4; the mean of both orders with
                        `debias=both`), None when failed
    match_failure_reason   why the pair failed (either call failing fails a `both` pair)
    topology            the tournament that scheduled the match
  pointwise rows also: member, trace (as shown), score (the member's score, None when failed).
  The group row itself (`read_groups`) adds the traces as the policy wrote them, the task's example,
  the arrival order and the tournament's native ranking.
  """
  for g in read_groups(workdir, step):
    shown = g["shown"]
    traces = [s if s is not None else t for s, t in zip(shown["traces"], g["traces"])]
    base = {
      "step": g["step"],
      "group": g["group"],
      "form": g["form"],
      "problem": shown["problem"],
      "reference": shown["reference"],
    }
    if g["form"] == "pairwise":
      for m in g["matches"]:
        i, j = m["i"], m["j"]
        for k, c in enumerate(m["calls"]):
          yield {
            **base,
            "i": i,
            "j": j,
            "call": k,
            "trace_first": traces[i],
            "trace_second": traces[j],
            "swapped": c["order_shown"] == [j, i],
            "verdict": m["verdict"],
            "outcome": m["outcome"],
            "match_failure_reason": m["failure_reason"],
            "topology": g.get("topology"),
            **c,
          }
    else:
      for s in g["scores"]:
        for k, c in enumerate(s["calls"]):
          yield {**base, "member": s["member"], "call": k, "trace": traces[s["member"]], "score": s["score"], **c}
