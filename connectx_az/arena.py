"""Measuring agents: Pons accuracy against perfect play, and kaggle-environments validation.

``policy_mistake_rates`` grades a network's raw policy on the Pons sets (the
cheap per-generation signal of training); ``search_mistake_rates`` grades MCTS
at a fixed simulation count; ``validate`` plays a built ``submission.py``
through kaggle-environments exactly as Kaggle runs it.

The arena (the second half of the file) rates players against each other.  A
*player* is anything in Kaggle's agent shape, ``(observation, configuration) ->
column``; one that also has a ``reset()`` method gets it called before each game
(a submission re-executes its file there, as Kaggle does).  ``round_robin``
referees games on ``game.py`` bitboards, both seats per opening, and
``elo_ratings`` fits Bradley-Terry ratings with bootstrap confidence intervals.
"""

from __future__ import annotations

import math
import operator
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az import game, mcts, pons


def choose_policy(evaluator: mcts.Evaluator, positions: list[tuple[int, int]]) -> list[int]:
    """Raw-policy argmax over legal columns for each position."""
    p = np.array([x[0] for x in positions], np.uint64)
    m = np.array([x[1] for x in positions], np.uint64)
    logits, _ = evaluator.evaluate(game.encode(p, m))
    return list(np.where(game.legal_mask(m), logits, -np.inf).argmax(axis=1))


def _choose_search(evaluator: mcts.Evaluator, positions: list[tuple[int, int]],
                   search: mcts.SearchConfig) -> list[int]:
    """MCTS (no noise) at ``search.num_simulations`` for each position, batched across positions."""
    p = np.array([x[0] for x in positions], np.uint64)
    m = np.array([x[1] for x in positions], np.uint64)
    tree = mcts.Tree(p, m, capacity=search.num_simulations + 1)
    mcts.search(tree, evaluator, search)
    return list(mcts.best_cols(tree))


def grade_sets(choose: Callable[[list[tuple[int, int]]], list[int]], *, limit: int | None = None,
               sets: list[str] | None = None) -> list[pons.SetResult]:
    """Grade ``choose`` (positions -> columns) on each Pons set."""
    results = []
    for name in sets or list(pons.SETS):
        positions = pons.load_set(name, limit=limit)
        cols = choose([pons.position_of(p) for p in positions])
        results.append(pons.grade(name, positions, [int(c) for c in cols]))
    return results


def policy_mistake_rates(evaluator: mcts.Evaluator, *, limit: int = 100) -> dict[str, float]:
    """``{"pons_policy/<set>": mistake rate}`` of the raw policy on ``limit`` positions per set."""
    results = grade_sets(lambda pos: choose_policy(evaluator, pos), limit=limit)
    return {f"pons_policy/{r.name}": round(r.mistake_rate, 4) for r in results}


def search_mistake_rates(evaluator: mcts.Evaluator, search: mcts.SearchConfig, *,
                         limit: int | None = None, sets: list[str] | None = None) -> list[pons.SetResult]:
    """Pons grades of MCTS without noise at ``search.num_simulations`` simulations."""
    return grade_sets(lambda pos: _choose_search(evaluator, pos, search), limit=limit, sets=sets)


def submission_mistake_rates(submission: str | Path, *, limit: int | None = None, sets: list[str] | None = None,
                             act_timeout: float = 2.0, overage: float = 60.0,
                             on_position: Callable[[], None] | None = None) -> list[pons.SetResult]:
    """Pons grades of a built ``submission.py`` under the Kaggle clock.

    The file is executed afresh for every position (as Kaggle loads it for every
    game), so each answer pays the load and decode time of a first move.  Run it
    in a process pinned to one core, with onnxruntime blocked, to measure what
    Kaggle's numpy backend does (``connectx-az eval pons --submission`` does).
    """

    def choose(positions: list[tuple[int, int]]) -> list[int]:
        cols = []
        for position, mask in positions:
            ply = game.num_stones(mask)
            mark = 1 + ply % 2
            obs = {"board": game.to_kaggle(position, mask, mark), "mark": mark, "step": ply,
                   "remainingOverageTime": overage}
            cfg = {"rows": game.ROWS, "columns": game.COLS, "inarow": game.INAROW, "actTimeout": act_timeout,
                   "timeout": act_timeout, "episodeSteps": 1000, "runTimeout": 1200}
            cols.append(int(load_submission(submission)(obs, cfg)))
            if on_position is not None:
                on_position()
        return cols

    return grade_sets(choose, limit=limit, sets=sets)


# --------------------------------------------------------------------------- kaggle validation

