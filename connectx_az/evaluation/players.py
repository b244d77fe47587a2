"""Reference opponents for the arena, all in Kaggle's agent shape (``Player``).

A player with a ``reset()`` method gets it called before each game (a submission re-executes its file there, as
Kaggle does).  ``alphabeta_player`` is a deterministic depth-limited negamax over a line-counting ``heuristic``;
``model_player`` runs MCTS over an ONNX model; ``submission_player`` wraps a built ``submission.py``;
``builtin_player`` gives kaggle-environments' own agents; ``lineup`` names and makes the arena's players."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az.engine import game, mcts, search_tree
from connectx_az.evaluation import kaggle_io

#: Kaggle's agent shape: ``(observation, configuration) -> column``; both arguments read as dicts
#: and as attributes (``observation["board"]`` and ``observation.board``).
Player = Callable[[Any, Any], int]

#: kaggle-environments' own ConnectX agents, by name
BUILTINS = ("random", "negamax")

_INF = 1 << 40


def _windows() -> tuple[int, ...]:
    """Bit masks of the 69 lines of four cells (``game`` bit layout)."""
    out = []
    for col in range(game.COLS):
        for row in range(game.ROWS):
            for dcol, drow in ((1, 0), (0, 1), (1, 1), (1, -1)):
                cells = [(col + k * dcol, row + k * drow) for k in range(game.INAROW)]
                if all(0 <= c < game.COLS and 0 <= r < game.ROWS for c, r in cells):
                    out.append(sum(1 << (c * (game.ROWS + 1) + r) for c, r in cells))
    return tuple(out)


WINDOWS = _windows()
# Heuristic points of a line holding k stones of one side and none of the other; a centre stone is worth 3.
_LINE_POINTS = (0, 0, 2, 5, 0)
_CENTRE_POINTS = 3
# A win scores this plus the depth still to search, so that sooner wins score higher.
_WIN_SCORE = 1_000_000


def heuristic(position: int, mask: int) -> int:
    """Static score of a position for the side to move (higher is better): each of the 69 lines open to one side
    only scores ``_LINE_POINTS[k]`` for its ``k`` stones (for the side that owns them, against the other), and each
    stone in the centre column ``_CENTRE_POINTS``."""
    opponent = position ^ mask
    centre = game.COLUMN_BITS[game.COLS // 2]
    score = _CENTRE_POINTS * ((position & centre).bit_count() - (opponent & centre).bit_count())
    for line in WINDOWS:
        own, opp = position & line, opponent & line
        if own and not opp:
            score += _LINE_POINTS[own.bit_count()]
        elif opp and not own:
            score -= _LINE_POINTS[opp.bit_count()]
    return score


def _alphabeta(position: int, mask: int, depth: int, alpha: int, beta: int) -> int:
    """Fail-soft negamax score for the side to move of an unfinished position."""
    for col in game.CENTRE_FIRST:
        if not mask & game.TOP_BITS[col] and game.wins_now(position, mask, col):
            return _WIN_SCORE + depth
    if depth <= 0:
        return heuristic(position, mask)
    best = -_INF
    for col in game.CENTRE_FIRST:
        if mask & game.TOP_BITS[col]:
            continue
        child, child_mask = game.play(position, mask, col)
        score = 0 if game.is_full(child_mask) else -_alphabeta(child, child_mask, depth - 1, -beta, -alpha)
        if score > best:
            best = score
            if score > alpha:
                alpha = score
                if alpha >= beta:
                    break
    return best


def alphabeta_move(position: int, mask: int, depth: int) -> int:
    """Column chosen by a ``depth``-ply negamax alpha-beta search with ``heuristic`` at the leaves.

    The position is seen from the side to move and must be unfinished.  A win at once is always taken, and a node
    whose side to move can win at once scores that win whatever depth is left, so even ``depth=1`` blocks a threat.
    Ties go to the more central column.  ``ValueError`` for ``depth < 1`` or a finished position."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    if game.outcome(position, mask) is not None:
        raise ValueError("the game is already over")
    best_col, best, alpha = -1, -_INF, -_INF
    for col in game.CENTRE_FIRST:
        if mask & game.TOP_BITS[col]:
            continue
        if game.wins_now(position, mask, col):
            return col
        child, child_mask = game.play(position, mask, col)
        score = 0 if game.is_full(child_mask) else -_alphabeta(child, child_mask, depth - 1, -_INF, -alpha)
        if score > best:
            best_col, best, alpha = col, score, max(alpha, score)
    return best_col


