"""Accuracy metrics (SPEC §9): the unbiased pass@k estimator against brute force, and `evaluate` on a
tiny random model with a stub verifier whose numbers can be recomputed from the samples."""

import itertools

import jax
import numpy as np
import pytest

from arena_jax import models
from arena_jax.sampling import accuracy
from arena_jax.eval import default_ks, evaluate, flatten_metrics, pass_at_k
from arena_jax.tasks import Example
from arena_jax.tokenizer import SentencePieceTokenizer


def brute_force_pass_at_k(n, c, k):
  """The fraction of k-subsets of n samples (c correct) that contain a correct one."""
  samples = [1] * c + [0] * (n - c)
  subsets = list(itertools.combinations(range(n), k))
  return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_pass_at_k_matches_brute_force(n):
  for c in range(n + 1):
    for k in range(1, n + 1):
      assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_vectorised_and_checked():
  np.testing.assert_allclose(pass_at_k(np.array([4, 4, 4]), np.array([0, 1, 4]), 1), [0.0, 0.25, 1.0])
  assert pass_at_k(16, 3, 16) == 1.0
  with pytest.raises(ValueError, match="k ≤ n"):
    pass_at_k(4, 1, 5)
  with pytest.raises(ValueError, match="c ≤ n"):
    pass_at_k(4, 5, 1)
  assert default_ks(8) == (1, 2, 4, 8) and default_ks(6) == (1, 2, 4, 6) and default_ks(1) == (1,)


class ParityTask:
  """A stub task: a completion is correct iff it has an even number of characters (a random policy
  then solves about half, so every statistic is non-trivial)."""

  chat = False

  def prompt_texts(self, examples, tokenizer):
    return [e.question for e in examples]

  def verify_batch(self, examples, completions):
    assert len(examples) == len(completions)
    return [float(len(c) % 2 == 0) for c in completions]


@pytest.fixture(scope="module")
def tiny():
  tokenizer = SentencePieceTokenizer.train(["Compute 1 + 2.\nAnswer: 3", "Compute 4 * 5.\nAnswer: 20"] * 8, 48)
  config = models.ModelConfig(
    vocab_size=64, d_model=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16, mlp_dim=64
  )
  examples = [Example(uid=str(i), question=f"Compute {i} + {i}.", answer=str(2 * i)) for i in range(10)]
  return models.init_model(config, seed=0), tokenizer, examples


def test_evaluate_on_a_tiny_model(tiny):
  model, tokenizer, examples = tiny
  n, max_new = 4, 12
  kw = dict(num_samples=n, temperature=1.0, max_new_tokens=max_new, batch_size=4, rng=jax.random.key(1))
  r = evaluate(model, tokenizer, ParityTask(), examples, return_details=True, **kw)
  rewards = r["rewards"]
  assert rewards.shape == (10, n) and len(r["completions"]) == 10 * n
  assert r["num_examples"] == 10
  assert r["mean_pass_ratio"] == pytest.approx(rewards.mean()) == pytest.approx(r["pass_at_k"][1])
  assert sorted(r["pass_at_k"]) == [1, 2, 4]
  assert r["pass_at_k"][4] == pytest.approx(np.mean(rewards.max(axis=1)))
  assert r["pass_at_k"][1] <= r["pass_at_k"][2] <= r["pass_at_k"][4]
  assert r["frac_all_correct"] == pytest.approx(np.mean(rewards.min(axis=1) == 1))
  assert r["frac_all_wrong"] == pytest.approx(np.mean(rewards.max(axis=1) == 0))
  assert r["frac_all_correct"] + r["frac_all_wrong"] + r["frac_diverse"] == pytest.approx(1.0)
  # The judge's room in the groups the router would send it: distinct traces per non-diverse group.
  same = (rewards.min(axis=1) == rewards.max(axis=1)).nonzero()[0]
  texts = r["completions"]
  want = np.mean([len({" ".join(t.split()) for t in texts[b * n : (b + 1) * n]}) for b in same]) if len(same) else None
  assert r.get("distinct_per_non_diverse_group") == (pytest.approx(want) if want is not None else None)
  assert 0 < r["mean_pass_ratio"] < 1  # a random policy under the parity verifier
  assert 1 <= r["mean_response_length"] <= max_new and 0 <= r["truncated_fraction"] <= 1
  assert r["greedy_accuracy"] == pytest.approx(r["greedy_rewards"].mean())
  # 95% intervals: Wilson's for the greedy proportion, over problems for the mean pass ratio.
  lo, hi = accuracy.wilson_interval(r["greedy_rewards"].sum(), 10)
  assert (r["greedy_accuracy_lo95"], r["greedy_accuracy_hi95"]) == (lo, hi) and lo <= r["greedy_accuracy"] <= hi
  half = 1.96 * rewards.mean(axis=1).std(ddof=1) / np.sqrt(10)
  assert r["mean_pass_ratio_lo95"] == pytest.approx(max(0.0, r["mean_pass_ratio"] - half))
  assert r["mean_pass_ratio_hi95"] == pytest.approx(min(1.0, r["mean_pass_ratio"] + half))
  # The same key gives the same samples; the last, partial batch (10 = 4 + 4 + 2) is handled.
  again = evaluate(model, tokenizer, ParityTask(), examples, return_details=True, **kw)
  assert again["completions"] == r["completions"]
  # Greedy decoding does not depend on the key.
  other = evaluate(model, tokenizer, ParityTask(), examples, return_details=True, **dict(kw, rng=jax.random.key(2)))
  assert other["greedy_completions"] == r["greedy_completions"]


