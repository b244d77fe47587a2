"""Build the opening book: the positions the agent can meet in its first plies, each proven by the solver.

**The tree**, from the empty board, with the agent as the first player (its nodes at even plies) and as the
second (odd plies): at an agent's node one move, the forced one where the agent's own checks decide before the book
(``game.forced_move``), else the book's move, chosen by ``prove_entry`` from the position alone, never from a
network, so that one book serves every model; at an opponent's node every legal reply.  Nodes are mirror-canonical
(``book.canonical_key``).  ``all_plies`` adds every position up to that ply (those of random openings).

**The rule** (``prove_entry``), from a cleared table: weak-solve the position.  Won or lost, ask for the exact
score within ``exact_factor`` times the nodes the weak proof took (at least ``exact_min_nodes``): the move that wins
fastest, or loses slowest, first in the solver's root order (``solver._root_order``).  A draw, or an exact score not
found within that budget: the first move in that order that keeps the result (lost: the first move).  The budgets
count nodes, so a build is reproducible whatever the machine's speed.

``build`` proves the tree ply by ply, shallowest first, into a ``book_journal.State`` (a rerun proves only what is
missing), so that the book written after each ply (``write_book``) is complete to it, and a later run with a larger
``depth`` extends the same state file."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from connectx_az import files
from connectx_az.engine import book, game, solver
from connectx_az.tools import labeller
from connectx_az.tools.book_journal import NO_SCORE, Entry, State

# --------------------------------------------------------------------------- the tree


def canonical(position: int, mask: int) -> tuple[int, int, int]:
    """``(key, position, mask)``: the position in its mirror-canonical orientation, and its key."""
    key, mirrored = book.canonical_key(position, mask)
    if mirrored:
        position, mask = book.mirror_bits(position), book.mirror_bits(mask)
    return key, position, mask


Node = tuple[int, int]  # (position, mask), canonical orientation


def position_of_key(key: int) -> Node:
    """``(position, mask)`` of a key ``position + mask``: in each 7-bit column of height ``h`` the key is
    ``2^h - 1`` plus the side to move's stones there, so its bit length gives ``h``."""
    position = mask = 0
    for col in range(game.COLS):
        shift = col * (game.ROWS + 1)
        bits = (key >> shift) & ((1 << (game.ROWS + 1)) - 1)
        column_mask = (1 << ((bits + 1).bit_length() - 1)) - 1
        position |= (bits - column_mask) << shift
        mask |= column_mask << shift
    return position, mask


def _replies(position: int, mask: int) -> Iterator[Node]:
    """The canonical positions after each legal move that does not end the game."""
    for col in game.legal_cols(mask):
        child = game.play(position, mask, col)
        if game.outcome(*child) is None:
            yield canonical(*child)[1:]


def next_agent_nodes(nodes: dict[int, Node], move_of: Callable[[int, int, int], int]) -> dict[int, Node]:
    """The agent's nodes two plies below ``nodes`` (key -> canonical position): its move at each
    (``move_of(key, position, mask)``), then every reply of the opponent that does not end the game."""
    out: dict[int, Node] = {}
    for key, (position, mask) in nodes.items():
        child = game.play(position, mask, move_of(key, position, mask))
        if game.outcome(*child) is not None:
            continue
        for grand in _replies(*child):
            out.setdefault(grand[0] + grand[1], grand)
    return out


def all_positions(nodes: dict[int, Node]) -> dict[int, Node]:
    """Every position one ply below ``nodes`` that the game reaches unfinished (key -> canonical position)."""
    out: dict[int, Node] = {}
    for position, mask in nodes.values():
        for child in _replies(position, mask):
            out.setdefault(child[0] + child[1], child)
    return out


def needs_entry(position: int, mask: int) -> bool:
    """True where the agent asks its book: the game goes on and no move is forced."""
    return game.outcome(position, mask) is None and game.forced_move(position, mask) is None


# --------------------------------------------------------------------------- proving one entry


@dataclass
class Provers:
    """The solvers of a build: ``deep`` for the positions of at most ``deep_plies`` plies, ``fast`` for the rest.

    The first plies' proofs take billions of nodes, which a large table (``deep``, made on first use by
    ``make_deep``) cuts; later positions take millions, which a table that fits the cache (``fast``) proves faster."""

    fast: solver.Solver
    deep_plies: int = -1
    make_deep: Callable[[], solver.Solver] | None = None
    deep: solver.Solver | None = None

    def pick(self, mask: int) -> solver.Solver:
        if game.num_stones(mask) > self.deep_plies or self.make_deep is None:
            return self.fast
        if self.deep is None:
            self.deep = self.make_deep()
        return self.deep