KAGGLE_BLOCKED = ("connectx_az", "onnxruntime", "torch")


def sandbox_prelude(blocked: tuple[str, ...] = KAGGLE_BLOCKED) -> str:
    """Python source that makes a fresh interpreter look like Kaggle's agent sandbox.

    Prepend it to a child script: importing any of ``blocked`` (by top-level
    name) raises ``ImportError``, and numpy is imported first, as Kaggle's
    harness has it loaded before it executes a submission.
    """
    return (
        "import sys\n"
        "class _Blocker:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {tuple(blocked)!r}:\n"
        "            raise ImportError('blocked to imitate Kaggle: ' + name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Blocker())\n"
        "import numpy  # noqa: E402,F401\n"
    )


BAD_STATUSES = ("ERROR", "INVALID", "TIMEOUT")


def load_submission(path: str | Path) -> Callable[..., Any]:
    """Execute ``submission.py`` the way Kaggle does and return its last callable."""
    code = Path(path).read_text()
    namespace: dict[str, Any] = {}
    exec(compile(code, str(path), "exec"), namespace)
    agents = [v for v in namespace.values() if callable(v)]
    if not agents:
        raise ValueError(f"{path} defines no callable agent")
    return agents[-1]


def _submission_backend() -> str:
    """The backend the last loaded submission's agent used (its template module's state)."""
    template = sys.modules.get("connectx_az_submission.template")
    state = getattr(template, "STATE", None)
    return str(getattr(state, "backend", "") or "unknown")


@dataclass
class SeatResult:
    """Games of the submission against one opponent from one seat (1 = moves first)."""

    opponent: str
    seat: int
    wins: int = 0
    draws: int = 0
    losses: int = 0
    bad_statuses: list[str] = field(default_factory=list)
    move_seconds: list[float] = field(default_factory=list)
    bank_used: list[float] = field(default_factory=list)  # seconds over actTimeout, per game
    backends: set[str] = field(default_factory=set)  # inference backends the agent reported

    @property
    def num_games(self) -> int:
        return self.wins + self.draws + self.losses

    def as_dict(self) -> dict[str, Any]:
        times = self.move_seconds or [0.0]
        return {"opponent": self.opponent, "seat": self.seat, "wins": self.wins, "draws": self.draws,
                "losses": self.losses, "bad_statuses": self.bad_statuses,
                "mean_move_s": round(float(np.mean(times)), 4), "max_move_s": round(float(np.max(times)), 4),
                "max_bank_used_s": round(max(self.bank_used, default=0.0), 3),
                "backends": sorted(self.backends)}


def validate(submission: str | Path, *, opponents: tuple[str, ...] = ("random", "negamax"), games: int = 20,
             replay_dir: str | Path | None = None, act_timeout: float | None = None,
             on_game: Callable[[SeatResult], None] | None = None) -> list[SeatResult]:
    """Play ``games`` games per opponent and seat through kaggle-environments.

    The submission file is executed afresh for every game, as on Kaggle.
    ``act_timeout`` overrides Kaggle's 2 s a move and scales the 60 s bank the
    agent sees by the same factor (quick checks).  Saves the last
    game against each opponent and seat as an HTML replay in ``replay_dir``.
    """
    configuration = {} if act_timeout is None else {"actTimeout": act_timeout}
    from kaggle_environments import make

    results = []
    for opponent in opponents:
        for seat in (1, 2):
            result = SeatResult(opponent, seat)
            for _ in range(games):
                agent = load_submission(submission)
                excess = [0.0]

                def timed(obs: Any, cfg: Any, agent: Callable[..., Any] = agent, excess: list[float] = excess) -> Any:
                    if act_timeout is not None:  # a scaled clock: the bank shrinks with the move time
                        obs = {**obs, "remainingOverageTime": obs["remainingOverageTime"] * act_timeout / 2.0}
                    start = time.perf_counter()
                    move = agent(obs, cfg)
                    seconds = time.perf_counter() - start
                    result.move_seconds.append(seconds)
                    excess[0] += max(0.0, seconds - cfg["actTimeout"])
                    return move

                env = make("connectx", configuration=configuration, debug=False)
                agents = [timed, opponent] if seat == 1 else [opponent, timed]
                steps = env.run(agents)
                result.bank_used.append(excess[0])
                result.backends.add(_submission_backend())
                final = steps[-1][seat - 1]
                if final.status in BAD_STATUSES or final.reward is None:
                    result.bad_statuses.append(str(final.status))
                    result.losses += 1
                elif final.reward > 0:
                    result.wins += 1
                elif final.reward < 0:
                    result.losses += 1
                else:
                    result.draws += 1
                if on_game is not None:
                    on_game(result)
            if replay_dir is not None:
                out = Path(replay_dir) / f"{opponent}_seat{seat}.html"
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(env.render(mode="html"))
            results.append(result)
    return results


