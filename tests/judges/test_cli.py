"""The CLIs end to end against the embedded server."""

import asyncio
import json
import os

import pytest

from arena_jax import fileio
from arena_jax import judges
from arena_jax import tasks
from arena_jax.judges import files

from tests.judges.conftest import fast_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROCESSBENCH = os.path.join(ROOT, "tests", "data", "processbench_gsm8k_20.jsonl")


@pytest.fixture
def cli(python_m):
  """`cli(module, *args)`: the stdout of `python -m module --noprogress args…`, which must succeed."""

  def run(module, *args):
    proc = python_m(module, "--noprogress", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout

  return run


def write_jsonl(path, rows):
  fileio.write_jsonl(path, rows)


def read_jsonl(path):
  return fileio.read_jsonl(path, strict=True)


def test_judge_pairs_end_to_end_and_resumable(tmp_path, server, demos, cli):
  rows = []
  for k, d in enumerate(demos.values()):
    rows.append(
      {
        "id": f"p{k}",
        "problem": d.prompt,
        "reference": d.example.answer,
        "trace_a": d.example.solution,
        "trace_b": d.completion,
      }
    )
  src, out = tmp_path / "pairs.jsonl", tmp_path / "verdicts.jsonl"
  write_jsonl(src, rows)
  # No --judge_url: the CLI starts its own embedded server.
  summary = json.loads(cli("launch.judge_pairs", "--input", str(src), "--output", str(out)).strip().splitlines()[-1])
  assert summary["judged"] == len(rows) and summary["failed"] == 0
  assert [r["row"] for r in read_jsonl(out)] == list(range(len(rows)))  # input order, however they finished
  got = {r["id"]: r for r in read_jsonl(out)}
  for k, d in enumerate(demos.values()):
    r = got[f"p{k}"]
    # The canonical solution vs a variant: one operation not shown (penalty 0.5) is within the tie band.
    expected = "tie" if d.kind in ("clean", "skipped") else "A"
    assert r["verdict"] == expected and r["outcome"] == {"A": 0.9, "tie": 0.5}[expected], (d.kind, r)
    assert "[[" in r["judge_text"] and r["failure_reason"] is None and r["prompt_tokens"] > 0
  # Interrupted: keep three rows and a half-written line, then resume against a given URL.
  lines = out.read_text().splitlines()
  out.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])
  summary = json.loads(
    cli("launch.judge_pairs", "--judge_url", server.url, "--input", str(src), "--output", str(out))
    .strip()
    .splitlines()[-1]
  )
  assert summary["resumed"] == 3 and summary["judged"] == len(rows) - 3
  assert [r["row"] for r in read_jsonl(out)] == list(range(len(rows)))


def test_failed_rows_are_recorded_and_retried_on_request(tmp_path, demos):
  d = demos["slip"]
  src, out = tmp_path / "pairs.jsonl", tmp_path / "verdicts.jsonl"
  write_jsonl(
    src, [{"problem": d.prompt, "reference": d.example.answer, "trace_a": d.completion, "trace_b": d.example.solution}]
  )

  async def main():
    config = fast_config(max_parse_retries=0)
    async with judges.serve_in_process(malformed_rate=1.0) as broken:
      first = await judges.judge_pairs_file(config, str(src), str(out), urls=[broken], progress=False)
    async with judges.serve_in_process() as good:
      kept = await judges.judge_pairs_file(config, str(src), str(out), urls=[good], progress=False)
      retried = await judges.judge_pairs_file(
        config, str(src), str(out), urls=[good], retry_failed=True, progress=False
      )
    return first, kept, retried

  first, kept, retried = asyncio.run(main())
  assert first["failed"] == 1 and kept["judged"] == 0 and retried["judged"] == 1 and retried["failed"] == 0
  (row,) = read_jsonl(out)
  assert row["verdict"] == "B" and row["outcome"] == 1.0 - 0.9


def test_jury_cli_scores_processbench_rows(tmp_path, cli):
  out = tmp_path / "flaws.jsonl"
  stdout = cli("launch.jury", "--mode", "deliberation", "--input", PROCESSBENCH, "--output", str(out))
  assert "ProcessBench  acc1" in stdout and "balanced F1" in stdout
  summary = json.loads(stdout.strip().splitlines()[-1])
  pb = summary["metrics"]["processbench"]
  assert pb["num_erroneous"] == 10 and pb["num_correct"] == 10 and 0 <= pb["f1"] <= 1
  rows = read_jsonl(out)
  assert len(rows) == 20 and all(r["consensus"]["mode"] == "deliberation" for r in rows)
  assert {r["id"] for r in rows} == {json.loads(line)["id"] for line in open(PROCESSBENCH)}


