"""Matches between players in Kaggle's agent shape (``players.Player``): a referee, round robins, Elo ratings.

``play_game`` referees one game on ``game.py`` bitboards by Kaggle's rules and clock; ``round_robin`` plays every
pair, both seats per opening; ``elo_ratings`` fits Bradley-Terry ratings with bootstrap confidence intervals."""

from __future__ import annotations

import math
import operator
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from connectx_az.engine import game
from connectx_az.evaluation.kaggle_io import ACT_TIMEOUT, OVERAGE_PER_ACT_SECOND, kaggle_inputs
from connectx_az.evaluation.players import Player


@dataclass(frozen=True)
class GameResult:
    """One refereed game.

    ``score`` is the first mover's: 1 win, 0.5 draw, 0 loss.  ``reason``: ``"four in a row"``, ``"draw"``,
    ``"illegal move ..."``, ``"error ..."`` or ``"timeout ..."`` (the last three lose for the player named in them).
    ``opening``: the columns played at random before the players took over, counted in ``num_plies``."""

    first: str
    second: str
    score: float
    num_plies: int
    reason: str
    opening: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"first": self.first, "second": self.second, "score": self.score, "num_plies": self.num_plies,
                "reason": self.reason, "opening": list(self.opening)}


def _as_column(move: Any) -> int | None:
    """The move as an int column, or None when it is not an integer (bools are not columns)."""
    if isinstance(move, bool):
        return None
    try:
        return operator.index(move)
    except TypeError:
        return None


def play_game(first: Player, second: Player, *, names: tuple[str, str] = ("first", "second"),
              opening: Sequence[int] = (), act_timeout: float = ACT_TIMEOUT,
              overage: float | None = None) -> GameResult:
    """Referee one game between two players after the 0-based ``opening`` columns.

    Kaggle's rules: a move that raises, is not an integer or is not a legal column loses, and so does overdrawing
    the overage bank (``overage`` seconds, default ``OVERAGE_PER_ACT_SECOND * act_timeout``), from which each move's
    time beyond ``act_timeout`` is taken.  A slow move is judged after it returns: nothing interrupts a player.  A
    player's ``reset()``, where it has one, is called first.  ``ValueError`` for an opening that is illegal or ends
    the game."""
    players = (first, second)
    for player in players:
        reset = getattr(player, "reset", None)
        if callable(reset):
            reset()
    try:
        position, mask = game.from_moves(list(opening), one_based=False)
    except ValueError as exc:
        raise ValueError(f"bad opening {list(opening)}: {exc}") from exc
    if game.outcome(position, mask) is not None:
        raise ValueError(f"the opening {list(opening)} ends the game")
    bank = [OVERAGE_PER_ACT_SECOND * act_timeout if overage is None else overage] * 2

    def result(score: float, reason: str) -> GameResult:
        return GameResult(names[0], names[1], score, game.num_stones(mask), reason, tuple(opening))

    while True:
        ply = game.num_stones(mask)
        seat = ply % 2
        lost = 1.0 if seat else 0.0  # first mover's score when the side to move loses
        observation, configuration = kaggle_inputs(position, mask, act_timeout=act_timeout, overage=bank[seat])
        start = time.perf_counter()
        try:
            move = players[seat](observation, configuration)
        except Exception as exc:
            return result(lost, f"error by {names[seat]}: {type(exc).__name__}: {exc}")
        bank[seat] -= max(0.0, time.perf_counter() - start - act_timeout)
        if bank[seat] < 0:
            return result(lost, f"timeout by {names[seat]}")
        col = _as_column(move)
        if col is None or not 0 <= col < game.COLS or not game.is_legal(mask, col):
            return result(lost, f"illegal move {move!r} by {names[seat]}")
        position, mask = game.play(position, mask, col)
        over = game.outcome(position, mask)
        if over == -1:
            return result(1.0 - lost, "four in a row")
        if over == 0:
            return result(0.5, "draw")


def random_opening(rng: np.random.Generator, num_plies: int) -> tuple[int, ...]:
    """``num_plies`` uniformly random legal 0-based columns that do not end the game."""
    while True:
        position, mask = game.initial()
        cols: list[int] = []
        for _ in range(num_plies):
            col = int(rng.choice(game.legal_cols(mask)))
            position, mask = game.play(position, mask, col)
            cols.append(col)
            if game.outcome(position, mask) is not None:
                break
        else:
            return tuple(cols)


