"""Export to a HF checkpoint directory (`models.hf.export`, `models.hf.tokenizer_files`, `arena_jax.export`,
`launch.export`): transformers loads each exported family with our logits, our importer reads an export back bit
for bit, transformers' tokenizer encodes as ours, and `launch.export` turns a run's checkpoint into a directory
transformers loads.

The tests that load with transformers need the `hf` extra (torch, transformers) and skip without it, as the
parity tests do; the round trips through our own importer need neither.
"""

import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

from arena_jax import chat_template, models
from arena_jax import export as run_export
from arena_jax import tokenizer as tok
from arena_jax.models.hf import export, tokenizer_files
from arena_jax.sampling import model_from_params

ROOT = pathlib.Path(__file__).resolve().parents[2]

BASE = models.ModelConfig(
  vocab_size=97, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, mlp_dim=96, rms_norm_eps=1e-5
)
# One config per exported family, with what only that family has (as the parity tests of the import choose them).
CONFIGS = {
  # Llama-3.1 RoPE scaling (original context 16: the scaled band is exercised), q/k/v/o and MLP biases.
  "LlamaForCausalLM": BASE.replace(
    rope_theta=500_000.0,
    attention_bias=True,
    mlp_bias=True,
    rope_scaling=models.RopeScaling("llama3", factor=8.0, original_max_position_embeddings=16),
  ),
  # A sliding window shorter than the sequences, one KV head.
  "MistralForCausalLM": BASE.replace(sliding_window=6, num_kv_heads=1),
  # q/k/v biases without an o bias, a window on the second layer only, tied embeddings.
  "Qwen2ForCausalLM": BASE.replace(
    qkv_bias=True, sliding_window=5, sliding_layers=(False, True), tie_embeddings=True, rope_theta=1e6
  ),
  # QK-norm, a window on the second layer only.
  "Qwen3ForCausalLM": BASE.replace(qk_norm=True, sliding_window=5, sliding_layers=(False, True), rope_theta=1e6),
  # YaRN with mscale and Llama-4 attention scaling every 8 positions.
  "Ministral3ForCausalLM": BASE.replace(
    rope_theta=1e6,
    query_scale_beta=0.1,
    query_scale_length=8,
    rope_scaling=models.RopeScaling(
      "yarn", factor=4.0, original_max_position_embeddings=8, mscale=1.0, mscale_all_dim=1.0
    ),
  ),
}
TOKEN_IDS = {"bos_token_id": tok.BOS_ID, "eos_token_id": tok.EOS_ID, "pad_token_id": tok.PAD_ID}

# Float32 logits, ours against transformers': each is a chain of float32 sums of ≤ 96 terms (d_model 64,
# mlp_dim 96) through two blocks, and the two sides add in different orders. Rounding (ε = 1.2e-7) grows
# like √terms · ε per sum, relative to logits of magnitude ≤ 10 here: about 2e-5 measured. The import's parity
# tests hold the same 1e-4.
FLOAT32_ATOL = 1e-4
# Bfloat16 compute (transformers on the bfloat16 export) against float32 compute on the same weights: every
# activation is rounded to 8 significant bits (relative 2⁻⁹) some 20 times per block, so the logits move by a
# few percent of their scale: measured 2% (RMS) and 5% (max) of the largest |logit|.
BF16_RMS, BF16_MAX = 0.05, 0.1


def random_params(config: models.ModelConfig, seed: int) -> dict:
  """Every parameter random (biases and norms included), as the parity tests draw them: N(0, 0.25²), norm
  scales U(0.5, 1.5), so that logits are informative and no parameter hides behind a zero or a one."""
  rng = np.random.default_rng(seed)

  def draw(path, spec):
    if str(getattr(path[-1], "key", "")) == "scale":
      return rng.uniform(0.5, 1.5, spec.shape).astype(np.float32)
    return rng.normal(0.0, 0.25, spec.shape).astype(np.float32)

  return jax.tree_util.tree_map_with_path(draw, models.pure_params(models.abstract_model(config)))


def leaves_equal(a, b) -> bool:
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  return jax.tree.structure(a) == jax.tree.structure(b) and all(
    x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb)
  )


