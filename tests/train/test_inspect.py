"""The tournament inspector (`launch.inspect`): run and step pages from a real run's transcripts, the
filters' data (failures, upsets, BT / win-rate disagreement), escaping, and a workdir still being written."""

import html.parser
import json
import os

import pytest

from arena_jax.report import inspector
from arena_jax.train import read_groups, read_metrics
from arena_jax.train import transcripts as tr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Elements(html.parser.HTMLParser):
  """Counts elements by tag.class and keeps the text (the HTML as a browser's parser sees it)."""

  def __init__(self, text: str):
    super().__init__()
    self.count: dict[str, int] = {}
    self.attrs: dict[str, list[dict]] = {}
    self.text: list[str] = []
    self.feed(text)

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    for cls in (attrs.get("class") or "").split() or [""]:
      key = f"{tag}.{cls}" if cls else tag
      self.count[key] = self.count.get(key, 0) + 1
      self.attrs.setdefault(key, []).append(attrs)

  def handle_data(self, data):
    self.text.append(data)


def test_run_and_step_pages_of_a_real_run(judged_run, tmp_path):
  report = inspector.write_report(judged_run, str(tmp_path / "out"))
  groups = list(read_groups(judged_run))
  steps = sorted({g["step"] for g in groups})
  assert steps and set(steps) <= set(report.step_pages)
  run = Elements(open(report.run_page, encoding="utf-8").read())
  assert run.count["tr.step-row"] == len(read_metrics(judged_run))
  assert run.count["svg"] >= len(inspector.CURVES)
  links = {a["href"] for a in run.attrs["a"]}
  assert {inspector.step_file(s) for s in steps} <= links
  for s in steps:
    page = Elements(open(report.step_pages[s], encoding="utf-8").read())
    mine = [g for g in groups if g["step"] == s]
    assert page.count["section.group-card"] == len(mine)
    assert page.count["tr.match"] == sum(len(g["matches"]) for g in mine)
    assert page.count["tr.router-row"] == 4  # every group of the step, routed or not
    assert page.count["table.matrix"] == len(mine)
    assert page.count["details"] == sum(len(m["calls"]) for g in mine for m in g["matches"])
    text = "".join(page.text)
    for g in mine:
      assert g["problem"] in text and all(t.strip()[:20] in text for t in g["traces"])
      for m in g["matches"]:
        assert m["calls"][0]["answer"].splitlines()[0] in text
  # --groups: only those cards
  s = steps[0]
  first = min(g["group"] for g in groups if g["step"] == s)
  one = Elements(inspector.render_step(judged_run, s, [first]))
  assert one.count["section.group-card"] == 1 and one.attrs["section.group-card"][0]["data-group"] == str(first)


def _example_row(step, verdict, traces, failure=None):
  """A judged arithmetic group of two members whose one match the judge decided `verdict`."""
  example = {
    "uid": "u",
    "question": "Compute 2 + 3 * 4.",
    "answer": "14",
    "solution": "",
    "expression": "2 + 3 * 4",
    "numbers": [],
  }
  call = {
    "order_shown": [0, 1],
    "answer": f"judge says {verdict}",
    "reasoning": "<b>thinking</b>",
    "finish_reason": "stop",
    "verdict_shown": {"first": "A", "second": "B"}.get(verdict),
    "failure_reason": failure,
    "failure_detail": "",
    "latency_s": 0.1,
    "prompt_tokens": 10,
    "completion_tokens": 5,
    "http_requests": 1,
    "parse_attempts": 1,
    "endpoint": "http://judge",
    "status": 200,
    "seed": 1,
    "cached": False,
  }
  outcome = {"first": 0.9, "second": 0.1}.get(verdict)
  return {
    "kind": "group",
    "form": "pairwise",
    "step": step,
    "group": 0,
    "problem": example["question"],
    "reference": "14",
    "traces": traces,
    "shown": {"problem": example["question"], "reference": "14", "traces": [None, None]},
    "example": example,
    "topology": "round_robin",
    "arrival_order": [0, 1],
    "native_ranking": None,
    "matches": [
      {
        "i": 0,
        "j": 1,
        "outcome": outcome,
        "verdict": verdict,
        "failure_reason": failure,
        "failure_detail": "",
        "calls": [call],
      }
    ],
  }


RIGHT = "3 * 4 = 12.\n\n2 + 12 = 14.\n\nAnswer: 14"
WRONG = "3 * 4 = 13.\n\n2 + 13 = 15.\n\nAnswer: 15"
EVIL = "<script>document.title = 'pwned'</script> 3 * 4 = 12."