# --------------------------------------------------------------------------- arena: players

#: Kaggle's agent shape: ``(observation, configuration) -> column``; both arguments read as dicts
#: and as attributes (``observation["board"]`` and ``observation.board``).
Player = Callable[[Any, Any], int]

#: kaggle-environments' own ConnectX agents, by name
BUILTINS = ("random", "negamax")
#: default seconds a move (Kaggle's ``actTimeout``) and overage bank per second of it (60 s at 2 s)
ACT_TIMEOUT = 2.0
OVERAGE_PER_ACT_SECOND = 30.0

_CENTRE_FIRST = (3, 2, 4, 1, 5, 0, 6)
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
    """Static score of a position for the side to move (higher is better).

    Each of the 69 lines still open to one side only scores ``_LINE_POINTS[k]``
    for its ``k`` stones (for the side that owns them, against the other), and
    every stone in the centre column scores ``_CENTRE_POINTS``.
    """
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
    for col in _CENTRE_FIRST:
        if not mask & game.TOP_BITS[col] and game.is_win(position | ((mask + game.BOTTOM_BITS[col])
                                                                      & game.COLUMN_BITS[col])):
            return _WIN_SCORE + depth
    if depth <= 0:
        return heuristic(position, mask)
    best = -_INF
    for col in _CENTRE_FIRST:
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

    The position is seen from the side to move and must be unfinished.  A win
    at once is always taken, and a node whose side to move can win at once is
    scored as that win whatever depth is left, so even ``depth=1`` blocks a
    threat.  Ties go to the more central column.  Raises ``ValueError`` for
    ``depth < 1`` or a finished position.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    if game.outcome(position, mask) is not None:
        raise ValueError("the game is already over")
    best_col, best, alpha = -1, -_INF, -_INF
    for col in _CENTRE_FIRST:
        if mask & game.TOP_BITS[col]:
            continue
        if game.is_win(position | ((mask + game.BOTTOM_BITS[col]) & game.COLUMN_BITS[col])):
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

    A fresh tree every move and no clock, so the player is deterministic.
    ``simulations`` is rounded up to a multiple of ``num_parallel`` (leaves per
    network call, as in the Kaggle agent).  Raises ``FileNotFoundError`` or
    ``ValueError`` when the model cannot be loaded.
    """
    from connectx_az.export import OnnxRuntimeEvaluator

    evaluator = OnnxRuntimeEvaluator(onnx_path)
    config = mcts.SearchConfig(num_simulations=simulations, num_parallel=max(1, min(num_parallel, simulations)))

    def agent(observation: Any, configuration: Any) -> int:
        position, mask = game.from_kaggle(observation["board"], observation["mark"])
        tree = mcts.Tree(np.array([position], np.uint64), np.array([mask], np.uint64), capacity=simulations + 1)
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
        self._agent = load_submission(self.path)

    def __call__(self, observation: Any, configuration: Any) -> Any:
        if self._agent is None:
            self.reset()
        return self._agent(observation, configuration)


def submission_player(path: str | Path) -> Player:
    """A built ``submission.py`` as a player; raises ``FileNotFoundError`` if it is missing."""
    return _SubmissionPlayer(path)


def builtin_player(name: str) -> Player:
    """kaggle-environments' own ``"random"`` or ``"negamax"`` agent.

    Both draw from Python's global ``random`` module; ``round_robin`` seeds it
    for each game so that tournaments are reproducible.
    """
    if name not in BUILTINS:
        raise ValueError(f"unknown built-in player {name!r}; choose from {', '.join(BUILTINS)}")
    from kaggle_environments.envs.connectx.connectx import agents

    return agents[name]


# --------------------------------------------------------------------------- arena: referee


class _Struct(dict):
    """A dict whose keys also read as attributes, like kaggle-environments' observations."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


