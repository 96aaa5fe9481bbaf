"""`launch.score`: the verifiers on their own, run over the hand-written corpora of the choice
and code tasks, one score and its reason per row."""

import json
import pathlib

import pytest

from arena_jax import tasks
from arena_jax.tasks import choice_format
from arena_jax.tasks import scoring

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SAMPLES = ROOT / "arena_jax" / "tasks" / "samples"


def _jsonl(path):
  return [json.loads(line) for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path, rows):
  path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
  return str(path)


def test_the_choice_corpus_scores_as_its_letters_say_through_launch_score(tmp_path, python_m):
  corpus = _jsonl(DATA / "choice_completions.jsonl")
  rows = [{k: r[k] for k in ("id", "question", "options", "answer", "completion")} for r in corpus]
  out = tmp_path / "scores.jsonl"
  done = python_m("launch.score", "--task=choice", f"--input={_write(tmp_path / 'in.jsonl', rows)}", f"--output={out}")
  assert done.returncode == 0, done.stderr[-2000:]
  scores = _jsonl(out)
  assert [s["id"] for s in scores] == [r["id"] for r in corpus]
  wrong = []
  for r, s in zip(corpus, scores):
    correct = choice_format.LETTERS[choice_format.normalise_answer(r["options"], r["answer"])]  # the row's order
    if s["score"] != float(r["expect_letter"] == correct):
      wrong.append((r["id"], r["expect_letter"], correct, s))
    if r["expect_letter"]:
      assert f"answered {r['expect_letter']}" in s["reason"], (r["id"], s)
  assert not wrong, wrong
  summary = json.loads(done.stdout.strip().splitlines()[-1])
  assert summary["rows"] == len(corpus)


def test_the_code_corpus_scores_as_it_should(tmp_path):
  problems = {r["id"]: r for r in _jsonl(SAMPLES / "code_sample.jsonl")}
  corpus = _jsonl(DATA / "code_completions.jsonl")
  rows = [{**problems[r["id"]], "completion": r["completion"]} for r in corpus]
  scores = scoring.score_file("code", _write(tmp_path / "in.jsonl", rows))
  assert len(scores) == len(corpus)
  for r, s in zip(corpus, scores):
    assert s["score"] == float(r["expect_pass"]), (r["id"], r["note"], s)
    assert s["reason"].startswith(r["expect_reason"]), (r["id"], r["note"], s)  # + the error's message


def test_math_rows_and_bad_rows(tmp_path):
  rows = [
    {"question": "1 + 1?", "answer": 2, "completion": "So the answer is 2."},
    {"question": "Half?", "answer": "\\frac{1}{2}", "completion": "Answer: 0.5"},
    {"question": "No completion", "answer": 3},
  ]
  path = _write(tmp_path / "m.jsonl", rows)
  with pytest.raises(tasks.DataError, match=r"m\.jsonl:3: completion: missing or not a string"):
    scoring.score_file("math", path)
  scores = scoring.score_file("math", path, on_bad_row="skip")
  assert [(s["line"], s["score"], s["reason"]) for s in scores] == [
    (1, 1.0, "answered '2'"),
    (2, 1.0, "answered '0.5'"),
  ]
  with pytest.raises(ValueError, match="scores rows of a file-backed task"):
    scoring.score_file("arithmetic", path)