def alphabeta_player(depth: int) -> Player:
    """A deterministic reference player: ``alphabeta_move`` at ``depth`` plies."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")

    def agent(observation: Any, configuration: Any) -> int:
        position, mask = game.from_kaggle(observation["board"], observation["mark"])
        return alphabeta_move(position, mask, depth)

    agent.__name__ = f"alphabeta{depth}"
    return agent


def model_player(onnx_path: str | Path, simulations: int, *, num_parallel: int = 8) -> Player:
    """MCTS without noise over an ONNX model (onnxruntime, one thread) at a fixed simulation count.

    A fresh tree every move and no clock, so the player is deterministic.  ``simulations`` is rounded up to a
    multiple of ``num_parallel`` (leaves per network call, as in the Kaggle agent).  ``FileNotFoundError`` or
    ``ValueError`` when the model cannot be loaded."""
    from connectx_az.agent.backends import OnnxRuntimeEvaluator

    evaluator = OnnxRuntimeEvaluator(onnx_path)
    config = search_tree.SearchConfig(num_simulations=simulations, num_parallel=max(1, min(num_parallel, simulations)))

    def agent(observation: Any, configuration: Any) -> int:
        position, mask = game.from_kaggle(observation["board"], observation["mark"])
        tree = search_tree.Tree(np.array([position], np.uint64), np.array([mask], np.uint64), capacity=simulations + 1)
        mcts.search(tree, evaluator, config)
        return int(mcts.best_cols(tree)[0])

    return agent


class _SubmissionPlayer:
    """A built ``submission.py``, executed afresh (``reset``) before every game."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"submission {self.path} does not exist")
        self._agent: Callable[..., Any] | None = None

    def reset(self) -> None:
        self._agent = kaggle_io.load_submission(self.path)

    def __call__(self, observation: Any, configuration: Any) -> Any:
        if self._agent is None:
            self.reset()
        return self._agent(observation, configuration)


def submission_player(path: str | Path) -> Player:
    """A built ``submission.py`` as a player; raises ``FileNotFoundError`` if it is missing."""
    return _SubmissionPlayer(path)


def builtin_player(name: str) -> Player:
    """kaggle-environments' own ``"random"`` or ``"negamax"`` agent; both draw from Python's global ``random``, which
    ``round_robin`` seeds for each game."""
    if name not in BUILTINS:
        raise ValueError(f"unknown built-in player {name!r}; choose from {', '.join(BUILTINS)}")
    from kaggle_environments.envs.connectx.connectx import agents

    return agents[name]


def lineup(*, models: Sequence[str | Path] = (), simulations: int = 800, submissions: Sequence[str | Path] = (),
           alphabeta_depths: Sequence[int] = (), builtins: Sequence[str] = ()) -> dict[str, Player]:
    """The arena's players by name, in this order: ``STEM@SIMULATIONS`` for each ONNX model, ``sub:STEM`` for
    each built file, ``alphabetaN`` for each depth and the built-in names; a name taken already gets ``#2``,
    ``#3``...  Raises ``FileNotFoundError`` for a missing file, ``kaggle_io.SubmissionError`` (a ``ValueError``)
    for a file that is not a submission or whose network does not load (``kaggle_io.check_network``), and
    ``ValueError`` for a depth below 1 or an unknown built-in player."""
    players: dict[str, Player] = {}

    def add(name: str, player: Player) -> None:
        unique, k = name, 2
        while unique in players:
            unique, k = f"{name}#{k}", k + 1
        players[unique] = player

    for path in models:
        add(f"{Path(path).stem}@{simulations}", model_player(path, simulations))
    for path in submissions:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path} not found; run `make submission` first")
        kaggle_io.check_network(path)  # not a submission, or its network does not load: one line, before any game
        add(f"sub:{Path(path).stem}", submission_player(path))
    for depth in alphabeta_depths:
        if depth < 1:
            raise ValueError(f"--alphabeta depths must be >= 1, got {depth}")
        add(f"alphabeta{depth}", alphabeta_player(depth))
    for name in builtins:
        add(name, builtin_player(name))
    return players
