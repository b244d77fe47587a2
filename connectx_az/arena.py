"""Measuring agents: Pons accuracy against perfect play, and kaggle-environments validation.

``policy_mistake_rates`` grades a network's raw policy on the Pons sets (the
cheap per-generation signal of training); ``search_mistake_rates`` grades MCTS
at a fixed simulation count; ``validate`` plays a built ``submission.py``
through kaggle-environments exactly as Kaggle runs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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

    @property
    def num_games(self) -> int:
        return self.wins + self.draws + self.losses

    def as_dict(self) -> dict[str, Any]:
        times = self.move_seconds or [0.0]
        return {"opponent": self.opponent, "seat": self.seat, "wins": self.wins, "draws": self.draws,
                "losses": self.losses, "bad_statuses": self.bad_statuses,
                "mean_move_s": round(float(np.mean(times)), 4), "max_move_s": round(float(np.max(times)), 4),
                "max_bank_used_s": round(max(self.bank_used, default=0.0), 3)}


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
