"""The first real run, in small: the real pretrained policy (SmolLM2-135M-Instruct from `make real-model`) trained
with Arena-Live against a real LLM judge behind a real OpenAI-compatible server (`transformers serve`, started and
stopped by the run), on the CPU. The metrics must show real verdicts, and no server may outlive the run."""

import os

import pytest

import configs
from arena_jax import judges
from arena_jax.train import read_metrics, read_transcripts, train

pytest.importorskip("fastapi", reason="the `serve` extra (transformers serve): pip install -e '.[serve]'")


def _serving_processes(model: str) -> list[int]:
  """The pids of `transformers serve <model>` processes on this machine."""
  found = []
  for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    except OSError:
      continue
    if b"serve" in argv and model.encode() in argv and any(a.endswith(b"transformers") for a in argv):
      found.append(int(pid))
  return found


@pytest.mark.heavy  # ≈ 2 min: a real server's start and a real model's two steps
def test_two_arena_live_steps_of_the_real_model_against_a_real_llm_judge(real_gguf, one_real_model_run, tmp_path):
  del real_gguf  # installed: the policy and the judge are both the wheel's GGUF
  c = configs.get_config("configs/real_smollm2.py", "smoke,llm_judge")
  c.rollout.max_new_tokens = 24  # short answers: most groups end all wrong, reward-non-diverse, and are judged
  c.judge.transcripts = 1.0
  summary = train(c, str(tmp_path))
  assert summary["steps"] == 2

  rows = read_metrics(str(tmp_path))
  judged = sum(r.get("judge/groups", 0) for r in rows)
  assert judged >= 1, rows  # at least one group went to the LLM judge
  calls = list(read_transcripts(str(tmp_path)))
  assert calls and all(r["form"] == "pairwise" for r in calls)
  answered = [r for r in calls if r["failure_reason"] is None]
  # Real verdicts: the judge's own words name a letter (alone, or after a lead-in such as "The trace with A is
  # better", which the letter parser reads), taken as the verdict of the order it was shown.
  assert answered, [(r["failure_reason"], r["failure_detail"]) for r in calls]
  assert all(
    judges.formats.parse_letter(r["answer"]) is not None and r["verdict_shown"] in ("A", "B") for r in answered
  ), [r["answer"] for r in answered]
  assert {r["call"] for r in calls} == {0, 1}  # debias = both: each pair asked in both orders
  assert not _serving_processes(c.judge.model)  # the server stopped with the run


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
  assert not _serving_processes("j")


def test_a_server_that_does_not_become_healthy_in_time_is_stopped_and_named(real_gguf):
  del real_gguf
  server = judges.TransformersJudgeServer("pretrained:smollm2-135m-instruct", name="slowjudge", startup_timeout_s=0.5)
  with pytest.raises(
    judges.JudgeServerError, match=r"did not list 'slowjudge'.*within 0\.5 s \(judge\.serve_startup_s\)"
  ):
    server.start()
  assert not _serving_processes("slowjudge")


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
    assert len(_serving_processes("orphan")) == 1
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 30
    while _serving_processes("orphan") and time.monotonic() < deadline:
      time.sleep(0.5)
    assert not _serving_processes("orphan")
  finally:
    run.kill()