def test_upsets_failures_and_escaping(tmp_path):
  workdir = str(tmp_path)
  w = tr.TranscriptWriter(workdir, fraction=1.0)
  w.put(_example_row(1, "second", [RIGHT, WRONG]))  # the judge preferred the wrong trace: an upset
  w.put(_example_row(2, "first", [RIGHT, WRONG]))  # agrees with the process checker
  w.put(_example_row(3, None, [EVIL, WRONG], failure="timeout"))
  w.close()
  with open(os.path.join(workdir, "tasks.json"), "w") as f:  # what a run writes: the task's checker is found
    json.dump({"train_task": "arithmetic"}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for s in (1, 2, 3):
      f.write(
        json.dumps(
          {
            "step": s,
            "accuracy": 0.5,
            "judge/calls": 1,
            "judge/failures": int(s == 3),
            "judge/failed/timeout": int(s == 3),
          }
        )
        + "\n"
      )
  upset = inspector.step_context(workdir, 1)["cards"][0]
  assert upset["upsets"] == 1 and upset["failures"] == 0 and upset["matches"][0]["upset"]
  marks = [[s["mark"] for s in m["process"]["steps"]] for m in upset["members"]]
  assert marks[0] == ["valid"] * 3 and marks[1][0] == "invalid"  # 3 * 4 = 13
  assert inspector.step_context(workdir, 2)["cards"][0]["upsets"] == 0
  failed = inspector.step_context(workdir, 3)
  assert failed["cards"][0]["failures"] == 1 and failed["counts"]["failures"] == 1 and failed["row"] is None
  page = inspector.render_step(workdir, 3)
  assert "<script>document.title" not in page and "&lt;script&gt;document.title" in page
  assert "not logged yet" in page  # a group whose step row is not written yet (a run still going)
  run = inspector.render_run(workdir, [1, 2, 3])
  assert "judge failures by reason" in run


def test_the_run_page_says_when_the_judge_steers_next_to_nothing(tmp_path):
  """Issue 32: a run that calls its judge while the judged rows carry almost none of Σ|Â| gets a warning."""

  def page(shares):
    workdir = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    workdir.mkdir()
    with open(workdir / "metrics.jsonl", "w") as f:
      for s, share in enumerate(shares, 1):
        row = {"step": s, "accuracy": 0.5, "judge/calls": 6, "judge/signal_rows": share / 2, "judge/grad_share": share}
        f.write(json.dumps({**row, "judge/distinct_per_group": 1.5}) + "\n")
    return Elements(inspector.render_run(str(workdir), []))

  idle = page([0.01, 0.03, 0.02])
  assert idle.count.get("p.warning") == 1 and "The judge steers 2.0% of the updates" in "".join(idle.text)
  busy = page([0.2, 0.3])
  assert "p.warning" not in busy.count and "judged share of Σ|Â|" in "".join(busy.text)


def test_a_copy_shows_its_nodes_strength_and_says_whose_copy_it_is(tmp_path):
  """Member 2's trace is member 0's (`reward.dedupe_traces`: one tournament node, member 0 played for both):
  it shows node 0's θ, standard error and win rate, not an unplayed member's θ 0 and "win rate –". No tasks.json
  is written: the page of a run whose task has no process checker (a JSONL run) renders too."""
  workdir = str(tmp_path)
  row = _example_row(1, "first", [RIGHT, WRONG, RIGHT])
  row["copy_of"] = [0, 1, 0]
  w = tr.TranscriptWriter(workdir, fraction=1.0)
  w.put(row)
  w.close()
  members = inspector.step_context(workdir, 1)["cards"][0]["members"]
  assert members[2]["copy_of"] == 0 and "copy_of" not in members[0] and "copy_of" not in members[1]
  assert members[2]["theta"] == members[0]["theta"] > members[1]["theta"]
  assert (
    members[2]["se"] == members[0]["se"] and members[2]["win_rate"] == members[0]["win_rate"] == 0.9
  )  # one soft win
  page = inspector.render_step(workdir, 1)
  assert "a copy of #0" in page and "win rate –" not in page


def test_an_upset_needs_a_trace_worse_in_every_respect():
  dominated = inspector._dominated  # pylint: disable=protected-access
  assert dominated((0, -1, 0), (1, 0, 0)) and dominated((1, -2, 0), (1, -1, 0))
  assert not dominated((1, -2, 0), (0, 0, 0))  # a right answer with slips against a clean wrong one
  assert not dominated((0, -1, -4), (0, -2, -2)) and not dominated((1, 0, 0), (1, 0, 0))


def test_kendall_tau_and_disagreement():
  assert inspector.kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
  assert inspector.kendall_tau([1, 2, 3], [30, 20, 10]) == -1.0
  assert inspector.kendall_tau([1, None], [2, 3]) is None
  assert inspector.kendall_tau([0.5, 0.5, 0.5], [1, 2, 3]) is None  # all ties: nothing to disagree on
  assert inspector.kendall_tau([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(4 / 6)


def test_bad_requests_are_one_line_errors(judged_run, tmp_path, python_m):
  with pytest.raises(inspector.InspectError, match="no transcripts of step"):
    inspector.write_report(judged_run, str(tmp_path), steps=[999])
  with pytest.raises(inspector.InspectError, match="--groups: 'x'"):
    inspector.parse_ints("1,x", "groups")
  assert inspector.parse_ints("1,3-5", "step") == [1, 3, 4, 5]
  proc = python_m("launch.inspect", f"--workdir={tmp_path}")
  assert proc.returncode == 2 and proc.stderr.strip().startswith("error: ") and "metrics.jsonl" in proc.stderr
  assert "Traceback" not in proc.stderr
