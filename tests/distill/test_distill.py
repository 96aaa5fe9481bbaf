"""`arena_jax.distill`: a pairwise judge distilled from a teacher. A tiny student (a random 2-layer model
with a byte-level BPE tokenizer and a chat template, exported as a HF directory) learns the embedded process
checker's verdicts on arithmetic groups whose traces differ by a redundant step; then it is served."""

import dataclasses
import importlib
import json
import os
import random
import shutil
import subprocess
import sys
from types import SimpleNamespace

import filelock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import distill, judges, models, tasks
from arena_jax.distill import student as student_lib
from arena_jax.errors import MissingFileError
from arena_jax.models.hf import export as hf_export
from arena_jax.models.hf import tokenizer_files
from arena_jax.tokenizer import load_tokenizer
from tests import cache
from tests.tokenizer_fixtures import write_bpe_tokenizer

demonstrations = importlib.import_module("arena_jax.tasks.demonstrations")

CHAT = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# A short letter template (the default one is ~700 characters: a tiny model's prompts stay short this way).
TEMPLATE = "{problem} = {reference}\nA:\n{trace_a}\nB:\n{trace_b}\nAnswer with one letter, A or B"


def _student_dir(path, chat_template=CHAT):
  path.mkdir(parents=True, exist_ok=True)
  config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
  if chat_template:
    config["chat_template"] = chat_template
  write_bpe_tokenizer(
    path, vocab_size=400, special_tokens=["<|endoftext|>", "<|im_end|>", "<|im_start|>"], config=config
  )
  tokenizer = load_tokenizer(path)
  config = models.ModelConfig(
    vocab_size=416,
    d_model=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    mlp_dim=128,
    max_position_embeddings=1024,
  )
  params = models.pure_params(models.init_model(config, jax.random.key(0)))
  hf_export.export_params(
    jax.device_get(params), config, path, special_token_ids=tokenizer_files.special_token_ids(tokenizer)
  )
  return path


def _groups_file(path, num_problems, kinds=("clean", "redundant", "clean", "redundant")):
  """All-correct groups (the router's non-diverse ones) of clean and redundant demonstrations."""
  tc = tasks.default_config()
  task = tasks.get_task("arithmetic", tc)
  rng = random.Random(0)
  with open(path, "w", encoding="utf-8") as f:
    for e in list(tasks.load_split(tc, "arithmetic", "train"))[:num_problems]:
      traces = [demonstrations.write_demonstration(task, e, k, rng)[1] for k in kinds]
      row = {"problem": task.judge_question(e), "reference": task.reference_answer(e), "traces": traces}
      f.write(json.dumps(row | {"rewards": [1.0] * len(traces)}) + "\n")
  return path


def _config(tmp, groups, student, **train):
  (tmp / "templates").mkdir(exist_ok=True)
  (tmp / "templates" / "pairwise_letter.txt").write_text(TEMPLATE)
  c = distill.default_config()
  c.source = str(groups)
  c.student.source = str(student)
  c.teacher.template_dir = str(tmp / "templates")
  c.train.update(dict(lr=1e-3, max_steps=300, eval_every=50, patience=100, batch_pairs=8) | train)
  c.min_decisive = 8
  return c


# The distillation of the fixture, in a child: 300 training steps are compute, which the suite's -O0 compiles
# (tests/conftest.py) slow (74 s at -O0, 41 s at XLA's full optimisation, tests.cache.optimized_env).
_DISTILL = """
import json, sys
import ml_collections
from arena_jax import distill
distill.distill(ml_collections.ConfigDict(json.loads(sys.argv[1])), sys.argv[2], log=lambda m: None)
"""