def test_evaluate_params_and_flat_metrics(tiny):
  model, tokenizer, examples = tiny
  from flax import nnx  # pylint: disable=g-import-not-at-top

  params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  r = evaluate(
    params, tokenizer, ParityTask(), examples[:3], config=model.config, num_samples=0, max_new_tokens=8, batch_size=4
  )
  assert set(r) == {
    "num_examples",
    "greedy_accuracy",
    "greedy_accuracy_lo95",
    "greedy_accuracy_hi95",
    "greedy_response_length",
  }
  flat = flatten_metrics(
    evaluate(model, tokenizer, ParityTask(), examples[:3], num_samples=2, max_new_tokens=8, batch_size=4, greedy=False),
    prefix="eval/",
  )
  # Distinct traces per non-diverse group exist only when some group is non-diverse.
  assert ("eval/distinct_per_non_diverse_group" in flat) == (flat["eval/frac_diverse"] < 1)
  assert set(flat) - {"eval/distinct_per_non_diverse_group"} == {
    "eval/num_examples",
    "eval/mean_pass_ratio",
    "eval/mean_pass_ratio_lo95",
    "eval/mean_pass_ratio_hi95",
    "eval/pass@1",
    "eval/pass@2",
    "eval/mean_response_length",
    "eval/truncated_fraction",
    "eval/frac_all_correct",
    "eval/frac_all_wrong",
    "eval/frac_diverse",
  }
  with pytest.raises(ValueError, match="no examples"):
    evaluate(model, tokenizer, ParityTask(), [], max_new_tokens=8)


def test_out_of_vocabulary_samples_decode():
  """A model whose vocab exceeds the tokenizer's may sample ids the tokenizer lacks: they become UNK."""
  tokenizer = SentencePieceTokenizer.train(["a b c"] * 4, 32)
  tokens = np.array([[5, tokenizer.vocab_size + 3, 1]])
  fixed = accuracy._in_vocab(tokens, tokenizer)
  assert fixed[0, 1] == tokenizer.unk_id
  tokenizer.decode_batch(fixed)  # would raise on the raw ids


def test_wilson_interval():
  """Known values (Wilson 1927; e.g. 0 of 10: [0, 0.278], 5 of 10: [0.237, 0.763]), and never a point at 0 or n."""
  assert accuracy.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
  assert accuracy.wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
  lo, hi = accuracy.wilson_interval(10, 10)
  assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
  assert accuracy.wilson_interval(0, 0) == (0.0, 1.0)
