"""The prompt iterator: deterministic, sharded by process, exactly resumable."""

from hypothesis import given, settings, strategies as st
import pytest

from arena_jax import tasks


def source(n):
  return [tasks.Example(uid=str(i), question=f"q{i}", answer=str(i)) for i in range(n)]


def uids(batch):
  return [int(e.uid) for e in batch]


def take(it, steps):
  return [uids(next(it)) for _ in range(steps)]


def test_deterministic_and_covers_each_epoch_once():
  data = source(23)
  a = tasks.PromptIterator(data, batch_size=5, seed=3, process_index=0, process_count=1)
  b = tasks.PromptIterator(data, batch_size=5, seed=3, process_index=0, process_count=1)
  first = take(a, 8)
  assert first == take(b, 8)
  epoch0, epoch1 = sum(first[:4], []), sum(first[4:8], [])
  assert len(set(epoch0)) == 20 and len(set(epoch1)) == 20  # 23 // 5 steps per epoch, remainder dropped
  assert epoch0 != epoch1  # a new permutation each epoch
  assert a.state == tasks.IteratorState(seed=3, epoch=2, position=0)
  c = tasks.PromptIterator(data, batch_size=5, seed=4, process_index=0, process_count=1)
  assert take(c, 4) != first[:4]


def test_shards_partition_the_global_batch():
  data = source(50)
  its = [tasks.PromptIterator(data, batch_size=4, seed=0, process_index=p, process_count=3) for p in range(3)]
  single = tasks.PromptIterator(data, batch_size=12, seed=0, process_index=0, process_count=1)
  for _ in range(6):
    shards = [uids(next(it)) for it in its]
    assert sum(shards, []) == uids(next(single))
    assert len({tuple(s) for s in shards}) == 3 and len(set(sum(shards, []))) == 12
  assert len({it.state for it in its}) == 1  # the state is the same on every process


def test_unshuffled_order_and_default_process():
  it = tasks.PromptIterator(source(7), batch_size=3, shuffle=False)  # jax.process_index() / count()
  assert take(it, 3) == [[0, 1, 2], [3, 4, 5], [0, 1, 2]]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
  n=st.integers(8, 60),
  batch=st.integers(1, 4),
  procs=st.integers(1, 2),
  seed=st.integers(0, 2**31),
  before=st.integers(0, 30),
  after=st.integers(1, 20),
)
def test_resumes_exactly(n, batch, procs, seed, before, after):
  data = source(n)
  for p in range(procs):
    run = tasks.PromptIterator(data, batch_size=batch, seed=seed, process_index=p, process_count=procs)
    take(run, before)
    saved = run.state.to_dict()  # what a checkpoint stores
    expected = take(run, after)
    resumed = tasks.PromptIterator(
      data,
      batch_size=batch,
      seed=12345,
      process_index=p,
      process_count=procs,
      state=tasks.IteratorState.from_dict(saved),
    )
    assert take(resumed, after) == expected
    other = tasks.PromptIterator(data, batch_size=batch, seed=seed, process_index=p, process_count=procs)
    other.restore(saved)
    assert take(other, after) == expected


def test_bad_arguments():
  with pytest.raises(tasks.DataError, match="fewer than one global batch"):
    tasks.PromptIterator(source(5), batch_size=3, process_index=0, process_count=2)
  with pytest.raises(ValueError, match="process_index"):
    tasks.PromptIterator(source(5), batch_size=1, process_index=2, process_count=2)
  with pytest.raises(ValueError, match="does not fit"):
    tasks.PromptIterator(
      source(5), batch_size=2, process_index=0, process_count=1, state=tasks.IteratorState(seed=0, epoch=0, position=4)
    )
  with pytest.raises(ValueError, match="not an iterator state"):
    tasks.IteratorState.from_dict({"seed": 0})


def test_works_on_a_stored_split(tmp_path):
  config = tasks.default_config()
  config.data_dir = str(tmp_path)
  config.arithmetic.update(num_train=40, num_test=10)
  split = tasks.load_split(config, "arithmetic", "train")
  it = tasks.PromptIterator(split, batch_size=8, seed=0, process_index=0, process_count=1)
  batch = next(it)
  assert len(batch) == 8 and all(isinstance(e, tasks.Example) for e in batch)