@pytest.fixture(scope="session")
def distilled(tmp_path_factory):
  """(config, out_dir, report) of the tiny student distilled from the embedded checker, trained once per session:
  the xdist workers share it under a lock (the first to ask trains it, the others read its report)."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent  # this session's folder, above each worker's own base temp
  tmp = root / "distill"
  with filelock.FileLock(str(root / "distill.lock")):
    if not (tmp / "out" / distill.run.REPORT_FILE).is_file():
      tmp.mkdir(exist_ok=True)
      c = _config(tmp, _groups_file(tmp / "groups.jsonl", 120), _student_dir(tmp / "student"))
      command = [sys.executable, "-c", _DISTILL, c.to_json(), str(tmp / "out")]
      proc = subprocess.run(command, env=cache.optimized_env(), capture_output=True, text=True, timeout=1200)
      assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads((tmp / "out" / distill.run.REPORT_FILE).read_text(encoding="utf-8"))
  return _config(tmp, tmp / "groups.jsonl", tmp / "student"), tmp / "out", report


# ── the loss and the batches ──


def test_the_soft_cross_entropy_is_the_cross_entropy_against_p_on_a_and_1_minus_p_on_b():
  logits = jnp.asarray(np.random.default_rng(0).normal(size=(3, 7)), jnp.float32)
  logp = jax.nn.log_softmax(logits, -1)
  targets, weights = jnp.asarray([1.0, 0.3, 0.5]), jnp.asarray([1.0, 1.0, 0.0])
  got = student_lib.soft_cross_entropy(logp, (2, 5), targets, weights)
  want = -(np.array([1.0, 0.3]) * np.asarray(logp)[:2, 2] + np.array([0.0, 0.7]) * np.asarray(logp)[:2, 5]).mean()
  np.testing.assert_allclose(float(got), want, rtol=1e-6)  # float32, a sum of 2 terms: a few ulps
  # Its gradient in the logits is softmax − target: all the mass moves onto the two labels, in ratio p : 1 − p.
  grad = jax.grad(lambda z: student_lib.soft_cross_entropy(jax.nn.log_softmax(z, -1), (2, 5), targets, weights))(logits)
  target = np.zeros((3, 7))
  target[:, 2], target[:, 5] = targets, 1 - targets
  want_grad = (np.asarray(jax.nn.softmax(logits, -1)) - target) * np.array([[0.5], [0.5], [0.0]])
  np.testing.assert_allclose(np.asarray(grad), want_grad, atol=1e-6)


def test_a_judge_that_leans_to_a_position_loses_single_order_agreement_and_shows_its_bias():
  labels = [SimpleNamespace(outcome=o, kind="slip") for o in (1.0, 0.0, 1.0, 0.5)]
  fair = distill.judge_measures(labels, np.asarray([0.9, 0.2, 0.7, 0.5]), np.asarray([0.1, 0.8, 0.3, 0.5]))
  assert fair["agreement_vs_teacher"] == fair["single_order_agreement"] == 1.0 and fair["decisive_pairs"] == 3
  assert fair["position_bias"] == pytest.approx(0.0, abs=1e-12)
  # Says A with 3/4 whatever it is shown: right in one order of each pair, its debiased outcome exactly 1/2 (a miss).
  leaning = distill.judge_measures(labels, np.full(4, 0.75), np.full(4, 0.75))
  assert leaning["single_order_agreement"] == 0.5 and leaning["agreement_vs_teacher"] == 0.0
  assert leaning["position_bias"] == pytest.approx(0.25, abs=1e-12)


def test_both_orders_of_a_pair_land_in_the_same_batch(tmp_path):
  student = student_lib.load_student(str(_student_dir(tmp_path / "s")))
  pair = distill.Pair("Compute 1 + 2.", "3", "1 + 2 = 3.\n\nAnswer: 3", "Answer: 3", 0)
  labels = [distill.Label(dataclasses.replace(pair, group=i), 0.9, "skipped") for i in range(5)]
  judge = judges.default_config()
  rows = student_lib.pair_rows(student, labels, judge, max_trace_chars=0, max_tokens=4096)
  assert [(r.pair_index, r.swapped, round(r.target, 6)) for r in rows[:2]] == [(0, False, 0.9), (0, True, 0.1)]
  shown = student.tokenizer.decode(list(rows[0].tokens))
  assert shown.index("1 + 2 = 3.") < shown.index("Answer: 3\n")  # the first trace shown as A, then swapped
  swapped = student.tokenizer.decode(list(rows[1].tokens))
  assert swapped.index("[The Start of Trace A]\nAnswer: 3") >= 0
  batches = student_lib.pair_batches(rows, 2, seed=0)
  for _ in range(7):  # across epochs too (5 pairs, 2 per batch)
    batch = next(batches)
    assert len(batch) == 4
    for pair_index in {r.pair_index for r in batch}:
      assert sorted(r.swapped for r in batch if r.pair_index == pair_index) == [False, True]


# ── the tiny student ──


def test_the_student_learns_the_teachers_verdicts_and_loses_its_position_bias(distilled):
  _, out, report = distilled
  before, after = report["before"], report["after"]
  n = after["decisive_pairs"]
  assert n >= 30 and set(after["per_kind"]) == {"redundant"}  # the pairs the checker separates: a redundant step
  # Above its start by more than both 95% intervals allow: the intervals (Wilson, of n pairs) do not overlap.
  assert after["agreement_lo95"] > before["agreement_hi95"], (before, after)
  assert after["position_bias"] <= 0.05 and after["position_bias"] < before["position_bias"]
  assert after["brier"] < before["brier"]
  assert report["training"]["best_step"] > 0 and report["pairs"]["failed"] == 0
  assert (out / "export" / "config.json").exists() and (out / "report.md").read_text().count("|") > 10
  # The labels are kept: a rerun with the same settings reads them instead of asking the teacher again.
  head = json.loads((out / distill.run.LABELS_FILE).read_text().splitlines()[0])
  assert head["teacher"]["asked"] == report["pairs"]["labelled"]


@pytest.mark.slow  # a LoRA student's programs
def test_the_rerun_reads_the_labels_and_lora_trains_the_adapters_only(distilled, tmp_path):
  c, out, report = distilled
  c = c.copy_and_resolve_references()
  c.student.lora_rank = 4
  c.train.max_steps = 4
  c.train.eval_every = 2
  said = []
  (tmp_path / "again").mkdir()
  shutil.copy(out / distill.run.LABELS_FILE, tmp_path / "again")
  again = distill.distill(c, tmp_path / "again", log=said.append)
  assert any("reading the teacher's labels" in m for m in said)
  assert again["pairs"] == report["pairs"]
  assert again["student"]["lora_rank"] == 4 and (tmp_path / "again" / "export" / "config.json").exists()


def test_a_spent_time_limit_ends_training_with_a_last_validation(distilled, tmp_path):
  """train.max_minutes covers the last validation: out of time after the first step, the run validates and stops."""
  c, out, _ = distilled
  c = c.copy_and_resolve_references()
  c.train.max_minutes = 1e-6
  shutil.copy(out / distill.run.LABELS_FILE, tmp_path)
  training = distill.distill(c, tmp_path, log=lambda m: None)["training"]
  assert training["stopped"] == "max_minutes" and training["steps"] == 1
  assert [h["step"] for h in training["history"]] == [1] and training["best_step"] == 1


def test_the_weights_average_warms_up_then_decays_at_its_rate():
  """SPEC §10: rate min(decay, (1 + t) / (10 + t)) on the kept average, 1 − rate on the new weights."""
  a, w = {"x": jnp.full((3,), 2.0)}, {"x": jnp.full((3,), 4.0)}
  for t, rate in ((1, 2 / 11), (2, 3 / 12), (1000, 0.9)):
    got = student_lib.average_weights(a, w, 0.9, t)["x"]
    np.testing.assert_allclose(np.asarray(got), 2.0 * rate + 4.0 * (1 - rate), rtol=1e-6)  # float32, 2 terms


def test_the_student_kept_is_the_weights_average_when_asked(tmp_path):
  """train.average > 0: the student validated and kept is the moving average of the trained weights, not the last
  weights. Two steps (the first at the warm-up's learning rate 0 leaves the weights as they were): the average is
  1/4 of the start and 3/4 of the weights after step 2, the rate at t = 2."""
  student = student_lib.load_student(str(_student_dir(tmp_path / "s")))
  pair = distill.Pair("Compute 1 + 2.", "3", "1 + 2 = 3.\n\nAnswer: 3", "1 + 2 = 3.\n\n1 + 2 = 3.\n\nAnswer: 3", 0)
  labels = [distill.Label(dataclasses.replace(pair, group=i), 1.0, "redundant") for i in range(4)]
  c = _config(tmp_path, tmp_path / "unused.jsonl", tmp_path / "s", max_steps=2, eval_every=2, batch_pairs=2)
  rows = student_lib.pair_rows(student, labels, c.teacher, max_trace_chars=0, max_tokens=4096)
  start = jax.device_get(student.trainable)
  last, _ = distill.run.train_student(student, rows, labels, c, log=lambda m: None)
  c.train.average = 0.9
  averaged, record = distill.run.train_student(student, rows, labels, c, log=lambda m: None)
  assert record["best_step"] == 2
  moved = 0.0
  for (path, w0), w2, a in zip(
    jax.tree_util.tree_leaves_with_path(start),
    jax.tree.leaves(jax.device_get(last.trainable)),
    jax.tree.leaves(jax.device_get(averaged.trainable)),
    strict=True,
  ):
    # float32: each weight a sum of two rounded terms, after a first average that rounds w0 itself; and the
    # averaged run's step is a program of its own (the average is part of it), whose weights after step 2 may be
    # a rounding apart from the first run's w2. The spacing of the larger weight bounds it all 8 times over (4 times
    # was exceeded by 12% in one weight of 4,096 under the suite's compile flags, tests/cache.py).
    want = 0.25 * np.asarray(w0, np.float64) + 0.75 * np.asarray(w2, np.float64)
    bound = 8 * np.spacing(np.maximum(np.abs(w0), np.abs(w2)).astype(np.float32)).astype(np.float64)
    np.testing.assert_array_less(np.abs(np.asarray(a, np.float64) - want), bound + 1e-30, err_msg=str(path))
    moved = max(moved, float(np.max(np.abs(np.asarray(w2, np.float64) - np.asarray(w0, np.float64)))))
  assert moved > 0  # the second step moved the weights: the average is not the start itself


def test_the_exported_student_judges_through_the_judge_client_behind_launch_serve(distilled):
  """`launch.serve`'s server (in process) in the `logprobs` format: soft outcomes straight from the student."""
  from arena_jax import serving  # noqa: PLC0415

  c, out, report = distilled
  policy = serving.load_served_policy(out / "export", name="student")
  judge_config = c.teacher.copy_and_resolve_references()
  judge_config.update(dict(model="student", verdict_format="logprobs", debias="both"))
  judge_config.client.startup_check_s = 0.0
  test_pairs = [l for l in map(json.loads, (out / "labels.jsonl").read_text().splitlines()[1:]) if l["outcome"] != 0.5]
  with serving.PolicyServer(policy, max_rows=8, window_s=0.05) as server:
    import asyncio  # noqa: PLC0415

    async def ask():
      judge = judges.make_judge(judge_config, [server.url])
      try:
        return await judge.judge_pairs(
          [judges.PairRequest(p["problem"], p["reference"], p["first"], p["second"]) for p in test_pairs[:6]]
        )
      finally:
        await judge.close()

    results = asyncio.run(ask())
  assert all(r.ok for r in results), [r.failure_detail for r in results]
  agree = [np.sign(r.outcome - 0.5) == np.sign(p["outcome"] - 0.5) for r, p in zip(results, test_pairs)]
  assert sum(agree) >= 5, [(r.outcome, p["outcome"]) for r, p in zip(results, test_pairs)]


# ── bad input ──


def test_too_few_decisive_pairs_say_how_many_there_are_and_are_needed(tmp_path):
  student = _student_dir(tmp_path / "s")
  c = _config(tmp_path, _groups_file(tmp_path / "g.jsonl", 6), student)
  c.min_decisive = 1000
  with pytest.raises(
    distill.TooFewPairsError, match=r"^\d+ decisive training pairs .*, 1000 needed \(config\.min_decisive\)"
  ):
    distill.distill(c, tmp_path / "out", log=lambda m: None)
  assert (tmp_path / "out" / "labels.jsonl").exists()  # the teacher's labels are kept for the next try


def test_a_teacher_that_fails_every_judgment_is_named(tmp_path):
  c = _config(tmp_path, _groups_file(tmp_path / "g.jsonl", 4), tmp_path / "unused")
  c.teacher.server.error_rate = 1.0
  c.teacher.client.max_retries = 0
  with pytest.raises(
    distill.TeacherError, match=r"the teacher \(judge\.model='arena-judge' .*\) failed all \d+ judgments: http_5\d\d"
  ):
    distill.distill(c, tmp_path / "out", log=lambda m: None)


def test_a_student_without_a_chat_template_is_refused_for_the_chat_format(tmp_path):
  path = _student_dir(tmp_path / "s", chat_template=None)
  with pytest.raises(
    distill.StudentError, match=r"config\.student\.prompt_format='chat': the student .* has no chat template"
  ):
    student_lib.load_student(str(path), prompt_format="chat")
  assert student_lib.load_student(str(path)).prompt_format == "plain"  # auto: plain, exported with its template


def test_a_transcripts_directory_without_traces_is_named(tmp_path):
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "metrics.jsonl").write_text("")
  with pytest.raises(MissingFileError, match=r"run: no transcripts directory \(transcripts/\)"):
    distill.groups_from_transcripts(tmp_path / "run")
  (tmp_path / "run" / "transcripts").mkdir()
  with pytest.raises(MissingFileError, match=r"no judged group with traces"):
    distill.groups_from_transcripts(tmp_path / "run")