def our_logits(config, params, tokens):
  return np.asarray(jax.jit(lambda t: model_from_params(config, params)(t))(jnp.asarray(tokens, jnp.int32)))


TOKENS = np.random.default_rng(0).integers(0, BASE.vocab_size, (2, 24))  # longer than every window and context


@pytest.fixture(scope="module")
def hf():
  """(torch, transformers), or the test is skipped (the `hf` extra)."""
  return pytest.importorskip("torch"), pytest.importorskip("transformers")


# ─────────────────────────────────────── weights and config ───────────────────────────────────────


@pytest.mark.parametrize("architecture", sorted(CONFIGS))
def test_our_importer_reads_an_export_back_bit_for_bit(architecture, tmp_path):
  config = CONFIGS[architecture]
  params = random_params(config, seed=1)
  out = export.export_params(params, config, tmp_path / "f32", special_token_ids=TOKEN_IDS)
  assert out.architecture == architecture  # chosen by the config alone
  assert out.files == ("model.safetensors", "generation_config.json", "config.json")
  back = models.load_hf(tmp_path / "f32")
  assert back.config == config and leaves_equal(models.pure_params(back), params)
  hf_config = json.loads((tmp_path / "f32" / "config.json").read_text())
  assert {k: hf_config[k] for k in TOKEN_IDS} == TOKEN_IDS and hf_config["architectures"] == [architecture]
  # bfloat16: each weight rounded to nearest even, as ml_dtypes (and torch) cast.
  export.export_params(params, config, tmp_path / "bf16", dtype="bfloat16")
  back = models.load_hf(tmp_path / "bf16")
  assert back.config == config.replace(param_dtype="bfloat16", dtype="bfloat16")
  assert leaves_equal(models.pure_params(back), jax.tree.map(lambda x: x.astype(ml_dtypes.bfloat16), params))


def test_above_the_shard_size_the_weights_are_sharded_with_an_index(tmp_path):
  config = CONFIGS["LlamaForCausalLM"]
  params = random_params(config, seed=2)
  (tmp_path / "model.safetensors").write_bytes(b"stale")  # an earlier export's file: replaced, not left to confuse
  out = export.export_params(params, config, tmp_path, max_shard_bytes=40_000)
  index = json.loads((tmp_path / export.INDEX).read_text())
  shards = sorted(set(index["weight_map"].values()))
  assert len(shards) > 1 and set(out.files) == {*shards, export.INDEX, "config.json"}
  assert not (tmp_path / "model.safetensors").exists()
  assert index["metadata"]["total_size"] == sum(x.nbytes for x in jax.tree.leaves(params))
  assert leaves_equal(models.pure_params(models.load_hf(tmp_path)), params)
  # Exported again below the size: one file, and the index of the sharded export is gone.
  export.export_params(params, config, tmp_path)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
  assert leaves_equal(models.pure_params(models.load_hf(tmp_path)), params)


def test_the_family_is_chosen_by_the_config_and_what_it_cannot_express_is_refused(tmp_path):
  assert export.default_architecture(BASE) == "LlamaForCausalLM"
  for architecture, config in CONFIGS.items():
    assert export.default_architecture(config) == architecture
  params = random_params(BASE, seed=3)
  # A plain config as Mistral (a window of none) or as the architecture asked for.
  assert export.export_params(params, BASE, tmp_path, architecture="MistralForCausalLM").architecture == (
    "MistralForCausalLM"
  )
  assert models.load_hf(tmp_path).config == BASE
  refused = [
    (BASE.replace(sliding_window=4, sliding_layers=(True, False)), None, "sliding_layers"),  # no family has it
    (BASE.replace(qk_norm=True), "LlamaForCausalLM", "qk_norm"),
    (BASE.replace(attention_bias=True, sliding_window=4), None, "attention_bias"),  # Mistral would drop the biases
    (BASE, "Mistral3ForConditionalGeneration", "Ministral3ForCausalLM"),  # a wrapper: export its decoder
    (BASE, "GPT2LMHeadModel", "supported are"),
  ]
  for config, architecture, message in refused:
    with pytest.raises(export.InexpressibleError, match=message):
      export.export_params(random_params(config, 0), config, tmp_path / "no", architecture=architecture)
    assert not (tmp_path / "no").exists()  # refused before anything is written
  with pytest.raises(ValueError, match="dtype"):
    export.export_params(params, BASE, tmp_path, dtype="int8")
  with pytest.raises(ValueError, match="missing"):
    export.export_params({k: v for k, v in params.items() if k != "final_norm"}, BASE, tmp_path)


