"""The trainer tests' fixtures (a data dir per worker, the coin-flip verifier), shared with this folder."""

from tests.train.conftest import coin_verifier, data_dir  # noqa: F401  (pytest finds fixtures by name here)
