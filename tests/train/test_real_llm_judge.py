"""The first real run, in small: the real pretrained policy (SmolLM2-135M-Instruct from `make real-model`) trained
with Arena-Live against a real LLM judge behind a real OpenAI-compatible server (`transformers serve`, started and
stopped by the run), on the CPU. The metrics must show real verdicts, and no server may outlive the run."""

import pytest

import configs
from arena_jax import judges
from arena_jax.train import train
from tests.real_model import assert_real_verdicts, serving_processes

pytest.importorskip("fastapi", reason="the `serve` extra (transformers serve): pip install -e '.[serve]'")


# The slow tier: two full fine-tuning steps of the real model against the real judge, ≈ 2 min alone; `make test`
# runs one LoRA step of the same path (tests/real_model/test_smoke.py).
@pytest.mark.slow
def test_two_arena_live_steps_of_the_real_model_against_a_real_llm_judge(real_gguf, one_real_model_run, tmp_path):
  del real_gguf  # installed: the policy and the judge are both the wheel's GGUF
  c = configs.get_config("configs/real_smollm2.py", "smoke,llm_judge")
  c.rollout.max_new_tokens = 24  # short answers: most groups end all wrong, reward-non-diverse, and are judged
  c.judge.transcripts = 1.0
  summary = train(c, str(tmp_path))
  assert summary["steps"] == 2

  assert_real_verdicts(str(tmp_path), c.judge.model)


def test_a_port_in_use_and_a_missing_model_fail_before_anything_starts(tmp_path):
  import socket  # noqa: PLC0415

  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    s.listen()
    server = judges.TransformersJudgeServer("pretrained:smollm2-135m-instruct", name="j", port=s.getsockname()[1])
    with pytest.raises(judges.JudgeServerError, match=r"judge\.serve_port=\d+: 127\.0\.0\.1:\d+ is in use"):
      server.start()
  with pytest.raises(FileNotFoundError, match=r"judge\.serve_model='/nope\.gguf': no such file"):
    judges.TransformersJudgeServer("/nope.gguf", name="j").start()
  assert not serving_processes("j")


def test_a_server_that_does_not_become_healthy_in_time_is_stopped_and_named(real_gguf):
  del real_gguf
  server = judges.TransformersJudgeServer("pretrained:smollm2-135m-instruct", name="slowjudge", startup_timeout_s=0.5)
  with pytest.raises(
    judges.JudgeServerError, match=r"did not list 'slowjudge'.*within 0\.5 s \(judge\.serve_startup_s\)"
  ):
    server.start()
  assert not serving_processes("slowjudge")


@pytest.mark.slow  # a second `transformers serve` of the real model; `make test` starts one (tests/real_model)
def test_a_killed_run_leaves_no_judge_server_behind(real_gguf):
  """SIGKILL gives the run no chance to stop its server: Linux's parent-death signal does."""
  import signal  # noqa: PLC0415
  import subprocess  # noqa: PLC0415
  import sys  # noqa: PLC0415
  import time  # noqa: PLC0415

  del real_gguf
  script = (
    "import sys, time; from arena_jax import judges; "
    "s = judges.TransformersJudgeServer('pretrained:smollm2-135m-instruct', name='orphan'); "
    "print(s.start(), flush=True); time.sleep(600)"
  )
  run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
  try:
    assert run.stdout.readline().startswith("http://127.0.0.1:")
    assert len(serving_processes("orphan")) == 1
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 30
    while serving_processes("orphan") and time.monotonic() < deadline:
      time.sleep(0.5)
    assert not serving_processes("orphan")
  finally:
    run.kill()
