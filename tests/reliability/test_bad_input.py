"""Bad input: every config field is checked up front, a bad value gives one clear error
naming the field before anything compiles; bad dataset rows name file:line; a judge URL that does not
answer at start is a clear error within seconds."""

import contextlib
import json
import math
import os
import time
import urllib.request

import jax
import pytest

from arena_jax import judges, models, tasks
from arena_jax.tokenizer import SentencePieceTokenizer
from arena_jax.train import policy_io, train
from arena_jax.train.config import validate_config
from tests.reliability.helpers import free_port, killable_judge, smoke_config

# Sections whose fields another part of the project owns and validates (arena_jax/parallel.py).
OWNED_ELSEWHERE = ("mesh", "aot")


@contextlib.contextmanager
def compiles():
  """Collects the names of JAX compile events (tracing, lowering, backend compile) in the block."""
  seen = []

  def listener(name, duration, **kwargs):
    del duration, kwargs
    if name.startswith("/jax/core/compile"):
      seen.append(name)

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield seen
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


def fails_up_front(config, workdir, error=ValueError, match=None):
  """`train` raises `error` (matching `match`) before anything compiles or is written; returns the message."""
  with compiles() as seen, pytest.raises(error, match=match) as info:
    train(config, str(workdir))
  assert not seen, f"compiled before failing: {seen}"
  assert not os.path.exists(os.path.join(str(workdir), "checkpoints")), "built the trainer before failing"
  return str(info.value)


def _leaves(node, prefix=""):
  for key, value in node.items():
    if hasattr(value, "items"):
      yield from _leaves(value, f"{prefix}{key}.")
    else:
      yield f"{prefix}{key}", value


def _set(config, path, value):
  *parents, name = path.split(".")
  for p in parents:
    config = config[p]
  config[name] = value


def test_every_field_is_checked_up_front(data_dir):
  """A nonsense value in any field — a negative integer, a NaN or an infinity, a bool that is not one — is
  refused, by ConfigDict's types when the flag is parsed or by `validate_config` naming that field."""
  base = smoke_config("arena_live", data_dir)
  validate_config(base)
  missed, checked = [], 0
  for path, value in _leaves(base):
    if path.split(".")[0] in OWNED_ELSEWHERE:
      continue
    if isinstance(value, bool):
      probes = ["yes"]
    elif isinstance(value, int):
      probes = [-(10**9)]
    elif isinstance(value, float):
      probes = [math.nan, math.inf]
    else:
      continue  # strings and tuples: per-field cases below and in tests/{judges,tasks}/test_config.py
    for bad in probes:
      c = smoke_config("arena_live", data_dir)
      checked += 1
      try:
        _set(c, path, bad)
      except TypeError:
        continue  # refused at assignment, as `--config.<path>=yes` is refused by absl
      try:
        validate_config(c)
        missed.append(f"{path}={bad!r}: accepted")
      except ValueError as e:
        if f"config.{path}" not in str(e):
          missed.append(f"{path}={bad!r}: the error does not name the field: {e}")
  assert checked > 100 and not missed, "\n".join(missed)


@pytest.mark.parametrize(
  "path, value, match",
  [
    ("rollout.group_size", 1, r"config\.rollout\.group_size: a group needs ≥ 2"),
    ("judge.margin", 0.7, r"config\.judge\.margin: must be a finite number in \[0, 0\.5\], got 0\.7"),
    ("judge.margin", -0.1, r"config\.judge\.margin: must be a finite number in \[0, 0\.5\], got -0\.1"),
    ("reward.mode", "ppo", r"config\.reward\.mode: unknown reward mode 'ppo'"),
    ("reward.topology", "ladder", r"config\.reward\.topology: unknown topology 'ladder'"),
    ("reward.bt_solver", "adam", r"config\.reward\.bt_solver: unknown Bradley–Terry solver 'adam'"),
    ("init.random_model", "huge", r"config\.init\.random_model: unknown model config 'huge'"),
    ("optim.b2", 9.99, r"config\.optim\.b2"),
    ("rollout.top_k", -1, r"config\.rollout\.top_k"),
    ("judge.urls", ("localhost:8000",), r"config\.judge\.urls: entries must be http"),
    ("judge.client.timeout_s", 0.0, r"config\.judge\.client\.timeout_s"),
    ("tasks.train_task", "chess", r"config\.tasks\.train_task"),
  ],
)
def test_a_bad_field_is_one_clear_error_before_any_compile(path, value, match, data_dir, tmp_path):
  c = smoke_config("arena_live", data_dir)
  _set(c, path, value)
  fails_up_front(c, tmp_path / "run", match=match)


