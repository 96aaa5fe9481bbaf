"""The trainer tests' shared runs (tests/train/conftest.py), which the server tests serve from their run directories."""

from tests.train.conftest import coin_verifier, data_dir, rlvr_run  # noqa: F401  (fixtures, by name)
