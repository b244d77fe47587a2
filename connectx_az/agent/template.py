"""The Kaggle ConnectX agent: MCTS over the embedded network, exact play near the end, a safety net.

``submission.py`` makes one ``Agent`` with the embedded model and ends with Kaggle's
``agent(observation, configuration)`` calling it.  One move (``Agent.choose_move``):

1. Anything but a well-formed 6x7 four-in-a-row position with ``mark`` to move is answered by
   ``fallback.simple_move`` (on the raw board, any size).
2. A forced move (``game.forced_move``) is played at once, then the opening book's move.
3. The first move that gets further compiles the exact solver (``solver_numba``) if numba imports and
   the bank holds ``compile_min_bank``, charged to the bank; otherwise the game keeps ``solver``.
4. The move's budget (``move_budget``): a share of ``actTimeout`` and of the overage bank; the first
   move also pays for executing the file.
5. The exact solver (weak mode) gets a share of it that grows as the board fills, and its move is
   played if it proves a win or a draw; the compiled one may draw extra seconds from the bank
   (``_solver_seconds``).
6. Otherwise ``mcts.search`` until the deadline, on the previous move's subtree where it holds the
   position, and ``mcts.best_cols``.  The search runs as Python until numba has compiled it: the first
   search move starts that compile in a background thread once it has chosen its move (``compile_search``),
   off the move's clock; later steps run compiled, to the same trees.

Any exception falls back to ``simple_move``: the move is a plain ``int``, legal whenever a legal column
exists.  A missing or corrupt model is replaced by a uniform evaluator (``backends``).  The garbage
collector is paused during a move, so its pauses cannot land inside the search."""

from __future__ import annotations

import base64
import gc
import hashlib
import math
import time
from dataclasses import dataclass

import numpy as np

from connectx_az.agent import backends
from connectx_az.agent import fallback as fb
from connectx_az.engine import game, mcts, search_tree

try:
    from connectx_az.engine import book
except ImportError:
    book = None
try:
    from connectx_az.engine import solver
except ImportError:
    solver = None
try:
    from connectx_az.engine import solver_numba
except ImportError:
    solver_numba = None


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """How the agent spends its time.

    Clock (``move_budget``): ``safe_share * actTimeout - safety_seconds`` plus ``overage_share * (bank -
    overage_reserve) / moves_left`` (at most ``max_extra_seconds``; ``moves_left``: own moves still to
    play, at least ``min_moves_left``).  ``solver_schedule``/``compiled_schedule``: ``(max empty cells,
    share of the remaining budget)`` for the pure-Python/compiled solver, tightest first.
    ``limit_blas_threads``: one BLAS thread (tiny matmuls only lose from threads on a shared core).

    The compiled solver (``compile_solver``) may add ``min(solver_extra_seconds, solver_bank_share *
    (bank - solver_bank_reserve))`` seconds from the bank when its node rate covers ``solver_nodes``:
    ``(max empty cells, median nodes of a weak proof of Pons' Begin positions)``, tightest first, none
    beyond the last.  ``compile_search``: compile the search in a background thread after the first search move
    (``mcts.compile_search_in_background``).  The measurements behind these numbers: ``docs/agent.md``, *The
    figures behind the constants*."""

    backends: tuple[str, ...] = backends.BACKENDS
    limit_blas_threads: bool = True
    use_book: bool = True
    search: search_tree.SearchConfig = search_tree.SearchConfig(num_simulations=1_000_000_000, num_parallel=8)
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
    compile_solver: bool = True
    compile_min_bank: float = 20.0
    compile_search: bool = True
    compiled_schedule: tuple[tuple[int, float], ...] = ((24, 0.9), (32, 0.75), (38, 0.6), (40, 0.3))
    compiled_table_size: int = 1 << 18
    solver_extra_seconds: float = 4.0
    solver_bank_share: float = 0.25
    solver_bank_reserve: float = 20.0
    solver_nodes: tuple[tuple[int, int], ...] = ((28, 7_000), (29, 10_000), (30, 37_000), (31, 50_000),
                                                 (32, 69_000), (33, 277_000), (34, 912_000), (35, 1_682_000),
                                                 (36, 6_369_000), (37, 14_249_000), (38, 30_114_000),
                                                 (39, 104_372_000))

    def __post_init__(self) -> None:
        if not 0 < self.safe_share <= 1 or self.safety_seconds < 0:
            raise ValueError("safe_share must be in (0, 1] and safety_seconds >= 0")
        if not 0 <= self.overage_share <= 1 or self.overage_reserve < 0 or self.min_moves_left < 1:
            raise ValueError("overage_share must be in [0, 1], overage_reserve >= 0, min_moves_left >= 1")
        if self.default_act_timeout <= 0 or self.tree_capacity < 2:
            raise ValueError("default_act_timeout must be > 0 and tree_capacity >= 2")
        if any(not 0 <= share <= 1 for _, share in (*self.solver_schedule, *self.compiled_schedule)):
            raise ValueError("solver shares must be in [0, 1]")
        if min(self.compile_min_bank, self.solver_extra_seconds, self.solver_bank_reserve) < 0 \
                or not 0 <= self.solver_bank_share <= 1:
            raise ValueError("compile_min_bank, solver_extra_seconds and solver_bank_reserve must be >= 0, "
                             "solver_bank_share in [0, 1]")
        if any(b not in backends.KNOWN_BACKENDS for b in self.backends):
            raise ValueError(f"unknown backend in {self.backends}")