def default_provers(*, table_bits: int = 18, deep_table_bits: int = 24, deep_plies: int = 2) -> Provers:
    """The compiled solver (``solver_numba.make_solver``; pure Python where numba is missing), a table of
    ``2^table_bits`` entries, and ``2^deep_table_bits`` for positions of at most ``deep_plies`` plies."""
    from connectx_az.engine import solver_numba

    return Provers(solver_numba.make_solver(table_size=1 << table_bits), deep_plies=deep_plies,
                   make_deep=lambda: solver_numba.make_solver(table_size=1 << deep_table_bits))


def prove_entry(provers: Provers | solver.Solver, position: int, mask: int, exact_factor: float,
                exact_min_nodes: int) -> tuple[int, int, int, int, float]:
    """``(result, score, col, nodes, cpu_seconds)`` of one position by the rule (module docstring).

    From a cleared table; ``score`` is ``NO_SCORE`` where the exact score was not sought (a draw) or not found within
    the budget.  The weak proof itself has no budget: an entry is always proven."""
    start = time.process_time()
    prover = provers.pick(mask) if isinstance(provers, Provers) else provers
    prover.clear()
    result = prover.solve(position, mask, weak=True)
    nodes = prover.nodes
    found = None
    if result != 0:
        found = prover.best_move(position, mask, max_nodes=max(exact_min_nodes, int(exact_factor * nodes)))
        nodes += prover.nodes
    if found is None:
        col, score = prover.best_move(position, mask, weak=True)[0], NO_SCORE
        nodes += prover.nodes
    else:
        col, score = found
    return result, score, col, nodes, time.process_time() - start


# --------------------------------------------------------------------------- the build


@dataclass
class Progress:
    """Where a build stands, given to ``build``'s ``on_progress`` after each proven position and at each ply's
    start: the ``ply`` being proven (of ``0..depth``), its positions ``done`` of ``total``, the CPU seconds and
    nodes of this run's proofs, and ``seconds_left``: a rough estimate for the whole build (``None`` until a
    position is proven)."""

    ply: int
    depth: int
    done: int
    total: int
    proven: int = 0
    cpu_seconds: float = 0.0
    nodes: int = 0
    seconds_left: float | None = None


@dataclass
class BuildStats:
    """What ``build`` did: positions proven by this run, their CPU seconds and nodes, the number of the agent's
    nodes at each ply (``tree``) and of positions needing an entry (``entries``), and whether it was interrupted."""

    proven: int = 0
    cpu_seconds: float = 0.0
    nodes: int = 0
    tree: dict[int, int] = field(default_factory=dict)
    entries: dict[int, int] = field(default_factory=dict)
    completed_ply: int = -1
    interrupted: bool = False


def _seconds_left(done: int, total: int, seconds: float, later: float, workers: int) -> float:
    """A rough estimate of the build's time left: this ply's positions left at its mean so far, then ``later``
    times this ply's cost for the deeper plies (``_later_plies``)."""
    mean = seconds / max(done, 1)
    return ((total - done) + later * total) * mean / workers


def _later_plies(ply: int, depth: int, all_plies: int, tree_share: float, held: set[int]) -> float:
    """What the plies after ``ply`` cost, in units of this ply's: each deeper ply about as much as this one (more
    positions, each cheaper: ``data/book/README.md``, the CPU of each ply), but ``tree_share`` (the tree's part of
    this ply) for a ply of the agent's tree only after plies of every position (``all_plies``), and nothing for a
    ply of the tree only that the journal held entries of when the build began (``held``: an earlier run's)."""
    def cost(later: int) -> float:
        if later <= all_plies:
            return 1.0
        if later in held:
            return 0.0
        return tree_share if ply <= all_plies else 1.0
    return sum(cost(later) for later in range(ply + 1, depth + 1))


def _first_nodes(root: Node) -> tuple[int, dict[int, dict[int, Node]]]:
    """``(ply of root, {ply: agent's nodes})``: the tree's first two plies, the agent to move at ``root``, then
    the opponent (every reply)."""
    key, position, mask = canonical(*root)
    if game.outcome(position, mask) is not None:
        raise ValueError("the root position is already over")
    ply = game.num_stones(mask)
    return ply, {ply: {key: (position, mask)}, ply + 1: all_positions({key: (position, mask)})}


