"""The real model's tests: the smoke of `make test` (test_smoke.py) and what they share with the slow tier's."""

import os

from arena_jax import judges
from arena_jax.train import read_metrics, read_transcripts


def serving_processes(model: str) -> list[int]:
  """The pids of `transformers serve <model>` processes on this machine."""
  found = []
  for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    except OSError:
      continue
    if b"serve" in argv and model.encode() in argv and any(a.endswith(b"transformers") for a in argv):
      found.append(int(pid))
  return found


def assert_real_verdicts(workdir: str, model: str) -> None:
  """A run judged by the real LLM behind `transformers serve`: at least one group judged, every call pairwise and
  asked in both orders, real verdicts, and no server left running."""
  rows = read_metrics(workdir)
  assert sum(r.get("judge/groups", 0) for r in rows) >= 1, rows  # at least one group went to the LLM judge
  calls = list(read_transcripts(workdir))
  assert calls and all(r["form"] == "pairwise" for r in calls)
  answered = [r for r in calls if r["failure_reason"] is None]
  # Real verdicts: the judge's own words name a letter (alone, or after a lead-in such as "The trace with A is
  # better", which the letter parser reads), taken as the verdict of the order it was shown.
  assert answered, [(r["failure_reason"], r["failure_detail"]) for r in calls]
  assert all(
    judges.formats.parse_letter(r["answer"]) is not None and r["verdict_shown"] in ("A", "B") for r in answered
  ), [r["answer"] for r in answered]
  assert {r["call"] for r in calls} == {0, 1}  # debias = both: each pair asked in both orders
  assert not serving_processes(model)  # the server stopped with the run
