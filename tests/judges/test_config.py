"""`judges.default_config()` validates, and every bad value is reported with the field to change."""

import pytest

from arena_jax import judges


def test_default_config_is_valid():
  config = judges.validate_config(judges.default_config())
  assert config.backend in judges.BACKENDS and config.debias == "random" and config.margin == 0.4


@pytest.mark.parametrize(
  "path, value, field",
  [
    ("backend", "elo", "judge.backend"),
    ("urls", ("ftp://a",), "judge.urls"),
    ("margin", 0.7, "judge.margin"),
    ("debias", "sometimes", "judge.debias"),
    ("max_tokens", 0, "judge.max_tokens"),
    ("template_dir", "/no/such/dir", "judge.template_dir"),
    ("rubric_levels", (1.0,), "judge.rubric_levels"),
    ("client.concurrency", 0, "judge.client.concurrency"),
    ("client.timeout_s", 0.0, "judge.client.timeout_s"),
    ("client.jitter", 1.5, "judge.client.jitter"),
    ("jury.mode", "shouting", "judge.jury.mode"),
    ("jury.quorum", 9, "judge.jury.quorum"),
    ("jury.error_min_impact", "huge", "judge.jury.error_min_impact"),
    ("server.error_rate", 1.2, "judge.server.error_rate"),
    ("server.latency_dist", "pareto", "judge.server.latency_dist"),
    ("server.error_statuses", (200,), "judge.server.error_statuses"),
  ],
)
def test_bad_fields_are_named(path, value, field):
  config = judges.default_config()
  *parents, name = path.split(".")
  node = config
  for p in parents:
    node = node[p]
  node[name] = value
  with pytest.raises(ValueError, match=field.replace(".", r"\.")):
    judges.validate_config(config)


def test_backends_are_registered_by_name():
  assert set(judges.BACKENDS) == {"pairwise", "pointwise", "jury"}
  with pytest.raises(ValueError, match="judge.urls is empty"):
    judges.make_judge(judges.default_config())
