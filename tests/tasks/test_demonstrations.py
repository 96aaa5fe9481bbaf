"""SFT demonstrations of controlled reasoning quality, and the tokenizer corpus."""

import collections

import pytest

from arena_jax import tasks
from arena_jax.tasks import steps as steps_lib


@pytest.fixture(scope="module")
def config():
  c = tasks.default_config()
  c.arithmetic.update(num_train=1500, num_test=50)
  c.countdown.update(num_train=300, num_test=50)
  return c


@pytest.fixture(scope="module")
def demos(config):
  return list(tasks.demonstrations(config, "arithmetic"))


def test_kind_fractions_follow_the_config(config, demos):
  counts = collections.Counter(d.kind for d in demos)
  for kind in tasks.DEMO_KINDS:
    want = config.sft.fractions[kind]
    assert abs(counts[kind] / len(demos) - want) < 0.035, (kind, counts)


def test_each_kind_is_what_the_verifier_and_the_checker_see(config, demos):
  task = tasks.get_task("arithmetic", config)
  for d in demos:
    reward = task.verify(d.example, d.completion)
    r = task.check_process(d.example, d.completion)
    steps = steps_lib.split_steps(d.completion)
    assert d.text == d.prompt + d.completion and d.prompt == task.prompt(d.example)
    assert r.first_error_step == d.error_step
    if d.kind == "clean":
      assert d.completion == d.example.solution and reward == 1.0 and r.is_clean
    elif d.kind == "slip":
      assert reward == 0.0 and r.invalid_steps == (d.error_step,) and r.num_irrelevant == 0
    elif d.kind == "compensating":
      assert reward == 1.0 and len(r.invalid_steps) == 2 and r.invalid_steps[0] == d.error_step
      assert {r.steps[i].impact for i in r.invalid_steps} == {"major"}
    elif d.kind == "skipped":
      assert reward == 1.0 and r.num_skipped >= 1 and r.num_invalid == r.num_irrelevant == 0
      assert len(steps) < len(steps_lib.split_steps(d.example.solution))
    elif d.kind == "bare_answer":
      assert reward == 1.0 and d.completion == f"Answer: {d.example.answer}"
    elif d.kind == "redundant":
      assert reward == 1.0 and r.num_irrelevant == 1 and r.num_invalid == 0
      assert len(steps) == len(steps_lib.split_steps(d.example.solution)) + 1


def test_demonstrations_are_deterministic_per_problem(config, demos):
  again = list(tasks.demonstrations(config, "arithmetic", examples=[d.example for d in demos[::-1]]))
  assert [(d.kind, d.completion) for d in again[::-1]] == [(d.kind, d.completion) for d in demos]
  config = config.copy_and_resolve_references()
  config.sft.seed = 1
  other = list(tasks.demonstrations(config, "arithmetic", examples=[d.example for d in demos[:200]]))
  assert [d.kind for d in other] != [d.kind for d in demos[:200]]


def test_countdown_demonstrations_and_fallback(config):
  demos = list(tasks.demonstrations(config, "countdown"))
  task = tasks.get_task("countdown", config)
  kinds = collections.Counter(d.kind for d in demos)
  assert set(kinds) == set(tasks.DEMO_KINDS)
  for d in demos:
    assert task.check_process(d.example, d.completion).first_error_step == d.error_step
    assert task.verify(d.example, d.completion) == float(d.kind in ("clean", "skipped", "redundant"))
  # A one-operation problem has nothing to compensate: it is written clean, and says so.
  c = config.copy_and_resolve_references()
  c.arithmetic.update(min_ops=1, max_ops=1, num_train=40)
  c.sft.fractions.update(clean=0.0, slip=0.0, compensating=1.0, skipped=0.0, bare_answer=0.0, redundant=0.0)
  assert {d.kind for d in tasks.demonstrations(c, "arithmetic")} == {"clean"}


def test_sft_and_corpus(config):
  c = config.copy_and_resolve_references()
  c.arithmetic.num_train = 100
  c.countdown.num_train = 30
  sft = list(tasks.sft_demonstrations(c))
  assert len(sft) == 100 and {d.task for d in sft} == {"arithmetic"}  # countdown stays OOD
  docs = list(tasks.corpus(c))
  assert len(docs) == 130 and all(isinstance(d, str) and d for d in docs)
  assert docs[:100] == [d.text for d in sft]
  assert all(d.startswith("Question: Use ") and "Answer: " in d for d in docs[100:])
  assert len(list(tasks.corpus(c, max_examples_per_task=7))) == 14
  with pytest.raises(ValueError, match="built-in"):
    list(tasks.demonstrations(c, "jsonl"))
