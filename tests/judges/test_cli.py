"""The CLIs end to end against the embedded server."""
import asyncio
import json
import os
import subprocess
import sys

from arena_jax import fileio
from arena_jax import judges
from arena_jax import tasks

from tests.judges.conftest import fast_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROCESSBENCH = os.path.join(ROOT, "tests", "data", "processbench_gsm8k_20.jsonl")


def cli(module, *args):
  proc = subprocess.run([sys.executable, "-m", module, "--noprogress", *args], cwd=ROOT, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def write_jsonl(path, rows):
  fileio.write_jsonl(path, rows)


def read_jsonl(path):
  return fileio.read_jsonl(path, strict=True)


def test_judge_pairs_end_to_end_and_resumable(tmp_path, server, demos):
  rows = []
  for k, d in enumerate(demos.values()):
    rows.append({"id": f"p{k}", "problem": d.prompt, "reference": d.example.answer, "trace_a": d.example.solution,
                 "trace_b": d.completion})
  src, out = tmp_path / "pairs.jsonl", tmp_path / "verdicts.jsonl"
  write_jsonl(src, rows)
  # No --judge_url: the CLI starts its own embedded server.
  summary = json.loads(cli("launch.judge_pairs", "--input", str(src), "--output", str(out)).strip().splitlines()[-1])
  assert summary["judged"] == len(rows) and summary["failed"] == 0
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
  summary = json.loads(cli("launch.judge_pairs", "--judge_url", server.url, "--input", str(src), "--output",
                           str(out)).strip().splitlines()[-1])
  assert summary["resumed"] == 3 and summary["judged"] == len(rows) - 3
  assert sorted(r["row"] for r in read_jsonl(out)) == list(range(len(rows)))


def test_failed_rows_are_recorded_and_retried_on_request(tmp_path, demos):
  d = demos["slip"]
  src, out = tmp_path / "pairs.jsonl", tmp_path / "verdicts.jsonl"
  write_jsonl(src, [{"problem": d.prompt, "reference": d.example.answer, "trace_a": d.completion,
                     "trace_b": d.example.solution}])

  async def main():
    config = fast_config(max_parse_retries=0)
    async with judges.serve_in_process(malformed_rate=1.0) as broken:
      first = await judges.judge_pairs_file(config, str(src), str(out), urls=[broken], progress=False)
    async with judges.serve_in_process() as good:
      kept = await judges.judge_pairs_file(config, str(src), str(out), urls=[good], progress=False)
      retried = await judges.judge_pairs_file(config, str(src), str(out), urls=[good], retry_failed=True,
                                              progress=False)
    return first, kept, retried

  first, kept, retried = asyncio.run(main())
  assert first["failed"] == 1 and kept["judged"] == 0 and retried["judged"] == 1 and retried["failed"] == 0
  (row,) = read_jsonl(out)
  assert row["verdict"] == "B" and row["outcome"] == 1.0 - 0.9


def test_jury_cli_scores_processbench_rows(tmp_path):
  out = tmp_path / "flaws.jsonl"
  stdout = cli("launch.jury", "--mode", "deliberation", "--input", PROCESSBENCH, "--output", str(out))
  assert "ProcessBench  acc1" in stdout and "balanced F1" in stdout
  summary = json.loads(stdout.strip().splitlines()[-1])
  pb = summary["metrics"]["processbench"]
  assert pb["num_erroneous"] == 10 and pb["num_correct"] == 10 and 0 <= pb["f1"] <= 1
  rows = read_jsonl(out)
  assert len(rows) == 20 and all(r["consensus"]["mode"] == "deliberation" for r in rows)
  assert {r["id"] for r in rows} == {json.loads(line)["id"] for line in open(PROCESSBENCH)}


def test_jury_cli_with_given_jurors_on_labelled_traces(tmp_path, server, demos):
  rows = []
  for d in demos.values():
    report = tasks.check_arithmetic(d.example.expression, d.example.answer, d.completion)
    rows.append({"problem": d.prompt, "reference": d.example.answer, "trace": d.completion,
                 "flawed_steps": [s.index for s in report.steps if s.impact]})
  src, out = tmp_path / "traces.jsonl", tmp_path / "flaws.jsonl"
  write_jsonl(src, rows)
  urls = ",".join([server.url] * 3)
  stdout = cli("launch.jury", "--jurors", urls, "--mode", "consolidation", "--input", str(src), "--output", str(out),
               "--judge.jury.error_min_impact=minor")
  m = json.loads(stdout.strip().splitlines()[-1])["metrics"]
  assert m["balanced_f1"] == 1.0 and "processbench" not in m  # accurate jurors, no ProcessBench labels


def test_judge_pairs_reads_a_reasoning_style_judge(tmp_path, demos):
  """The embedded judge writing like a served reasoning LLM (thinking in reasoning_content or inline,
  verdicts as [[A]], \\boxed{A}, Final verdict: A, **A**): the same verdicts as the plain style."""
  rows = [{"id": f"p{k}", "problem": d.prompt, "reference": d.example.answer, "trace_a": d.example.solution,
           "trace_b": d.completion} for k, d in enumerate(demos.values())]
  src, out = tmp_path / "pairs.jsonl", tmp_path / "verdicts.jsonl"
  write_jsonl(src, rows)
  summary = json.loads(cli("launch.judge_pairs", "--input", str(src), "--output", str(out),
                           "--judge.server.style=reasoning", "--judge.server.truncate_rate=0").strip().splitlines()[-1])
  assert summary["judged"] == len(rows) and summary["failed"] == 0
  got = {r["id"]: r for r in read_jsonl(out)}
  for k, d in enumerate(demos.values()):
    expected = "tie" if d.kind in ("clean", "skipped") else "A"
    assert got[f"p{k}"]["verdict"] == expected, (d.kind, got[f"p{k}"])
