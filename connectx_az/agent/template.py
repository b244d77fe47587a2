"""The Kaggle ConnectX agent: MCTS over the embedded network, exact play near the end, a safety net.

This is an ordinary module, imported and tested like any other; ``builder``
pastes it verbatim (with ``game``, ``mcts``, ``solver`` and ``onnx_numpy``) into
the single-file ``submission.py`` and fills ``MODEL_B64``/``MODEL_SHA256``.
Everything here is standard library plus numpy; onnxruntime is used only when
it imports.

One move (``agent``):

1. Read the observation defensively.  Anything that is not a well-formed 6x7,
   four-in-a-row position with ``mark`` as the side to move (other board sizes,
   wrong lengths, floats, missing fields, impossible boards) is answered by
   ``simple_move``: win now, else block, else the most central safe column,
   computed on the raw board list for any size.
2. Return at once when the move is forced: one legal column, a win now, or the
   single block of an immediate threat.
3. Budget the move (``move_budget``): a safe share of ``actTimeout`` plus a
   share of the overage bank that shrinks with the bank and can never drain it.
   The first move also pays for decoding the model and for executing the file.
4. With up to 38 empty cells, ask the exact ``solver`` (weak mode: win, draw
   or loss) for a move within a share of the budget that grows as the board
   fills, and play it if it proves a win or a draw.
5. Otherwise search: ``mcts.search`` with virtual-loss batches
   (``CONFIG.search.num_parallel`` leaves per network call) until the deadline or a
   proven root, reusing the subtree of the previous move when the opponent's
   reply is found in it, and play ``mcts.best_cols``.

Any exception falls back to ``simple_move``, and the returned move is always a
plain ``int`` that is legal on the raw board whenever a legal column exists.
A missing or corrupt embedded model is replaced by a uniform evaluator (the
search still plays legal, tactically sound moves).  The garbage collector is
paused during a move, so its pauses cannot land inside the search.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import math
import time
from dataclasses import dataclass

import numpy as np

from connectx_az import game, mcts
from connectx_az.agent import onnx_numpy

try:
    from connectx_az import solver
except ImportError:
    solver = None

#: the ONNX model, base64; ``builder`` fills these in the submission (``set_model`` in tests)
MODEL_B64 = ""
MODEL_SHA256 = ""
#: seconds spent executing the submission file before the first call (set by the builder's loader)
PRELOAD_SECONDS = 0.0


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """How the agent spends its time.

    Clock (``move_budget``): a move may use ``safe_share * actTimeout -
    safety_seconds`` plus ``overage_share * (bank - overage_reserve) / moves_left``
    (capped at ``max_extra_seconds``; ``moves_left`` is the own moves still to
    play, at least ``min_moves_left``).  ``solver_schedule`` lists
    ``(max empty cells, share of the remaining budget)`` for the exact solver,
    tightest first.  ``backends`` are tried in order; ``limit_blas_threads``
    asks numpy's BLAS for one thread (tiny matmuls only lose from threads on a
    shared core).
    """

    backends: tuple[str, ...] = ("onnxruntime", "numpy")
    limit_blas_threads: bool = True
    search: mcts.SearchConfig = mcts.SearchConfig(num_simulations=1_000_000_000, num_parallel=8)
    tree_capacity: int = 4096
    max_tree_nodes: int = 400_000  # start a fresh tree beyond this (memory)
    safe_share: float = 0.75
    safety_seconds: float = 0.2
    overage_reserve: float = 5.0
    overage_share: float = 0.8
    max_extra_seconds: float = 3.0
    min_moves_left: int = 4
    default_act_timeout: float = 2.0
    solver_schedule: tuple[tuple[int, float], ...] = ((16, 0.9), (24, 0.7), (32, 0.5), (38, 0.25))
    solver_table_size: int = 1 << 20

    def __post_init__(self) -> None:
        if not 0 < self.safe_share <= 1 or self.safety_seconds < 0:
            raise ValueError("safe_share must be in (0, 1] and safety_seconds >= 0")
        if not 0 <= self.overage_share <= 1 or self.overage_reserve < 0 or self.min_moves_left < 1:
            raise ValueError("overage_share must be in [0, 1], overage_reserve >= 0, min_moves_left >= 1")
        if self.default_act_timeout <= 0 or self.tree_capacity < 2:
            raise ValueError("default_act_timeout must be > 0 and tree_capacity >= 2")
        if any(not 0 <= share <= 1 for _, share in self.solver_schedule):
            raise ValueError("solver shares must be in [0, 1]")
        if any(b not in ("onnxruntime", "numpy") for b in self.backends):
            raise ValueError(f"unknown backend in {self.backends}")


CONFIG = AgentConfig()


class _State:
    """What persists between moves of one game (and across games in one process)."""

    def __init__(self) -> None:
        self.evaluator = None
        self.backend = ""
        self.load_error = ""
        self.load_seconds = 0.0
        self.num_calls = 0
        self.tree: mcts.Tree | None = None
        self.last: tuple[int, int, int] | None = None  # (position, mask, col) of our last searched move
        self.solver = None
        self.nodes_per_second = 0.0  # nodes the last search added per second (0: not measured yet)
        self.last_error = ""
        self.info: dict[str, object] = {}


STATE = _State()


def reset() -> None:
    """Forget the loaded model, the search tree and the solver's table."""
    global STATE
    STATE = _State()


