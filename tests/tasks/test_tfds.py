"""TFDS datasets: built on first use without TensorFlow, reused afterwards, read with tfds.data_source."""

import json
import os
import subprocess
import sys

import pytest

from arena_jax import tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def small_config(tmp_path):
  config = tasks.default_config()
  config.data_dir = str(tmp_path / "data")
  config.arithmetic.update(num_train=200, num_test=40)
  config.countdown.update(num_train=50, num_test=30)
  return config


@pytest.mark.parametrize("name", ["arithmetic", "countdown"])
def test_stored_splits_are_the_generated_ones(tmp_path, name):
  config = small_config(tmp_path)
  task = tasks.get_task(name, config)
  for split in ("train", "test"):
    source = tasks.load_split(config, name, split)
    assert len(source) == config[name][f"num_{split}"]
    assert list(source) == list(task.generate(split))
    assert source[-1] == source[len(source) - 1] and source[1:3] == [source[1], source[2]]
  files = os.listdir(tasks.prepare(config, name))
  assert any(f.endswith("array_record-00000-of-00001") for f in files)


def test_built_once_then_reused_and_rebuilt_when_the_config_changes(tmp_path, monkeypatch):
  config = small_config(tmp_path)
  first = tasks.prepare(config, "arithmetic")
  calls = []
  original = tasks.ArithmeticTask.generate
  monkeypatch.setattr(
    tasks.ArithmeticTask, "generate", lambda self, split: calls.append(split) or original(self, split)
  )
  assert tasks.prepare(config, "arithmetic") == first and len(tasks.load_split(config, "arithmetic", "test")) == 40
  assert calls == []  # nothing regenerated
  config.arithmetic.max_ops = 3
  second = tasks.prepare(config, "arithmetic")
  assert second != first and sorted(calls) == ["test", "train"]


def test_jsonl_through_a_builder_config(tmp_path):
  config = small_config(tmp_path)
  train = tmp_path / "train.jsonl"
  train.write_text("".join(json.dumps({"problem": f"What is {i} + {i}?", "sol": 2 * i}) + "\n" for i in range(5)))
  config.jsonl.update(train_path=str(train), question_field="problem", answer_field="sol")
  source = tasks.load_split(config, "jsonl", "train")
  assert [e.answer for e in source] == ["0", "2", "4", "6", "8"]
  with pytest.raises(tasks.DataError, match=r"tasks\.jsonl\.test_path is not set"):
    tasks.load_split(config, "jsonl", "test")
  # Editing the file builds a new dataset (the builder config hashes the contents).
  train.write_text(json.dumps({"problem": "What is 1 + 2?", "sol": 3}) + "\n")
  assert [e.answer for e in tasks.load_split(config, "jsonl", "train")] == ["3"]
  # A bad file fails before anything is built or trained.
  train.write_text('{"problem": "x", "sol": 1}\n{"problem": \n')
  with pytest.raises(tasks.DataError, match=r"train\.jsonl:2"):
    tasks.load_split(config, "jsonl", "train")


def test_empty_split_is_a_clear_error(tmp_path):
  config = small_config(tmp_path)
  config.countdown.num_test = 0
  with pytest.raises(tasks.DataError, match=r"tasks\.countdown\.num_test is 0"):
    tasks.load_split(config, "countdown", "test")


def _run(code, tmp_path):
  env = dict(os.environ, PYTHONPATH=ROOT, ARENA_JAX_DATA_DIR=str(tmp_path / "data"))
  return subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120
  )


def test_import_is_quiet_and_light(tmp_path):
  out = _run(
    "import sys, arena_jax.tasks\n"
    "heavy = ('jax', 'tensorflow', 'tensorflow_datasets', 'math_verify')\n"
    "print(sorted(m for m in heavy if m in sys.modules))",
    tmp_path,
  )
  assert out.returncode == 0, out.stderr
  assert out.stdout == "[]\n" and out.stderr == ""


def test_build_and_read_need_no_tensorflow(tmp_path):
  code = (
    "import importlib.util, sys\n"
    "from arena_jax import tasks\n"
    "c = tasks.default_config()\n"
    "c.arithmetic.update(num_train=30, num_test=10)\n"
    "s = tasks.load_split(c, 'arithmetic', 'train')\n"
    "assert len(s) == 30 and s[0].answer\n"
    "assert importlib.util.find_spec('tensorflow') is None\n"
    "assert 'tensorflow' not in sys.modules\n"
    "print('ok')\n"
  )
  out = _run(code, tmp_path)
  assert out.returncode == 0, out.stderr
  assert out.stdout == "ok\n" and out.stderr == ""  # building prints nothing either
  assert os.path.isdir(tmp_path / "data" / "arena_arithmetic")
