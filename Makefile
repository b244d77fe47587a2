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
# what the agent may import in `make validate`: numpy (numpy alone, the worst case), kaggle (numba and torch too)
RUNTIME ?= numpy

# onnx for the Kaggle dataset: versions with wheels for Kaggle's and Colab's Pythons that work with numpy 1.x and 2.x.
ONNX_SPEC ?= onnx==1.17.0
KAGGLE_PYTHONS ?= 3.11 3.12
KAGGLE_DIR := build/kaggle

.PHONY: gpu-check submission test test-slow test-timing validate install install-train install-validate install-test train-cpu kaggle lint clean

$(PY):
	@$(PYTHON) -m venv $(VENV)

# Building a submission needs numpy only: no torch, no kaggle-environments.  Quiet: `make submission` prints what
# it built and little else.
$(VENV)/.core: pyproject.toml | $(PY)
	@echo "installing connectx-az into $(VENV) (numpy only)"
	@$(PIP) install -e .
	@touch $@

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
install-validate: $(VENV)/.validate
install-test: $(VENV)/.test

submission: $(VENV)/.core
	@$(BIN)/connectx-az build --out build/submission.py

test: $(VENV)/.test
	$(PY) -m pytest -q

test-slow: $(VENV)/.test
	$(PY) -m pytest -q -m slow

test-timing: $(VENV)/.test
	$(PY) -m pytest -q -m timing

validate: $(VENV)/.validate
	@test -f build/submission.py || $(MAKE) submission
	$(BIN)/connectx-az validate build/submission.py --games $(GAMES) --runtime $(RUNTIME)

train-cpu: $(VENV)/.train
	$(BIN)/connectx-az train runs/cpu --preset cpu

# What only a GPU can show, in about seven minutes: the device, the CUDA tests, self-play per precision, a few
# generations of the gpu preset and its whole run projected (here and on a T4), a file built and played.  On a GPU
# machine whose python3 already has a CUDA torch (Kaggle, Colab, a lent box) nothing is installed: it runs from this
# tree.  The same check runs on the CPU with the smoke preset in `make test` (tests/test_bench_gpu.py).
GPU_PYTHON ?= python3
GPU_CHECK_OUT ?= build/gpu-check
gpu-check:
	PYTHONPATH="$(CURDIR)" $(GPU_PYTHON) -m connectx_az.cli bench gpu --out $(GPU_CHECK_OUT)

# One folder to upload as a Kaggle dataset: the package's wheel, onnx wheels, and the notebook, which
# installs the wheel from /kaggle/input with Internet off (see the notebook's first cell).
kaggle: $(VENV)/.core
	rm -rf $(KAGGLE_DIR)
	$(PIP) wheel --no-deps -w $(KAGGLE_DIR) .
	rm -rf build/lib build/bdist.*
	for version in $(KAGGLE_PYTHONS); do \
		$(PIP) download --no-deps --only-binary=:all: --python-version $$version \
			--platform manylinux_2_17_x86_64 -d $(KAGGLE_DIR) "$(ONNX_SPEC)" || exit 1; \
	done
	cp notebooks/train.ipynb $(KAGGLE_DIR)/
	printf '%s\n' '{"title": "connectx-az package", "id": "YOUR_KAGGLE_USERNAME/connectx-az-package",' \
		'"licenses": [{"name": "MIT"}]}' > $(KAGGLE_DIR)/dataset-metadata.json
	@ls -l $(KAGGLE_DIR)
	@echo "Upload $(KAGGLE_DIR) as a Kaggle dataset (kaggle.com: Datasets, New dataset; or set your user name in" \
		"$(KAGGLE_DIR)/dataset-metadata.json and run: kaggle datasets create -p $(KAGGLE_DIR))."

lint: $(VENV)/.test
	$(BIN)/ruff check .

clean:
	rm -rf build .pytest_cache
