"""A game in the terminal (evaluation.terminal), driven by a script of answers."""

from __future__ import annotations

from connectx_az.evaluation import players, terminal


def _script(answers: list[str]):
    it = iter(answers)

    def read(prompt: str) -> str:
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    return read


def test_a_person_first_is_asked_again_after_a_bad_column_and_can_quit() -> None:
    out: list[str] = []
    terminal.play(players.alphabeta_player(1), human_first=True, read=_script(["9", "x", "4", "q"]), write=out.append)
    assert out[0].startswith("you are X (first)")
    assert sum("is not a playable column" in line for line in out) == 2
    assert any(line.startswith("agent plays ") for line in out) and out[-1] == "bye"


def test_the_agent_moves_first_and_the_game_ends_when_the_input_does() -> None:
    out: list[str] = []
    terminal.play(players.alphabeta_player(1), human_first=False, read=_script([]), write=out.append)
    assert out[0].startswith("you are O (second)") and out[2].startswith("agent plays ")
    assert out[-1] == "\nno more input: quitting"


def test_a_won_game_is_announced() -> None:
    out: list[str] = []
    # an agent that only stacks column 7 never blocks: four stones in column 1 win
    terminal.play(lambda obs, cfg: 6 if obs["board"][6] == 0 else 5, human_first=True,
                  read=_script(["1", "1", "1", "1"]), write=out.append)
    assert out[-1] == "you win"