def round_robin(players: Mapping[str, Player], games_per_pair: int, *, act_timeout: float = ACT_TIMEOUT,
                overage: float | None = None, opening_plies: int = 2, seed: int = 0,
                on_game: Callable[[GameResult], None] | None = None) -> list[GameResult]:
    """Every pair of ``players`` plays ``games_per_pair`` games; returns them in playing order.

    Games come in twos from one random opening of ``opening_plies`` moves, the seats swapped between the two (so
    that deterministic players do not repeat one game); pairs follow the mapping's order.  Everything random (the
    openings, and Python's global ``random`` that kaggle's built-in agents use, seeded per game and restored after)
    derives from ``seed``.  Rules and clock: ``play_game``."""
    if len(players) < 2:
        raise ValueError(f"a round robin needs at least two players, got {len(players)}")
    if games_per_pair < 1 or opening_plies < 0:
        raise ValueError("games_per_pair must be >= 1 and opening_plies >= 0")
    rng = np.random.default_rng(seed)
    names = list(players)
    results = []
    opening: tuple[int, ...] = ()
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for g in range(games_per_pair):
                if g % 2 == 0:
                    opening = random_opening(rng, opening_plies)
                first, second = (a, b) if g % 2 == 0 else (b, a)
                saved = random.getstate()
                random.seed(int(rng.integers(1 << 62)))
                try:
                    res = play_game(players[first], players[second], names=(first, second), opening=opening,
                                    act_timeout=act_timeout, overage=overage)
                finally:
                    random.setstate(saved)
                results.append(res)
                if on_game is not None:
                    on_game(res)
    return results


# --------------------------------------------------------------------------- ratings


@dataclass(frozen=True)
class Rating:
    """A player's line of the ratings table: ``score`` the fraction of points won (draws half); ``elo`` and its 95%
    interval ``[ci_low, ci_high]`` on the Elo scale (400 = 10:1 odds)."""

    name: str
    num_games: int
    score: float
    elo: float
    ci_low: float
    ci_high: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "games": self.num_games, "score": round(self.score, 4),
                "elo": round(self.elo, 1), "ci95": [round(self.ci_low, 1), round(self.ci_high, 1)]}


def _fit_bradley_terry(points: np.ndarray, games: np.ndarray, *, tol: float = 1e-9,
                       max_iter: int = 100_000) -> np.ndarray:
    """``float64[R, P]`` log-strengths (mean 0) of ``R`` Bradley-Terry fits at once.

    ``points[r, a, b]``: what ``a`` scored against ``b`` in resample ``r``; ``games[r, a, b]``: the games they
    played (symmetric).  Hunter's (2004) minorize-maximize update ``gamma_a = W_a / sum_b n_ab / (gamma_a +
    gamma_b)`` climbs the likelihood at every step; every player needs some points and some losses, which the
    caller's virtual draws guarantee."""
    wins = points.sum(axis=2)
    gamma = np.ones(wins.shape)
    for _ in range(max_iter):
        denom = (games / (gamma[:, :, None] + gamma[:, None, :])).sum(axis=2)
        new = wins / denom
        new /= np.exp(np.log(new).mean(axis=1, keepdims=True))
        change = np.abs(np.log(new) - np.log(gamma)).max()
        gamma = new
        if change < tol:
            break
    return np.log(gamma)


def elo_ratings(results: Sequence[GameResult], *, anchor: str | None = None, prior_draws: float = 1.0,
                num_bootstrap: int = 200, seed: int = 0) -> list[Rating]:
    """Bradley-Terry (Elo) ratings of the players in ``results``, best first.

    Draws count half to each side.  Each pair that met gets ``prior_draws`` virtual draws (bayeselo's prior), so a
    clean sweep has a finite rating.  Ratings are shifted so that ``anchor`` (where it played) is 0, else to average
    0.  The 95% intervals come from a parametric bootstrap, as Ordo's: ``num_bootstrap`` tournaments (seeded by
    ``seed``) replay each pair's games with outcomes drawn from the fitted ratings (expected score ``1 / (1 + 10 **
    (-diff / 400))``, at the pair's observed draw rate where that allows) and are fitted again; the interval spans
    their 2.5th to 97.5th percentiles.  Resampling the games themselves would give every clean sweep a zero-width
    interval.  ``ValueError`` for no games or ``prior_draws <= 0``."""
    if not results:
        raise ValueError("no games to rate")
    if prior_draws <= 0:
        raise ValueError("prior_draws must be > 0 (a clean sweep has no finite maximum-likelihood rating)")
    names = list(dict.fromkeys(name for r in results for name in (r.first, r.second)))
    index = {name: k for k, name in enumerate(names)}
    n = len(names)
    first = np.array([index[r.first] for r in results])
    second = np.array([index[r.second] for r in results])
    score = np.array([r.score for r in results], np.float64)
    games = np.zeros((n, n))
    points = np.zeros((n, n))
    draws = np.zeros((n, n))
    np.add.at(games, (first, second), 1.0)
    np.add.at(points, (first, second), score)
    np.add.at(points, (second, first), 1.0 - score)
    np.add.at(draws, (first, second), score == 0.5)
    games, draws = games + games.T, draws + draws.T
    prior = prior_draws * (games > 0)

    def fit(points: np.ndarray) -> np.ndarray:
        """``[R, P, P]`` points -> ``[R, P]`` Elo, anchored."""
        elo = _fit_bradley_terry(points + 0.5 * prior, games + prior) * (400.0 / math.log(10.0))
        return elo - (elo[:, [index[anchor]]] if anchor in index else elo.mean(axis=1, keepdims=True))

    elo = fit(points[None])[0]
    low, high = elo.copy(), elo.copy()
    if num_bootstrap > 0:
        rng = np.random.default_rng(seed)
        expected = 1.0 / (1.0 + 10.0 ** (-(elo[:, None] - elo[None, :]) / 400.0))
        simulated = np.zeros((num_bootstrap, n, n))
        for a, b in zip(*np.nonzero(np.triu(games, 1)), strict=True):
            e, num = expected[a, b], int(games[a, b])
            p_draw = min(draws[a, b] / num, 2 * min(e, 1 - e))
            probs = np.clip([e - p_draw / 2, p_draw, 1 - e - p_draw / 2], 0.0, None)
            wins, drawn, _ = rng.multinomial(num, probs / probs.sum(), size=num_bootstrap).T
            simulated[:, a, b] = wins + 0.5 * drawn
            simulated[:, b, a] = num - simulated[:, a, b]
        low, high = np.percentile(fit(simulated), [2.5, 97.5], axis=0)

    num_games = games.sum(axis=1)
    won = points.sum(axis=1)
    ratings = [Rating(name, int(num_games[k]), float(won[k] / num_games[k]), float(elo[k]), float(low[k]),
                      float(high[k])) for k, name in enumerate(names)]
    return sorted(ratings, key=lambda x: -x.elo)


