"""Every task, one module each: importing this package imports them all, and each registers itself.

The built-in ones first, in the order the docs list them; any other module placed here after them, by name.
"""

import importlib
import pkgutil

_BUILT_IN = ("arithmetic", "arithmetic_shift", "countdown", "jsonl", "choice", "code", "mixture")


def _modules() -> list[str]:
  found = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
  return [m for m in _BUILT_IN if m in found] + [m for m in found if m not in _BUILT_IN]


for _name in _modules():
  importlib.import_module(f"{__name__}.{_name}")