def kaggle_inputs(position: int, mask: int, *, act_timeout: float = ACT_TIMEOUT,
                  overage: float | None = None) -> tuple[_Struct, _Struct]:
    """``(observation, configuration)`` in Kaggle's shape for the side to move of a position.

    ``overage`` is the bank shown as ``remainingOverageTime`` (default
    ``OVERAGE_PER_ACT_SECOND * act_timeout``).
    """
    ply = game.num_stones(mask)
    mark = 1 + ply % 2
    bank = OVERAGE_PER_ACT_SECOND * act_timeout if overage is None else overage
    observation = _Struct(board=game.to_kaggle(position, mask, mark), mark=mark, step=ply,
                          remainingOverageTime=bank)
    configuration = _Struct(rows=game.ROWS, columns=game.COLS, inarow=game.INAROW, actTimeout=act_timeout,
                            timeout=act_timeout, episodeSteps=1000, runTimeout=1200, agentTimeout=60)
    return observation, configuration


@dataclass(frozen=True)
class GameResult:
    """One refereed game.

    ``score`` is the first mover's: 1 win, 0.5 draw, 0 loss.  ``reason`` says
    how it ended: ``"four in a row"``, ``"draw"``, ``"illegal move ..."``,
    ``"error ..."`` or ``"timeout ..."`` (the last three lose for the player
    named in them).  ``opening`` holds the columns played at random before the
    players took over; ``num_plies`` counts them too.
    """

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

    Kaggle's rules: a move that raises, is not an integer, or is not a legal
    column loses, and so does overdrawing the overage bank (``overage`` seconds,
    default ``OVERAGE_PER_ACT_SECOND * act_timeout``; every move's time beyond
    ``act_timeout`` is taken from it).  A slow move is judged after it returns:
    nothing here interrupts a player.  Players with a ``reset()`` method get it
    called first.  Raises ``ValueError`` for an opening that is illegal or ends
    the game.
    """
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

    Games come in twos from one random opening of ``opening_plies`` moves (so
    that deterministic players do not repeat one game), the players swapping
    seats between the two; pairs follow the mapping's order.  Everything random
    (openings, and Python's global ``random`` that kaggle's built-in agents
    use, seeded per game and restored afterwards) derives from ``seed``.  See
    ``play_game`` for the rules and the clock.
    """
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


# --------------------------------------------------------------------------- arena: ratings


@dataclass(frozen=True)
class Rating:
    """A player's line of the ratings table.

    ``score`` is the fraction of points won (draws count half); ``elo`` and its
    95% interval ``[ci_low, ci_high]`` are on the Elo scale (400 = 10:1 odds).
    """

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

    ``points[r, a, b]`` is what ``a`` scored against ``b`` and ``games[r, a, b]``
    the games they played (symmetric), each for resample ``r``.  Hunter's (2004)
    minorize-maximize update ``gamma_a = W_a / sum_b n_ab / (gamma_a + gamma_b)``
    climbs the likelihood at every step; every player needs some points and
    some losses, which the caller's virtual draws guarantee.
    """
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

    Draws count as half a win to each side.  Each pair that met is credited
    with ``prior_draws`` virtual draws (as bayeselo's prior does), so that a
    clean sweep gives a finite rating.  Ratings are shifted so that ``anchor``
    (when it played) is 0, else so that they average 0.

    The 95% intervals come from a parametric bootstrap, as Ordo's simulations:
    ``num_bootstrap`` tournaments (seeded by ``seed``) replay every pair's
    number of games with outcomes drawn from the fitted ratings (expected
    score ``1 / (1 + 10 ** (-diff / 400))``, the pair's observed draw rate where
    that expectation allows it) and are fitted again; the interval spans the
    2.5th to 97.5th percentile.  Resampling the games themselves would give a
    zero-width interval to every clean sweep, common in this arena.  Raises
    ``ValueError`` for no games or ``prior_draws <= 0``.
    """
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


def format_ratings(ratings: Sequence[Rating]) -> str:
    """The ratings as a text table: player, games, score %, Elo, 95% CI."""
    width = max(len("player"), *(len(r.name) for r in ratings))
    lines = [f"{'player':<{width}}  {'games':>5}  {'score':>6}  {'Elo':>6}  {'95% CI':>15}"]
    for r in ratings:
        lines.append(f"{r.name:<{width}}  {r.num_games:>5}  {100 * r.score:>5.1f}%  {r.elo:>6.0f}  "
                     f"[{r.ci_low:>5.0f}, {r.ci_high:>5.0f}]")
    return "\n".join(lines)


def render_board(board: Sequence[int]) -> str:
    """Kaggle's 42-cell board as text, top row first: ``X`` player 1, ``O`` player 2, columns numbered 1-7."""
    symbols = {0: ".", 1: "X", 2: "O"}
    rows = [" ".join(symbols[board[row * game.COLS + col]] for col in range(game.COLS))
            for row in range(game.ROWS)]
    return "\n".join([*rows, " ".join(str(col + 1) for col in range(game.COLS))])
