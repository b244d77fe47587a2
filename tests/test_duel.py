"""The duel: the perfect opponent keeps the value (Pons' scores as the truth), noise, seats, the checks of the
file's moves, the cache of solved positions, the clock, the JSON output and one-line errors.

Games start near the end (End-Easy positions) with the pure-Python solver and small files standing in for a
submission, so that each test takes a few seconds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from connectx_az.cli import main as cli_main
from connectx_az.engine import game, solver
from connectx_az.evaluation import duel
from connectx_az.evaluation import oracle as referee
from connectx_az.testsets import pons

# End-Easy: the side to move (the first player, 34 stones) wins by column 2 or 6 (1-based); column 1 loses
WON = "7422341735647741166133573473242566"

LEFTMOST = '''
def agent(observation, configuration):
    board = observation["board"]
    return next(c for c in range(configuration["columns"]) if board[c] == 0)
'''


def _file(tmp_path: Path, source: str, name: str = "submission.py") -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


def _oracle(max_nodes: int = 10_000_000) -> referee.Oracle:
    return referee.Oracle(solver.Solver(), referee.SolvedCache(None), max_nodes=max_nodes)


def _duel(submission: Path, **kwargs: object) -> duel.DuelReport:
    settings: dict = {"games_per_seat": 1, "noise": 0.0, "solver_kind": "python", "opening": WON,
                      "act_timeout": 0.5, "max_nodes": 10_000_000}
    return duel.duel(submission, **{**settings, **kwargs})


def test_the_opponent_keeps_the_value_at_noise_0() -> None:
    oracle = _oracle()
    positions = pons.load_set("End-Easy", limit=30)
    for k, p in enumerate(positions):
        col, kind = referee.opponent_move(oracle, *pons.position_of(p), np.random.default_rng(k), 0.0)
        assert kind == "kept"
        assert p.move_scores[col] is not None and np.sign(p.move_scores[col]) == p.result, p.moves
        if p.result < 0:  # lost: the longest defence, by the exact scores
            assert p.move_scores[col] == p.score, p.moves
    # the choice among value-keeping columns is random: here both winning columns come up
    chosen = {referee.opponent_move(oracle, *game.from_moves(WON), np.random.default_rng(seed), 0.0)[0]
              for seed in range(20)}
    assert chosen == {1, 5}


def test_noise_1_plays_random_legal_moves_and_solves_nothing() -> None:
    oracle = _oracle()
    position, mask = game.from_moves(WON)
    moves = [referee.opponent_move(oracle, position, mask, np.random.default_rng(seed), 1.0) for seed in range(200)]
    assert {kind for _, kind in moves} == {"noise"}
    assert {col for col, _ in moves} == set(game.legal_cols(mask))
    assert oracle.stats.nodes == 0 and len(oracle.cache) == 0


def test_seats_alternate_and_games_are_reported(tmp_path: Path) -> None:
    report = _duel(_file(tmp_path, LEFTMOST), games_per_seat=2, noise=0.5)
    assert [g.seat for g in report.games] == [1, 2, 1, 2]
    for g in report.games:
        assert g.moves.startswith(WON) and g.reason in ("four in a row", "draw")
        assert len(g.checks) == len(g.move_seconds) == len(g.move_plies) > 0
        # the file's stones: seat 1 plays the even plies (0-based), seat 2 the odd ones
        assert all(ply % 2 == g.seat - 1 for ply in g.move_plies)
        assert sum(g.opponent.values()) == len(g.moves) - len(WON) - len(g.checks)
    assert report.by_seat[1]["wins"] + report.by_seat[1]["draws"] + report.by_seat[1]["losses"] == 2


def test_a_value_losing_move_is_reported_with_the_moves_that_keep_the_value(tmp_path: Path) -> None:
    report = _duel(_file(tmp_path, LEFTMOST), games_per_seat=1)
    first = report.games[0]  # seat 1: the file is to move in the won position and plays column 1
    loss = referee.MoveCheck(WON, 0, "lost", 1, -1, (1, 5))
    assert first.value_losses[0] == loss
    assert first.first_won_ply == len(WON) and first.result == -1 and not first.converted
    assert report.num_value_losses >= 1 and report.num_unconverted == 1 and report.failed
    assert f"value lost at {WON} (ply 34, result 1): played 1 (-1), keeps: 2, 6" in duel.format_game(first)
    # seat 2: the opponent wins from the won position; the file's moves in a lost position keep its value
    second = report.games[1]
    assert second.result == -1 and second.value_losses == [] and second.first_won_ply is None


def test_moves_the_solver_cannot_prove_are_unchecked_never_kept() -> None:
    p = pons.load_set("Middle-Easy", limit=1)[0]
    col = next(c for c in p.best_cols)  # a good move, but the budget is too small to say so
    check = referee.check_move(_oracle(max_nodes=5), p.moves, col)
    assert check.verdict == "unchecked"
    assert referee.check_move(_oracle(max_nodes=5), "445566", 6).verdict == "kept"  # a win at once needs no search


def test_a_duel_reports_what_it_could_not_check(tmp_path: Path) -> None:
    p = pons.load_set("Middle-Easy", limit=1)[0]
    report = _duel(_file(tmp_path, LEFTMOST), opening=p.moves, max_nodes=5)
    unchecked = [c for g in report.games for c in g.checks if c.verdict == "unchecked"]
    assert unchecked and report.summary()["unchecked"] == len(unchecked) and report.stats.num_unproven > 0
    assert report.games[0].opponent["unproven"] + report.games[1].opponent["unproven"] > 0
    assert f"unchecked (plies {len(unchecked[0].moves)}" in "\n".join(duel.format_game(g) for g in report.games)


def test_the_cache_is_reused(tmp_path: Path) -> None:
    submission, cache = _file(tmp_path, LEFTMOST), tmp_path / "cache.sqlite"
    first = _duel(submission, games_per_seat=2, noise=0.3, cache_path=cache)
    assert first.stats.num_proven > 0 and cache.is_file()
    again = _duel(submission, games_per_seat=2, noise=0.3, cache_path=cache)
    assert again.stats.num_proven == again.stats.num_unproven == again.stats.nodes == 0
    assert again.cache_size == first.cache_size
    assert [g.moves for g in again.games] == [g.moves for g in first.games]


def test_the_clock_charges_the_bank_and_times_out(tmp_path: Path) -> None:
    slow = _file(tmp_path, "import time\n" + LEFTMOST.replace("    board =", "    time.sleep(0.5)\n    board ="))
    report = _duel(slow, act_timeout=0.02)  # a bank of 0.6 s: the second move overdraws it
    first = report.games[0]
    assert first.reason == "timeout by file" and first.result == -1 and report.failed
    assert len(first.move_seconds) == 2 and first.bank_used > 0.6 and first.slowest_move[0] >= 0.5


def test_the_runtime_hides_packages_from_the_file(tmp_path: Path) -> None:
    probe = _file(tmp_path, '''
def agent(observation, configuration):
    try:
        import connectx_az  # noqa: F401
        return 6
    except ImportError:
        pass
    try:
        import numba  # noqa: F401
        return 6
    except ImportError:
        return 0
''')
    report = _duel(probe, runtime="numpy")
    assert report.games[0].value_losses[0].col == 0  # it played column 1: neither package imported


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    submission = _file(tmp_path, LEFTMOST)
    code = cli_main.main(["duel", str(submission), "--games", "1", "--solver", "python", "--opening", WON,
                     "--act-timeout", "0.5", "--cache", str(tmp_path / "c.sqlite"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # a value-losing move
    assert set(out) == {"games", "summary"} and len(out["games"]) == 2
    g = out["games"][0]
    assert {"game", "seat", "moves", "result", "reason", "value_losses", "unchecked", "slowest_move_s",
            "bank_used_s", "opponent", "converted"} <= set(g)
    assert g["value_losses"][0] == {"position": WON, "col": 1, "verdict": "lost", "result": 1, "played": -1,
                                    "keeping": [2, 6]}
    s = out["summary"]
    assert s["games"] == 2 and s["value_losses"] >= 1 and s["by_seat"]["1"]["losses"] == 1
    assert {"slowest_move_s", "max_bank_used_s", "unchecked", "unconverted", "solves", "cache_positions"} <= set(s)


def test_the_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main.main(["duel", str(_file(tmp_path, LEFTMOST)), "--games", "1", "--solver", "python", "--opening",
                     WON, "--act-timeout", "0.5", "--cache", str(tmp_path / "c.sqlite"), "--noise", "0"])
    out = capsys.readouterr().out
    assert code == 1
    assert "game 0 seat 1: file loses" in out and "value lost at" in out and "summary: 2 games" in out
    assert "value-losing moves: " in out and "slowest move: " in out


@pytest.mark.parametrize(("source", "message"), [
    (None, "not found; run `make submission` first"),
    ("<!DOCTYPE html>\n", "is not a submission: not Python (invalid syntax at line 1)"),
    ("x = 1\n", "is not a submission: it defines no callable agent"),
])
def test_bad_files_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str | None,
                                       message: str) -> None:
    path = tmp_path / "file.py" if source is None else _file(tmp_path, source)
    code = cli_main.main(["duel", str(path), "--games", "1", "--solver", "python", "--opening", WON,
                     "--cache", str(tmp_path / "c.sqlite")])
    err = capsys.readouterr().err.split("\r")[-1]  # after the progress bar's redraws
    assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1


def test_each_setting_a_duel_cannot_play_is_named_alone() -> None:
    with pytest.raises(duel.DuelError) as caught:
        duel.check_settings(games_per_seat=1, noise=2.0, act_timeout=2.0, opening="")
    assert str(caught.value) == "the noise must lie in [0, 1], not 2"
    with pytest.raises(duel.DuelError) as caught:
        duel.check_settings(games_per_seat=0, noise=0.2, act_timeout=0.0, opening="")
    assert str(caught.value) == "games a seat must be >= 1, not 0; the move time must be > 0, not 0"


def test_bad_opening_and_cache_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    submission = _file(tmp_path, LEFTMOST)
    assert cli_main.main(["duel", str(submission), "--opening", "48", "--solver", "python"]) == 2
    assert "bad opening '48'" in capsys.readouterr().err
    not_a_cache = _file(tmp_path, "not a database\n" * 100, "cache.sqlite")
    assert cli_main.main(["duel", str(submission), "--opening", WON, "--solver", "python",
                     "--cache", str(not_a_cache)]) == 2
    assert "is not a cache of solved positions" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "said"), [
    (["--noise", "1.5"], "error: --noise 1.5 must lie in [0, 1]\n"),  # alone: not the settings that hold beside it
    (["--opening", "48"], "error: bad opening '48'"),
    ([], "error: `connectx-az duel` (its opponent and its checks solve positions) needs numba, which is not "
         "installed: run `make install-validate`"),
])
def test_bad_settings_are_one_line_before_any_header_or_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch, args: list[str],
                                                            said: str) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # as where numba is not installed
    code = cli_main.main(["duel", str(_file(tmp_path, LEFTMOST)), "--cache", str(tmp_path / "c.sqlite"), *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(said) and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["submission.py"]


@pytest.mark.parametrize(("body", "message"), [
    ("return 9", "game 0 (seat 1), ply 34: the file answered 9, not a legal column (a plain int of a column that "
                 "is not full); the duel stops at the file's first broken move"),
    ("raise ValueError('boom\\nand a second line')", "game 0 (seat 1), ply 34: the file failed: "
     "ValueError: boom; the duel stops at the file's first broken move"),
])
def test_the_duel_stops_at_the_first_broken_move_and_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               body: str, message: str) -> None:
    broken = _file(tmp_path, f"def agent(observation, configuration):\n    {body}\n")
    code = cli_main.main(["duel", str(broken), "--games", "5", "--solver", "python", "--opening", WON,
                     "--cache", str(tmp_path / "c.sqlite")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""  # no game reported: it stopped in the first
    lines = [line.strip() for line in captured.err.replace("\r", "\n").splitlines() if line.strip()]
    assert lines[-1] == f"error: {message}"  # after the progress bar's redraws
    assert captured.err.startswith("duel: 10 games, runtime numpy, 2 s a move; the opponent's and the checks' solver "
                                   "in pure Python (slow); the first games prove the opening plies")
