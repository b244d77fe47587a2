"""The arena: the referee, round robins, and Elo ratings."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from connectx_az.evaluation import arena, players


def _first_legal(observation, configuration) -> int:
    return next(c for c in range(7) if observation["board"][c] == 0)


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
    entrants = {"sub": players.submission_player(source), "ab1": players.alphabeta_player(1)}
    results = arena.round_robin(entrants, 4, act_timeout=30.0)
    assert not any(r.reason.startswith("error") for r in results)
    with pytest.raises(FileNotFoundError):
        players.submission_player(tmp_path / "missing.py")


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