def test_jury_cli_with_given_jurors_on_labelled_traces(tmp_path, server, demos, cli):
  rows = []
  for d in demos.values():
    report = tasks.check_arithmetic(d.example.expression, d.example.answer, d.completion)
    rows.append(
      {
        "problem": d.prompt,
        "reference": d.example.answer,
        "trace": d.completion,
        "flawed_steps": [s.index for s in report.steps if s.impact],
      }
    )
  src, out = tmp_path / "traces.jsonl", tmp_path / "flaws.jsonl"
  write_jsonl(src, rows)
  urls = ",".join([server.url] * 3)
  stdout = cli(
    "launch.jury",
    "--jurors",
    urls,
    "--mode",
    "consolidation",
    "--input",
    str(src),
    "--output",
    str(out),
    "--judge.jury.error_min_impact=minor",
  )
  m = json.loads(stdout.strip().splitlines()[-1])["metrics"]
  assert m["balanced_f1"] == 1.0 and "processbench" not in m  # accurate jurors, no ProcessBench labels


def test_judge_pairs_reads_a_reasoning_style_judge(tmp_path, demos, cli):
  """The embedded judge writing like a served reasoning LLM (thinking in reasoning_content or inline,
  verdicts as [[A]], \\boxed{A}, Final verdict: A, **A**): the same verdicts as the plain style."""
  rows = [
    {
      "id": f"p{k}",
      "problem": d.prompt,
      "reference": d.example.answer,
      "trace_a": d.example.solution,
      "trace_b": d.completion,
    }
    for k, d in enumerate(demos.values())
  ]
  src, out = tmp_path / "pairs.jsonl", tmp_path / "verdicts.jsonl"
  write_jsonl(src, rows)
  summary = json.loads(
    cli(
      "launch.judge_pairs",
      "--input",
      str(src),
      "--output",
      str(out),
      "--judge.server.style=reasoning",
      "--judge.server.truncate_rate=0",
    )
    .strip()
    .splitlines()[-1]
  )
  assert summary["judged"] == len(rows) and summary["failed"] == 0
  got = {r["id"]: r for r in read_jsonl(out)}
  for k, d in enumerate(demos.values()):
    expected = "tie" if d.kind in ("clean", "skipped") else "A"
    assert got[f"p{k}"]["verdict"] == expected, (d.kind, got[f"p{k}"])


def test_rows_land_as_they_finish_and_the_file_ends_in_input_order(tmp_path):
  out, n = tmp_path / "out.jsonl", 5
  seen_while_running = []

  async def main():
    finished = [asyncio.Event() for _ in range(n)] + [asyncio.Event()]
    finished[n].set()

    async def work(i):
      await finished[i + 1].wait()  # row i finishes only after row i + 1: the reverse of input order
      seen_while_running.append([r["row"] for r in fileio.read_jsonl(out, strict=False)])
      finished[i].set()
      return {"row": i}

    return await files._run_rows(list(range(n)), work, str(out), workers=n, progress=False, desc="rows")  # pylint: disable=protected-access

  written = asyncio.run(main())
  assert [r["row"] for r in written] == [4, 3, 2, 1, 0]
  assert seen_while_running[-1] == [4, 3, 2, 1]  # appended as they landed: an interruption loses nothing
  assert [r["row"] for r in read_jsonl(out)] == list(range(n))


def _first_shown_ending(judge_text):
  """The last step the embedded judge quotes for its own "Trace A" (its plain answer)."""
  return judge_text.split('Trace A ends with: "', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize("debias", ["random", "both"])
def test_judge_text_order_names_the_trace_the_judge_calls_a(tmp_path, demos, debias):
  d = demos["slip"]
  rows = [
    {"problem": d.prompt, "reference": d.example.answer, "trace_a": d.example.solution, "trace_b": d.completion}
    for _ in range(8)
  ]
  src, out = tmp_path / "pairs.jsonl", tmp_path / "verdicts.jsonl"
  write_jsonl(src, rows)

  async def main():
    config = fast_config()
    config.debias = debias
    async with judges.serve_in_process() as url:
      await judges.judge_pairs_file(config, str(src), str(out), urls=[url], progress=False)

  asyncio.run(main())
  got = read_jsonl(out)
  ending = {"trace_a": d.example.solution.split("\n\n")[-1], "trace_b": d.completion.split("\n\n")[-1]}
  assert ending["trace_a"] != ending["trace_b"]
  for r in got:
    assert r["verdict"] == "A"  # the verdict is always in the input's naming
    if debias == "both":
      assert r["judge_text_order"] == files.TEXT_ORDER[(True, False)] and not r["swapped"]
      first, second = r["judge_text"].split("\n\n-----\n\n")
      assert _first_shown_ending(first) == ending["trace_a"] and _first_shown_ending(second) == ending["trace_b"]
    elif r["swapped"]:
      assert r["judge_text_order"] == "swapped: the judge's Trace A is trace_b"
      assert _first_shown_ending(r["judge_text"]) == ending["trace_b"]
    else:
      assert r["judge_text_order"] == "as given"
      assert _first_shown_ending(r["judge_text"]) == ending["trace_a"]
  if debias == "random":
    assert {r["swapped"] for r in got} == {True, False}  # both presentations occur among 8 keyed coins
