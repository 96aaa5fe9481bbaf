"""Judge transcripts (`judge.transcripts`): every judge call of a run on disk, readable while written and
after a kill, superseded on resume, bounded in size."""

import gzip
import os
import time


from arena_jax import judges
from arena_jax.train import read_groups, read_metrics, read_steps, read_transcripts, train
from arena_jax.train import transcripts as tr
from tests.train.conftest import smoke_config


def test_a_run_records_every_judge_call_with_what_rejudging_needs(judged_run):
  metrics = {r["step"]: r for r in read_metrics(judged_run)}
  rows = list(read_transcripts(judged_run))
  assert rows, "the smoke run routed no group to the judge"
  for step, m in metrics.items():
    assert sum(r["step"] == step for r in rows) == m["judge/calls"]
    assert len({r["group"] for r in rows if r["step"] == step}) == m["judge/groups"]
  steps = {s["step"]: s for s in read_steps(judged_run)}
  assert sorted(steps) == sorted(metrics)
  groups = {(g["step"], g["group"]): g for g in read_groups(judged_run)}
  for r in rows:
    g = groups[(r["step"], r["group"])]
    # The router of that step sent this group to the judge.
    assert steps[r["step"]]["groups"][r["group"]]["routed"]
    assert r["form"] == "pairwise" and r["topology"] == "live" and r["endpoint"].startswith("http://127.0.0.1")
    assert r["problem"] == g["problem"] and r["reference"] == g["reference"] == g["example"]["answer"]
    # The smoke traces are short and clean: shown as written.
    assert r["trace_first"] == g["traces"][r["i"]] and r["trace_second"] == g["traces"][r["j"]]
    assert sorted(r["order_shown"]) == sorted([r["i"], r["j"]]) and r["swapped"] == (r["order_shown"][0] == r["j"])
    assert r["verdict_shown"] in ("A", "B", "tie") and r["answer"] and r["failure_reason"] is None
    assert r["verdict"] in ("first", "second", "tie") and 0 <= r["outcome"] <= 1
    # The canonical verdict is the shown one mapped back through the order shown.
    flip = {"A": "B", "B": "A", "tie": "tie"}
    shown = flip[r["verdict_shown"]] if r["swapped"] else r["verdict_shown"]
    assert {"A": "first", "B": "second", "tie": "tie"}[shown] == r["verdict"]
    assert r["prompt_tokens"] > 0 and r["latency_s"] >= 0 and r["http_requests"] == 1
  assert list(read_transcripts(judged_run, step=10**6)) == []
  # The session row holds the rest of each request (settings and template texts).
  (session,) = tr.read_rows(judged_run, kind="session")
  assert session["mode"] == "arena_live" and session["judge"]["model"] == "arena-judge"
  assert session["templates"]["pairwise"] == judges.load_templates("").texts["pairwise"]
  # The order shown is the order the judge saw: the embedded judge quotes the end of trace A, then of B.
  checked = 0
  for r in rows:
    a, b = (r["trace_second"], r["trace_first"]) if r["swapped"] else (r["trace_first"], r["trace_second"])
    quoted = [line for line in r["answer"].splitlines() if " ends with: " in line]
    if len(quoted) == 2 and a != b:
      assert quoted[0][len('Trace A ends with: "') : -1] in a and quoted[1][len('Trace B ends with: "') : -1] in b
      checked += 1
  assert checked


def test_transcripts_off_writes_nothing_and_a_fraction_samples_whole_groups(data_dir, coin_verifier, tmp_path):
  c = smoke_config("arena", data_dir)
  c.judge.transcripts = 0.0
  train(c, str(tmp_path / "off"))
  assert not os.path.exists(tmp_path / "off" / "transcripts")
  picked = [(s, g) for s in range(1, 200) for g in range(4) if tr.sampled(0.25, 0, s, g)]
  assert 0.15 < len(picked) / 796 < 0.35  # about the fraction asked for
  assert tr.sampled(1.0, 0, 3, 1) and not tr.sampled(0.0, 0, 3, 1)


def _row(step, group=0, text="x"):
  return {
    "kind": "group",
    "form": "pointwise",
    "step": step,
    "group": group,
    "problem": "p",
    "reference": "r",
    "traces": [text],
    "shown": {"problem": "p", "reference": "r", "traces": [None]},
    "example": None,
    "scores": [
      {
        "member": 0,
        "score": 1.0,
        "failure_reason": None,
        "failure_detail": "",
        "calls": [{"answer": "Score: 1", "verdict_shown": 1.0}],
      }
    ],
  }


def _written(w, n):
  """Waits until the writer thread has written `n` rows."""
  deadline = time.monotonic() + 30
  while w.written < n and time.monotonic() < deadline:
    time.sleep(0.005)
  assert w.written == n


def test_rows_are_readable_while_written_and_a_torn_tail_is_skipped(tmp_path):
  w = tr.TranscriptWriter(str(tmp_path), fraction=1.0)
  w.put(_row(1))
  w.put(lambda: _row(2))  # built on the writer thread
  _written(w, 2)  # flushed, not closed: a reader sees both rows while the run goes on
  assert [g["step"] for g in read_groups(str(tmp_path))] == [1, 2]
  w.put(_row(3))
  w.close()
  (path,) = tr._parts(tr.transcripts_dir(str(tmp_path)))  # pylint: disable=protected-access
  with gzip.open(path, "rt") as f:  # a closed part is a standard gzip file
    assert len(f.readlines()) == 3
  data = open(path, "rb").read()
  for cut in (len(data) - 9, len(data) // 2):  # killed mid-row (or before the trailer was written)
    with open(path, "wb") as f:
      f.write(data[:cut])
    steps = [g["step"] for g in read_groups(str(tmp_path))]
    assert steps == [1, 2, 3][: len(steps)]
  with open(path, "wb") as f:
    f.write(data + b"garbage that is not gzip")
  assert [g["step"] for g in read_groups(str(tmp_path))] == [1, 2, 3]
  rows = list(read_transcripts(str(tmp_path)))
  assert rows[0]["trace"] == "x" and rows[0]["score"] == 1.0 and rows[0]["member"] == 0


def test_a_resumed_session_supersedes_the_steps_after_its_checkpoint(tmp_path):
  first = tr.TranscriptWriter(str(tmp_path), fraction=1.0, session=1000)
  for s in (1, 2, 3):
    first.put(_row(s, text=f"first {s}"))
  first.close()
  second = tr.TranscriptWriter(str(tmp_path), fraction=1.0, start_step=2, session=2000)
  second.put(_row(3, text="second 3"))
  second.close()
  got = [(g["step"], g["traces"][0]) for g in read_groups(str(tmp_path))]
  assert got == [(1, "first 1"), (2, "first 2"), (3, "second 3")]


def test_files_are_bounded_oldest_part_first(tmp_path):
  w = tr.TranscriptWriter(str(tmp_path), fraction=1.0, segment_bytes=1, max_bytes=1)
  for s in range(1, 6):  # a part per row: each exceeds the segment size
    w.put(_row(s, text=os.urandom(2000).hex()))
    _written(w, s)
  w.close()
  assert [g["step"] for g in read_groups(str(tmp_path))] == [5]  # only the latest part stays


def test_a_judge_result_keeps_each_call():
  c = judges.Completion(content="[[A]]", parsed=judges.prompts.parse_pairwise("[[A]]"), endpoint="http://e")
  rec = tr.call_record(judges.JudgeCall(True, c), "pairwise", (0, 3))
  assert rec["order_shown"] == [3, 0] and rec["verdict_shown"] == "A" and rec["endpoint"] == "http://e"