def test_a_mesh_that_does_not_match_the_devices(data_dir, tmp_path):
  c = smoke_config("arena_live", data_dir)
  c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 3, 1, 1  # 3 devices; the tests run with 8
  message = fails_up_front(c, tmp_path / "run", match=r"mesh")
  assert str(jax.device_count()) in message, message


def test_a_tokenizer_larger_than_the_checkpoint_vocab_fails_before_any_compile(data_dir, tmp_path):
  tokenizer = SentencePieceTokenizer.train(["Question: 1 + 2\nSolution:\n1 + 2 = 3.\n\nAnswer: 3"] * 8, 64)
  config = models.ModelConfig(
    vocab_size=tokenizer.vocab_size, d_model=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, mlp_dim=64
  )
  policy = tmp_path / "policy"
  policy_io.save_policy(policy, models.init_model(config, seed=0), config, tokenizer)
  small = tokenizer.vocab_size - 5  # a model_config.json from another checkpoint
  (policy / "model_config.json").write_text(
    json.dumps({**json.loads((policy / "model_config.json").read_text()), "vocab_size": small})
  )
  c = smoke_config("rlvr", data_dir)
  c.init.random_model, c.init.policy_dir = "", str(policy)
  message = fails_up_front(c, tmp_path / "run", match="vocab")
  for part in (str(tokenizer.vocab_size), str(small), "tokenizer.model", "model_config.json"):
    assert part in message, (part, message)


@pytest.mark.parametrize(
  "line, needle",
  [
    (b'{"question": "1 + 1?", "answer": 2', "malformed JSON"),
    (b'{"question": "1 + 1?"}', "answer: missing field"),
    (b'{"question": "", "answer": "2"}', "must be a non-empty string"),
    (b'{"question": "\xff 1 + 1?", "answer": "2"}', "not valid UTF-8"),
    (b'["1 + 1?", "2"]', "expected a JSON object"),
  ],
)
def test_a_bad_dataset_row_names_file_and_line(line, needle, tmp_path):
  path = tmp_path / "math.jsonl"
  path.write_bytes(b'{"question": "2 + 3?", "answer": "5"}\n\n' + line + b'\n{"question": "4?", "answer": 4}\n')
  c = smoke_config("rlvr", str(tmp_path / "datasets"))
  c.tasks.train_task, c.tasks.jsonl.train_path = "jsonl", str(path)
  message = fails_up_front(c, tmp_path / "run", error=tasks.DataError, match=needle)
  assert f"{path}:3" in message, message  # line 3: blank lines count


def test_an_unreachable_judge_url_is_a_clear_error_within_seconds(data_dir, tmp_path):
  dead = f"http://127.0.0.1:{free_port()}/v1"
  c = smoke_config("arena_live", data_dir)
  c.judge.urls = (dead,)
  c.judge.client.startup_check_s = 2.0
  start = time.monotonic()
  message = fails_up_front(c, tmp_path / "run", error=judges.JudgeUnreachableError, match="failed the start-up check")
  assert dead in message and "within 2 s" in message, message
  # Within seconds: the check's window, not a step's worth of retries (a behaviour bound, generous margin).
  assert time.monotonic() - start < 2.0 + 30.0


def test_the_start_up_check_names_each_dead_url_and_a_rejected_key(monkeypatch):
  monkeypatch.setenv("RELIABILITY_JUDGE_KEY", "s3cret")
  with killable_judge(api_key_env="RELIABILITY_JUDGE_KEY") as judge:
    dead = f"http://127.0.0.1:{free_port()}"
    judges.check_endpoints([judge.url], api_key="s3cret", timeout_s=5.0)  # the live one passes
    with pytest.raises(judges.JudgeUnreachableError) as info:
      judges.check_endpoints([judge.url, dead], api_key="s3cret", timeout_s=1.0)
    assert dead in str(info.value) and "1 of 2" in str(info.value) and judge.url + " " not in str(info.value)
    with pytest.raises(judges.JudgeUnreachableError, match="HTTP 401: the judge rejected the API key"):
      judges.check_endpoints([judge.url], api_key="wrong", timeout_s=5.0)


def test_a_judge_model_the_server_does_not_serve_fails_at_start_up_naming_what_it_serves(data_dir, tmp_path):
  with killable_judge() as judge:
    served = json.loads(urllib.request.urlopen(judge.url.rstrip("/") + "/v1/models", timeout=10).read())
    names = [m["id"] for m in served["data"]]
    judges.check_endpoints([judge.url], timeout_s=5.0, model=names[0])  # the served model passes
    c = smoke_config("arena_live", data_dir)
    c.judge.urls, c.judge.model = (judge.url,), "my-judge"
    message = fails_up_front(
      c, tmp_path / "run", error=judges.JudgeUnreachableError, match="does not serve judge.model='my-judge'"
    )
    assert repr(names[0]) in message, message
