# The two commands a user needs: `make submission` and `make test`.
# Everything is installed into .venv from pyproject.toml; nothing else is needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
BIN := $(VENV)/bin
# torch for install-train and install-test: the release TORCH_SPEC (pyproject.toml asks torch>=2.4: the pin must
# satisfy it), in the build TORCH: cpu (default: pip also looks in PyTorch's CPU index, whose "+cpu" wheels sort above
# PyPI's CUDA ones of the same release, about 200 MB) or cuda (PyPI's own build: CUDA on Linux, several GB).  The
# choice is recorded in $(VENV)/.torch: an install that names another one reinstalls torch.
TORCH ?= cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
GAMES ?= 20
# what the agent may import in `make validate`: numpy (numpy alone, the worst case), kaggle (numba and torch too)
RUNTIME ?= numpy

# onnx for the Kaggle dataset: versions with wheels for Kaggle's and Colab's Pythons that work with numpy 1.x and 2.x.
ONNX_SPEC ?= onnx==1.17.0
KAGGLE_PYTHONS ?= 3.11 3.12
KAGGLE_DIR := build/kaggle

.PHONY: help gpu-check submission test test-slow test-timing validate install install-eval install-train install-validate install-test train-cpu kaggle lint clean distclean

# `make` alone: what there is to make (the first rule below would make an empty $(VENV)).
.DEFAULT_GOAL := help
help:
	@echo "make submission     build/submission.py, the file to upload (installs numpy and the package into $(VENV))"
	@echo "make validate       play it through kaggle-environments (GAMES=20 a seat and opponent, RUNTIME=numpy)"
	@echo "make install-train  what \`connectx-az train\` and \`export\` need (TORCH=cuda on a CUDA machine)"
	@echo "make install-eval   what grading a model, \`arena\` and \`play\` need (no torch)"
	@echo "make test           the tests (make test-slow, make test-timing, make lint: the others)"
	@echo "make kaggle         build/kaggle/, a folder to upload as a Kaggle dataset for the notebook"
	@echo "make gpu-check      on a CUDA machine: what only a GPU can show"
	@echo "make clean          remove the builds, replays, compares and caches in build/ (your models stay)"
	@echo "make distclean      that, and $(VENV)"

