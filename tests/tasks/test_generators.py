"""Arithmetic and countdown generation: knobs, determinism, disjoint splits, verifiable solutions."""

import collections

from hypothesis import given, settings, strategies as st
import pytest

from arena_jax import tasks
from arena_jax.tasks import arithmetic, countdown
from arena_jax.tasks import expressions as ex


def _config(**arith):
  config = tasks.default_config()
  config.arithmetic.update(dict(num_train=300, num_test=60), **arith)
  config.countdown.update(num_train=200, num_test=50)
  return config


def test_arithmetic_respects_its_knobs():
  config = _config(min_ops=3, max_ops=3, min_operand=2, max_operand=9, max_value=90, operators="+*")
  for e in tasks.get_task("arithmetic", config).generate("train"):
    tree = ex.parse(e.expression)
    assert tree.num_ops == 3
    assert all(2 <= lf.value <= 9 for lf in ex.leaves(tree))
    assert all(0 <= n.value <= 90 and n.value.denominator == 1 and n.op in "+*" for n in ex.operations(tree))
    assert e.question == f"Compute {e.expression}." and e.answer == ex.format_number(tree.value)


def test_countdown_respects_its_knobs():
  config = _config()
  c = config.countdown
  for e in tasks.get_task("countdown", config).generate("test"):
    target = int(e.answer)
    assert c.min_numbers <= len(e.numbers) <= c.max_numbers
    assert all(c.min_number <= n <= c.max_number for n in e.numbers)
    assert c.min_target <= target <= c.max_target and target not in e.numbers
    tree = ex.parse(e.expression)  # the reference solution uses exactly the given numbers
    assert sorted(int(lf.value) for lf in ex.leaves(tree)) == sorted(e.numbers)
    assert tree.value == target
    assert all(0 < n.value <= c.max_value and n.value.denominator == 1 for n in ex.operations(tree))


@pytest.mark.parametrize("name", ["arithmetic", "countdown"])
def test_generation_is_deterministic_by_seed(name):
  config = _config()
  first = list(tasks.get_task(name, config).generate("train"))
  assert first == list(tasks.get_task(name, config).generate("train"))
  config.seed = 1
  assert first != list(tasks.get_task(name, config).generate("train"))


@pytest.mark.parametrize(
  "name, key",
  [
    ("arithmetic", lambda e: ex.canonical_key(ex.parse(e.expression))),
    ("countdown", lambda e: ",".join(map(str, sorted(e.numbers))) + "->" + e.answer),
  ],
)
def test_splits_are_disjoint_and_free_of_duplicates_across_seeds(name, key):
  config = _config()
  train_keys, test_keys = set(), set()
  for seed in (0, 1):
    config.seed = seed
    task = tasks.get_task(name, config)
    train = [key(e) for e in task.generate("train")]
    test = [key(e) for e in task.generate("test")]
    assert len(set(train)) == len(train) and len(set(test)) == len(test)
    assert len(train) == config[name].num_train and len(test) == config[name].num_test
    train_keys |= set(train)
    test_keys |= set(test)
  assert not train_keys & test_keys
  # 5 + 7 and 7 + 5 are the same problem: the normalised form is what is de-duplicated.
  assert ex.canonical_key(ex.parse("7 + 5")) == ex.canonical_key(ex.parse("5 + 7"))


def test_growing_a_split_keeps_its_prefix():
  config = _config()
  small = list(tasks.get_task("arithmetic", config).generate("test"))
  config.arithmetic.num_test = 120
  assert list(tasks.get_task("arithmetic", config).generate("test"))[: len(small)] == small


