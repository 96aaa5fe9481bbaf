"""configs/real_smollm2.py (the real model's preset) and configs/eval/real_smollm2.py (its baseline suite): they
validate, start from the GGUF of `make real-model`, and a flag swaps the model."""

import configs
from arena_jax.eval import benchmarks, watch
from arena_jax import pretrained
from arena_jax.train.config import validate_config


def test_the_preset_starts_from_the_real_gguf_and_validates(real_gguf):
  for arg in (None, "smoke"):
    c = configs.get_config("configs/real_smollm2.py", arg)
    validate_config(c)
    assert pretrained.resolve(c.init.hf_path) == real_gguf and not c.init.policy_dir and not c.init.random_model
    assert c.tasks.prompt_format == "chat" and c.model.weight_dtype == "float32"
    assert c.tasks.answer_fallback == "last_number" and c.rollout.temperature == 0.7
  assert configs.get_config("configs/real_smollm2.py", "smoke").num_steps == 2


def test_the_baseline_suite_names_every_sample_suite(real_gguf):
  del real_gguf  # the suite reads the preset's tasks, which name the real model's preset
  config = watch.with_suite(watch.default_config(), configs.get_config("configs/eval/real_smollm2.py"))
  names = [b.name for b in benchmarks.resolve(config)]
  assert names == ["arithmetic", "arithmetic_shift", "countdown", "sample_math", "sample_choice", "sample_code"]
  assert config.tasks.arithmetic.max_ops == 2 and config.temperature == 0.7 and config.num_samples == 8