def head_to_head(results: Sequence[GameResult]) -> list[dict[str, Any]]:
    """Per pair, in order of first meeting: ``{"a", "b", "wins", "draws", "losses"}`` from ``a``'s side."""
    table: dict[tuple[str, str], list[int]] = {}
    for r in results:
        key = (r.first, r.second) if (r.second, r.first) not in table else (r.second, r.first)
        counts = table.setdefault(key, [0, 0, 0])
        a_score = r.score if key[0] == r.first else 1.0 - r.score
        counts[0 if a_score == 1 else 1 if a_score == 0.5 else 2] += 1
    return [{"a": a, "b": b, "wins": w, "draws": d, "losses": lo} for (a, b), (w, d, lo) in table.items()]


@dataclass(frozen=True)
class Report:
    """A tournament's outcome: ``ratings`` (``elo_ratings``, anchored at ``anchor`` where that player
    took part), ``pairs`` (``head_to_head``) and ``failures``, the games lost by rule (illegal move,
    error or timeout) as ``GameResult.as_dict`` rows."""

    ratings: list[Rating]
    pairs: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    anchor: str | None


def report(results: Sequence[GameResult], names: Sequence[str], *, seed: int = 0) -> Report:
    """The ``Report`` of ``results`` among the players ``names``; ``random`` is Elo 0 where it played."""
    anchor = "random" if "random" in names else None
    return Report(ratings=elo_ratings(results, anchor=anchor, seed=seed), pairs=head_to_head(results),
                  failures=[r.as_dict() for r in results if r.reason.startswith(("illegal", "error", "timeout"))],
                  anchor=anchor)


def report_json(summary: Report, results: Sequence[GameResult]) -> dict[str, Any]:
    """``connectx-az arena --json``: ratings, pairs, failures, every game and the anchor."""
    return {"ratings": [r.as_dict() for r in summary.ratings], "pairs": summary.pairs, "failures": summary.failures,
            "games": [r.as_dict() for r in results], "anchor": summary.anchor}


def format_report(summary: Report, names: Sequence[str], *, games: int, opening_plies: int) -> list[str]:
    """``connectx-az arena``'s lines: the ratings, how they were fitted, the pairs, the games lost by rule."""
    lines = [format_ratings(summary.ratings),
             f"Elo: Bradley-Terry fit, {'random = 0' if summary.anchor else 'mean 0'}, one virtual draw per pair; "
             "95% CI: 200 simulated tournaments"]
    width = max(len(name) for name in names)
    lines.append(f"\n{'pair':<{2 * width + 4}}  win draw loss")
    for p in summary.pairs:
        lines.append(f"{p['a']:<{width}} vs {p['b']:<{width}}  {p['wins']:>3} {p['draws']:>4} {p['losses']:>4}")
    lines.append(f"{games} games a pair, seats swapped after each random {opening_plies}-ply opening")
    lines.extend(f"lost by rule: {f['first']} vs {f['second']}: {f['reason']}" for f in summary.failures)
    return lines


def format_ratings(ratings: Sequence[Rating]) -> str:
    """The ratings as a text table: player, games, score %, Elo, 95% CI."""
    width = max(len("player"), *(len(r.name) for r in ratings))
    lines = [f"{'player':<{width}}  {'games':>5}  {'score':>6}  {'Elo':>6}  {'95% CI':>15}"]
    for r in ratings:
        lines.append(f"{r.name:<{width}}  {r.num_games:>5}  {100 * r.score:>5.1f}%  {r.elo:>6.0f}  "
                     f"[{r.ci_low:>5.0f}, {r.ci_high:>5.0f}]")
    return "\n".join(lines)
