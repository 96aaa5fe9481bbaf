"""JSONL batch judging behind the CLIs `launch/judge_pairs.py` and `launch/jury.py`.

Both read a JSONL file, judge every row concurrently, and append one output row per input row as
soon as it is judged (each carrying its input `row` index and `id`), so an interrupted run loses
nothing and resumes where it stopped: rows already in the output are skipped (failed ones are judged
again with `retry_failed`). When every row is done the file is rewritten in input order (atomically; an
interrupted file is put in order when it is resumed). A progress bar goes to stderr.

Pairs:  {"problem", "reference", "trace_a", "trace_b"[, "id"]}
        → {"row", "id", "verdict": "A" | "B" | "tie" | null, "outcome" (soft score of trace_a, SPEC §4),
           "judge_text", "judge_text_order", "reasoning", "failure_reason", "swapped", "calls",
           "prompt_tokens", ...}
        `judge_text` is the judge's own words, so its "Trace A" is whichever trace was shown first;
        `judge_text_order` says which that was (`TEXT_ORDER`; SPEC §4 debiasing).
Jury:   {"problem", "trace" (or "steps": [...]), "reference"?, "label"?, "flawed_steps"?[, "id"]} or a
        ProcessBench row {"id", "problem", "steps", "label", "final_answer_correct"}
        → {"row", "id", "flaws", "consensus", "num_steps", "flagged_steps", "predicted_error_step", "label"}
        With labels, `jury_file` returns ProcessBench acc1 / acc2 / F1 and step-level balanced F1 (SPEC §8).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
from typing import Any, Callable, Iterable, Sequence

import tqdm

from arena_jax import fileio
from arena_jax import tasks
from arena_jax.judges import backends
from arena_jax.judges import metrics
from arena_jax.judges.pairwise import PairwiseJudge
from arena_jax.judges.usage import Usage

_VERDICT_NAMES = {1: "A", 0: "tie", -1: "B"}
# How the judge's "Trace A" / "Trace B" in `judge_text` map onto the input's trace_a / trace_b, by
# (debias == "both", swapped). The verdict and outcome are already in the input's naming; only the
# judge's text, kept verbatim, is not.
TEXT_ORDER = {
  (False, False): "as given",
  (False, True): "swapped: the judge's Trace A is trace_b",
  (True, False): "both: as given, then swapped (in the second answer the judge's Trace A is trace_b)",
}


def _sort_by_row(output_path: str) -> dict[int, dict]:
  """Rewrites an output file in input order (one line per `row`); returns {row: output row}."""
  # A line cut by an interruption is skipped (strict=False), so its row is judged again.
  rows = {r["row"]: r for r in fileio.read_jsonl(output_path, strict=False) if isinstance(r.get("row"), int)}
  fileio.write_jsonl(output_path, (rows[k] for k in sorted(rows)))
  return rows


def _resume(output_path: str, retry_failed: bool) -> dict[int, dict]:
  """Rows already written {row: output row}; with `retry_failed`, failed rows are dropped from the file."""
  if not os.path.exists(output_path):
    return {}
  done = _sort_by_row(output_path)
  if retry_failed:
    done = {k: v for k, v in done.items() if not v.get("failure_reason")}
    fileio.write_jsonl(output_path, (done[k] for k in sorted(done)))
  return done


def _usage_fields(u: Usage, *, http_requests: bool = True) -> dict:
  """The cost columns of an output row."""
  fields = {
    "calls": u.calls,
    "http_requests": u.http_requests,
    "prompt_tokens": u.prompt_tokens,
    "completion_tokens": u.completion_tokens,
    "latency_s": round(u.latency_s, 4),
  }
  if not http_requests:
    del fields["http_requests"]
  return fields


async def _run_rows(
  todo: Sequence[int], work: Callable, output_path: str, *, workers: int, progress: bool, desc: str
) -> list[dict]:
  """Runs `work(i)` for every row index with `workers` in flight; appends each output row as it lands
  (an interruption loses nothing), then puts the file in input order (rows finish out of order)."""
  written = []
  pending = iter(todo)
  bar = tqdm.tqdm(total=len(todo), desc=desc, unit="row", disable=not progress, dynamic_ncols=True)
  os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
  with open(output_path, "a", encoding="utf-8") as out:

    async def worker():
      for i in pending:
        row = await work(i)
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        out.flush()
        written.append(row)
        bar.update(1)

    await asyncio.gather(*(worker() for _ in range(max(1, min(workers, len(todo))))))
  bar.close()
  _sort_by_row(output_path)
  return written


async def judge_pairs_file(
  config,
  input_path: str,
  output_path: str,
  *,
  urls: Sequence[str] | None = None,
  retry_failed: bool = False,
  progress: bool = True,
) -> dict:
  """Judges every pair of `input_path` into `output_path` (module docstring); returns a summary."""
  rows = fileio.read_jsonl(input_path, strict=True, required=[("problem",), ("trace_a",), ("trace_b",)])
  done = _resume(output_path, retry_failed)
  todo = [i for i in range(len(rows)) if i not in done]
  judge = backends.BACKENDS["pairwise"](config, urls)
  assert isinstance(judge, PairwiseJudge)

  async def work(i: int) -> dict:
    r = rows[i]
    res = await judge.compare(r["problem"], r.get("reference") or "", r["trace_a"], r["trace_b"], key=("row", i))
    return {
      "row": i,
      "id": r.get("id"),
      "verdict": None if res.verdict is None else _VERDICT_NAMES[int(res.verdict)],
      "outcome": res.outcome,
      "judge_text": res.raw,
      "judge_text_order": TEXT_ORDER[(judge.debias == "both", bool(res.swapped))],
      "reasoning": res.reasoning,
      "failure_reason": res.failure_reason,
      "failure_detail": res.failure_detail,
      "swapped": res.swapped,
      **_usage_fields(res.usage),
    }

  workers = config.client.concurrency * len(judge.client.urls)
  try:
    written = await _run_rows(todo, work, output_path, workers=workers, progress=progress, desc="pairs")
  finally:
    await judge.close()
  every = list(done.values()) + written
  return {
    "rows": len(rows),
    "judged": len(written),
    "resumed": len(done),
    "failed": sum(bool(r["failure_reason"]) for r in every),
    "verdicts": dict(collections.Counter(str(r["verdict"]) for r in every)),
    "client": judge.client.stats.as_dict(),
  }


def _jury_input(row: dict) -> tuple[str | list[str], dict[int, bool] | None]:
  """(trace or steps, step truth or None) of a jury input row (ProcessBench or ours)."""
  if isinstance(row.get("steps"), list):
    trace = [str(s) for s in row["steps"]]
    num_steps = len(trace)
  else:
    trace = str(row.get("trace") or row.get("completion") or "")
    num_steps = len(tasks.split_steps(trace)) or 1
  if isinstance(row.get("flawed_steps"), list):
    flawed = {int(i) for i in row["flawed_steps"]}
    return trace, {i: i in flawed for i in range(num_steps)}
  if isinstance(row.get("label"), int) and not isinstance(row.get("label"), bool):
    return trace, metrics.processbench_step_truth(row["label"], num_steps)
  return trace, None


def jury_metrics(rows: Sequence[dict], outputs: Iterable[dict], min_impact: str) -> dict | None:
  """ProcessBench acc1/acc2/F1 and step-level balanced F1 over the labelled rows (None without labels)."""
  by_row = {o["row"]: o for o in outputs if o.get("row") is not None}
  preds, labels, flagged, truths, failed = [], [], [], [], 0
  for i, row in enumerate(rows):
    _, truth = _jury_input(row)
    out = by_row.get(i)
    if truth is None or out is None:
      continue
    if out.get("failure_reason"):
      failed += 1  # counted, and scored as "no error found"
    label = row.get("label")
    if isinstance(label, int) and not isinstance(label, bool):
      preds.append(out["predicted_error_step"])
      labels.append(label)
    flagged.append(set(out["flagged_steps"]))
    truths.append(truth)
  if not truths:
    return None
  result = {"rows": len(truths), "failed": failed, "min_impact": min_impact, **metrics.step_detection(flagged, truths)}
  if labels:
    result["processbench"] = metrics.processbench_scores(preds, labels)
  return result


async def jury_file(
  config,
  input_path: str,
  output_path: str,
  *,
  urls: Sequence[str] | None = None,
  mode: str | None = None,
  retry_failed: bool = False,
  progress: bool = True,
) -> dict:
  """Audits every trace of `input_path` with the Reasoning Jury into `output_path`; returns a summary
  with metrics when the rows carry labels (module docstring)."""
  rows = fileio.read_jsonl(input_path, strict=True, required=[("problem",), ("trace", "completion", "steps")])
  done = _resume(output_path, retry_failed)
  todo = [i for i in range(len(rows)) if i not in done]
  jury = backends.make_jury(config, urls, mode=mode)
  min_impact = config.jury.error_min_impact

  async def work(i: int) -> dict:
    r = rows[i]
    trace, _ = _jury_input(r)
    reference = r.get("reference") or r.get("answer") or ""
    v = await jury.audit(str(r["problem"]), trace, str(reference), key=("row", i, r.get("id")))
    out = {
      "row": i,
      "id": r.get("id"),
      **v.to_json(),
      "num_steps": v.num_steps,
      "flagged_steps": sorted(v.flagged_steps(min_impact)),
      "predicted_error_step": v.first_error_step(min_impact),
      "failure_reason": v.failure_reason,
      **_usage_fields(v.usage, http_requests=False),
    }
    if "label" in r:
      out["label"] = r["label"]
    return out

  clients = {id(c): c for c in [jury.moderator, *jury.jurors]}.values()
  workers = max(1, config.client.concurrency // max(1, len(jury.jurors)))
  try:
    written = await _run_rows(todo, work, output_path, workers=workers, progress=progress, desc=f"jury ({jury.mode})")
  finally:
    for c in clients:
      await c.close()
  every = list(done.values()) + written
  summary: dict[str, Any] = {
    "rows": len(rows),
    "audited": len(written),
    "resumed": len(done),
    "mode": jury.mode,
    "jurors": len(jury.jurors),
    "failed": sum(bool(r.get("failure_reason")) for r in every),
    "calls_per_trace": sum(r.get("calls", 0) for r in written) / len(written) if written else 0.0,
  }
  m = jury_metrics(rows, every, min_impact)
  if m is not None:
    summary["metrics"] = m
  return summary


def format_jury_metrics(m: dict) -> str:
  """The metrics of `jury_metrics` as a few readable lines (percentages, as ProcessBench reports)."""
  lines = [
    f"traces with labels: {m['rows']} (failed audits: {m['failed']}); errors = flaws of impact >= {m['min_impact']}"
  ]
  if "processbench" in m:
    p = m["processbench"]
    lines.append(
      f"ProcessBench  acc1 (erroneous, n={p['num_erroneous']}) {100 * p['acc1']:.1f}   "
      f"acc2 (correct, n={p['num_correct']}) {100 * p['acc2']:.1f}   F1 {100 * p['f1']:.1f}"
    )
  lines.append(
    f"step level    TPR {100 * m['tpr']:.1f}   TNR {100 * m['tnr']:.1f}   "
    f"balanced F1 {100 * m['balanced_f1']:.1f}"
    f"   (tp {m['tp']}, fn {m['fn']}, tn {m['tn']}, fp {m['fp']})"
  )
  return "\n".join(lines)
