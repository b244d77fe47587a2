# The two commands a user needs: `make submission` and `make test`.
# Everything is installed into .venv from pyproject.toml; nothing else is needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
BIN := $(VENV)/bin
# A CPU build of torch (override, e.g. TORCH_SPEC="torch" for a CUDA machine).
TORCH_SPEC ?= torch==2.13.0
GAMES ?= 20

.PHONY: submission test test-slow validate install install-train install-test train-cpu lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Building a submission needs numpy only: no torch, no kaggle-environments.
$(VENV)/.core: pyproject.toml | $(PY)
	$(PIP) install -e .
	touch $@

$(VENV)/.train: pyproject.toml | $(PY)
	$(PIP) install "$(TORCH_SPEC)"
	$(PIP) install -e ".[train]"
	touch $@

$(VENV)/.test: pyproject.toml | $(PY)
	$(PIP) install "$(TORCH_SPEC)"
	$(PIP) install -e ".[test]"
	touch $@ $(VENV)/.train $(VENV)/.validate

$(VENV)/.validate: pyproject.toml | $(PY)
	$(PIP) install -e ".[validate]"
	touch $@

install: $(VENV)/.core
install-train: $(VENV)/.train
install-test: $(VENV)/.test

submission: $(VENV)/.core
	$(BIN)/connectx-az build --out build/submission.py

test: $(VENV)/.test
	$(PY) -m pytest -q

test-slow: $(VENV)/.test
	$(PY) -m pytest -q -m slow

validate: $(VENV)/.validate
	@test -f build/submission.py || $(MAKE) submission
	$(BIN)/connectx-az validate build/submission.py --games $(GAMES)

train-cpu: $(VENV)/.train
	$(BIN)/connectx-az train runs/cpu --preset cpu

lint: $(VENV)/.test
	$(BIN)/ruff check .

clean:
	rm -rf build .pytest_cache
