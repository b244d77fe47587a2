"""Running a file the way Kaggle does: observations, the sandbox, loading a submission, validation.

``kaggle_inputs`` builds Kaggle's ``(observation, configuration)`` for a position; ``sandbox_prelude`` makes a fresh
interpreter, and ``kaggle_like_process`` this one, look like Kaggle's agent sandbox; ``load_submission`` executes a
``submission.py`` as Kaggle does; ``check_network`` refuses a file whose embedded network or opening book does
not load (every command that grades or plays a file calls it first); ``validate`` plays a file through
kaggle-environments."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from connectx_az import paths
from connectx_az.engine import game
from connectx_az.engine.solver_numba import forget_compiled
from connectx_az.evaluation.kaggle_sandbox import SubmissionError, exec_submission, kaggle_dicts

#: default seconds a move (Kaggle's ``actTimeout``) and overage bank per second of it (60 s at 2 s)
ACT_TIMEOUT = 2.0
OVERAGE_PER_ACT_SECOND = 30.0


class _Struct(dict):
    """A dict whose keys also read as attributes, like kaggle-environments' observations."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


def kaggle_inputs(position: int, mask: int, *, act_timeout: float = ACT_TIMEOUT,
                  overage: float | None = None) -> tuple[_Struct, _Struct]:
    """``(observation, configuration)`` in Kaggle's shape for the side to move of a position; ``overage`` is the bank
    shown as ``remainingOverageTime`` (default ``OVERAGE_PER_ACT_SECOND * act_timeout``)."""
    ply = game.num_stones(mask)
    mark = 1 + ply % 2
    bank = OVERAGE_PER_ACT_SECOND * act_timeout if overage is None else overage
    observation, configuration = kaggle_dicts(game.to_kaggle(position, mask, mark), mark, ply, bank, act_timeout)
    return _Struct(observation), _Struct(configuration)


#: the optional packages each runtime hides from the agent.  ``numpy``: the worst case, numpy alone;
#: ``kaggle``: what Kaggle's agent image most likely has (numba and torch, no onnxruntime); ``full``:
#: whatever this machine has.
RUNTIMES = {"numpy": ("onnxruntime", "torch", "numba"), "kaggle": ("onnxruntime",), "full": ()}
#: what a child script imitating Kaggle's sandbox blocks by default: the package and the numpy runtime's list
KAGGLE_BLOCKED = ("connectx_az", *RUNTIMES["numpy"])


def runtime_blocked(runtime: str) -> tuple[str, ...]:
    """The packages ``runtime`` (a key of ``RUNTIMES``) blocks; ``ValueError`` names the choices."""
    try:
        return RUNTIMES[runtime]
    except KeyError:
        raise ValueError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}") from None


def sandbox_prelude(blocked: tuple[str, ...] = KAGGLE_BLOCKED) -> str:
    """Python source that makes a fresh interpreter look like Kaggle's agent sandbox.

    Prepend it to a child script: importing any of ``blocked`` (by top-level name) raises ``ImportError``, and numpy
    is imported first, as Kaggle's harness has it loaded before it executes a submission.  The script can then call
    ``kaggle_dicts`` and ``exec_submission`` (``kaggle_sandbox``, pasted)."""
    return ("import sys\n"
            "class _Blocker:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] in {tuple(blocked)!r}:\n"
            "            raise ImportError('blocked to imitate Kaggle: ' + name)\n"
            "        return None\n"
            "sys.meta_path.insert(0, _Blocker())\n"
            "import numpy  # noqa: E402,F401\n"
            + Path(__file__).with_name("kaggle_sandbox.py").read_text(encoding="utf-8"))


