"""Model cards: the lines ``build`` prints, and the whole card that ``connectx-az card`` shows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from connectx_az import cards

DEFAULT_CARD = Path(__file__).resolve().parents[1] / "connectx_az" / "models" / "default.json"


def test_the_shipped_card_says_what_how_and_how_strong_in_three_lines() -> None:
    card = cards.load(DEFAULT_CARD)
    onnx = DEFAULT_CARD.with_suffix(".onnx")
    assert card["sha256"] == hashlib.sha256(onnx.read_bytes()).hexdigest() and card["num_bytes"] == onnx.stat().st_size
    lines = cards.summary_lines(card, model="default.onnx", sha256=card["sha256"], net_label=card["net"]["label"])
    assert [line.split(":")[0] for line in lines] == ["model", "trained", "strength"]
    assert f"sha256 {card['sha256'][:12]}" in lines[0] and f"{card['training']['games']:,} games" in lines[1]
    assert "Begin-Hard" in lines[2] and "measured by:" in "\n".join(cards.describe(card))


def test_the_card_names_the_model_as_build_does_and_what_its_strength_was_measured_against() -> None:
    card = cards.load(DEFAULT_CARD)
    shown = cards.describe(card, model=DEFAULT_CARD, width=1000)
    assert shown[0].startswith(f"model: default.onnx (exported as {card['path']}; ")  # build says default.onnx too
    assert shown[-1].startswith("measured by: connectx-az compare gen_0450.onnx (against the model shipped before it "
                                "(default.onnx), sha256 0bb40357d4d3)")
    assert card["sha256"][:12] != "0bb40357d4d3"
    assert cards.describe(card, width=1000)[0].startswith(f"model: {card['path']} (1,608,297 bytes")


def test_a_provenance_is_shown_one_step_a_line() -> None:
    steps = ["connectx-az train runs/a --preset cpu", "connectx-az train runs/b --init-model runs/a/checkpoint.pt"]
    card = {"trained_by": "two warm-started runs", "provenance": {"summary": "a chain", "steps": steps}}
    shown = "\n".join(cards.describe(card))
    assert "a chain" in shown and all(f"({i}) {step}" in shown for i, step in enumerate(steps, 1))


def test_a_card_with_only_some_facts_prints_what_it_has(tmp_path: Path) -> None:
    lines = cards.summary_lines({"trained_by": "connectx_az notebooks/train.ipynb", "training": {"generations": 3}},
                                model=tmp_path / "m.onnx", sha256="ab" * 32, net_label="1x16")
    assert lines == ["model: m.onnx, 1x16 ResNet, sha256 abababababab",
                     "trained: connectx_az notebooks/train.ipynb; 3 generations"]
    assert cards.summary_lines({}, model="m.onnx", sha256="0" * 64, net_label="1x16") == \
        ["model: m.onnx, 1x16 ResNet, sha256 000000000000"]
    assert cards.describe({}) == ["(no model card: export writes one beside the model, e.g. build/model.json)"]
    # `card` shows the card: the pointer to it that `build`'s line carries is left out there
    card = {"trained_by": "four warm-started runs (`connectx-az card`)"}
    assert cards.summary_lines(card, model="m.onnx", sha256="0" * 64, net_label="1x16")[1] == \
        "trained: four warm-started runs (`connectx-az card`)"
    assert cards.describe(card)[-1] == "trained by: four warm-started runs"


def test_builds_trained_line_counts_the_set_options_of_a_long_command_and_the_card_shows_them() -> None:
    short = {"trained_by": "connectx-az train RUN --preset cpu --set seed=1"}
    assert cards.summary_lines(short, model="m.onnx", sha256="0" * 64, net_label="1x16")[1] == \
        "trained: connectx-az train RUN --preset cpu --set seed=1"
    sets = " --set selfplay.num_parallel_games=64 --set selfplay.fork_previous=false --set train.precision=float32"
    long = {"trained_by": "connectx-az train RUN --preset cpu --workers 0" + sets, "training": {"generations": 450}}
    assert cards.summary_lines(long, model="m.onnx", sha256="0" * 64, net_label="1x16")[1] == \
        "trained: connectx-az train RUN --preset cpu --workers 0 +3 --set; 450 generations"
    assert "trained by: " + long["trained_by"] in " ".join(" ".join(cards.describe(long, width=80)).split())


def test_a_missing_card_is_empty_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    assert cards.load(tmp_path / "none.json") == {}
    (tmp_path / "list.json").write_text(json.dumps([1, 2]))
    with pytest.raises(cards.CardError, match="is not a JSON object"):
        cards.load(tmp_path / "list.json")
    (tmp_path / "cut.json").write_text('{"sha256": "ab')
    with pytest.raises(cards.CardError, match="is not readable JSON"):
        cards.load(tmp_path / "cut.json")