# ─────────────────────────────────────── transformers loads the export ───────────────────────────────────────


def _load(transformers, path, **kwargs):
  model, info = transformers.AutoModelForCausalLM.from_pretrained(path, output_loading_info=True, **kwargs)
  assert not any(info.get(k) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
  return model.eval()


@pytest.mark.parametrize("architecture", sorted(CONFIGS))
def test_transformers_loads_the_export_with_our_logits(architecture, hf, tmp_path):
  torch, transformers = hf
  config = CONFIGS[architecture]
  params = random_params(config, seed=4)
  export.export_params(params, config, tmp_path, special_token_ids=TOKEN_IDS)
  model = _load(transformers, tmp_path)
  assert type(model).__name__ == architecture and model.dtype == torch.float32
  assert model.generation_config.eos_token_id == tok.EOS_ID and model.config.bos_token_id == tok.BOS_ID
  with torch.no_grad():
    ref = model(torch.from_numpy(TOKENS)).logits.numpy()
  assert np.abs(our_logits(config, params, TOKENS) - ref).max() <= FLOAT32_ATOL


def test_a_bfloat16_export_loads_as_bfloat16(hf, tmp_path):
  torch, transformers = hf
  config = CONFIGS["Qwen3ForCausalLM"]
  params = random_params(config, seed=5)
  export.export_params(params, config, tmp_path / "bf16", dtype="bfloat16")
  model = _load(transformers, tmp_path / "bf16", dtype=torch.bfloat16)
  assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
  rounded = jax.tree.map(lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float32), params)
  ours = our_logits(config, rounded, TOKENS)
  with torch.no_grad():
    in_bf16 = model(torch.from_numpy(TOKENS)).logits.float().numpy()
    in_f32 = model.float()(torch.from_numpy(TOKENS)).logits.numpy()
  # The stored weights are exactly the rounded ones: computed in float32, float32's tolerance holds.
  assert np.abs(ours - in_f32).max() <= FLOAT32_ATOL
  scale = np.abs(ours).max()
  assert np.sqrt(np.mean((in_bf16 - ours) ** 2)) <= BF16_RMS * np.sqrt(np.mean(ours**2))
  assert np.abs(in_bf16 - ours).max() <= BF16_MAX * scale


def test_transformers_loads_a_sharded_export(hf, tmp_path):
  torch, transformers = hf
  config = CONFIGS["MistralForCausalLM"]
  params = random_params(config, seed=6)
  export.export_params(params, config, tmp_path, max_shard_bytes=30_000)
  assert (tmp_path / export.INDEX).exists()
  with torch.no_grad():
    ref = _load(transformers, tmp_path)(torch.from_numpy(TOKENS)).logits.numpy()
  assert np.abs(our_logits(config, params, TOKENS) - ref).max() <= FLOAT32_ATOL


# ─────────────────────────────────────── the tokenizer ───────────────────────────────────────


@pytest.fixture(scope="module")
def corpus():
  """Texts of the built-in tasks (what the testbed's tokenizer is trained on and the policy reads)."""
  from arena_jax import tasks  # pylint: disable=g-import-not-at-top
  from arena_jax.tasks import config as tasks_config  # pylint: disable=g-import-not-at-top

  return list(tasks.corpus(tasks_config.TASKS.defaults(), max_examples_per_task=400))


EDGE_TEXTS = [
  "",
  "x",
  "Answer: 987654321",
  "  Step 2:  compute  3 +  4\n\n\nAnswer: 7 ",  # leading, double and trailing spaces; three newlines
  "\n\nQuestion:\tCompute (1 + 2) * 3.\n",
  "héllo wörld ☃ 漢字 🙂",  # characters outside the corpus: unknown pieces, or bytes with byte fallback
]