#: the shipped settings
CONFIG = AgentConfig()


def move_budget(act_timeout: float, overage: float, num_empty: int, config: AgentConfig | None = None) -> float:
    """Seconds the move may take from the start of the call (see ``AgentConfig``); the bank never runs dry."""
    config = config or CONFIG
    base = max(0.05, config.safe_share * act_timeout - config.safety_seconds)
    moves_left = max(config.min_moves_left, (num_empty + 1) // 2)
    extra = config.overage_share * max(0.0, overage - config.overage_reserve) / moves_left
    return base + min(extra, config.max_extra_seconds)


class Agent:
    """One process's agent: its settings, the embedded model, and what persists between moves.

    ``model_b64``/``model_sha256``: the ONNX model; ``book_b64``: the opening book file (``""``: none);
    ``preload_seconds``: the time spent executing the submission file before the first call.  Between
    moves it keeps the ``evaluator``, the book, the search ``tree`` and ``last`` searched move, and the
    ``solver`` (``solver_kind``: ``"numba"``, ``"python"``, ``"none"``, ``""`` before the first search);
    ``last_error`` and ``info`` say what the last move did.  Call it as Kaggle calls an agent."""

    def __init__(self, config: AgentConfig = CONFIG, *, model_b64: str = "", model_sha256: str = "",
                 book_b64: str = "", preload_seconds: float = 0.0) -> None:
        self.config = config
        self.model_b64 = model_b64
        self.model_sha256 = model_sha256
        self.book_b64 = book_b64
        self.book = None
        self.book_error = ""
        self.book_seconds = 0.0
        self._book_tried = False
        self.preload_seconds = preload_seconds
        self.evaluator = None
        self.backend = ""
        self.load_error = ""
        self.load_seconds = 0.0
        self.num_calls = 0
        self.tree: search_tree.Tree | None = None
        self.last: tuple[int, int, int] | None = None  # (position, mask, col) of our last searched move
        self.solver = None
        self.solver_kind = ""
        self.compile_seconds = 0.0
        self.nodes_per_second = 0.0  # nodes the last search added per second (0: not measured yet)
        self._rate_compiled = False  # whether that search ran compiled
        self.last_error = ""
        self.info: dict[str, object] = {}

    def load_model(self):
        """The evaluator, built on first use (``backends.load_model``); records ``backend`` and ``load_error``."""
        if self.evaluator is not None:
            return self.evaluator
        start = time.perf_counter()
        self.evaluator, self.backend, self.load_error = backends.load_model(
            self.model_b64, self.model_sha256, self.config.backends, limit_blas=self.config.limit_blas_threads)
        gc.collect()  # once, now, rather than inside a later search
        self.load_seconds = time.perf_counter() - start
        return self.evaluator

    def load_book(self):
        """The decoded book (``book.Book``), decoded on the first call; ``None`` without one or if it fails
        (``book_error`` says why)."""
        if self._book_tried:
            return self.book
        self._book_tried = True
        if not (self.book_b64.strip() and self.config.use_book):
            return None
        start = time.perf_counter()
        try:
            if book is None:
                raise ImportError("the book module is not available")
            self.book = book.decode(base64.b64decode(self.book_b64))
        except Exception as exc:  # a damaged book is left out, never the move
            self.book, self.book_error = None, f"{type(exc).__name__}: {exc}"
        self.book_seconds = time.perf_counter() - start
        return self.book

    def _book_move(self, position: int, mask: int) -> int | None:
        """The book's column for the position, or ``None`` (not in the book, no book, or a lookup that failed)."""
        opening = self.load_book()
        if opening is None:
            return None
        try:
            col = opening.move(position, mask)
        except Exception as exc:
            self.book, self.book_error = None, f"lookup: {type(exc).__name__}: {exc}"
            return None
        return None if col is None or not game.is_legal(mask, col) else int(col)

    def _tree_for(self, position: int, mask: int) -> tuple[search_tree.Tree, bool]:
        """``(tree, reused)``: the previous tree moved down our last move and the reply, or a new tree."""
        config = self.config
        tree, last = self.tree, self.last
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
        return search_tree.Tree(np.array([position], np.uint64), np.array([mask], np.uint64),
                         capacity=config.tree_capacity), False

    def _reserve_nodes(self, tree: search_tree.Tree, deadline: float) -> None:
        """Grow the tree now for the nodes the coming search will add, by the last search's rate, twice over (eight
        times where the search has become compiled since): growing copies every array, which inside the search
        could overrun the deadline; here it only shortens the search."""
        seconds = max(0.0, deadline - time.perf_counter())
        # a rate measured before the compiled search took over (and while its compile took CPU) is no guide
        margin = 2.0 if self._rate_compiled == mcts.is_compiled() else 8.0
        tree.ensure_capacity(int(margin * self.nodes_per_second * seconds))

    def _ensure_solver(self, overage: float) -> float:
        """Make the game's solver on the first call that needs one; returns the seconds spent compiling.  A kernel
        compiled earlier in the process costs nothing; otherwise numba compiles it if ``compile_solver`` and the bank
        holds ``compile_min_bank``.  Any failure means the pure-Python solver."""
        if self.solver is not None or self.solver_kind:
            return 0.0
        config, start, kernel = self.config, time.perf_counter(), None
        if solver_numba is not None and config.compile_solver:
            try:
                kernel = solver_numba.cached_kernel()
                if kernel is None and overage >= config.compile_min_bank:
                    kernel = solver_numba.compile_kernel()
                if kernel is not None:
                    self.solver = solver_numba.CompiledSolver(kernel, table_size=config.compiled_table_size)
                    self.solver_kind = "numba"
            except Exception as exc:  # never let the compile cost the move
                self.last_error = f"solver compile: {type(exc).__name__}: {exc}"
        if self.solver is None and solver is not None:
            self.solver = solver.Solver(table_size=config.solver_table_size)
            self.solver_kind = "python"
        self.solver_kind = self.solver_kind or "none"
        self.compile_seconds = time.perf_counter() - start
        return self.compile_seconds

    def _solver_seconds(self, num_empty: int, left: float, overage: float) -> tuple[float, float]:
        """``(seconds of the move's own budget, seconds more from the bank)`` for the exact solver.  ``left`` is the
        move's unspent budget, ``overage`` the bank, which adds time only when the compiled solver's node rate in
        this game covers the typical proof at ``num_empty`` (``solver_nodes``)."""
        config = self.config
        compiled = self.solver_kind == "numba"
        schedule = config.compiled_schedule if compiled else config.solver_schedule
        own = left * next((s for limit, s in schedule if num_empty <= limit), 0.0)
        if own <= 0:
            return 0.0, 0.0
        extra = min(config.solver_extra_seconds,
                    config.solver_bank_share * max(0.0, overage - config.solver_bank_reserve))
        typical = next((n for limit, n in config.solver_nodes if num_empty <= limit), None)
        rate = float(getattr(self.solver, "rate", 0.0)) if compiled else 0.0
        if extra <= 0 or typical is None or rate * (own + extra) < typical:
            extra = 0.0
        return own, extra

    def _solve(self, position: int, mask: int, num_empty: int, deadline: float,
               overage: float) -> tuple[int | None, float]:
        """``(column, extra)``: a column proven (weak mode) to win or to hold the draw, else None (a lost position
        too, for the search), and the seconds from the bank the solver was allowed beyond ``deadline`` (the search
        gets them if it fails)."""
        now = time.perf_counter()
        if self.solver is None or deadline - now < 0.02:
            return None, 0.0
        own, extra = self._solver_seconds(num_empty, deadline - now, overage)
        if own <= 0:
            return None, 0.0
        self.info["solver_seconds"] = own + extra
        found = self.solver.best_move(position, mask, weak=True, deadline=now + own + extra)
        if found is None or found[1] < 0:
            return None, extra
        col = int(found[0])
        return (col if game.is_legal(mask, col) else None), extra

    def choose_move(self, observation, configuration) -> int:
        """The move for one call; may raise on malformed input (``__call__`` catches everything)."""
        start = time.perf_counter()
        config = self.config
        first_call = self.num_calls == 0
        self.num_calls += 1
        info: dict[str, object] = {"source": "", "backend": self.backend, "simulations": 0}
        self.info = info
        board = fb.read_field(observation, "board")
        mark = fb.as_int(fb.read_field(observation, "mark"), 0)
        rows = fb.as_int(fb.read_field(configuration, "rows"), game.ROWS)
        columns = fb.as_int(fb.read_field(configuration, "columns"), game.COLS)
        inarow = fb.as_int(fb.read_field(configuration, "inarow"), game.INAROW)
        cells = fb.board_cells(board)

        def simple(source: str) -> int:
            info["source"] = source
            return fb.simple_move(board, columns, inarow, mark)

        if (rows, columns, inarow) != (game.ROWS, game.COLS, game.INAROW) or cells is None \
                or len(cells) != game.NUM_CELLS:
            return simple("simple: not a 6x7 four-in-a-row board")
        try:
            position, mask = game.from_kaggle(cells, mark)
        except ValueError as exc:
            return simple(f"simple: {exc}")
        if game.outcome(position, mask) is not None:
            return simple("simple: the game is over")
        forced = game.forced_move(position, mask)
        if forced is not None:
            info["source"] = forced[1]
            return forced[0]
        col = self._book_move(position, mask)
        if col is not None:
            info["source"] = "book"
            return col

        act_timeout = fb.as_float(fb.read_field(configuration, "actTimeout"), math.nan)
        if not act_timeout > 0:
            act_timeout = fb.as_float(fb.read_field(configuration, "timeout"), config.default_act_timeout)
        act_timeout = act_timeout if act_timeout > 0 else config.default_act_timeout
        overage = max(0.0, fb.as_float(fb.read_field(observation, "remainingOverageTime"), 0.0))
        num_empty = game.NUM_CELLS - game.num_stones(mask)
        # A compile (once a game) is charged to the bank: the move proper then budgets what is left.
        compiled = self._ensure_solver(overage)
        overage = max(0.0, overage - compiled)
        budget = move_budget(act_timeout, overage, num_empty, config)
        if first_call:
            budget -= min(max(self.preload_seconds, 0.0), budget)
        deadline = start + compiled + budget
        info["budget"] = compiled + budget
        info["solver"] = self.solver_kind
        if compiled > 0.01:
            info["compile_seconds"] = compiled

        evaluator = self.load_model()
        info["backend"] = self.backend
        try:
            col, extra = self._solve(position, mask, num_empty, deadline, overage)
        except Exception as exc:  # the solver is an optimisation; never let it lose the move
            self.last_error = f"solver: {type(exc).__name__}: {exc}"
            col, extra = None, 0.0
        info["budget"] = float(info["budget"]) + extra  # the bank's extra for the solver, spent or not
        if col is not None:
            info["source"] = "solver"
            return col
        deadline += extra

        return self._search_move(position, mask, evaluator, deadline, info)

    def _search_move(self, position: int, mask: int, evaluator, deadline: float, info: dict) -> int:
        """The search's move until ``deadline``, on the tree kept from the last move where it holds the position."""
        tree, info["reused_tree"] = self._tree_for(position, mask)
        self._reserve_nodes(tree, deadline)
        capacity, num_nodes, search_start = tree.capacity, int(tree.num_nodes[0]), time.perf_counter()
        info["simulations"] = mcts.search(tree, evaluator, self.config.search, deadline=deadline)
        search_seconds = time.perf_counter() - search_start
        if search_seconds > 0.01:
            self.nodes_per_second = (int(tree.num_nodes[0]) - num_nodes) / search_seconds
            self._rate_compiled = mcts.is_compiled()
        info["tree_grew"] = tree.capacity != capacity
        root_visits = int(tree.root_visits()[0].sum())
        if root_visits == 0 and np.isnan(tree.root_proven()[0]):
            # No time for a single simulation (a slow first move): trust the prior, centre first.
            prior = tree.prior[0, tree.root[0]] - 1e-6 * np.abs(np.arange(game.COLS) - game.COLS // 2)
            col = int(np.argmax(np.where(game.legal_mask(mask), prior, -np.inf)))
        else:
            col = int(mcts.best_cols(tree)[0])
        self.tree, self.last = tree, (position, mask, col)
        info["source"] = "search"
        info["root_visits"] = root_visits
        info["search"] = "numba" if mcts.is_compiled() else "python"
        if self.config.compile_search and info["search"] == "python":
            try:  # after the move is chosen: the compile runs while the opponent thinks
                info["search_compile_started"] = mcts.compile_search_in_background()
            except Exception as exc:  # never let the compile cost the move
                self.last_error = f"search compile: {type(exc).__name__}: {exc}"
        return col

    def __call__(self, observation, configuration) -> int:
        """Kaggle's agent call: a legal column as a plain ``int``, whatever it is given."""
        start = time.perf_counter()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            try:
                move = self.choose_move(observation, configuration)
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                move = None
            board = fb.read_field(observation, "board")
            columns = fb.as_int(fb.read_field(configuration, "columns"), game.COLS)
            if not fb.is_legal_move(move, board, columns):
                if move is not None:
                    self.last_error = f"illegal move {move!r} replaced"
                move = fb.simple_move(board, columns, fb.as_int(fb.read_field(configuration, "inarow"), game.INAROW),
                                      fb.as_int(fb.read_field(observation, "mark"), 0))
            self.info["seconds"] = time.perf_counter() - start
            return int(move)
        except Exception:
            return game.COLS // 2
        finally:
            if gc_was_enabled:
                gc.enable()


def from_model_bytes(data: bytes | None, config: AgentConfig = CONFIG, *, book_data: bytes | None = None) -> Agent:
    """A fresh ``Agent`` with ``data`` (ONNX bytes) and ``book_data`` (a book file's bytes) embedded as the builder
    would; ``None``: no model, no book."""
    book_b64 = "" if book_data is None else base64.b64encode(bytes(book_data)).decode("ascii")
    if data is None:
        return Agent(config, book_b64=book_b64)
    return Agent(config, model_b64=base64.b64encode(bytes(data)).decode("ascii"),
                 model_sha256=hashlib.sha256(bytes(data)).hexdigest(), book_b64=book_b64)