def kaggle_like_process(runtime: str) -> None:
    """Make this process look like Kaggle's agent sandbox: one core, and ``runtime``'s packages blocked.

    For a command's own process (``validate``, ``eval pons --submission``), before anything imports the blocked
    packages: pins the process to its lowest core, drops the blocked packages already imported from ``sys.modules``
    and installs ``sandbox_prelude``'s import blocker."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    blocked = runtime_blocked(runtime)
    for name in [n for n in sys.modules if n.split(".")[0] in blocked]:
        sys.modules.pop(name)
    if blocked:
        exec(sandbox_prelude(blocked), {})


BAD_STATUSES = ("ERROR", "INVALID", "TIMEOUT")


def load_submission(path: str | Path) -> Callable[..., Any]:
    """Execute ``submission.py`` the way Kaggle does and return its last callable; ``OSError`` where the file cannot
    be opened, ``SubmissionError`` (a ``ValueError``) where it is not a submission."""
    return exec_submission(str(path))[0]


def check_network(submission: str | Path) -> str:
    """The backend the file's agent loads its embedded network with; ``SubmissionError`` where it loads none, or
    where the file embeds an opening book that does not load.

    On Kaggle an agent whose network fails to load (a damaged or edited file, or no backend that runs it) plays on
    with uniform priors, and one whose book fails searches every opening move (seconds each, from the bank), as it
    should once a game has started; a file about to be uploaded must not.  Executes the file (``OSError``;
    ``SubmissionError`` where it is not a submission) and loads the network and the book in this process, so in the
    runtime it imitates (``kaggle_like_process``).  A file with no ``_agent`` of this package's kind: ``""``."""
    _, namespace = exec_submission(str(submission))
    player = namespace.get("_agent")
    if not callable(getattr(player, "load_model", None)):
        return ""
    player.load_model()
    backend = str(getattr(player, "backend", ""))
    rebuild = f"rebuild it (`make submission` or `{paths.COMMAND} build`)"
    if backend == "uniform":
        why = " ".join(str(getattr(player, "load_error", "")).split()) or "no backend could run it"
        raise SubmissionError(f"{submission}: its network did not load ({why}); on Kaggle it would play with "
                              f"uniform priors, far weaker: {rebuild}")
    if callable(getattr(player, "load_book", None)):
        player.load_book()
        why = " ".join(str(getattr(player, "book_error", "")).split())
        if why:
            raise SubmissionError(f"{submission}: its opening book did not load ({why}); on Kaggle it would search "
                                  f"every opening move, seconds each from the bank: {rebuild}")
    return backend


def first_move(submission: str | Path, *, act_timeout: float = ACT_TIMEOUT) -> int:
    """The column the file's agent, executed afresh, plays on the empty board with the full bank.

    A check before hours of grading: ``SubmissionError`` where the file is not a submission, or its agent raises or
    answers anything but a column as a plain ``int`` (Kaggle's INVALID); ``OSError`` where it cannot be opened."""
    agent = load_submission(submission)
    observation, configuration = kaggle_inputs(0, 0, act_timeout=act_timeout)
    try:
        move = agent(observation, configuration)
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise SubmissionError(f"{submission}: its agent raised {type(exc).__name__} on the empty board: {first}") \
            from exc
    if type(move) is not int or not 0 <= move < game.COLS:
        raise SubmissionError(f"{submission}: its agent answered {move!r} on the empty board, not a column "
                              f"(a plain int from 0 to {game.COLS - 1})")
    return move


def warm_up(submission: str | Path, *, act_timeout: float = ACT_TIMEOUT) -> None:
    """Leave the process as a game leaves it once the file's agent has searched a move with its bank full.

    An agent whose book answers a game's first moves compiles its solver (numba's kernel, which the process keeps for
    later executions of the file) on its first searched move, the bank still full.  A grader that then shows it
    positions with an empty bank, executing the file afresh for each, must have had that search first: here the
    agent, executed afresh with its book off (``book_b64``, where the file has one), plays the empty board."""
    agent, namespace = exec_submission(str(submission))
    if hasattr(namespace.get("_agent"), "book_b64"):
        namespace["_agent"].book_b64 = ""
    observation, configuration = kaggle_inputs(0, 0, act_timeout=act_timeout)
    agent(observation, configuration)


#: what validate reports where no move of a game needed the network or the solver: no failure, nothing to load
NONE_NEEDED = "none needed"


def _submission_backend(namespace: dict[str, Any]) -> str:
    """The inference backend the agent (``_agent``) of an executed submission used; ``NONE_NEEDED`` where no move
    needed the network (the book, the solver or a forced move chose every one)."""
    return str(getattr(namespace.get("_agent"), "backend", "") or NONE_NEEDED)


