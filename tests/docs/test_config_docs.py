"""docs/configuration.md and the judge-cost tables of docs/judges.md are generated from the code
(tools/gen_config_docs.py): they must equal a fresh generation, and every config field needs a
description (issue #9)."""
import pytest

from arena_jax.train import config as train_config
from tools import gen_config_docs as gen

REGENERATE = "run `python -m tools.gen_config_docs` and commit the result"


def test_generated_docs_are_up_to_date():
  for path, text in gen.expected_files().items():
    assert path.read_text(encoding="utf-8") == text, f"{path} is stale: {REGENERATE}"


def test_check_mode_passes_on_the_committed_docs(capsys):
  assert gen.main(["--check"]) == 0, capsys.readouterr().err


def test_a_field_without_a_description_fails(monkeypatch):
  original = train_config.base_config

  def with_new_field():
    c = original()
    c.reward.brand_new_knob = 3
    return c

  monkeypatch.setattr(train_config, "base_config", with_new_field)
  with pytest.raises(gen.DocsError, match=r"no description for \['reward.brand_new_knob'\]"):
    gen.generate_configuration()
  assert gen.main(["--check"]) == 1


def test_a_description_of_a_removed_field_fails(monkeypatch):
  table = {**gen.RUN, "reward": gen.RUN["reward"] + [gen.Field("reward.gone", "bool", "Was removed.")]}
  monkeypatch.setattr(gen, "RUN", table)
  with pytest.raises(gen.DocsError, match=r"described but in no config: \['reward.gone'\]"):
    gen.generate_configuration()


def test_defaults_do_not_depend_on_the_environment(monkeypatch, tmp_path):
  monkeypatch.setenv("ARENA_JAX_DATA_DIR", str(tmp_path))
  assert str(tmp_path) not in gen.generate_configuration()


def test_every_field_appears_with_its_default():
  text = gen.generate_configuration()
  flat = gen.flatten(train_config.base_config())
  for path in ("reward.mode", "judge.client.timeout_s", "judge.server.noise", "tasks.sft.fractions.clean",
               "loss.eps_high", "optim.lr"):
    assert f"| `{path}` | {gen.fmt(flat[path])} |" in text, path


def test_judge_cost_formulas_match_the_schedulers(monkeypatch):
  block = gen.generate_judge_costs()  # raises when a closed form disagrees with arena.expected_calls
  assert "| `live` | 3G−6 | 6 | 18 | 42 |" in block and "| `round_robin` | G(G−1)/2 | 6 | 28 | 120 |" in block
  monkeypatch.setitem(gen.FORMULAS, "live", ("3G", lambda g: 3 * g))
  with pytest.raises(gen.DocsError, match="live"):
    gen.generate_judge_costs()
