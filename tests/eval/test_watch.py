"""Checkpoint-driven evaluation: each checkpoint evaluated exactly once, restart-safe; a run's policy spec."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading

import pytest

from arena_jax.eval import watch as watch_lib
from arena_jax.train import policy_io, train
from tests import cache
from tests.train.conftest import smoke_config

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  data = str(tmp_path_factory.mktemp("datasets"))
  workdir = str(tmp_path_factory.mktemp("run"))
  c = smoke_config("rlvr", data)
  c.num_steps, c.checkpoint.every, c.checkpoint.keep = 3, 1, 5
  train(c, workdir)
  return workdir, data


def test_each_checkpoint_once_and_restart_safe(run_dir, tmp_path):
  workdir, _ = run_dir
  calls = []
  fake = lambda w, step, cfg: calls.append(step) or {"arithmetic": {"greedy_accuracy": step / 10}}
  out = str(tmp_path / "eval")
  rows = watch_lib.watch(workdir, None, out_dir=out, evaluate_fn=fake, tensorboard=False)
  assert [r["step"] for r in rows] == [1, 2, 3] and calls == [1, 2, 3]
  # A restarted watcher finds nothing new.
  assert watch_lib.watch(workdir, None, out_dir=out, evaluate_fn=fake, tensorboard=False) == []
  assert calls == [1, 2, 3]
  # A row torn by a crash is not counted: that step is evaluated again, once.
  lines = open(os.path.join(out, "eval.jsonl")).read().splitlines()
  with open(os.path.join(out, "eval.jsonl"), "w") as f:
    f.write("\n".join(lines[:2]) + "\n" + lines[2][:10])
  watch_lib.watch(workdir, None, out_dir=out, evaluate_fn=fake, tensorboard=False)
  assert calls == [1, 2, 3, 3]
  assert [r["step"] for r in watch_lib.read_results(out)] == [1, 2, 3]
  assert "| 3 | 0.300 |" in open(os.path.join(out, "eval.md")).read()


def test_watch_picks_up_new_checkpoints_and_stops_after_step(run_dir, tmp_path):
  workdir, _ = run_dir
  out = str(tmp_path / "eval")
  seen = []

  def fake(w, step, cfg):
    seen.append(step)
    if step == 2:  # while step 2 is evaluated, the trainer "writes" checkpoint 7
      os.makedirs(os.path.join(workdir, "checkpoints", "7"), exist_ok=True)
    return {"arithmetic": {"greedy_accuracy": 0.0}}

  try:
    watch_lib.watch(workdir, None, out_dir=out, evaluate_fn=fake, poll_s=0.01, stop_after_step=7, tensorboard=False)
  finally:
    os.rmdir(os.path.join(workdir, "checkpoints", "7"))
  assert seen == [1, 2, 3, 7]


def test_watch_without_a_stop_condition_polls_until_interrupted(run_dir, tmp_path):
  """`launch.eval --watch` with neither --stop_after_step nor --timeout_s: a pass that finds nothing new
  does not end the watch; a checkpoint written later is evaluated; an interrupt (SIGINT here; SIGTERM in
  launch.eval) ends it cleanly with the rows kept."""
  workdir, _ = run_dir
  out, late = str(tmp_path / "eval"), os.path.join(workdir, "checkpoints", "9")
  seen = []
  interrupt = lambda: os.kill(os.getpid(), signal.SIGINT)

  def fake(w, step, cfg):
    seen.append(step)
    if step == 9:
      threading.Timer(0.2, interrupt).start()
    return {"arithmetic": {"greedy_accuracy": 0.0}}

  # Checkpoint 9 appears after several empty polls; the safety timer only ends a watch that missed it.
  writer, safety = threading.Timer(0.5, os.makedirs, (late,)), threading.Timer(20.0, interrupt)
  # Ctrl-C as a user's shell delivers it: Python's own SIGINT handler, whatever disposition the test
  # runner's worker process was started with (a fresh-clone CI run once sat here until pytest's timeout).
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  writer.start(), safety.start()
  try:
    rows = watch_lib.watch(workdir, None, out_dir=out, evaluate_fn=fake, poll_s=0.05, follow=True, tensorboard=False)
  finally:
    signal.signal(signal.SIGINT, previous)
    writer.cancel(), safety.cancel()
    writer.join()
    if os.path.isdir(late):
      os.rmdir(late)
  assert seen == [1, 2, 3, 9] and [r["step"] for r in rows] == [1, 2, 3, 9]
  assert [r["step"] for r in watch_lib.read_results(out)] == [1, 2, 3, 9]


@pytest.mark.slow  # a full evaluation of a checkpoint
def test_real_evaluation_of_a_checkpoint(run_dir):
  workdir, data = run_dir
  cfg = watch_lib.default_config()
  cfg.tasks.data_dir = data
  cfg.tasks.arithmetic.num_train, cfg.tasks.arithmetic.num_test = 256, 32
  cfg.tasks.countdown.num_train, cfg.tasks.countdown.num_test = 64, 16
  cfg.tasks.arithmetic_shift.num_test = 8
  cfg.benchmarks = ("arithmetic", "arithmetic_shift", "countdown")
  cfg.num_examples, cfg.num_samples, cfg.max_new_tokens, cfg.batch_size = 4, 2, 8, 4
  results = watch_lib.evaluate_step(workdir, 2, cfg)
  assert set(results) == {"arithmetic", "arithmetic_shift", "countdown"}
  for metrics in results.values():
    assert 0.0 <= metrics["greedy_accuracy"] <= 1.0 and 0.0 <= metrics["mean_pass_ratio"] <= 1.0
    # The process metrics: right answers are faithful or carry compensating errors.
    assert metrics["faithful_accuracy"] + metrics["compensating_rate"] == pytest.approx(metrics["mean_pass_ratio"])
    assert metrics["greedy_faithful_accuracy"] <= metrics["greedy_accuracy"]
    assert all(0.0 <= v for k, v in metrics.items() if k.startswith(("all_correct_flawed", "all_wrong_error")))
  watch_lib.pop_samples(results)
  json.dumps(results)  # serialisable as an eval.jsonl row


def test_evaluation_writes_what_the_policy_wrote(run_dir, tmp_path):
  """`launch.eval` keeps a few completions per benchmark and step: in samples.jsonl,
  not in the metrics rows, each once even when a step is evaluated again after a torn row."""
  workdir, _ = run_dir
  c = watch_lib.default_config()
  c.update(dict(num_examples=3, num_samples=2, max_new_tokens=8, benchmarks=("arithmetic",), samples_per_benchmark=4))
  out = str(tmp_path / "eval")
  only = lambda w, step, cfg: watch_lib.evaluate_step(w, step, cfg) if step == 3 else {"arithmetic": {}}
  watch_lib.watch(workdir, c, out_dir=out, evaluate_fn=only, tensorboard=True)
  rows = [r for r in map(json.loads, open(os.path.join(out, "samples.jsonl"))) if r["step"] == 3]
  assert [(r["problem"], r["kind"]) for r in rows] == [(0, "greedy"), (0, "sampled"), (1, "greedy"), (1, "sampled")]
  for r in rows:
    assert r["benchmark"] == "arithmetic" and r["prompt"] and isinstance(r["completion"], str)
    assert r["verifier"] in (0.0, 1.0)
  assert all("samples" not in r["results"]["arithmetic"] for r in watch_lib.read_results(out))
  assert os.listdir(os.path.join(out, "tensorboard"))
  # Step 3's row torn by a crash: the step is evaluated again and its completions appear once.
  lines = open(os.path.join(out, "eval.jsonl")).read().splitlines()
  with open(os.path.join(out, "eval.jsonl"), "w") as f:
    f.write("\n".join(lines[:2]) + "\n" + lines[2][:10])
  watch_lib.watch(workdir, c, out_dir=out, evaluate_fn=only, tensorboard=False)
  again = [r for r in map(json.loads, open(os.path.join(out, "samples.jsonl"))) if r["step"] == 3]
  assert [(r["problem"], r["kind"]) for r in again] == [(r["problem"], r["kind"]) for r in rows]


def test_a_trainer_run_directory_holds_its_policy_spec(run_dir):
  workdir, _ = run_dir
  config, tokenizer, add_bos = policy_io.load_run_policy(workdir)
  assert add_bos and config.vocab_size >= tokenizer.vocab_size
  assert not [f for f in os.listdir(workdir) if f.endswith(".tmp")]  # every write renamed into place


def test_missing_run_directory_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="policy.json is missing"):
    policy_io.load_run_policy(str(tmp_path))


def test_evaluation_scores_the_runs_own_problems(run_dir):
  """The evaluator reads the task settings the run trained with (its workdir records them), not the
  library defaults: same difficulty, same held-out split."""
  workdir, _ = run_dir
  c = watch_lib.default_config()
  c.update(dict(num_examples=4, num_samples=2, max_new_tokens=8, benchmarks=("arithmetic",)))
  assert c.tasks.arithmetic.max_operand == 20  # the library default …
  resolved = watch_lib.run_config(workdir, c)
  assert resolved.tasks.arithmetic.max_operand == 15 and resolved.tasks.arithmetic.num_test == 32  # … the run's
  assert c.tasks.arithmetic.max_operand == 20  # the caller's config is left alone
  model_config, tokenizer, add_bos = policy_io.load_run_policy(workdir)
  mesh, rules = watch_lib.eval_mesh(workdir, 3, c)  # the run's own mesh (the suite has 8 CPU devices)
  params = watch_lib.load_params(workdir, 3, model_config, mesh, rules)
  want = watch_lib.evaluate_params(params, model_config, tokenizer, resolved, add_bos=add_bos, mesh=mesh, rules=rules)
  assert watch_lib.evaluate_step(workdir, 3, c) == want
  # A flag that agrees with the run is fine; one that contradicts it names both values.
  c.tasks.arithmetic.max_operand = 15
  assert watch_lib.run_config(workdir, c).tasks.arithmetic.max_operand == 15
  c.tasks.arithmetic.max_operand = 12
  with pytest.raises(ValueError, match=r"config.tasks.arithmetic.max_operand=12 but the run trained with 15"):
    watch_lib.run_config(workdir, c)
  # Settings of a task the run did not train on (the out-of-distribution benchmark) are the caller's.
  c.tasks.arithmetic.max_operand = 20
  c.tasks.countdown.num_test = 16
  assert watch_lib.run_config(workdir, c).tasks.countdown.num_test == 16


def test_a_run_recorded_before_a_task_existed_gets_its_defaults(run_dir, tmp_path):
  """tasks.json written before a section was added (here: arithmetic_shift) still evaluates: the
  recorded fields are the run's, the missing ones the given config's."""
  import shutil

  workdir, _ = run_dir
  old = tmp_path / "old_run"
  shutil.copytree(workdir, old, ignore=shutil.ignore_patterns("checkpoints", "eval", "transcripts"))
  recorded = json.loads((old / policy_io.RUN_TASKS).read_text())
  del recorded["arithmetic_shift"]
  (old / policy_io.RUN_TASKS).write_text(json.dumps(recorded))
  c = watch_lib.default_config()
  resolved = watch_lib.run_config(str(old), c)
  assert resolved.tasks.arithmetic_shift.to_dict() == c.tasks.arithmetic_shift.to_dict()
  assert resolved.tasks.arithmetic.max_operand == 15  # the run's own


def test_a_run_that_set_a_section_where_the_config_holds_none(run_dir, tmp_path):
  """chat_template_kwargs defaults to None; a run that set it to a dict records a section: the run's dict
  comes back whole (an empty one too), not a clash between a leaf and its children."""
  import shutil

  workdir, _ = run_dir
  for kwargs in ({"enable_thinking": False}, {}):
    old = tmp_path / f"run_{len(kwargs)}"
    shutil.copytree(workdir, old, ignore=shutil.ignore_patterns("checkpoints", "eval", "transcripts"))
    recorded = json.loads((old / policy_io.RUN_TASKS).read_text())
    recorded["chat_template_kwargs"] = kwargs
    (old / policy_io.RUN_TASKS).write_text(json.dumps(recorded))
    c = watch_lib.default_config()
    assert c.tasks.chat_template_kwargs is None
    resolved = watch_lib.run_config(str(old), c)
    assert dict(resolved.tasks.chat_template_kwargs) == kwargs


def test_a_run_without_recorded_tasks_keeps_the_given_settings(run_dir, tmp_path, caplog):
  workdir, _ = run_dir
  old = tmp_path / "old_run"
  old.mkdir()
  c = watch_lib.default_config()
  assert watch_lib.run_config(str(old), c) is c
  assert "records no task settings" in caplog.text


@pytest.mark.slow  # five benchmarks in a child
def test_one_launch_eval_call_scores_five_named_benchmarks_of_three_kinds(run_dir, tmp_path):
  """Issue 29's target: the shipped suite (math, choice and code files beside the testbed's two tasks) in one
  call, printed and written in the Table 1 layout; a test file other than the run's own is allowed."""
  workdir, data = run_dir
  out = tmp_path / "eval"
  args = [
    f"--workdir={workdir}",
    f"--out_dir={out}",
    "--suite=configs/eval/samples.py",
    "--step=3",
    "--config.num_examples=2",
    "--config.num_samples=5",
    "--config.max_new_tokens=8",
    "--config.batch_size=2",
    "--config.greedy=False",
  ]
  env = dict(os.environ, **cache.jax_env(), ARENA_JAX_DATA_DIR=data)
  done = subprocess.run(
    [sys.executable, "-m", "launch.eval", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
  )
  assert done.returncode == 0, done.stderr[-3000:]
  [row] = watch_lib.read_results(str(out))
  names = ["sample_math", "sample_choice", "sample_code", "arithmetic", "arithmetic_shift"]
  assert list(row["results"]) == names
  assert [row["benchmarks"][n]["task"] for n in names] == ["jsonl", "choice", "code", "arithmetic", "arithmetic_shift"]
  for name in names:
    m = row["results"][name]
    assert m["num_examples"] == 2 and 0.0 <= m["mean_pass_ratio"] <= 1.0
  assert "pass@5" in row["results"]["sample_code"]
  table = (out / "eval.md").read_text()
  for name in names:
    assert f"| {name} | " in table
  assert "| **average** |" in table and "| benchmark | task | problems | n | pass ratio@n | pass@5 |" in done.stdout
