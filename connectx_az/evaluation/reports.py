"""The shapes and tables of the evaluation commands' reports: what ``cli`` prints, as lines and JSON cells.

``eval pons --json`` writes one object ``{mode: {set: cell}}``: a mode is ``policy``, ``mcts<N>``, ``value``,
``value_children`` or a submission's label (``submission@2s``, ``NAME@2s+30s/kaggle``); a cell is ``grade_cell`` of
one set's grade, ``{"n", "mistake_rate", "strict_rate", "mistakes"}`` (for the value head ``{"n", "accuracy",
"mistakes"}``; ``mistakes`` are the positions' indexes in the set), with ``control``, ``only_this_right`` and
``only_control_right`` added where a mode is paired with a control.  ``eval show`` and ``eval paired`` read those
files back (``load_graded``, ``graded_mode``).  Each ``*_table`` returns the lines to print; nothing here prints."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from connectx_az.engine import game
from connectx_az.errors import UserError
from connectx_az.evaluation import grading
from connectx_az.testsets import pons


class ReportError(UserError, ValueError):
    """A saved report that cannot be read as one (one line: which file, and what to give instead)."""


def file_labels(paths: list[str]) -> list[str]:
    """Short names of files for table rows: their stems where those differ, else the paths, numbered
    (``#1``, ``#2``...) where a path is given twice."""
    stems = [Path(p).stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    if len(set(paths)) == len(paths):
        return list(paths)
    return [f"{p}#{k}" for k, p in enumerate(paths, 1)]


def clock_label(act_timeout: float, bank: float, runtime: str) -> str:
    """The clock part of a submission's mode, e.g. ``@2s``, ``@2s+30s/kaggle`` (numpy, the default, unnamed)."""
    label = f"@{act_timeout:g}s" + (f"+{bank:g}s" if bank else "")
    return label + ("" if runtime == "numpy" else f"/{runtime}")


# --------------------------------------------------------------------------- eval pons, show, paired


def grade_cell(result: Any) -> dict[str, Any]:
    """One set's grade as JSON: ``n`` and the mistake rates, or the value head's ``accuracy``."""
    if hasattr(result, "accuracy"):  # mistakes: which positions the value head classed wrong
        return {"n": result.num_positions, "accuracy": round(result.accuracy, 4),
                "mistakes": [i for i, right in enumerate(result.is_correct) if not right]}
    return {"n": result.num_positions, "mistake_rate": round(result.mistake_rate, 4),
            "strict_rate": round(result.strict_rate, 4),
            "mistakes": [i for i, wrong in enumerate(result.is_mistake) if wrong]}


def is_grade(cell: Any) -> bool:
    """Whether ``cell`` is one set's cell of ``eval pons --json`` (a mode's grade, or the value head's)."""
    return isinstance(cell, dict) and ("accuracy" in cell or {"mistake_rate", "strict_rate"} <= cell.keys())


def cell_text(cell: dict[str, Any]) -> str:
    """A cell as the table shows it, 16 characters: ``mistake% / strict%``, or the value head's accuracy."""
    if "accuracy" in cell:
        return f"{100 * cell['accuracy']:>15.1f}%"
    return f"{100 * cell['mistake_rate']:>8.1f}%/{100 * cell['strict_rate']:>5.1f}%"


def pons_rows(table: dict[str, list[Any]], control: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
    """``eval pons --json``: mode -> set -> ``grade_cell``; the modes of ``control`` paired with its grades."""
    rows = {mode: {r.name: grade_cell(r) for r in results} for mode, results in table.items()}
    for mode, results in control.items():
        for mine, theirs in zip(table[mode], results, strict=True):
            paired = grading.compare(mine, theirs)
            rows[mode][mine.name].update(control=grade_cell(theirs), only_this_right=paired.only_first,
                                         only_control_right=paired.only_second)
    return rows


def grades_table(rows: dict[str, dict], compare: str | None) -> list[str]:
    """The table of ``eval pons`` (rows: mode -> set -> JSON cell); sets a mode lacks show as ``-``."""
    names = [n for n in pons.SETS if any(n in row for row in rows.values())]
    width = max([22, *(len(mode) + 2 for mode in rows)])
    lines = [f"{'mode':<{width}}" + "".join(f"{n:>16}" for n in names)]
    for mode, row in rows.items():
        lines.append(f"{mode:<{width}}" + "".join(cell_text(row[n]) if n in row else f"{'-':>16}" for n in names))
        if compare and all("control" in row[n] for n in names if n in row):
            lines.append(f"{'  control':<{width}}" + "".join(cell_text(row[n]["control"]) for n in names))
            paired = (f"+{row[n]['only_this_right']} -{row[n]['only_control_right']}" for n in names)
            lines.append(f"{'  paired':<{width}}" + "".join(f"{cell:>16}" for cell in paired))
    lines.append("cells: mistake rate / strict mistake rate, or for value* the value head's W/D/L accuracy "
                 f"(v > {grading.WDL_THRESHOLD:.3g} win, v < -{grading.WDL_THRESHOLD:.3g} loss, else draw; "
                 "side to move)")
    if any(mode.split(":")[-1] == "value" for mode in rows):
        lines.append("value: the set's positions (Begin-Hard: all of the raw file, results only); value_children: "
                     "the positions after each legal move of the annotated positions (moves that end the game left "
                     "out)")
    if compare:
        lines.append(f"control: {compare}; paired: +positions this model gets right that the control misses, "
                     "-the reverse")
    for mode, row in rows.items():
        if mode.split(":")[-1] in ("policy", "value", "value_children") or "@" in mode:
            lines.append(f"positions per set ({mode}): " + ", ".join(f"{n} {v['n']}" for n, v in row.items()))
    return lines


def _read_json(path: str | Path) -> Any:
    """The JSON in ``path``; ``ReportError`` where it cannot be read."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ReportError(f"cannot read {path}: {exc}; give the output of `eval pons --json`") from None


def load_graded(path: str | Path) -> dict[str, dict]:
    """The object of an ``eval pons --json`` output; ``ReportError`` for an unreadable file or another shape."""
    table = _read_json(path)
    if not isinstance(table, dict) or not all(isinstance(row, dict) and all(map(is_grade, row.values()))
                                              for row in table.values()):
        raise ReportError(f"{path} is not the output of `eval pons --json`")
    return table


def join_graded(tables: list[tuple[str, dict[str, dict]]]) -> dict[str, dict]:
    """``eval show``'s rows from ``(file stem, table)`` pairs, mode -> set -> cell.  Files join mode by mode (e.g.
    the same submission graded on different sets); where two grade the same mode on the same set (two models), every
    row is labelled ``STEM:MODE`` instead."""
    cells = [(mode, name) for _, table in tables for mode, row in table.items() for name in row]
    labelled = len(cells) != len(set(cells))
    rows: dict[str, dict] = {}
    for stem, table in tables:
        for mode, row in table.items():
            rows.setdefault(f"{stem}:{mode}" if labelled else mode, {}).update(row)
    return rows


def graded_mode(spec: str) -> tuple[str, dict]:
    """``(label, rows)`` for ``FILE[:MODE]``: one mode of an ``eval pons --json`` output (MODE may be left out
    when the file holds one).  ``ReportError`` where the file or the mode is not there."""
    path, _, mode = spec.partition(":") if not Path(spec).is_file() else (spec, "", "")
    table = _read_json(path)
    if not isinstance(table, dict) or not table:
        raise ReportError(f"{path} is not the output of `eval pons --json`")
    if not mode:
        if len(table) != 1:
            raise ReportError(f"{path} holds the modes {', '.join(table)}; pick one as {path}:MODE")
        mode = next(iter(table))
    if mode not in table:
        raise ReportError(f"{path} has no mode {mode!r}; it holds {', '.join(table)}")
    return f"{path}:{mode}", table[mode]


def paired_table(label_a: str, label_b: str, counts: dict[str, dict[str, int]]) -> list[str]:
    """The table of ``eval paired`` (``grading.paired``'s counts per set), with the sets summed where there are
    several, and each row's one-sided sign tests (``grading.sign_test``) that a is worse and that b is."""
    from connectx_az.evaluation import grading

    rows = dict(counts)
    if len(counts) > 1:
        rows["the sets"] = {key: sum(c[key] for c in counts.values()) for key in ("n", "only_a", "only_b", "both")}
    lines = [f"a: {label_a}", f"b: {label_b}",
             f"{'set':<15}{'n':>6}{'a wrong':>9}{'b wrong':>9}{'only a':>8}{'only b':>8}{'both':>6}"
             f"{'p a worse':>11}{'p b worse':>11}"]
    for name, c in rows.items():
        lines.append(f"{name:<15}{c['n']:>6}{c['only_a'] + c['both']:>9}{c['only_b'] + c['both']:>9}"
                     f"{c['only_a']:>8}{c['only_b']:>8}{c['both']:>6}"
                     f"{grading.sign_test(c['only_a'], c['only_b']):>11.3g}"
                     f"{grading.sign_test(c['only_b'], c['only_a']):>11.3g}")
    lines.append("only a: positions a answers with a mistake and b does not (and the reverse for only b); p: the "
                 "one-sided sign test on them")
    return lines


# --------------------------------------------------------------------------- eval value


def value_json(graded: dict[str, list[Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``eval value --json``: label -> set -> the calibration's fields, NaN (a set without decisive results)
    written as null."""
    def plain(c: Any) -> dict[str, Any]:
        d = dataclasses.asdict(c)
        d["mean_value"] = [None if math.isnan(m) else m for m in d["mean_value"]]
        d["sign_accuracy"] = None if math.isnan(d["sign_accuracy"]) else d["sign_accuracy"]
        return d

    return {label: {c.name: plain(c) for c in cals} for label, cals in graded.items()}


def value_table(graded: dict[str, list[Any]], bands: Sequence[float]) -> list[str]:
    """The table of ``eval value``: a row per model and set (``grading.value_calibrations``)."""
    width = max(len(label) for label in graded) + 2
    heads = "".join(f"{'±' + format(b, '.3g'):>8}" for b in bands)
    lines = [f"{'model':<{width}}{'set':<15}{'n':>6}{heads}{'sign':>8}   mean value (true L/D/W)   "
             f"true L, D, W read as L/D/W at ±{grading.WDL_THRESHOLD:.3g}"]
    for label, cals in graded.items():
        for c in cals:
            accs = "".join(f"{100 * a:>7.1f}%" for _, a in c.band_accuracy)
            means = " / ".join("-" if math.isnan(m) else f"{m:+.2f}" for m in c.mean_value)  # NaN: no such result
            sign = f"{'-':>8}" if math.isnan(c.sign_accuracy) else f"{100 * c.sign_accuracy:>7.1f}%"
            confusion = ", ".join("/".join(str(k) for k in row) for row in c.confusion)
            lines.append(f"{label:<{width}}{c.name:<15}{c.num_positions:>6}{accs}{sign}   {means:<26}{confusion}")
    lines.append("±b: W/D/L accuracy reading v > b as a win, v < -b as a loss, else a draw (side to move; "
                 f"±{grading.WDL_THRESHOLD:.3g} is `eval pons`'s value row); sign: the value's sign right on the "
                 "decisive positions")
    return lines


# --------------------------------------------------------------------------- validate, play


def validate_table(rows: list[dict[str, Any]]) -> list[str]:
    """The lines of ``validate``'s table, a row per opponent and seat (``kaggle_io.SeatResult.as_dict`` rows)."""
    backends = [",".join(r["backends"]) or "-" for r in rows]
    solvers = [",".join(r["solvers"]) or "-" for r in rows]
    bw, sw = (max(map(len, [head, *cells])) + 2 for head, cells in (("backend", backends), ("solver", solvers)))
    lines = [f"{'opponent':<10}{'seat':>5}{'win':>6}{'draw':>6}{'loss':>6}{'mean s':>9}{'max s':>8}"
             f"{'bank s':>8}{'first s':>9}  {'backend':<{bw}}{'solver':<{sw}}other statuses"]
    for r, backend, solver in zip(rows, backends, solvers, strict=True):
        lines.append(f"{r['opponent']:<10}{r['seat']:>5}{r['wins']:>6}{r['draws']:>6}{r['losses']:>6}"
                     f"{r['mean_move_s']:>9.3f}{r['max_move_s']:>8.3f}{r['max_bank_used_s']:>8.2f}"
                     f"{r['max_first_move_bank_s']:>9.2f}  {backend:<{bw}}{solver:<{sw}}"
                     f"{','.join(r['bad_statuses']) or '-'}")
    return lines


def validate_report(rows: list[dict[str, Any]], *, runtime: str, replays: str | Path) -> list[str]:
    """``validate``'s table and the lines that explain it."""
    return [*validate_table(rows),
            "seat 1 moves first; times are per move of the submission (one core); bank s: most of the 60 s "
            f"overage bank used in one game, first s: by a game's first move; runtime {runtime}; backend and "
            "solver: what the file's agent loaded (none needed: the book, forced moves or the solver chose every "
            "move, as they often do against random)",
            f"replays: {replays}"]


def render_board(board: Sequence[int]) -> str:
    """Kaggle's 42-cell board as text, top row first: ``X`` player 1, ``O`` player 2, columns numbered 1-7."""
    symbols = {0: ".", 1: "X", 2: "O"}
    rows = [" ".join(symbols[board[row * game.COLS + col]] for col in range(game.COLS))
            for row in range(game.ROWS)]
    return "\n".join([*rows, " ".join(str(col + 1) for col in range(game.COLS))])
