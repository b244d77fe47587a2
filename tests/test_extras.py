"""Optional packages: the sentence that names what to install, and the check that raises it."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from connectx_az import extras


def test_the_message_names_the_packages_the_make_targets_and_the_pip_extras() -> None:
    one = extras.missing_message(["onnx"], "`connectx-az play`")
    assert one == ("`connectx-az play` needs onnx, which is not installed: run `make install-train` in the "
                   "repository (or there: pip install -e '.[train]')")
    both = extras.missing_message(["kaggle_environments", "torch", "tqdm.auto"], "`connectx-az arena`")
    assert "needs kaggle-environments, torch and tqdm, which are not installed" in both
    assert "`make install-train install-validate`" in both and "pip install -e '.[train,validate]'" in both
    runtime = extras.missing_message(["onnxruntime"], "`connectx-az eval pons`")
    assert runtime.endswith("run `make install-eval` in the repository (or there: pip install -e '.[eval]')")


def test_require_names_every_missing_package_and_passes_when_all_are_there(monkeypatch) -> None:
    extras.require("tqdm", needed_by="`connectx-az train`")  # installed with the test extras: no error
    monkeypatch.setitem(sys.modules, "onnx", None)  # as Python marks a module that cannot be imported
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(extras.MissingPackage) as caught:
        extras.require("matplotlib", "onnx", needed_by="`connectx-az plot`")
    assert caught.value.name == "matplotlib"
    assert str(caught.value).startswith("`connectx-az plot` needs matplotlib and onnx, which are not installed")
    assert isinstance(caught.value, ImportError)  # code that guards optional imports keeps working


def test_only_the_packages_of_the_extras_count_as_optional() -> None:
    assert extras.is_optional("tqdm.auto") and extras.is_optional("kaggle_environments.envs")
    assert not extras.is_optional("numpy") and not extras.is_optional(None)
    assert set(extras.MAKE_TARGETS) == {extra for _, extra in extras.PACKAGES.values()}


def test_each_package_is_in_the_extra_that_the_message_names() -> None:
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    for name, extra in extras.PACKAGES.values():
        requirements = project["optional-dependencies"][extra]
        assert name in {re.split(r"[<>=!~ \[;]", req, maxsplit=1)[0].lower() for req in requirements}, (name, extra)