def _sentencepiece(kind, texts):
  if kind == "default options":  # SentencePiece's own defaults: nmt_nfkc and a dummy prefix (no extra-space removal)
    import io  # pylint: disable=g-import-not-at-top

    import sentencepiece as spm  # pylint: disable=g-import-not-at-top

    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
      sentence_iterator=iter(texts), model_writer=writer, vocab_size=150, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
      remove_extra_whitespaces=False, minloglevel=2,
    )  # fmt: skip
    return tok.SentencePieceTokenizer(writer.getvalue())
  options = {
    "bpe": dict(vocab_size=models.tiny_config().vocab_size),  # the testbed policy's tokenizer
    "bpe, byte fallback": dict(vocab_size=600, byte_fallback=True),
    "unigram, byte fallback": dict(vocab_size=400, model_type="unigram", byte_fallback=True),
  }[kind]
  return tok.SentencePieceTokenizer.train(texts, **options)


@pytest.mark.parametrize("kind", ["bpe", "bpe, byte fallback", "unigram, byte fallback", "default options"])
def test_transformers_encodes_a_sentencepiece_export_as_we_do(kind, hf, corpus, tmp_path):
  _, transformers = hf
  sp = _sentencepiece(kind, corpus)
  texts = corpus[::3] + EDGE_TEXTS
  if kind == "default options":  # no dummy prefix before leading whitespace (the documented difference)
    texts = [t for t in texts if not t[:1].isspace()]
  for add_bos in (True, False):
    out = tmp_path / str(add_bos)
    names = tokenizer_files.export_tokenizer(sp, out, add_bos=add_bos)
    assert set(names) == {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model"}
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    ids = sp.encode(texts, add_bos=add_bos)
    assert hf_tok(texts)["input_ids"] == ids
    assert (hf_tok.bos_token_id, hf_tok.eos_token_id, hf_tok.pad_token_id) == (sp.bos_id, sp.eos_id, sp.pad_id)
    # Decoding gives the text back as ours does (an unknown piece has no text to agree on).
    known = [(i, t) for i, t in zip(ids, texts) if sp.unk_id not in i]
    assert [hf_tok.decode(i, skip_special_tokens=True) for i, _ in known] == [sp.decode(i) for i, _ in known]
    # Our own loader reads the export as a HF tokenizer that encodes alike.
    ours = tok.load_tokenizer(out)
    assert isinstance(ours, tok.HFTokenizer) and ours.encode(texts, add_bos=add_bos) == ids


def test_what_tokenizer_json_cannot_reproduce_is_refused(corpus, tmp_path):
  import io  # pylint: disable=g-import-not-at-top

  import sentencepiece as spm  # pylint: disable=g-import-not-at-top

  writer = io.BytesIO()  # SentencePiece's defaults remove extra whitespace (runs of spaces become one)
  spm.SentencePieceTrainer.train(
    sentence_iterator=iter(corpus), model_writer=writer, vocab_size=150, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
    minloglevel=2,
  )  # fmt: skip
  with pytest.raises(export.ExportError, match="removes extra whitespace"):
    tokenizer_files.export_tokenizer(tok.SentencePieceTokenizer(writer.getvalue()), tmp_path)


def test_a_hf_tokenizer_is_copied_with_its_chat_template(hf, corpus, tmp_path):
  _, transformers = hf
  template = (
    "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
  )
  sp = _sentencepiece("bpe", corpus)
  tokenizer_files.export_tokenizer(sp, tmp_path / "source", add_bos=True, chat_template=template)
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "chat_template.jinja").write_text("stale")  # an earlier export's: it would win
  source = tok.load_tokenizer(tmp_path / "source")
  names = tokenizer_files.export_tokenizer(source, tmp_path / "out")
  assert "tokenizer.json" in names and "chat_template.jinja" not in names
  assert not (tmp_path / "out" / "chat_template.jinja").exists()
  hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
  messages = [{"role": "user", "content": "Compute 1 + 2."}]
  rendered = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
  assert (
    rendered
    == source.apply_chat_template(messages)
    == chat_template.render(template, messages, special={"bos_token": "<s>", "eos_token": "</s>"})
  )
  assert hf_tok(corpus[:20])["input_ids"] == sp.encode(corpus[:20], add_bos=True)


