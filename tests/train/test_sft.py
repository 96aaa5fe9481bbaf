"""SFT warm start and the policy directory: end to end on the smoke config, the cache, bit-exact
save/load, a run directory's policy spec, the vocabulary check, config validation, the non-finite-loss error."""

import importlib.util
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arena_jax import models
from arena_jax.tokenizer import SentencePieceTokenizer
from arena_jax.train import policy_io
from arena_jax.train import sft

_CONFIG_FILE = pathlib.Path(__file__).resolve().parents[2] / "configs" / "sft.py"


def get_config(arg=None):
  spec = importlib.util.spec_from_file_location("configs_sft", _CONFIG_FILE)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  out = tmp_path_factory.mktemp("sft") / "policy"
  config = get_config("smoke")
  return config, out, sft.train_sft(config, str(out))


def test_sft_end_to_end(smoke_run):
  config, out, summary = smoke_run
  assert not summary["cached"]
  assert summary["loss_final"] < summary["loss_first"], summary["loss_history"]
  assert all(np.isfinite(loss) for _, loss in summary["loss_history"])
  assert policy_io.is_policy_dir(out)
  assert sorted(p.name for p in out.iterdir()) == ["meta.json", "model_config.json", "params", "tokenizer.model"]
  ev = summary["eval"]
  assert ev["num_examples"] == config.eval.num_examples
  for key in ("greedy_accuracy", "mean_pass_ratio", "pass@1", "frac_all_correct", "frac_all_wrong", "frac_diverse"):
    assert 0.0 <= ev[key] <= 1.0, key
  assert ev["frac_all_correct"] + ev["frac_all_wrong"] + ev["frac_diverse"] == pytest.approx(1.0)
  # The stored tokenizer keeps newlines (SPEC §8 steps are split at blank lines).
  policy = policy_io.load_policy(out)
  assert policy.tokenizer.decode(policy.tokenizer.encode("1 + 2 = 3.\n\n3 * 2 = 6.")) == "1 + 2 = 3.\n\n3 * 2 = 6."
  assert policy.config == sft.model_config(config) and policy.add_bos


def test_cache_hit_returns_without_training(smoke_run, monkeypatch):
  config, out, first = smoke_run

  def boom(*args, **kwargs):
    raise AssertionError("the cached policy was retrained")

  monkeypatch.setattr(SentencePieceTokenizer, "train", boom)
  monkeypatch.setattr(sft, "make_train_step", boom)
  config = get_config("smoke")
  config.progress = True  # display-only fields keep the cache valid
  again = sft.train_sft(config, str(out))
  assert again["cached"]
  assert again["eval"] == first["eval"] and again["loss_final"] == first["loss_final"]


def test_fingerprint_ignores_display_fields_only():
  a, b = get_config("smoke"), get_config("smoke")
  b.output_dir, b.progress, b.log_every, b.tasks.data_dir = "/elsewhere", True, 1, "/data"
  assert sft.config_fingerprint(a) == sft.config_fingerprint(b)
  b.learning_rate = 1e-4
  b.model.d_model = 64
  assert sft._diff(sft.config_fingerprint(a), sft.config_fingerprint(b)) == [
    "learning_rate",
    "model.d_model",
    "resolved_model.d_model",
  ]


def test_fingerprint_keeps_the_sections_of_the_tasks_it_reads_only():
  """A task the SFT never reads (a new task module, the choice or code knobs) leaves a cached policy valid; a
  knob of a task it reads (its demonstrations' task, a corpus task) does not."""
  a, b = get_config("smoke"), get_config("smoke")
  b.tasks.choice.shuffle, b.tasks.code.cpu_s, b.tasks.jsonl.timeout_s = False, 1.0, 1.0
  assert sft.config_fingerprint(a) == sft.config_fingerprint(b)
  assert "choice" not in sft.config_fingerprint(a)["tasks"] and "arithmetic" in sft.config_fingerprint(a)["tasks"]
  b.tasks.countdown.max_target = 150  # countdown is a corpus task: its prompts are in the tokenizer's corpus
  assert sft._diff(sft.config_fingerprint(a), sft.config_fingerprint(b)) == ["tasks.countdown.max_target"]


def _tiny_policy(vocab_size=64):
  tokenizer = SentencePieceTokenizer.train(["Question: 1 + 2\nSolution:\n1 + 2 = 3.\n\nAnswer: 3"] * 8, 64)
  config = models.ModelConfig(
    vocab_size=vocab_size,
    d_model=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    mlp_dim=64,
    tie_embeddings=False,
  )
  return models.init_model(config, seed=3), config, tokenizer


def test_save_load_round_trip_is_bit_exact(tmp_path):
  model, config, tokenizer = _tiny_policy()
  policy_io.save_policy(tmp_path / "p", model, config, tokenizer, extra={"note": "x"})
  policy = policy_io.load_policy(tmp_path / "p")
  assert isinstance(policy, policy_io.LoadedPolicy) and policy.config == config
  assert policy.meta["note"] == "x" and policy.meta["num_params"] == config.num_params()
  assert policy.tokenizer.model_proto == tokenizer.model_proto
  saved = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  loaded = models.pure_params(policy.model)
  assert jax.tree.structure(saved) == jax.tree.structure(loaded)
  for a, b in zip(jax.tree.leaves(saved), jax.tree.leaves(loaded)):
    assert a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b))
  tokens = jnp.asarray([[2, 5, 9, 11, 4, 7]], jnp.int32)
  np.testing.assert_array_equal(np.asarray(model(tokens)), np.asarray(policy.model(tokens)))
  # Saving again over the same directory replaces the policy (from a pure dict this time).
  policy_io.save_policy(tmp_path / "p", saved, config, tokenizer)
  assert "note" not in policy_io.read_meta(tmp_path / "p")