def set_model(data: bytes | None) -> None:
    """Embed ``data`` (ONNX bytes) as if built into the submission; ``None`` removes it. Resets state."""
    global MODEL_B64, MODEL_SHA256
    if data is None:
        MODEL_B64 = MODEL_SHA256 = ""
    else:
        MODEL_B64 = base64.b64encode(bytes(data)).decode("ascii")
        MODEL_SHA256 = hashlib.sha256(bytes(data)).hexdigest()
    reset()


# ---------------------------------------------------------------------------
# reading observations that may be malformed


def _field(obj, name: str, default=None):
    """``obj[name]`` for mappings (Kaggle's Struct is a dict), else ``obj.name``; ``default`` if absent."""
    try:
        if isinstance(obj, dict):
            return obj.get(name, default)
        return getattr(obj, name, default)
    except Exception:
        return default


def _as_float(value, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return default
    value = float(value)
    return value if math.isfinite(value) else default


def _as_int(value, default: int) -> int:
    number = _as_float(value, math.nan)
    return int(number) if math.isfinite(number) and number == int(number) else default


def _cells(board) -> list[int] | None:
    """The board as a list of ints; cells that are not whole numbers become -1 (occupied, unknown)."""
    if isinstance(board, np.ndarray):
        board = board.reshape(-1).tolist()
    if not isinstance(board, (list, tuple)):
        return None
    return [_as_int(v, -1) for v in board]


# ---------------------------------------------------------------------------
# the size-agnostic safety net


def _landing_row(cells: list[int], rows: int, cols: int, col: int) -> int:
    for row in range(rows - 1, -1, -1):
        if cells[row * cols + col] == 0:
            return row
    return -1


def _completes_line(cells: list[int], rows: int, cols: int, inarow: int, row: int, col: int, who: int) -> bool:
    """Would a stone of ``who`` at ``(row, col)`` make ``inarow`` in a line?"""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < rows and 0 <= c < cols and cells[r * cols + c] == who:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= inarow:
            return True
    return False


def simple_move(board, columns: int = game.COLS, inarow: int = game.INAROW, mark: int = 0) -> int:
    """Win now, else block, else the most central column that does not hand over a win.

    Works on the raw board list of any size; guesses ``columns`` from the
    board's length when the given value does not divide it, and the side to
    move from the stone counts when ``mark`` is not 1 or 2.  With no legal
    column it returns the centre column (nothing legal exists to return).
    """
    cells = _cells(board) or []
    n = len(cells)
    if not (isinstance(columns, int) and 0 < columns and n and n % columns == 0):
        columns = game.COLS if n and n % game.COLS == 0 else max(n, 1)
    rows = n // columns
    inarow = inarow if isinstance(inarow, int) and inarow > 0 else game.INAROW
    legal = [c for c in range(columns) if c < n and cells[c] == 0]
    if not legal:
        return int(columns // 2)
    if mark not in (1, 2):
        mark = 1 if cells.count(1) <= cells.count(2) else 2
    other = 3 - mark
    landing = {c: _landing_row(cells, rows, columns, c) for c in legal}
    for who in (mark, other):
        for c in legal:
            if _completes_line(cells, rows, columns, inarow, landing[c], c, who):
                return int(c)
    safe = [c for c in legal
            if landing[c] < 1 or not _completes_line(cells, rows, columns, inarow, landing[c] - 1, c, other)]
    return int(min(safe or legal, key=lambda c: (abs(2 * c - (columns - 1)), c)))


def _is_legal_move(move, board, columns) -> bool:
    cells = _cells(board)
    return (type(move) is int and cells is not None and 0 <= move < min(len(cells), columns)
            and cells[move] == 0)


# ---------------------------------------------------------------------------
# the model


class _UniformEvaluator:
    """Equal priors and a neutral value: the search's last resort without a usable model."""

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = obs.shape[0]
        return np.zeros((m, game.NUM_ACTIONS), np.float32), np.zeros(m, np.float32)


class OrtEvaluator:
    """``mcts.Evaluator`` over an onnxruntime CPU session with one thread (where onnxruntime imports)."""

    def __init__(self, data: bytes) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name
        self.output_names = [o.name for o in self.session.get_outputs()][:2]

    def evaluate(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, value = self.session.run(self.output_names, {self.input_name: np.asarray(obs, np.float32)})
        return np.asarray(logits, np.float32), np.asarray(value, np.float32).reshape(-1)


def _limit_blas_threads() -> None:
    """Best effort: ask every loaded OpenBLAS to use one thread (as threadpoolctl would)."""
    import ctypes

    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.lower() and ".so" in line}
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("openblas_set_num_threads", "openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads"):
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(1)


def make_evaluator(backend: str, data: bytes):
    if backend == "onnxruntime":
        return OrtEvaluator(data)
    if backend == "numpy":
        return onnx_numpy.NumpyOnnxModel(data)
    raise ValueError(f"unknown backend {backend!r}")


def load_model(config: AgentConfig | None = None):
    """The evaluator for this process, built on first use; records ``STATE.backend``.

    Tries ``config.backends`` (default ``CONFIG``) in order on the embedded model after checking its
    sha256; a backend counts only if it scores the empty board with finite
    numbers of the right shapes.  Falls back to a uniform evaluator.
    """
    if STATE.evaluator is not None:
        return STATE.evaluator
    config = config or CONFIG
    start = time.perf_counter()
    errors = []
    if config.limit_blas_threads:
        try:
            _limit_blas_threads()
        except Exception:
            pass
    data = b""
    try:
        data = base64.b64decode(MODEL_B64)
        if not data:
            raise ValueError("no model is embedded")
        if hashlib.sha256(data).hexdigest() != MODEL_SHA256:
            raise ValueError("the embedded model fails its sha256 check")
    except Exception as exc:
        errors.append(f"model: {exc}")
        data = b""
    probe = game.encode(np.zeros(1, np.uint64), np.zeros(1, np.uint64))
    for backend in config.backends if data else ():
        try:
            evaluator = make_evaluator(backend, data)
            logits, value = evaluator.evaluate(probe)
            if np.shape(logits) != (1, game.NUM_ACTIONS) or np.shape(value) != (1,) \
                    or not (np.all(np.isfinite(logits)) and np.all(np.isfinite(value))):
                raise ValueError("the model gives malformed outputs")
        except Exception as exc:
            errors.append(f"{backend}: {type(exc).__name__}: {exc}")
            continue
        STATE.evaluator, STATE.backend = evaluator, backend
        break
    else:
        STATE.evaluator, STATE.backend = _UniformEvaluator(), "uniform"
    STATE.load_error = "; ".join(errors)
    gc.collect()  # once, now, rather than inside a later search
    STATE.load_seconds = time.perf_counter() - start
    return STATE.evaluator


# ---------------------------------------------------------------------------
# the clock


def move_budget(act_timeout: float, overage: float, num_empty: int, config: AgentConfig | None = None) -> float:
    """Seconds the move may take from the start of the call (see ``AgentConfig``).

    The base share stays inside the free ``act_timeout`` with room for Kaggle's
    own overhead; the overage bank adds a fraction of what it holds above the
    reserve, divided over the own moves still to play, so it never runs dry.
    """
    config = config or CONFIG
    base = max(0.05, config.safe_share * act_timeout - config.safety_seconds)
    moves_left = max(config.min_moves_left, (num_empty + 1) // 2)
    extra = config.overage_share * max(0.0, overage - config.overage_reserve) / moves_left
    return base + min(extra, config.max_extra_seconds)


# ---------------------------------------------------------------------------
# the move


def _tree_for(position: int, mask: int, config: AgentConfig) -> tuple[mcts.Tree, bool]:
    """``(tree, reused)``: the previous tree moved down our last move and the reply, or a new tree."""
    tree, last = STATE.tree, STATE.last
    if tree is not None and last is not None and int(tree.num_nodes[0]) < config.max_tree_nodes:
        prev_position, prev_mask, col = last
        root = int(tree.root[0])
        if (int(tree.position[0, root]), int(tree.mask[0, root])) == (prev_position, prev_mask) \
                and game.is_legal(prev_mask, col):
            after_position, after_mask = game.play(prev_position, prev_mask, col)
            for reply in game.legal_cols(after_mask):
                if game.play(after_position, after_mask, reply) == (position, mask):
                    if tree.advance(0, [col, reply]):
                        return tree, True
                    break
    return mcts.Tree(np.array([position], np.uint64), np.array([mask], np.uint64), capacity=config.tree_capacity), False


def _reserve_nodes(tree: mcts.Tree, deadline: float) -> None:
    """Grow the tree now for the nodes the coming search will add, by the last search's rate, twice over.

    The tree doubles its arrays when full, which took 0.1 s at 131k nodes on
    one core here; inside the search that copy can start just before the deadline and
    overrun it.  Done here, it only shortens the search.  The first search of a
    process has no rate yet and starts from a small tree, whose growth is cheap.
    """
    seconds = max(0.0, deadline - time.perf_counter())
    tree.ensure_capacity(int(2.0 * STATE.nodes_per_second * seconds))


def _solve(position: int, mask: int, num_empty: int, deadline: float, config: AgentConfig) -> int | None:
    """A column proven to win or to hold the draw, found within part of the time left, or None.

    The solver is asked for the result only (weak mode: win, draw or loss),
    which is all a move needs and far cheaper than the exact score.  A lost
    position returns None: the search then picks the move that makes the
    opponent's task hardest.  The transposition table is kept between moves.
    """
    if solver is None:
        return None
    share = next((s for limit, s in config.solver_schedule if num_empty <= limit), 0.0)
    now = time.perf_counter()
    if share <= 0 or deadline - now < 0.02:
        return None
    if STATE.solver is None:
        STATE.solver = solver.Solver(table_size=config.solver_table_size)
    found = STATE.solver.best_move(position, mask, weak=True, deadline=now + share * (deadline - now))
    if found is None or found[1] < 0:
        return None
    col = int(found[0])
    return col if game.is_legal(mask, col) else None


def choose_move(observation, configuration) -> int:
    """The move for one call; may raise on malformed input (``agent`` catches everything)."""
    start = time.perf_counter()
    config = CONFIG
    first_call = STATE.num_calls == 0
    STATE.num_calls += 1
    info: dict[str, object] = {"source": "", "backend": STATE.backend, "simulations": 0}
    STATE.info = info
    board = _field(observation, "board")
    mark = _as_int(_field(observation, "mark"), 0)
    rows = _as_int(_field(configuration, "rows"), game.ROWS)
    columns = _as_int(_field(configuration, "columns"), game.COLS)
    inarow = _as_int(_field(configuration, "inarow"), game.INAROW)
    cells = _cells(board)

    def fallback(source: str) -> int:
        info["source"] = source
        return simple_move(board, columns, inarow, mark)

    if (rows, columns, inarow) != (game.ROWS, game.COLS, game.INAROW) or cells is None \
            or len(cells) != game.NUM_CELLS:
        return fallback("simple: not a 6x7 four-in-a-row board")
    try:
        position, mask = game.from_kaggle(cells, mark)
    except ValueError as exc:
        return fallback(f"simple: {exc}")
    if game.outcome(position, mask) is not None:
        return fallback("simple: the game is over")
    legal = game.legal_cols(mask)
    if len(legal) == 1:
        info["source"] = "only move"
        return legal[0]
    wins = game.winning_cols(position, mask)
    if wins:
        info["source"] = "win now"
        return min(wins, key=lambda c: abs(c - 3))
    threats = game.winning_cols(position ^ mask, mask)
    if len(threats) == 1:
        info["source"] = "block"
        return threats[0]

    act_timeout = _as_float(_field(configuration, "actTimeout"), math.nan)
    if not act_timeout > 0:
        act_timeout = _as_float(_field(configuration, "timeout"), config.default_act_timeout)
    act_timeout = act_timeout if act_timeout > 0 else config.default_act_timeout
    overage = max(0.0, _as_float(_field(observation, "remainingOverageTime"), 0.0))
    num_empty = game.NUM_CELLS - game.num_stones(mask)
    budget = move_budget(act_timeout, overage, num_empty, config)
    if first_call:
        budget -= min(max(PRELOAD_SECONDS, 0.0), budget)
    deadline = start + budget
    info["budget"] = budget

    evaluator = load_model(config)
    info["backend"] = STATE.backend
    try:
        col = _solve(position, mask, num_empty, deadline, config)
    except Exception as exc:  # the solver is an optimisation; never let it lose the move
        STATE.last_error = f"solver: {type(exc).__name__}: {exc}"
        col = None
    if col is not None:
        info["source"] = "solver"
        return col

    tree, info["reused_tree"] = _tree_for(position, mask, config)
    _reserve_nodes(tree, deadline)
    capacity, num_nodes, search_start = tree.capacity, int(tree.num_nodes[0]), time.perf_counter()
    info["simulations"] = mcts.search(tree, evaluator, config.search, deadline=deadline)
    search_seconds = time.perf_counter() - search_start
    if search_seconds > 0.01:
        STATE.nodes_per_second = (int(tree.num_nodes[0]) - num_nodes) / search_seconds
    info["tree_grew"] = tree.capacity != capacity
    root_visits = int(tree.root_visits()[0].sum())
    if root_visits == 0 and np.isnan(tree.root_proven()[0]):
        # No time for a single simulation (a slow first move): trust the prior, centre first.
        prior = tree.prior[0, tree.root[0]] - 1e-6 * np.abs(np.arange(game.COLS) - game.COLS // 2)
        col = int(np.argmax(np.where(game.legal_mask(mask), prior, -np.inf)))
    else:
        col = int(mcts.best_cols(tree)[0])
    STATE.tree, STATE.last = tree, (position, mask, col)
    info["source"] = "search"
    info["root_visits"] = root_visits
    return col


def agent(observation, configuration) -> int:
    """Kaggle's entry point: a legal column as a plain ``int``, whatever it is given."""
    start = time.perf_counter()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            move = choose_move(observation, configuration)
        except Exception as exc:
            STATE.last_error = f"{type(exc).__name__}: {exc}"
            move = None
        board = _field(observation, "board")
        columns = _as_int(_field(configuration, "columns"), game.COLS)
        if not _is_legal_move(move, board, columns):
            if move is not None:
                STATE.last_error = f"illegal move {move!r} replaced"
            move = simple_move(board, columns, _as_int(_field(configuration, "inarow"), game.INAROW),
                               _as_int(_field(observation, "mark"), 0))
        STATE.info["seconds"] = time.perf_counter() - start
        return int(move)
    except Exception:
        return game.COLS // 2
    finally:
        if gc_was_enabled:
            gc.enable()