def build(state: State, *, depth: int, all_plies: int = -1, root: Node = (0, 0),
          prover: Provers | solver.Solver | None = None,
          workers: int = 1, on_progress: Callable[[Progress], None] | None = None,
          on_ply: Callable[[int, BuildStats], None] | None = None) -> BuildStats:
    """Prove the tree's positions at plies up to ``depth`` (and every position up to ``all_plies``) into ``state``.

    The tree starts at ``root`` (default the empty board; a later position makes a book of its endings, which tests
    prove quickly); plies count the stones on the board.  Positions already in ``state`` are not proven again.
    ``prover``: a solver, or ``Provers`` (default ``default_provers()``).  ``workers`` > 1 proves that many positions
    at once, one process each (``labeller.proofs``).  ``on_ply(ply, stats)`` after each completed ply (``write_book``
    there ships a book complete to it).  A ``KeyboardInterrupt`` stops the build with what is proven kept
    (``stats.interrupted``)."""
    if depth < 0 or workers < 1:
        raise ValueError(f"depth must be >= 0 and workers >= 1, not {depth} and {workers}")
    prover = default_provers() if prover is None else prover
    stats = BuildStats()
    first, tree = _first_nodes(root)
    every = dict(tree[first])
    held = {entry.ply for entry in state.entries.values()}

    def move_of(key: int, position: int, mask: int) -> int:
        forced = game.forced_move(position, mask)
        return forced[0] if forced is not None else state.entries[key].col

    try:
        for ply in range(first, depth + 1):
            tree_nodes = tree.pop(ply)
            nodes = dict(tree_nodes)
            if ply <= all_plies:
                if ply > first:
                    every = all_positions(every)
                nodes.update(every)
            stats.tree[ply] = len(tree_nodes)
            wanted = sorted(key for key, node in nodes.items() if needs_entry(*node))
            stats.entries[ply] = len(wanted)
            todo = [key for key in wanted if key not in state.entries]
            tree_share = sum(needs_entry(*node) for node in tree_nodes.values()) / max(len(wanted), 1)
            later = _later_plies(ply, depth, all_plies, tree_share, held)
            _prove_ply(state, ply, depth, todo, nodes, prover, workers, later, stats, on_progress)
            if ply + 2 <= depth:
                tree[ply + 2] = next_agent_nodes(tree_nodes, move_of)
            stats.completed_ply = ply
            if on_ply is not None:
                on_ply(ply, stats)
    except KeyboardInterrupt:
        stats.interrupted = True
    return stats


def _prove_ply(state: State, ply: int, depth: int, todo: list[int], nodes: dict[int, Node],
               prover: Provers | solver.Solver,
               workers: int, later: float, stats: BuildStats,
               on_progress: Callable[[Progress], None] | None) -> None:
    """Prove ``todo`` (keys of ``nodes``) into ``state``, reporting each; ``later``: the deeper plies' cost in
    units of this one's (``_later_plies``)."""
    progress = Progress(ply=ply, depth=depth, done=0, total=len(todo))
    if on_progress is not None:
        on_progress(progress)
    tasks = ((key, (*nodes[key], state.exact_factor, state.exact_min_nodes)) for key in todo)
    cpu_this_ply = 0.0
    for key, (result, score, col, nodes_used, cpu) in labeller.proofs(tasks, prover, workers=workers,
                                                                    work=prove_entry):
        state.add(Entry(key, result, score, col, ply, nodes_used, cpu))
        stats.proven += 1
        stats.cpu_seconds += cpu
        stats.nodes += nodes_used
        cpu_this_ply += cpu
        progress.done += 1
        progress.proven, progress.cpu_seconds, progress.nodes = stats.proven, stats.cpu_seconds, stats.nodes
        progress.seconds_left = _seconds_left(progress.done, len(todo), cpu_this_ply, later, workers)
        if on_progress is not None:
            on_progress(progress)


def walk(lookup: Callable[[int, int], int | None], depth: int, root: Node = (0, 0)) -> Iterator[tuple[int, int, int]]:
    """``(ply, position, mask)`` of every agent's node of the tree from ``root`` to ``depth`` that needs a book
    entry (canonical orientation), following ``lookup(position, mask)`` (a column, e.g. ``book.Book.move``)
    where no move is forced; a node whose lookup gives ``None`` is yielded and not followed further."""
    first, tree = _first_nodes(root)
    for ply in range(first, depth + 1):
        nodes = tree.pop(ply)
        known: dict[int, Node] = {}
        for key, (position, mask) in nodes.items():
            if needs_entry(position, mask):
                yield ply, position, mask
                if lookup(position, mask) is None:
                    continue
            known[key] = (position, mask)
        if ply + 2 <= depth:
            def move_of(key: int, position: int, mask: int) -> int:
                forced = game.forced_move(position, mask)
                return forced[0] if forced is not None else lookup(position, mask)

            tree[ply + 2] = next_agent_nodes(known, move_of)


# --------------------------------------------------------------------------- the book file


