"""The arena: the reference alpha-beta player, the referee, Elo ratings, and the `arena`/`play` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectx_az import arena, game

ROOT = Path(__file__).resolve().parents[1]

# x (side to move) wins at once in column 3 (0-based): x x x . on the bottom row.
WIN_NOW = """
.......
.......
.......
.......
oo.....
xxx....
"""

# o threatens a vertical four in column 5 (0-based); x has nothing, so it must block there.
BLOCK = """
.......
.......
.......
.....o.
x....o.
x..x.o.
"""


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "connectx_az.cli", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


def _first_legal(observation, configuration) -> int:
    return next(c for c in range(7) if observation["board"][c] == 0)


def test_there_are_69_lines_and_the_heuristic_is_zero_sum() -> None:
    assert len(arena.WINDOWS) == 69
    position, mask = game.from_moves("4455")
    assert arena.heuristic(position, mask) == -arena.heuristic(position ^ mask, mask)


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_alphabeta_takes_a_win_and_blocks_a_loss(depth: int) -> None:
    assert arena.alphabeta_move(*game.from_ascii(WIN_NOW), depth) == 3
    assert arena.alphabeta_move(*game.from_ascii(BLOCK), depth) == 5


def test_alphabeta_is_deterministic_and_central_on_the_empty_board() -> None:
    assert arena.alphabeta_move(0, 0, 4) == 3
    with pytest.raises(ValueError):
        arena.alphabeta_move(0, 0, 0)


def test_alphabeta_depth_4_beats_random() -> None:
    players = {"alphabeta4": arena.alphabeta_player(4), "random": arena.builtin_player("random")}
    results = arena.round_robin(players, 4, act_timeout=30.0, seed=1)
    wins = sum(r.score if r.first == "alphabeta4" else 1.0 - r.score for r in results)
    assert wins >= 3


def test_round_robin_counts_games_and_illegal_moves_lose() -> None:
    def illegal(observation, configuration) -> int:
        return 7

    def raises(observation, configuration) -> int:
        raise RuntimeError("boom")

    players = {"ok": _first_legal, "illegal": illegal, "raises": raises, "float": lambda o, c: 3.0}
    results = arena.round_robin(players, 3, act_timeout=30.0, opening_plies=2, seed=0)
    assert len(results) == 6 * 3
    for a, b in [("ok", "illegal"), ("ok", "raises"), ("illegal", "float")]:
        pair = [r for r in results if {r.first, r.second} == {a, b}]
        assert len(pair) == 3
        assert [r.first for r in pair] == [a, b, a]  # seats swap within each opening pair
        assert pair[0].opening == pair[1].opening and len(pair[0].opening) == 2
    for r in results:
        loser = r.second if r.score == 1.0 else r.first
        if "ok" in (r.first, r.second):
            assert loser != "ok" and r.score in (0.0, 1.0)
        assert f"by {loser}" in r.reason
    reasons = {r.reason.split()[0] for r in results}
    assert reasons == {"illegal", "error"}
    table = {r.name: r for r in arena.elo_ratings(results, num_bootstrap=20)}
    assert table["ok"].num_games == 9 and table["ok"].score == 1.0


def test_play_game_times_out_a_slow_player() -> None:
    def slow(observation, configuration) -> int:
        time.sleep(0.05)
        return _first_legal(observation, configuration)

    result = arena.play_game(_first_legal, slow, names=("fast", "slow"), act_timeout=0.01, overage=0.02)
    assert result.score == 1.0 and result.reason == "timeout by slow"
    with pytest.raises(ValueError):
        arena.play_game(_first_legal, _first_legal, opening=[0] * 7)


def test_a_submission_is_executed_afresh_for_every_game(tmp_path: Path) -> None:
    # The agent fails if it ever sees fewer stones than on its previous call: state kept across games.
    source = tmp_path / "submission.py"
    source.write_text(
        "LAST = [-1]\n"
        "def agent(observation, configuration):\n"
        "    stones = sum(1 for v in observation['board'] if v)\n"
        "    assert stones > LAST[0], 'stale state from an earlier game'\n"
        "    LAST[0] = stones\n"
        "    return next(c for c in range(7) if observation['board'][c] == 0)\n"
    )
    players = {"sub": arena.submission_player(source), "ab1": arena.alphabeta_player(1)}
    results = arena.round_robin(players, 4, act_timeout=30.0)
    assert not any(r.reason.startswith("error") for r in results)
    with pytest.raises(FileNotFoundError):
        arena.submission_player(tmp_path / "missing.py")


def _games(first: str, second: str, score: float, count: int) -> list[arena.GameResult]:
    return [arena.GameResult(first, second, score, 20, "four in a row")] * count


def test_elo_orders_players_and_intervals_hold_the_estimates() -> None:
    results = (_games("strong", "weak", 1.0, 5) + _games("weak", "strong", 0.0, 5)
               + _games("strong", "mid", 1.0, 4) + _games("mid", "strong", 0.5, 4) + _games("mid", "strong", 0.0, 2)
               + _games("mid", "weak", 1.0, 6) + _games("weak", "mid", 1.0, 4))
    ratings = arena.elo_ratings(results, anchor="weak", seed=3)
    assert [r.name for r in ratings] == ["strong", "mid", "weak"]
    by_name = {r.name: r for r in ratings}
    assert by_name["weak"].elo == 0 and by_name["strong"].elo > by_name["mid"].elo > 0
    assert by_name["strong"].num_games == 20 and by_name["strong"].score == pytest.approx(18 / 20)
    for r in ratings:
        assert r.ci_low <= r.elo <= r.ci_high
    assert by_name["mid"].ci_high > by_name["mid"].ci_low  # a sweep elsewhere still leaves uncertainty
    assert arena.elo_ratings(results, anchor="weak", seed=3) == ratings  # seeded
    centred = arena.elo_ratings(results, num_bootstrap=0)
    assert sum(r.elo for r in centred) == pytest.approx(0, abs=1e-6)
    with pytest.raises(ValueError):
        arena.elo_ratings([])


def test_render_board_numbers_the_columns() -> None:
    board = game.to_kaggle(*game.from_moves("44"), mark=1)
    lines = arena.render_board(board).splitlines()
    assert lines[-1] == "1 2 3 4 5 6 7"
    assert lines[-2] == ". . . X . . ." and lines[-3] == ". . . O . . ."


def test_cli_play_finishes_a_game_from_scripted_input() -> None:
    # Bad inputs are re-prompted; columns cycle until the game ends (full columns are refused too).
    script = "x\n0\n9\n" + "1\n2\n3\n4\n5\n6\n7\n" * 12
    result = _cli("play", "--sims", "8", "--first", stdin=script)
    assert result.returncode == 0, result.stderr
    assert "'x' is not a playable column" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1] in ("you win", "the agent wins", "draw")


def test_cli_play_quits_on_q() -> None:
    result = _cli("play", "--sims", "8", stdin="q\n")
    assert result.returncode == 0, result.stderr
    assert "agent plays" in result.stdout and result.stdout.rstrip().endswith("bye")


def test_cli_arena_json() -> None:
    result = _cli("arena", "--games", "2", "--sims", "8", "--alphabeta", "1", "--builtin", "random", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {r["name"] for r in out["ratings"]} == {"default@8", "alphabeta1", "random"}
    assert len(out["games"]) == 3 * 2 and out["anchor"] == "random"
