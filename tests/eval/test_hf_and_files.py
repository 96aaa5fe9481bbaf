"""Evaluating what is not an RL run's own test split: a Hugging Face checkpoint before any RL
(`launch.eval --hf_path`), and another test file of the task a run trained on."""

import json
import pathlib

import pytest

from arena_jax import tasks
from arena_jax.eval import watch as watch_lib
from arena_jax.train import policy_io

pytest.importorskip("transformers")
from tests.train.test_real_smoke import qwen3_checkpoint  # noqa: E402  (needs transformers)

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "arena_jax" / "tasks" / "samples"


def test_a_hf_checkpoint_is_evaluated_as_step_zero_through_its_chat_template(tmp_path):
  checkpoint = tmp_path / "qwen3"
  checkpoint.mkdir()
  qwen3_checkpoint(checkpoint)
  c = watch_lib.default_config()
  with c.unlocked():
    c.suite = {"math": dict(task="jsonl", path=str(SAMPLES / "math_sample.jsonl"))}
  c.benchmarks = ("math",)
  c.num_examples, c.num_samples, c.max_new_tokens, c.batch_size, c.greedy = 2, 2, 4, 2, False
  c.tasks.prompt_format = "chat"
  c.samples_per_benchmark = 1
  out = tmp_path / "eval"
  row = watch_lib.evaluate_hf(str(checkpoint), c, out_dir=str(out), tensorboard=False)
  assert row["step"] == 0 and row["checkpoint"] == str(checkpoint)
  assert row["results"]["math"]["num_examples"] == 2 and 0.0 <= row["results"]["math"]["mean_pass_ratio"] <= 1.0
  [stored] = watch_lib.read_results(str(out))
  assert stored["results"] == row["results"]
  [sample] = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
  assert "<|im_start|>user" in sample["prompt"]  # the checkpoint's own chat template
  watch_lib.evaluate_hf(str(checkpoint), c, out_dir=str(out), tensorboard=False)
  assert [r["step"] for r in watch_lib.read_results(str(out))] == [0]  # evaluated again: replaced, not added


def test_another_test_file_of_the_trained_task_is_allowed_and_its_training_data_is_not(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  trained = tasks.default_config()
  trained.train_task = "jsonl"
  trained.jsonl.train_path, trained.jsonl.test_path = "/data/train.jsonl", "/data/test.jsonl"
  (run / policy_io.RUN_TASKS).write_text(trained.to_json(sort_keys=True))
  c = watch_lib.default_config()
  c.tasks.jsonl.test_path = str(SAMPLES / "math_sample.jsonl")
  assert watch_lib.run_config(str(run), c).tasks.jsonl.test_path == c.tasks.jsonl.test_path
  c.tasks.jsonl.train_path = "/data/other.jsonl"
  with pytest.raises(ValueError, match=r"config.tasks.jsonl.train_path='/data/other.jsonl' but the run trained"):
    watch_lib.run_config(str(run), c)