def _submission_solver(namespace: dict[str, Any]) -> str:
    """The exact solver the agent of an executed submission played with (``numba``, ``python``); ``NONE_NEEDED``
    where the book or a forced move chose every move."""
    return str(getattr(namespace.get("_agent"), "solver_kind", "") or NONE_NEEDED)


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
    first_move_bank: list[float] = field(default_factory=list)  # of which the game's first move, per game
    backends: set[str] = field(default_factory=set)  # inference backends the agent reported
    solvers: set[str] = field(default_factory=set)  # exact solvers the agent reported

    @property
    def num_games(self) -> int:
        return self.wins + self.draws + self.losses

    def as_dict(self) -> dict[str, Any]:
        times = self.move_seconds or [0.0]
        return {"opponent": self.opponent, "seat": self.seat, "wins": self.wins, "draws": self.draws,
                "losses": self.losses, "bad_statuses": self.bad_statuses,
                "mean_move_s": round(float(np.mean(times)), 4), "max_move_s": round(float(np.max(times)), 4),
                "max_bank_used_s": round(max(self.bank_used, default=0.0), 3),
                "max_first_move_bank_s": round(max(self.first_move_bank, default=0.0), 3),
                "backends": sorted(self.backends), "solvers": sorted(self.solvers)}


def validate(submission: str | Path, *, opponents: tuple[str, ...] = ("random", "negamax"), games: int = 20,
             replay_dir: str | Path | None = None, act_timeout: float | None = None,
             on_game: Callable[[SeatResult], None] | None = None) -> list[SeatResult]:
    """Play ``games`` games per opponent and seat through kaggle-environments.

    The file is executed afresh for every game, as on Kaggle, after forgetting what the process compiled for an
    earlier game (``solver_numba.forget_compiled``), so every game's first move pays for its own compile where numba
    imports.  ``act_timeout`` overrides Kaggle's 2 s a move and scales the agent's bank by the same factor (quick
    checks).  The last game against each opponent and seat is saved as an HTML replay in ``replay_dir``.  Stops at
    the file's first broken move (its agent raises, or answers anything but a legal column as a plain ``int``:
    Kaggle's ERROR and INVALID) with ``SubmissionError``, naming the game, the ply and the exception or the answer;
    no replay of such a file is saved."""
    configuration = {} if act_timeout is None else {"actTimeout": act_timeout}
    from kaggle_environments import make

    results = []
    for opponent in opponents:
        for seat in (1, 2):
            result = SeatResult(opponent, seat)
            for _ in range(games):
                forget_compiled()  # every game pays for its own compile, as in a fresh process: the worst case
                agent, namespace = exec_submission(str(submission))
                excess, first = [0.0], [None]  # bank used: in all, by the first move
                broken: list[str] = []  # what the file's first broken move did, where one was

                def timed(obs: Any, cfg: Any, agent: Callable[..., Any] = agent, excess: list[float] = excess,
                          first: list[Any] = first, broken: list[str] = broken) -> Any:
                    if act_timeout is not None:  # a scaled clock: the bank shrinks with the move time
                        obs = {**obs, "remainingOverageTime": obs["remainingOverageTime"] * act_timeout / 2.0}
                    ply = sum(cell != 0 for cell in obs["board"])
                    start = time.perf_counter()
                    try:
                        move = agent(obs, cfg)
                    except Exception as exc:  # kaggle-environments would only mark the game ERROR
                        detail = (str(exc).splitlines() or [""])[0]
                        broken.append(f"ply {ply}: its agent raised {type(exc).__name__}: {detail}")
                        raise
                    if type(move) is not int or not 0 <= move < cfg["columns"] or obs["board"][move] != 0:
                        broken.append(f"ply {ply}: its agent answered {move!r:.60}, not a legal column (a plain int "
                                      "of a column that is not full)")
                    seconds = time.perf_counter() - start
                    if first[0] is None:
                        first[0] = max(0.0, seconds - cfg["actTimeout"])
                    result.move_seconds.append(seconds)
                    excess[0] += max(0.0, seconds - cfg["actTimeout"])
                    return move

                env = make("connectx", configuration=configuration, debug=False)
                agents = [timed, opponent] if seat == 1 else [opponent, timed]
                steps = env.run(agents)
                if broken:
                    raise SubmissionError(f"{submission}, game {result.num_games + 1} against {opponent} (seat "
                                          f"{seat}), {broken[0]}; validation stops at the file's first broken move")
                result.bank_used.append(excess[0])
                result.first_move_bank.append(first[0] or 0.0)
                result.backends.add(_submission_backend(namespace))
                result.solvers.add(_submission_solver(namespace))
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
