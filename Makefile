# Every target works on a fresh machine: it creates .venv and installs the pinned versions (setup.py).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# JAX stays on the CPU unless the caller chooses otherwise (e.g. JAX_PLATFORMS=tpu make demo).
export JAX_PLATFORMS ?= cpu
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test bench venv clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# Re-install whenever setup.py (the one place that pins versions) changes.
$(VENV)/.installed: setup.py | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[test,hf]'
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) -m benchmarks.tournament_fidelity --demo

# pytest exits 5 when it collects no tests; make treats any non-zero status as a failure.
test: venv
	$(PY) -m pytest

bench: venv
	$(PY) -m benchmarks.bt_fit
	$(PY) -m benchmarks.tournament_fidelity
	$(PY) -m benchmarks.sampler
	$(PY) -m benchmarks.judge_throughput
	$(PY) -m benchmarks.jury_f1

clean:
	rm -rf $(VENV) .pytest_cache .jax_cache *.egg-info
