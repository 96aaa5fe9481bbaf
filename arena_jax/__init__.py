"""arena_jax: Reasoning Arena in JAX (the algorithms: docs/spec.md; the code: docs/architecture.md).

Rooms (each exports its public names from its own `__init__`):
  arena_jax.arena  — verdict outcomes, tournament schedulers, batched Bradley–Terry fitting
  arena_jax.rl     — group advantages, the per-group reward router, the CISPO loss
  arena_jax.report — the tournament inspector: a run's judge transcripts as static HTML (`launch.inspect`)

Importing this package imports nothing heavy: rooms are imported on use.
"""

__version__ = "0.1.0"
