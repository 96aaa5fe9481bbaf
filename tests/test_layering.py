"""The rooms of arena_jax import downwards only (`arena_jax.LAYERS`): every import of every module, those
inside functions included, is read with `ast`, and an import of a higher layer, or of another room of the
same layer, fails naming the file, the line and both layers."""

import ast
import pathlib
import shutil

import arena_jax

ROOT = pathlib.Path(arena_jax.__file__).resolve().parent


def _imported(node: ast.AST, package: list[str], root: pathlib.Path) -> list[str]:
  """The dotted names of arena_jax modules (or of arena_jax itself) that an import statement reads."""
  if isinstance(node, ast.Import):
    return [alias.name for alias in node.names]
  if node.level:  # relative: resolved against the module's own package
    base = ".".join(package[: len(package) - node.level + 1])
    module = f"{base}.{node.module}" if node.module else base
  else:
    module = node.module or ""
  if module != "arena_jax":
    return [module]
  # `from arena_jax import tokenizer, LAYERS`: a name that is a top-level module or room, else the package.
  return [
    f"arena_jax.{a.name}" if (root / a.name).is_dir() or (root / f"{a.name}.py").is_file() else "arena_jax"
    for a in node.names
  ]


def violations(root: pathlib.Path, layers) -> list[str]:
  """One line per import of `root` (an arena_jax tree) that `layers` forbid, and per room without a layer."""
  level = {unit: i for i, tier in enumerate(layers) for unit in tier}
  out = []
  for path in sorted(root.rglob("*.py")):
    rel = path.relative_to(root)
    parts = ["arena_jax", *rel.with_suffix("").parts]
    package = parts[:-1]  # what a relative import starts from (an __init__'s own package)
    unit = parts[1] if len(parts) > 2 or parts[-1] != "__init__" else None  # None: arena_jax/__init__.py
    name = f"arena_jax/{rel.as_posix()}"
    if unit is not None and unit not in level:
      out.append(f"{name}: {unit} has no layer in arena_jax.LAYERS")
      continue
    mine = -1 if unit is None else level[unit]
    nodes = ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=name))
    for node in sorted((n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))), key=lambda n: n.lineno):
      for module in _imported(node, package, root):
        target = module.split(".")
        if target[0] != "arena_jax" or len(target) < 2 or target[1] == unit:
          continue  # outside arena_jax, the package itself, or the module's own room
        theirs = level.get(target[1])
        if theirs is None:
          out.append(f"{name}:{node.lineno}: {unit or 'arena_jax'} imports {module}, whose room has no layer")
        elif theirs >= mine:
          where = "a higher layer" if theirs > mine else "another room of its own layer"
          out.append(
            f"{name}:{node.lineno}: {unit or 'arena_jax'} (layer {mine}) imports {module}, of {where}: "
            f"{target[1]} (layer {theirs})"
          )
  return out


def test_every_room_imports_only_lower_layers():
  assert violations(ROOT, arena_jax.LAYERS) == []


def test_each_room_has_one_layer():
  units = [u for tier in arena_jax.LAYERS for u in tier]
  assert len(units) == len(set(units))
  present = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
  present |= {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
  assert set(units) == present


def test_a_planted_upward_import_is_named_with_its_file_line_and_layers(tmp_path):
  """The checker on a copy of arena_jax with upward imports planted: in a function (models imports train,
  the import this layering removed), relative, of a same-layer room, and of a room without a layer."""
  tree = tmp_path / "arena_jax"
  shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns("__pycache__"))
  assert violations(tree, arena_jax.LAYERS) == []
  export = tree / "models" / "hf" / "export.py"
  n = len(export.read_text().splitlines())  # the planted imports land on lines n + 4 and n + 9
  with export.open("a") as f:
    f.write("\n\ndef _restore(workdir):\n  from arena_jax.train import policy_io\n\n  return policy_io\n")
    f.write("\n\nfrom ...judges import prompts  # noqa\n")
  (tree / "rl" / "planted.py").write_text("import arena_jax.nowhere\n")
  (tree / "newroom.py").write_text("")
  lev = {u: i for i, tier in enumerate(arena_jax.LAYERS) for u in tier}
  assert violations(tree, arena_jax.LAYERS) == [
    f"arena_jax/models/hf/export.py:{n + 4}: models (layer {lev['models']}) imports arena_jax.train, of a "
    f"higher layer: train (layer {lev['train']})",
    f"arena_jax/models/hf/export.py:{n + 9}: models (layer {lev['models']}) imports arena_jax.judges, of "
    f"another room of its own layer: judges (layer {lev['judges']})",
    "arena_jax/newroom.py: newroom has no layer in arena_jax.LAYERS",
    "arena_jax/rl/planted.py:1: rl imports arena_jax.nowhere, whose room has no layer",
  ]
