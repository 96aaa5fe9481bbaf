"""Named benchmarks: entries resolved with the evaluation's defaults, clear errors, the
evaluator registry, and the Table 1 layout."""

import json

import pytest

import configs
from arena_jax.eval import benchmarks
from arena_jax.eval import evaluators
from arena_jax.eval import watch as watch_lib
from arena_jax.eval.evaluators import accuracy as accuracy_evaluator


def _config(**changes):
  c = watch_lib.default_config()
  with c.unlocked():
    c.update(changes)
  return c


def test_entries_take_the_evaluations_values_where_they_set_none(tmp_path):
  (tmp_path / "a.jsonl").write_text(json.dumps({"question": "q", "answer": 1}) + "\n")
  c = _config(
    data_root=str(tmp_path),
    suite={"aime": dict(task="jsonl", path="a.jsonl", num_samples=16), "lcb": dict(task="code", ks=(1, 5))},
    benchmarks=("aime", "arithmetic", "lcb"),
  )
  aime, arith, lcb = benchmarks.resolve(c)
  assert (aime.task, aime.path, aime.num_samples, aime.max_new_tokens) == ("jsonl", str(tmp_path / "a.jsonl"), 16, 96)
  assert (arith.name, arith.task, arith.path, arith.num_samples) == ("arithmetic", "arithmetic", "", 16)
  assert lcb.ks == (1, 5) and lcb.type == "accuracy"
  t = aime.tasks_config(c.tasks)
  assert t.jsonl.test_path == aime.path and "jsonl" in t.eval_tasks and c.tasks.jsonl.test_path == ""


@pytest.mark.parametrize(
  "suite, names, message",
  [
    ({}, ("nope",), "config.benchmarks: unknown task 'nope'"),
    ({"x": dict(task="jsonl", path="/no/such.jsonl")}, ("x",), r"config.suite.x.path: no such file"),
    ({"x": dict(task="arithmetic", path="a.jsonl")}, ("x",), "config.suite.x.path: the arithmetic task reads no files"),
    ({"x": dict(task="jsonl", sample=3)}, ("x",), r"config.suite.x: unknown field\(s\) \['sample'\]"),
    ({"x": dict(task="jsonl", ks=(32,))}, ("x",), "config.suite.x.ks: .* above num_samples = 16"),
    ({}, ("arithmetic", "arithmetic"), "names one benchmark twice"),
  ],
)
def test_bad_entries_are_errors_that_name_them(suite, names, message):
  with pytest.raises(ValueError, match=message):
    benchmarks.resolve(_config(suite=suite, benchmarks=names))


def test_the_shipped_suites_resolve():
  c = watch_lib.with_suite(watch_lib.default_config(), configs.get_config("configs/eval/samples.py"))
  resolved = benchmarks.resolve(c)
  assert {b.task for b in resolved} >= {"jsonl", "choice", "code"} and len(resolved) >= 5
  paper = configs.get_config("configs/eval/paper.py:/data/eval")
  assert tuple(paper.benchmarks) == ("aime24", "aime25", "aime26", "beyond_aime", "gpqa_diamond", "lcb_v6")
  assert paper.suite.lcb_v6.ks == (1, 5) and paper.data_root == "/data/eval"
  kept = watch_lib.with_suite(_config(num_samples=4), paper, keep={"num_samples"})
  assert kept.num_samples == 4 and kept.max_new_tokens == 32768


def test_an_evaluator_is_one_registered_class(monkeypatch):
  assert evaluators.EVALUATORS["accuracy"] is accuracy_evaluator.Accuracy

  @evaluators.EVALUATORS.register("count_problems")
  class CountProblems(evaluators.Evaluator):
    def run(self, policy, task, examples, rng):
      return {"problems": float(len(examples)), "first_prompt_chars": float(len(task.prompt(examples[0])))}

  try:
    c = _config(suite={"count": dict(task="arithmetic", type="count_problems")}, benchmarks=("count",), num_examples=7)
    c.tasks.arithmetic.num_test = 10
    out = watch_lib.evaluate_params(None, None, None, c, progress=False)
    assert out["count"]["problems"] == 7.0 and out["count"]["first_prompt_chars"] > 10
  finally:
    del evaluators.EVALUATORS._entries["count_problems"]  # pylint: disable=protected-access


def test_table1_has_a_row_per_benchmark_and_their_average():
  row = {
    "step": 40,
    "results": {
      "aime24": {"num_examples": 30, "mean_pass_ratio": 0.2, "greedy_accuracy": 0.1, "mean_response_length": 900.0},
      "gpqa": {"num_examples": 198, "mean_pass_ratio": 0.5, "mean_response_length": 400.0},
      "lcb": {"num_examples": 100, "mean_pass_ratio": 0.3, "pass@5": 0.45, "mean_response_length": 700.0},
    },
    "benchmarks": {
      "aime24": {"task": "jsonl", "n": 16, "ks": []},
      "gpqa": {"task": "choice", "n": 16, "ks": []},
      "lcb": {"task": "code", "n": 16, "ks": [1, 5]},
    },
  }
  lines = watch_lib.table1_markdown(row).splitlines()
  assert lines[0] == "### step 40"
  assert lines[2] == "| benchmark | task | problems | n | pass ratio@n | pass@5 | greedy | mean length |"
  assert lines[4] == "| aime24 | jsonl | 30 | 16 | 0.200 | – | 0.100 | 900.0 |"
  assert lines[6] == "| lcb | code | 100 | 16 | 0.300 | 0.450 | – | 700.0 |"
  assert lines[7] == "| **average** |  |  |  | 0.333 | 0.450 | 0.100 |  |"
