"""The suite's cache keys (tests/cache.py): a cached SFT policy or corpus tokenizer is retrained after an edit to the
code it is built from, and reused after an edit anywhere else (an edit to any module used to retrain both SFT
policies)."""

import pathlib

from tests import cache


def _tree(root: pathlib.Path, files: dict[str, str]) -> None:
  for name, text in files.items():
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")


def test_the_key_follows_imports_and_ignores_the_rest(tmp_path, monkeypatch):
  _tree(
    tmp_path,
    {
      "setup.py": "PINS = 1\n",
      "arena_jax/__init__.py": "",
      "arena_jax/train/__init__.py": "from arena_jax.train import trainer\n",
      "arena_jax/train/sft.py": "from arena_jax import tasks\nfrom . import policy_io\n",
      "arena_jax/train/policy_io.py": "def load():\n  from arena_jax.models import transformer\n",
      "arena_jax/train/trainer.py": "from arena_jax import judges\n",
      "arena_jax/tasks/__init__.py": "from arena_jax.tasks.arithmetic import Task\n",
      "arena_jax/tasks/arithmetic.py": "import numpy\nTask = 1\n",
      "arena_jax/models/__init__.py": "",
      "arena_jax/models/transformer.py": "X = 1\n",
      "arena_jax/judges/__init__.py": "Y = 1\n",
    },
  )
  monkeypatch.setattr(cache, "REPO", tmp_path)
  closure = {str(p.relative_to(tmp_path)) for p in cache.module_closure("arena_jax/train/sft.py")}
  # A package's __init__ is followed where a name is imported from it; a lazy import inside a function counts;
  # a relative import resolves against the importing module's package.
  assert closure == {
    "arena_jax/train/sft.py",
    "arena_jax/tasks/__init__.py",
    "arena_jax/tasks/arithmetic.py",
    "arena_jax/train/policy_io.py",
    "arena_jax/models/transformer.py",
  }
  key = cache.source_key()
  (tmp_path / "arena_jax/judges/__init__.py").write_text("Y = 2\n", encoding="utf-8")
  (tmp_path / "arena_jax/train/trainer.py").write_text("Z = 3\n", encoding="utf-8")
  assert cache.source_key() == key, "an edit outside the SFT code retrained the policy"
  (tmp_path / "arena_jax/models/transformer.py").write_text("X = 2\n", encoding="utf-8")
  assert cache.source_key() != key, "an edit to the model kept a stale policy"
  key = cache.source_key()
  (tmp_path / "setup.py").write_text("PINS = 2\n", encoding="utf-8")
  assert cache.source_key() != key, "a new pin kept a stale policy"
  assert cache.source_key("config a") != cache.source_key("config b")


def test_the_sft_key_covers_the_model_tasks_tokenizer_and_sft_code_only():
  closure = {str(p.relative_to(cache.REPO)) for p in cache.module_closure(*cache.SFT_ROOTS)}
  for needed in (
    "arena_jax/train/sft.py",
    "arena_jax/models/transformer.py",
    "arena_jax/tasks/arithmetic.py",
    "arena_jax/tokenizer.py",
  ):
    assert needed in closure, needed
  for folder in ("arena_jax/judges/", "arena_jax/rl/", "arena_jax/arena/", "arena_jax/eval/", "experiments/"):
    assert not any(p.startswith(folder) for p in closure), (folder, sorted(closure))
  assert "arena_jax/train/trainer.py" not in closure