def test_a_too_small_problem_space_is_a_clear_error():
  config = _config(min_ops=1, max_ops=1, min_operand=1, max_operand=2, operators="+")
  with pytest.raises(tasks.DataError, match=r"tasks\.arithmetic.*num_train"):
    list(tasks.get_task("arithmetic", config).generate("train"))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
  seed=st.integers(0, 10**6),
  min_ops=st.integers(1, 3),
  extra_ops=st.integers(0, 2),
  max_operand=st.integers(10, 30),
  operators=st.sampled_from(["+-*", "+-*/", "+-", "*/+"]),
)
def test_every_canonical_solution_verifies_and_checks_clean(seed, min_ops, extra_ops, max_operand, operators):
  config = _config(
    min_ops=min_ops,
    max_ops=min_ops + extra_ops,
    max_operand=max_operand,
    operators=operators,
    max_value=max(400, max_operand),
  )
  config.seed = seed
  config.arithmetic.update(num_train=20, num_test=5)
  config.countdown.update(num_train=20, num_test=5)
  for name in ("arithmetic", "countdown"):
    task = tasks.get_task(name, config)
    for split in ("train", "test"):
      for e in task.generate(split):
        assert task.verify(e, e.solution) == 1.0
        report = task.check_process(e, e.solution)
        assert report.is_clean, (e, report)
        assert report.num_steps == ex.parse(e.expression).num_ops + 1


def test_operator_mix_is_not_degenerate():
  counts = collections.Counter()
  for e in tasks.get_task("arithmetic", _config()).generate("train"):
    counts.update(n.op for n in ex.operations(ex.parse(e.expression)))
  assert all(counts[op] > 0.1 * sum(counts.values()) for op in "+-*"), counts


def test_solutions_are_short():
  for name in ("arithmetic", "countdown"):
    task = tasks.get_task(name, _config())
    longest = max(len(task.prompt(e) + e.solution) for e in task.generate("train"))
    assert longest < 260, (name, longest)  # well under ~150 tokens even at 2 characters a token


def test_make_example_is_what_generate_yields():
  config = _config()
  e = next(arithmetic.generate(config.arithmetic, "train", 0))
  assert arithmetic.make_example(ex.parse(e.expression)) == e
  c = next(countdown.generate(config.countdown, "train", 0))
  assert countdown.make_example(c.numbers, ex.parse(c.expression)) == c


def test_the_shifted_split_holds_only_problems_no_training_problem_could_be():
  """arithmetic_shift: the out-of-distribution benchmark is arithmetic outside the
  training ranges — by default every problem has an operand up to 5 above the largest training operand."""
  config = _config(max_operand=15, max_value=100)
  config.arithmetic_shift.num_test = 40
  task = tasks.get_task("arithmetic_shift", config)
  shifted = list(task.generate("test"))
  assert len(shifted) == 40 and len({e.uid for e in shifted}) == 40 and list(task.generate("train")) == []
  assert [e.uid for e in task.generate("test")] == [e.uid for e in shifted]  # deterministic
  for e in shifted:
    tree = ex.parse(e.expression)
    assert any(16 <= leaf.value <= 20 for leaf in ex.leaves(tree)) and all(leaf.value <= 20 for leaf in ex.leaves(tree))
    assert all(n.op in "+-*" and 0 <= n.value <= 100 for n in ex.operations(tree))
    assert task.verify(e, e.solution) == 1.0 and task.check_process(e, e.solution).is_clean
  assert task.prompt(shifted[0]) == config.arithmetic.prompt_template.format(question=shifted[0].question)
  training = {e.uid.split("-")[1] for e in tasks.get_task("arithmetic", config).generate("train")}
  assert not training & {e.uid.split("-")[1] for e in shifted}
  # Another shift: exact division, which the training problems never have, within the training ranges.
  config.arithmetic_shift.update(operators="+-*/", extra_operand=0)
  for e in tasks.get_task("arithmetic_shift", config).generate("test"):
    tree = ex.parse(e.expression)
    assert any(n.op == "/" for n in ex.operations(tree)) and tree.value.denominator == 1
    assert all(leaf.value <= 15 for leaf in ex.leaves(tree))
  # A "shift" that cannot leave the training ranges is an error naming the section.
  config.arithmetic_shift.update(operators="+-*", extra_operand=0, extra_value=0)
  with pytest.raises(tasks.DataError, match="tasks.arithmetic_shift: found only 0 of num_test=40"):
    list(tasks.get_task("arithmetic_shift", config).generate("test"))
