"""Users' JSONL math: validation with file:line errors, math-verify rewards, the worker pool's timeouts."""

import json
import time

import pytest

from arena_jax import tasks

SLOW = "tests.tasks.slow_verify:equal_or_hang"


def write(path, rows):
  path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
  return str(path)


def test_load_rows_and_configurable_fields(tmp_path):
  path = write(
    tmp_path / "d.jsonl",
    [{"q": "1 + 1?", "a": 2, "s": "1 + 1 = 2.\n\nAnswer: 2"}, "", {"q": "Half of one?", "a": "\\frac{1}{2}", "s": ""}],
  )
  rows = tasks.load_jsonl(path, question_field="q", answer_field="a", solution_field="s")
  assert [(e.question, e.answer) for e in rows] == [("1 + 1?", "2"), ("Half of one?", "\\frac{1}{2}")]
  assert rows[0].solution.startswith("1 + 1") and len({e.uid for e in rows}) == 2


@pytest.mark.parametrize(
  "content, message",
  [
    (b'{"question": "a", "answer": 1}\n{"question": "b", "answer": \n', r"d\.jsonl:2:\d+: malformed JSON"),
    (b'{"question": "a", "answer": 1}\n[1, 2]\n', r"d\.jsonl:2: expected a JSON object"),
    (b'{"question": "a"}\n', r"d\.jsonl:1: answer: missing field.*answer_field"),
    (b'{"problem": "a", "answer": 1}\n', r"d\.jsonl:1: question: missing field"),
    (b'{"question": "", "answer": 1}\n', r"d\.jsonl:1: question: must be a non-empty string"),
    (b'{"question": "a", "answer": null}\n', r"d\.jsonl:1: answer: must be a string or a number"),
    (b'{"question": "a", "answer": true}\n', r"d\.jsonl:1: answer: must be a string or a number"),
    (b'{"question": "a", "answer": "  "}\n', r"d\.jsonl:1: answer: is empty"),
    (b'{"question": "a", "answer": 1}\n{"question": "caf\xe9", "answer": 1}\n', r"d\.jsonl:2: not valid UTF-8"),
    (b"", r"d\.jsonl: the train split is empty"),
    (b"\n  \n", r"d\.jsonl: the train split is empty"),
  ],
)
def test_bad_input_is_a_clear_error(tmp_path, content, message):
  path = tmp_path / "d.jsonl"
  path.write_bytes(content)
  with pytest.raises(tasks.DataError, match=message):
    tasks.load_jsonl(str(path))


def test_missing_file_and_bom(tmp_path):
  with pytest.raises(tasks.DataError, match="no such file"):
    tasks.load_jsonl(str(tmp_path / "nope.jsonl"))
  path = tmp_path / "bom.jsonl"
  path.write_bytes(b'\xef\xbb\xbf{"question": "a", "answer": 1}\n')
  assert tasks.load_jsonl(str(path))[0].answer == "1"


def test_train_is_deduplicated_against_test(tmp_path):
  config = tasks.default_config()
  config.jsonl.train_path = write(
    tmp_path / "train.jsonl", [{"question": "What is 2+2?", "answer": 4}, {"question": "What is 3+3?", "answer": 6}]
  )
  config.jsonl.test_path = write(tmp_path / "test.jsonl", [{"question": "what is  2+2?", "answer": 4}])
  task = tasks.get_task("jsonl", config)
  assert [e.question for e in task.generate("train")] == ["What is 3+3?"]
  config.jsonl.dedup = False
  assert len(list(tasks.get_task("jsonl", config).generate("train"))) == 2


def test_math_verify_rewards(tmp_path):
  config = tasks.default_config()
  config.jsonl.update(num_workers=1, timeout_s=60.0)
  e = lambda answer: tasks.Example(uid="u", question="q", answer=answer)  # noqa: E731
  with tasks.get_task("jsonl", config) as task:
    rewards = task.verify_batch(
      [e("1/2"), e("\\frac{\\pi}{2}"), e("x^2 + 1"), e("3"), e("3"), e("(1, 2)")],
      ["Answer: 0.5", "so \\boxed{\\pi/2}", "Answer: $1 + x^2$", "Answer: 4", "no answer", "\\boxed{(1,2)}"],
    )
    assert rewards == [1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    assert task.verify(e("12"), "Answer: 12.0") == 1.0  # numbers: compared on the host
    assert task.pool.stats["items"] == 3  # only the symbolic answers went to the workers


def test_a_pathological_answer_cannot_hang_the_pool():
  with tasks.MathVerifyPool(num_workers=2, timeout_s=1.0, fn=SLOW) as pool:
    t = time.monotonic()
    rewards = pool.verify(["a", "b", "c", "d", "e"], ["a", "hang", "c", "raise", "x"])
    assert time.monotonic() - t < 30  # the hung item costs its timeout (plus a worker restart), not an hour
    assert rewards == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert pool.stats["timeouts"] == 1 and pool.stats["errors"] == 1
    assert pool.verify(["a", "b"], ["crash", "b"]) == [0.0, 1.0]  # a dead worker is replaced
    assert pool.stats["crashes"] == 1 and pool.stats["items"] == 7


def test_workers_are_recycled():
  with tasks.MathVerifyPool(num_workers=1, timeout_s=30.0, max_items_per_worker=2, fn=SLOW) as pool:
    assert pool.verify(list("abcde"), list("abcdx")) == [1.0] * 4 + [0.0]
    assert pool.verify([], []) == []