def test_pure_params_of_a_module_a_state_and_a_dict():
  model, _, _ = _tiny_policy()
  pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  for form in (model, nnx.state(model, nnx.Param), pure):
    got = models.pure_params(form)
    assert isinstance(got, dict) and jax.tree.structure(got) == jax.tree.structure(pure)
  assert models.pure_params(pure) is pure


def test_run_policy_spec_round_trip(tmp_path):
  """What the RL trainer writes beside its checkpoints for the evaluator, read back."""
  _, config, tokenizer = _tiny_policy()
  policy_io.write_policy_spec(tmp_path / "run", config, tokenizer, add_bos=False)
  assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["model_config.json", "policy.json", "tokenizer.model"]
  got_config, got_tokenizer, add_bos = policy_io.load_run_policy(tmp_path / "run")
  assert got_config == config and got_tokenizer.model_proto == tokenizer.model_proto and add_bos is False
  with pytest.raises(FileNotFoundError, match="policy.json is missing"):
    policy_io.load_run_policy(tmp_path)


def test_vocab_mismatch_is_a_clear_error(tmp_path):
  model, config, tokenizer = _tiny_policy()
  with pytest.raises(ValueError, match="vocab_size"):
    policy_io.save_policy(tmp_path / "bad", model, config.replace(vocab_size=tokenizer.vocab_size - 1), tokenizer)
  path = tmp_path / "p"
  policy_io.save_policy(path, model, config, tokenizer)
  cfg = json.loads((path / "model_config.json").read_text())
  cfg["vocab_size"] = small = tokenizer.vocab_size - 5
  (path / "model_config.json").write_text(json.dumps(cfg))
  with pytest.raises(ValueError) as err:
    policy_io.load_policy(path)
  message = str(err.value)
  for part in (str(tokenizer.vocab_size), str(small), "tokenizer.model", "model_config.json"):
    assert part in message, (part, message)


def test_incomplete_policy_dir(tmp_path):
  model, config, tokenizer = _tiny_policy()
  policy_io.save_policy(tmp_path, model, config, tokenizer)
  (tmp_path / "meta.json").unlink()  # what a save that died half-way leaves
  assert not policy_io.is_policy_dir(tmp_path)
  with pytest.raises(FileNotFoundError, match="meta.json"):
    policy_io.load_policy(tmp_path)


@pytest.mark.parametrize(
  "field,value,needle",
  [
    ("learning_rate", 0.0, "config.learning_rate"),
    ("warmup_steps", 10_000, "config.warmup_steps"),
    ("batch_size", 0, "config.batch_size"),
    ("seq_buckets", (), "config.seq_buckets"),
    ("eval.temperature", -1.0, "config.eval.temperature"),
    ("tasks.arithmetic.max_ops", 0, "config.tasks.arithmetic"),
    ("model.name", "nope", "config.model.name"),
    ("model.num_kv_heads", 3, "config.model"),
  ],
)
def test_validation_names_the_field(field, value, needle):
  config = get_config("smoke")
  *parents, name = field.split(".")
  node = config
  for p in parents:
    node = node[p]
  node[name] = value
  with pytest.raises(ValueError, match=needle.replace(".", r"\.")):
    sft.validate_config(config)


def test_demo_config_is_valid():
  config = get_config()
  sft.validate_config(config)
  assert sft.model_config(config).vocab_size == config.tokenizer.vocab_size


def test_non_finite_loss_fails_fast(tmp_path, monkeypatch):
  monkeypatch.setattr(sft, "sft_loss", lambda *args: (jnp.float32(jnp.nan), jnp.float32(1.0)))
  config = get_config("smoke")
  config.eval.num_examples = 0
  with pytest.raises(FloatingPointError, match="learning_rate"):
    sft.train_sft(config, str(tmp_path / "nan"))
  assert not policy_io.is_policy_dir(tmp_path / "nan")


def test_batches_are_full_length_grouped_and_deterministic():
  lengths = np.random.default_rng(0).integers(10, 100, size=1000)
  take = lambda seed: [
    next(it) for it in [sft.batch_indices(lengths, 16, np.random.default_rng(seed))] for _ in range(125)
  ]
  a, b = take(1), take(1)
  assert all(np.array_equal(x, y) for x, y in zip(a, b))
  assert all(len(x) == 16 for x in a)
  first_epoch = np.concatenate(a[:62])  # 1000 // 16 = 62 full batches per epoch, no repeats
  assert len(set(first_epoch.tolist())) == len(first_epoch)
  spread = np.mean([np.ptp(lengths[x]) for x in a])
  assert spread < 0.5 * np.ptp(lengths)  # grouping by length cuts padding