# ─────────────────────────────────────── a run's checkpoint: launch.export ───────────────────────────────────────


def _run_dir(workdir: pathlib.Path, config, tokenizer, steps, *, add_bos=True) -> dict:
  """A run directory as the trainer leaves it: the policy spec, and a `TrainState` checkpoint (parameters,
  AdamW moments, step) per step; returns {step: params}."""
  from arena_jax.train import checkpoint, policy_io  # pylint: disable=g-import-not-at-top
  from arena_jax.train import step as step_lib  # pylint: disable=g-import-not-at-top

  policy_io.write_policy_spec(workdir, config, tokenizer, add_bos=add_bos)
  ckpt = checkpoint.Checkpointer(str(workdir / "checkpoints"))
  saved = {}
  try:
    for step in steps:
      saved[step] = models.pure_params(models.init_model(config, seed=step))
      ckpt.save(step, step_lib.init_state(saved[step], optax.adamw(1e-3)), {"step": step})
  finally:
    ckpt.close()
  return saved


def launch(*args):
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  return subprocess.run(
    [sys.executable, "-m", "launch.export", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
  )


@pytest.mark.slow  # launch.export in a child
def test_launch_export_turns_the_latest_checkpoint_into_a_hf_directory(hf, corpus, tmp_path):
  torch, transformers = hf
  sp = _sentencepiece("bpe", corpus)
  config = models.tiny_config().replace(vocab_size=sp.vocab_size)  # the testbed's policy
  saved = _run_dir(tmp_path / "run", config, sp, steps=(2, 4), add_bos=True)
  proc = launch(f"--workdir={tmp_path / 'run'}", f"--output={tmp_path / 'hf'}")
  assert proc.returncode == 0, proc.stderr
  assert "exported step 4" in proc.stdout and "LlamaForCausalLM" in proc.stdout, proc.stdout
  for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json"):
    assert name in proc.stdout and (tmp_path / "hf" / name).is_file()
  assert leaves_equal(models.pure_params(models.load_hf(tmp_path / "hf")), saved[4])  # the latest, bit for bit
  # What a server does with it: the tokenizer encodes a prompt as the run did (BOS first), the model scores it
  # as ours does, and generation stops at the policy's EOS.
  prompt = corpus[0].split("Solution:")[0] + "Solution:"
  hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
  ids = hf_tok(prompt)["input_ids"]
  assert ids == sp.encode(prompt, add_bos=True) and ids[0] == sp.bos_id
  model = _load(transformers, tmp_path / "hf")
  assert model.generation_config.eos_token_id == sp.eos_id and model.generation_config.pad_token_id == sp.pad_id
  with torch.no_grad():
    ref = model(torch.tensor([ids])).logits.numpy()
  # The policy's own init (LeCun-normal) keeps its logits of order 1: float32's tolerance holds at d_model 256.
  assert np.abs(our_logits(config, saved[4], [ids]) - ref).max() <= FLOAT32_ATOL

  # What --step and --dtype ask for (the library call the flags become): step 2, in bfloat16.
  out = run_export.export_checkpoint(tmp_path / "run", tmp_path / "hf2", step=2, dtype="bfloat16")
  assert (out.step, out.dtype) == (2, "bfloat16")
  back = models.pure_params(models.load_hf(tmp_path / "hf2"))
  assert leaves_equal(back, jax.tree.map(lambda x: np.asarray(x).astype(ml_dtypes.bfloat16), saved[2]))


@pytest.mark.slow  # launch.export in children
def test_launch_export_names_the_flag_of_a_missing_workdir_or_step(corpus, tmp_path):
  sp = _sentencepiece("bpe", corpus)
  _run_dir(tmp_path / "run", BASE.replace(vocab_size=sp.vocab_size), sp, steps=(3,))
  for args, message in [
    ((f"--workdir={tmp_path / 'nowhere'}",), "--workdir="),
    ((f"--workdir={tmp_path}",), "--workdir="),  # a directory without checkpoints
    ((f"--workdir={tmp_path / 'run'}", "--step=7"), "--step=7"),
    ((f"--workdir={tmp_path / 'run'}", "--architecture=Qwen3ForCausalLM"), "--architecture"),
  ]:
    proc = launch(*args, f"--output={tmp_path / 'hf'}")
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
    assert proc.returncode == 2 and len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
  assert not (tmp_path / "hf").exists()


def test_the_tokenizer_of_a_run_directory_is_exported_with_the_run_convention(corpus, tmp_path):
  """`arena_jax.export.export_tokenizer` reads the tokenizer and `add_bos` a run records; the pure conversion
  takes tokenizers only and names the function that reads a run."""
  sp = _sentencepiece("bpe", corpus)
  _run_dir(tmp_path / "run", BASE.replace(vocab_size=sp.vocab_size), sp, steps=(), add_bos=False)
  names = run_export.export_tokenizer(tmp_path / "run", tmp_path / "from_run")
  tokenizer_files.export_tokenizer(sp, tmp_path / "direct", add_bos=False)
  for name in names:
    assert (tmp_path / "from_run" / name).read_bytes() == (tmp_path / "direct" / name).read_bytes(), name
  assert json.loads((tmp_path / "from_run" / "tokenizer_config.json").read_text())["add_bos_token"] is False
  run_export.export_tokenizer(tmp_path / "run", tmp_path / "bos", add_bos=True)  # an explicit value wins
  assert json.loads((tmp_path / "bos" / "tokenizer_config.json").read_text())["add_bos_token"] is True
  with pytest.raises(TypeError, match="arena_jax.export.export_tokenizer"):
    tokenizer_files.export_tokenizer(tmp_path / "run", tmp_path / "nowhere")


def test_a_run_from_a_hf_checkpoint_keeps_its_architecture_and_tokenizer(corpus, tmp_path):
  """The architecture and tokenizer files are the HF checkpoint's the run started from (its config.json beside
  the tokenizer the run records), not the default for the config."""
  pytest.importorskip("tokenizers")
  sp = _sentencepiece("bpe", corpus)
  config = BASE.replace(vocab_size=sp.vocab_size)
  source = tmp_path / "source"
  export.export_params(random_params(config, 0), config, source, architecture="MistralForCausalLM")
  tokenizer_files.export_tokenizer(sp, source, add_bos=False)
  # The checkpoint's own special ids (a list of EOS ids, as Llama-3 Instruct has) and generation settings.
  hf_config = json.loads((source / "config.json").read_text())
  (source / "config.json").write_text(json.dumps({**hf_config, "eos_token_id": [1, 5], "pad_token_id": None}))
  (source / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 5], "temperature": 0.7}))
  saved = _run_dir(tmp_path / "run", config, tok.load_tokenizer(source), steps=(1,), add_bos=False)
  out = run_export.export_checkpoint(tmp_path / "run", tmp_path / "hf")
  assert (out.step, out.architecture) == (1, "MistralForCausalLM") and export.default_architecture(config) != (
    "MistralForCausalLM"
  )
  assert json.loads((tmp_path / "hf" / "generation_config.json").read_text()) == {
    "eos_token_id": [1, 5],
    "temperature": 0.7,
  }
  exported = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert (exported["bos_token_id"], exported["eos_token_id"], exported["pad_token_id"]) == (sp.bos_id, [1, 5], None)
  for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    assert (tmp_path / "hf" / name).read_bytes() == (source / name).read_bytes()
  assert leaves_equal(models.pure_params(models.load_hf(tmp_path / "hf")), saved[1])
  with pytest.raises(export.ExportError, match="started from"):  # never over the checkpoint itself
    run_export.export_checkpoint(tmp_path / "run", source)
  # An architecture asked for wins over the recorded one.
  assert run_export.export_checkpoint(
    tmp_path / "run", tmp_path / "hf", architecture="LlamaForCausalLM"
  ).architecture == ("LlamaForCausalLM")
