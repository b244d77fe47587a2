"""The clock benchmark's figures from the games' records (the games themselves run in ``test_clock.py``)."""

from __future__ import annotations

import pytest

from connectx_az.tools import bench_clock


def _move(step: int, seconds: float, budget: float | None, bank: float) -> dict:
    return {"step": step, "seconds": seconds, "budget": budget, "bank": bank}


GAMES = [
    {"result": "win", "moves": [_move(0, 0.40, 0.30, 7.35), _move(2, 0.21, 0.20, 7.35), _move(4, 0.26, 0.25, 7.34)]},
    {"result": "draw", "moves": [_move(1, 0.30, 0.30, 7.45), _move(3, 0.05, None, 7.45), _move(5, 0.12, 0.10, 7.45)]},
]


def test_lateness_leaves_out_each_seats_first_move_and_the_moves_without_a_budget() -> None:
    assert bench_clock.lateness(GAMES) == pytest.approx([0.01, 0.01, 0.02])


def test_summary_gives_the_latest_two_moves_past_budget_and_the_least_bank() -> None:
    summary = bench_clock.summarize_games(GAMES, 7.5)
    assert summary == {"games": 2, "moves": 6, "results": {"draw": 1, "win": 1}, "latest_past_budget_s": 0.02,
                       "next_latest_past_budget_s": 0.01, "longest_move_s": 0.4, "least_bank_s": 7.34, "bank_s": 7.5}
    text = bench_clock.format_clock({"model": "m.onnx", "cpu": 1, "act_timeout": 0.25,
                                     "games": {"numpy/shipped": summary},
                                     "first_move": [{"exec_s": 0.2, "call_s": 0.35, "budget_s": 0.556,
                                                     "past_budget_s": -0.006, "simulations": 40}]})
    assert "games numpy/shipped  2 at 0.25 s + 7.5 s bank (1 draw, 1 win; 6 moves): latest move 0.02 s past its " \
           "budget, next 0.01 s" in text
    assert "first move 1 at 0.5 s: exec 0.2 s + call 0.35 s against a budget of 0.556 s (-0.006 s)" in text


def test_a_first_move_is_measured_from_the_files_exec_against_the_compile_and_the_move_budget() -> None:
    from connectx_az.agent import template

    plain = {"exec_seconds": 0.2, "call_seconds": 0.35, "info": {"simulations": 40}}
    figures = bench_clock._first_move_figures(plain, 0.5, 15.0)
    assert figures["budget_s"] == round(template.move_budget(0.5, 15.0, 42), 3)
    assert figures["past_budget_s"] == round(0.55 - template.move_budget(0.5, 15.0, 42), 3)
    assert figures["bank_used_s"] == 0.05 and figures["simulations"] == 40
    compiled = {"exec_seconds": 0.2, "call_seconds": 4.0, "info": {"compile_seconds": 3.0}}
    figures = bench_clock._first_move_figures(compiled, 2.0, 60.0)
    assert figures["budget_s"] == round(3.0 + template.move_budget(2.0, 57.0, 42), 3)
    assert figures["bank_used_s"] == 2.2
