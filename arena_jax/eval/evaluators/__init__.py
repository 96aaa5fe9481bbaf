"""Evaluators by name (big_vision style): `config.suite.<name>.type` picks one; a new measurement is one module.

    @EVALUATORS.register("my_measure")
    class MyMeasure(Evaluator):
      def run(self, policy, task, examples, rng) -> dict: ...   # flat {metric: float}

Every module of this package is imported here, so a module placed in it registers itself.
"""

import importlib
import pkgutil

from arena_jax.eval.evaluators.base import EVALUATORS, EvalPolicy, Evaluator

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base" and not m.name.startswith("_")):
  importlib.import_module(f"{__name__}.{_m}")
