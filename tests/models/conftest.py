"""Fixtures for the model tests: tiny random HF checkpoints written by transformers into temp dirs."""

import pytest

from arena_jax import models


def random_init(model):
  """`model` (a torch module) with weights N(0, 0.25²) and norm scales U(0.5, 1.5), from torch's current seed."""
  import torch  # pylint: disable=g-import-not-at-top  (the hf extra)

  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("norm.weight"):
        p.uniform_(0.5, 1.5)
      else:
        p.normal_(0.0, 0.25)
  return model


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory):
  """make(config, architecture, **save_kwargs) → (torch model, path) of a saved random checkpoint.

  Weights are drawn N(0, 0.25²) (HF's 0.02 makes every logit ~0 and greedy decoding degenerate), norm
  scales around 1, so that logits and greedy paths are informative.
  """
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")

  def make(config: models.ModelConfig, architecture: str, *, seed: int = 0, dtype=None, **save_kwargs):
    hf_config = getattr(transformers, architecture.replace("ForCausalLM", "Config"))(
      **models.config_to_hf(config, architecture)
    )
    torch.manual_seed(seed)
    model = random_init(getattr(transformers, architecture)(hf_config).eval())
    if dtype is not None:
      model = model.to(dtype)
    path = tmp_path_factory.mktemp(architecture)
    model.save_pretrained(path, **save_kwargs)
    return model, path

  return make