# The package needs Python >= 3.11 (pyproject.toml): a PYTHON older than that is refused before $(VENV) is made, and
# a $(VENV) left by an older one (or by hand) is refused in one line that says how to start over.
NEED_PYTHON := import sys; sys.exit(sys.version_info < (3, 11))
START_OVER := run \`make distclean\` (removes $(VENV)), then make again with PYTHON=python3.11 or newer

$(PY):
	@$(PYTHON) -c '$(NEED_PYTHON)' 2>/dev/null || { v=$$($(PYTHON) --version 2>/dev/null | head -n 1); echo "error:" \
		"connectx-az needs Python >= 3.11, and $(PYTHON) is $${v:-not a working Python}: run make again with" \
		"PYTHON=python3.11 or newer"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "error: \`$(PYTHON) -m venv\` failed (on Debian and" \
		"Ubuntu: apt install python3-venv); $(VENV) was removed: run make again"; exit 1; }

# Every install starts here: the $(VENV) that exists is one this package can use.
CHECK_VENV = @$(PY) -c '$(NEED_PYTHON)' 2>/dev/null || { v=$$($(PY) --version 2>/dev/null | head -n 1); echo "error:" \
	"$(VENV) holds $${v:-no working Python}, and connectx-az needs Python >= 3.11: $(START_OVER)"; exit 1; }

# Building a submission needs numpy only: no torch, no kaggle-environments.  Quiet: `make submission` prints what
# it built and little else.
$(VENV)/.core: pyproject.toml | $(PY)
	$(CHECK_VENV)
	@echo "installing connectx-az into $(VENV) (numpy only)"
	@$(PIP) install -e .
	@touch $@

# torch as TORCH and TORCH_SPEC ask: remade (torch uninstalled, then installed) where this call names either (on the
# command line or in the environment) and the choice recorded in the stamp differs, or where there is no stamp; a
# plain `make test` keeps the torch recorded, and a venv with no record keeps a torch that satisfies TORCH_SPEC.
# torch alone: the CPU index is asked about torch only; its dependencies come from PyPI with the extra installed next.
TORCH_CHOICE := $(TORCH) $(TORCH_SPEC)
ifeq ($(filter $(TORCH),cpu cuda),)
$(error TORCH must be cpu or cuda, not "$(TORCH)")
endif
TORCH_RECORD := $(shell cat $(VENV)/.torch 2>/dev/null)
ifneq ($(TORCH_RECORD),$(TORCH_CHOICE))
ifneq ($(TORCH_RECORD)$(filter-out file,$(origin TORCH) $(origin TORCH_SPEC)),$(TORCH_RECORD))
.PHONY: $(VENV)/.torch
endif
endif
$(VENV)/.torch: | $(PY)
	$(CHECK_VENV)
	@if [ -f $@ ]; then echo "torch: $$(cat $@) -> $(TORCH_CHOICE)"; $(PIP) uninstall -y torch; fi
	$(PIP) install --no-deps $(if $(filter cpu,$(TORCH)),--extra-index-url $(TORCH_CPU_INDEX)) "$(TORCH_SPEC)"
	@echo '$(TORCH_CHOICE)' > $@

$(VENV)/.train: pyproject.toml $(VENV)/.torch | $(PY)
	$(CHECK_VENV)
	$(PIP) install -e ".[train]"
	touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.torch | $(PY)
	$(CHECK_VENV)
	$(PIP) install -e ".[test]"
	touch $@ $(VENV)/.train $(VENV)/.eval $(VENV)/.validate

# Grading a model (`eval pons --model`), the arena and play: onnxruntime and kaggle-environments, no torch.
$(VENV)/.eval: pyproject.toml | $(PY)
	$(CHECK_VENV)
	$(PIP) install -e ".[eval]"
	touch $@

$(VENV)/.validate: pyproject.toml | $(PY)
	$(CHECK_VENV)
	$(PIP) install -e ".[validate]"
	touch $@

install: $(VENV)/.core
install-eval: $(VENV)/.eval
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
# tree.  The same check runs on the CPU with the smoke preset in `make test` (tests/test_gpu_check.py).
# GPU_PYTHON: python3 where it has torch, else this checkout's $(VENV) (`make install-train TORCH=cuda`).
GPU_PYTHON ?= $(shell python3 -c 'import torch' 2>/dev/null && echo python3 || echo $(PY))
GPU_CHECK_OUT ?= build/gpu-check
gpu-check:
	@$(GPU_PYTHON) -c 'import torch' 2>/dev/null || { echo "error: make gpu-check needs a Python with torch: neither" \
		"python3 nor $(PY) has one (on a CUDA machine: make install-train TORCH=cuda)"; exit 1; }
	@$(GPU_PYTHON) -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' || { echo "error: make" \
		"gpu-check measures a CUDA GPU, and the torch of $(GPU_PYTHON) sees none here (no GPU, or a CPU build of" \
		"torch: make install-train TORCH=cuda)"; exit 1; }
	PYTHONPATH="$(CURDIR)" $(GPU_PYTHON) lab/device/gpu_check.py --out $(GPU_CHECK_OUT)

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

# clean: what the commands write into build/ by default and what tests wrote; not a model exported there
# (`export`'s default build/RUN.onnx and its card) nor the opening book's journal (build/book: hours of proofs).
# distclean: that and $(VENV) too (start over from a fresh install)
CLEANED := build/submission.py build/submission_*.py build/replays build/compare build/compare-replays \
	build/duel_cache.sqlite build/kaggle build/gpu-check build/lib build/bdist.* .pytest_cache
clean:
	rm -rf $(CLEANED)

distclean: clean
	rm -rf $(VENV)