def test_a_bad_groups_line_is_named_by_its_number(tmp_path):
  path = tmp_path / "g.jsonl"
  path.write_text(json.dumps({"problem": "p", "traces": ["a", "b"]}) + "\n" + json.dumps({"problem": "p"}) + "\n")
  with pytest.raises(Exception, match=r"g\.jsonl:2: not a group \(KeyError"):
    distill.groups_from_jsonl(path)


@pytest.mark.heavy  # a `transformers serve` start (torch, about 20 s)
def test_the_exported_student_is_served_by_transformers_serve_and_judges_a_pair(distilled):
  """The `letter` format through `transformers serve` (which ignores logprobs): the student's sampled first token."""
  pytest.importorskip("fastapi", reason="the `serve` extra (transformers serve): pip install -e '.[serve]'")
  import asyncio  # noqa: PLC0415

  c, out, _ = distilled
  judge_config = c.teacher.copy_and_resolve_references()
  judge_config.update(
    dict(serve="transformers", serve_model=str(out / "export"), model="tiny-student", verdict_format="letter")
  )
  judge_config.update(dict(debias="both", temperature=0.0))
  pairs = [l for l in map(json.loads, (out / "labels.jsonl").read_text().splitlines()[1:]) if l["outcome"] != 0.5][:4]
  with judges.judge_endpoints(judge_config) as urls:

    async def ask():
      judge = judges.make_judge(judge_config, urls)
      try:
        return await judge.judge_pairs(
          [judges.PairRequest(p["problem"], p["reference"], p["first"], p["second"]) for p in pairs]
        )
      finally:
        await judge.close()

    results = asyncio.run(ask())
  assert all(r.ok for r in results), [(r.failure_reason, r.failure_detail) for r in results]
  assert all(c.completion.content.strip()[:1] in ("A", "B") for r in results for c in r.calls)
  agree = [np.sign(r.outcome - 0.5) == np.sign(p["outcome"] - 0.5) for r, p in zip(results, pairs)]
  assert sum(agree) >= 3, [(r.outcome, p["outcome"]) for r, p in zip(results, pairs)]
