"""The real-size configs' `smoke` variant keeps every code path of the real run (issue: the researcher's
real path): a tiny random checkpoint of the policy's architecture built here with transformers, imported
from HF format, prompted through its chat template, trained 2 steps on JSONL math data verified by
math-verify against the embedded judge over HTTP on a sharded mesh, then evaluated from its checkpoint."""

import json
import pathlib

import pytest

from arena_jax import models
from arena_jax.eval import watch as watch_lib
from arena_jax.train import read_metrics, train
import configs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "data" / "chat_templates"
TINY = models.ModelConfig(
  vocab_size=512, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, mlp_dim=96, rms_norm_eps=1e-5
)
PROBLEMS = [(f"What is {a} + {b}?", str(a + b)) for a in range(2, 6) for b in range(3, 7)]


def _tokenizer(path, specials, config):
  model = tokenizers.Tokenizer(tokenizers.models.BPE())
  model.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
  model.decoder = tokenizers.decoders.ByteLevel()
  trainer = tokenizers.trainers.BpeTrainer(
    vocab_size=400, special_tokens=specials, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()
  )
  model.train_from_iterator([q + " Answer: " + a for q, a in PROBLEMS] * 4, trainer)
  model.save(str(path / "tokenizer.json"))
  (path / "tokenizer_config.json").write_text(json.dumps(config))


def _init(model):
  torch.manual_seed(0)
  with torch.no_grad():
    for name, p in model.named_parameters():
      p.uniform_(0.5, 1.5) if name.endswith("norm.weight") else p.normal_(0.0, 0.1)
  return model


def qwen3_checkpoint(path):
  config = TINY.replace(qk_norm=True, rope_theta=1e6)
  hf = transformers.Qwen3Config(**models.config_to_hf(config, "Qwen3ForCausalLM"), eos_token_id=1)
  _init(transformers.Qwen3ForCausalLM(hf)).save_pretrained(path)
  _tokenizer(
    path,
    ["<|endoftext|>", "<|im_end|>", "<|im_start|>", "<think>", "</think>"],
    {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
  )
  (path / "chat_template.jinja").write_text((TEMPLATES / "qwen3.jinja").read_text())


def ministral3_checkpoint(path):
  """Mistral3ForConditionalGeneration: a Pixtral vision tower around a ministral3 decoder (the paper's policy)."""
  config = TINY.replace(
    rope_theta=1e6,
    query_scale_beta=0.1,
    query_scale_length=8,
    rope_scaling=models.RopeScaling(
      "yarn", factor=4.0, original_max_position_embeddings=8, mscale=1.0, mscale_all_dim=1.0
    ),
  )
  text = transformers.Ministral3Config(**models.config_to_hf(config, "Ministral3ForCausalLM"))
  vision = transformers.PixtralVisionConfig(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    head_dim=16,
    image_size=32,
    patch_size=8,
  )
  hf = transformers.Mistral3Config(vision_config=vision, text_config=text, tie_word_embeddings=False)
  _init(transformers.Mistral3ForConditionalGeneration(hf)).save_pretrained(path)
  _tokenizer(
    path,
    ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"],
    {
      "bos_token": "<s>",
      "eos_token": "</s>",
      "unk_token": "<unk>",
      "chat_template": (TEMPLATES / "mistral.jinja").read_text(),
    },
  )


# The slow tier: about 2 minutes per config on 2 CPU cores: two compiles on a 4 × 2 mesh, then the evaluation.
@pytest.mark.slow
@pytest.mark.mesh  # a 4 × 2 mesh (tensor = 2): 8 fake devices
@pytest.mark.parametrize(
  "name, build", [("real_ministral3_8b", ministral3_checkpoint), ("real_qwen3_8b", qwen3_checkpoint)]
)
def test_the_real_config_at_smoke_size_trains_and_evaluates(name, build, tmp_path):
  checkpoint, data, workdir = tmp_path / "checkpoint", tmp_path / "data", tmp_path / "run"
  checkpoint.mkdir()
  data.mkdir()
  build(checkpoint)
  for split, rows in (("train", PROBLEMS[:12]), ("test", PROBLEMS[12:])):
    (data / f"{split}.jsonl").write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows))
  c = configs.get_config(name, "smoke")
  assert c.tasks.prompt_format == "chat" and c.tasks.train_task == "jsonl" and c.init.hf_path
  c.init.hf_path = str(checkpoint)
  c.tasks.jsonl.train_path, c.tasks.jsonl.test_path = str(data / "train.jsonl"), str(data / "test.jsonl")
  c.tasks.data_dir = str(tmp_path / "tfds")
  train(c, str(workdir))

  rows = read_metrics(str(workdir))
  assert [r["step"] for r in rows] == [1, 2]
  for r in rows:  # a random policy never answers: every group all-wrong, all routed to the judge
    assert r["judge/groups"] == 4 and r["judge/calls"] == 4 * (3 * 4 - 6) and r["judge/failures"] == 0
  samples = [json.loads(l) for l in (workdir / "samples.jsonl").read_text().splitlines()]
  assert samples and all("What is" in s["prompt"] for s in samples)
  # samples.jsonl records the prompt the policy was given: rendered by the checkpoint's chat template.
  marker = {"real_qwen3_8b": "<|im_start|>user", "real_ministral3_8b": "[INST]"}[name]
  assert all(marker in s["prompt"] for s in samples), samples[0]["prompt"]

  cfg = watch_lib.default_config()
  cfg.benchmarks = ("jsonl",)
  cfg.num_examples, cfg.num_samples, cfg.max_new_tokens, cfg.batch_size = 4, 2, 8, 4
  results = watch_lib.evaluate_step(str(workdir), 2, cfg)
  assert 0.0 <= results["jsonl"]["greedy_accuracy"] <= 1.0
