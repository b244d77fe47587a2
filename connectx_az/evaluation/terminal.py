"""A game against the agent in the terminal (``connectx-az play``): the board drawn, the person's moves read.

``play`` takes what it reads and where it writes as arguments (``input`` and ``print`` by default), so a test
drives it with a script.  The agent is any player in Kaggle's shape (``players.Player``)."""

from __future__ import annotations

from collections.abc import Callable

from connectx_az.engine import game
from connectx_az.evaluation import kaggle_io, reports
from connectx_az.evaluation.players import Player


def play(agent: Player, *, human_first: bool, read: Callable[[str], str] = input,
         write: Callable[[str], None] = print) -> None:
    """One game of a person (``read`` gives their moves: a column 1-7, or q) against ``agent``.

    Returns when the game ends, the person quits or the input runs out (``EOFError``); a column that
    is not playable is asked again."""
    human = 0 if human_first else 1  # seat: 0 moves first
    position, mask = game.initial()
    write(f"you are {'X' if human == 0 else 'O'} ({'first' if human == 0 else 'second'}); "
          "type a column 1-7, or q to quit")
    while True:
        observation, configuration = kaggle_io.kaggle_inputs(position, mask)
        write(f"\n{reports.render_board(observation['board'])}")
        over = game.outcome(position, mask)
        if over is not None:
            mover_is_human = (game.num_stones(mask) - 1) % 2 == human
            write("draw" if over == 0 else "you win" if mover_is_human else "the agent wins")
            return
        if game.num_stones(mask) % 2 == human:
            col = _read_move(mask, read, write)
            if col is None:
                return
        else:
            col = int(agent(observation, configuration))
            write(f"agent plays {col + 1}")
        position, mask = game.play(position, mask, col)


def _read_move(mask: int, read: Callable[[str], str], write: Callable[[str], None]) -> int | None:
    """The person's next playable column (0-based), or ``None`` when they quit or the input ends."""
    while True:
        try:
            text = read("your move (1-7, q quits): ").strip().lower()
        except EOFError:
            write("\nno more input: quitting")
            return None
        if text in ("q", "quit"):
            write("bye")
            return None
        if text.isdigit() and 1 <= int(text) <= game.COLS and game.is_legal(mask, int(text) - 1):
            return int(text) - 1
        write(f"{text!r} is not a playable column: type 1-7 (a column that is not full) or q")