def book_arrays(state: State, max_ply: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(keys uint64[N], info uint8[N])`` of the state's entries (those up to ``max_ply``)."""
    entries = [e for e in state.entries.values() if max_ply is None or e.ply <= max_ply]
    keys = np.array([e.key for e in entries], np.uint64)
    info = np.array([book.make_info(e.col, e.result) for e in entries], np.uint8)
    return keys, info


def write_book(state: State, path: str | Path, max_ply: int | None = None) -> tuple[Path, int, int]:
    """Write the book of the state's entries (up to ``max_ply``) atomically; ``(path, entries, bytes)``."""
    data = book.encode(*book_arrays(state, max_ply))
    files.atomic_write_bytes(path, data)
    return Path(path), len(book.decode(data)), len(data)


def read_book(path: str | Path) -> book.Book:
    """The book at ``path``; ``book.BookError`` (one line, naming the file) if it is missing or unusable."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise book.BookError(f"cannot read book {path}: {exc.strerror}") from None
    try:
        return book.decode(data)
    except book.BookError as exc:
        raise book.BookError(f"{path}: {exc}") from None


# --------------------------------------------------------------------------- beyond the book

#: nodes a second of the pure-Python and the compiled solver on one core (``bench solver``; docs/results.md, *Speed*)
PYTHON_RATE = 140_000
COMPILED_RATE = 15_000_000


def agent_solver_nodes(num_empty: int, kind: str, *, bank: float = 55.0) -> int:
    """Nodes the agent's solver may spend on a position with ``num_empty`` empty cells: its seconds there
    (``Agent``'s own rule, ``AgentConfig``'s schedules, Kaggle's 2 s a move, ``bank`` seconds of overage)
    at ``PYTHON_RATE`` (``kind`` ``"python"``) or ``COMPILED_RATE`` (``"numba"``)."""
    from types import SimpleNamespace

    from connectx_az.agent import template

    if kind not in ("python", "numba"):
        raise ValueError(f"kind must be python or numba, not {kind!r}")
    rate = PYTHON_RATE if kind == "python" else COMPILED_RATE
    agent = template.Agent()
    agent.solver_kind, agent.solver = kind, SimpleNamespace(rate=rate)
    own, extra = agent._solver_seconds(num_empty, template.move_budget(2.0, bank, num_empty), bank)
    return int((own + extra) * rate)


def frontier(state: State, depth: int, *, root: Node = (0, 0)) -> dict[int, list[Node]]:
    """The agent's nodes just beyond a book to ``depth`` (plies ``depth + 1`` and ``depth + 2``) that need a move:
    where the agent's solver, not the book, has to find it."""
    def lookup(position: int, mask: int) -> int | None:
        entry = state.entries.get(position + mask)
        return None if entry is None else entry.col

    out: dict[int, list[Node]] = {depth + 1: [], depth + 2: []}
    for ply, position, mask in walk(lookup, depth + 2, root):
        if ply > depth:
            out[ply].append((position, mask))
    return out


def share_proven(nodes: list[Node], prover: solver.Solver, node_budget: Callable[[int], int]) -> tuple[int, int]:
    """``(proven, tried)``: how many of ``nodes`` ``prover`` solves (``best_move``, weak) from a cleared table
    within ``node_budget(num_empty)`` nodes."""
    proven = 0
    for position, mask in nodes:
        prover.clear()
        num_empty = game.NUM_CELLS - game.num_stones(mask)
        budget = node_budget(num_empty)
        if budget > 0 and prover.best_move(position, mask, weak=True, max_nodes=budget) is not None:
            proven += 1
    return proven, len(nodes)


@dataclass(frozen=True)
class FrontierShare:
    """How many of ``tried`` sampled positions of the ``num_positions`` at ``ply`` the ``kind`` solver proved
    within ``node_budget`` nodes (the agent's budget there)."""

    ply: int
    num_positions: int
    kind: str
    proven: int
    tried: int
    node_budget: int

    def describe(self) -> str:
        """One line, as ``connectx-az book --frontier`` prints it."""
        return (f"ply {self.ply} ({self.num_positions:,} positions): {self.kind} solver proves {self.proven} of "
                f"{self.tried} sampled ({self.proven / max(self.tried, 1):.0%}) within the agent's budget "
                f"({self.node_budget:,} nodes)")


def frontier_shares(state: State, depth: int, *, limit: int, seed: int = 0, root: Node = (0, 0),
                    kinds: tuple[str, ...] = ("python", "numba")) -> list[FrontierShare]:
    """For each ply of ``frontier`` and each solver kind, the share of ``limit`` sampled positions proven within
    the agent's budget (``agent_solver_nodes``)."""
    from connectx_az.engine import solver_numba

    rng = np.random.default_rng(seed)
    out = []
    for ply, nodes in frontier(state, depth, root=root).items():
        sample = [nodes[i] for i in sorted(rng.choice(len(nodes), min(limit, len(nodes)), replace=False))]
        for kind in kinds:
            prover = solver.Solver() if kind == "python" else solver_numba.make_solver()
            budget = agent_solver_nodes(game.NUM_CELLS - ply, kind)
            proven, tried = share_proven(sample, prover, lambda empty, kind=kind: agent_solver_nodes(empty, kind))
            out.append(FrontierShare(ply, len(nodes), kind, proven, tried, budget))
    return out
