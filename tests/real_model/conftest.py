"""The trainer tests' fixtures (tests/train/conftest.py), which the real model's smoke uses for its tiny judged step."""

from tests.train.conftest import coin_verifier, data_dir  # noqa: F401  (fixtures, by name)
