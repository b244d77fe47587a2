"""``connectx-az compare``: the release rule on synthetic grade files (worse, level, better; positions that
differ), the card's strength read from the grades, and a smoke compare of two small models end to end."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from connectx_az.cli import main as cli_main
from connectx_az.evaluation import grading
from connectx_az.testsets import pons
from connectx_az.tools import compare, compare_steps
from connectx_az.training import config


def test_the_sign_test_is_the_one_sided_exact_binomial() -> None:
    assert grading.sign_test(0, 0) == 1.0
    assert grading.sign_test(3, 0) == 1 / 8
    assert grading.sign_test(9, 1) == 11 / 1024
    assert grading.sign_test(0, 5) == 1.0
    # the release issue's two counts: noise, far from 0.05
    assert round(grading.sign_test(11, 7), 2) == 0.24 and round(grading.sign_test(7, 4), 2) == 0.27


def _cell(n: int, mistakes: list[int]) -> dict:
    return {"n": n, "mistake_rate": len(mistakes) / n, "strict_rate": 0.0, "mistakes": mistakes}


def write_grades(folder: Path, *, runtime: str = "numpy", candidate: dict[str, list[int]] | None = None,
                 shipped: dict[str, list[int]] | None = None, n: int = 20, lost: int = 0, value_losses: int = 0,
                 network_candidate: dict[str, list[int]] | None = None) -> None:
    """Grade files as a compare's children write them: every set with the given mistakes (none by default)."""
    candidate, shipped = candidate or {}, shipped or {}
    folder.mkdir(parents=True, exist_ok=True)
    for name in pons.SETS:
        rows = {"candidate@2s": {name: _cell(n, candidate.get(name, []))},
                "shipped@2s": {name: _cell(n, shipped.get(name, []))}}
        (folder / f"pons_{runtime}_{name}.json").write_text(json.dumps(rows))
    results = [{"opponent": "negamax", "wins": 20 - lost, "draws": 0, "losses": lost, "bad_statuses": [],
                "max_move_s": 1.5}]
    (folder / f"negamax_{runtime}.json").write_text(json.dumps({"results": results}))
    summary = {"games": 20, "value_losses": value_losses, "file_moves": 300, "unconverted": 0, "won_positions": 12,
               "failures": [], "slowest_move_s": 1.9}
    (folder / f"duel_{runtime}.json").write_text(json.dumps({"summary": summary}))
    network_candidate = network_candidate or {}
    network = {mode: {name: {**_cell(n, network_candidate.get(name, []) if mode == "mcts800" else []),
                             "control": _cell(n, []),
                             "only_this_right": 0, "only_control_right": len(network_candidate.get(name, []))
                             if mode == "mcts800" else 0} for name in pons.SETS}
               for mode in ("policy", "mcts800")}
    (folder / "network.json").write_text(json.dumps(network))


def test_level_grades_ship(tmp_path) -> None:
    write_grades(tmp_path, candidate={"Begin-Hard": [1, 2, 3]}, shipped={"Begin-Hard": [1, 2, 3]})
    result = compare.verdict(tmp_path, runtimes=("numpy",))
    assert result["ships"] and result["fails"] == [] and result["missing"] == []
    hard = result["runtimes"]["numpy"]["sets"]["Begin-Hard"]
    assert (hard["candidate"], hard["shipped"], hard["only_candidate"], hard["only_shipped"], hard["p"]) == \
        (3, 3, 0, 0, 1.0)


def test_a_few_more_mistakes_are_noise_and_many_more_are_worse(tmp_path) -> None:
    # 4 against 1 discordant positions: p = 6/32, noise; the candidate ships
    write_grades(tmp_path / "noise", candidate={"Begin-Hard": [1, 2, 3, 4]}, shipped={"Begin-Hard": [5]})
    noise = compare.verdict(tmp_path / "noise", runtimes=("numpy",))
    assert noise["ships"] and noise["runtimes"]["numpy"]["sets"]["Begin-Hard"]["p"] == 6 / 32
    # 9 against 0: p = 1/512 < 0.05, worse; the verdict names the set and its p-value
    write_grades(tmp_path / "worse", candidate={"Begin-Medium": list(range(9))})
    worse = compare.verdict(tmp_path / "worse", runtimes=("numpy",))
    assert not worse["ships"]
    [line] = worse["fails"]
    assert line.startswith("numpy Begin-Medium: worse (9 mistakes against 0, paired 9 / 0, p = 0.00195")
    text = "\n".join(compare.format_verdict(worse, sizes=compare.FULL, candidate="c.onnx", shipped="s.onnx"))
    assert "verdict: keep the shipped file; numpy Begin-Medium: worse" in text
    # better: the reverse counts ship
    write_grades(tmp_path / "better", shipped={"Begin-Medium": list(range(9))})
    assert compare.verdict(tmp_path / "better", runtimes=("numpy",))["ships"]


def test_a_lost_game_a_value_losing_move_or_a_worse_network_fails(tmp_path) -> None:
    write_grades(tmp_path / "lost", lost=1)
    assert compare.verdict(tmp_path / "lost", runtimes=("numpy",))["fails"] == [
        "numpy negamax: 19 of 20 won, 0 timeouts or errors"]
    write_grades(tmp_path / "duel", value_losses=1)
    assert compare.verdict(tmp_path / "duel", runtimes=("numpy",))["fails"] == [
        "numpy duel: 1 value-losing moves, 0 timeouts or errors"]
    write_grades(tmp_path / "net", network_candidate={"Middle-Medium": list(range(6))})
    [line] = compare.verdict(tmp_path / "net", runtimes=("numpy",))["fails"]
    assert line.startswith("network alone Middle-Medium: worse at MCTS 800 (6 against 0, paired 6 / 0")


def test_a_drawn_game_against_negamax_fails_the_rule_that_every_game_is_won(tmp_path) -> None:
    write_grades(tmp_path)
    results = [{"opponent": "negamax", "seat": 1, "wins": 10, "draws": 0, "losses": 0, "bad_statuses": [],
                "max_move_s": 1.5},
               {"opponent": "negamax", "seat": 2, "wins": 9, "draws": 1, "losses": 0, "bad_statuses": [],
                "max_move_s": 1.5}]
    (tmp_path / "negamax_numpy.json").write_text(json.dumps({"results": results}))
    result = compare.verdict(tmp_path, runtimes=("numpy",))
    assert not result["ships"]
    assert result["fails"] == ["numpy negamax: 19 of 20 won, 0 timeouts or errors"]
    assert result["runtimes"]["numpy"]["negamax"]["games"] == 20


def test_grades_on_different_positions_are_refused_and_missing_ones_are_named(tmp_path) -> None:
    write_grades(tmp_path)
    rows = json.loads((tmp_path / "pons_numpy_Begin-Hard.json").read_text())
    rows["shipped@2s"]["Begin-Hard"]["n"] = 19
    (tmp_path / "pons_numpy_Begin-Hard.json").write_text(json.dumps(rows))
    with pytest.raises(compare.CompareError, match="different positions"):
        compare.verdict(tmp_path, runtimes=("numpy",))
    (tmp_path / "pons_numpy_Begin-Hard.json").unlink()
    (tmp_path / "network.json").unlink()
    result = compare.verdict(tmp_path, runtimes=("numpy",))
    assert result["missing"] == ["numpy Begin-Hard", "network alone"]
    assert "not graded: numpy Begin-Hard, network alone" in compare.format_verdict(
        result, sizes=compare.QUICK, candidate="c", shipped="s")


def test_the_card_strength_is_read_from_the_grades(tmp_path) -> None:
    for runtime in compare.RUNTIMES:
        write_grades(tmp_path, runtime=runtime, candidate={"Begin-Hard": [0, 1] if runtime == "numpy" else [],
                                                           "End-Easy": [4]})
    (tmp_path / "compare.json").write_text(json.dumps({"candidate": "/runs/c.onnx", "against": "/pkg/s.onnx",
                                                       "sha256": ["ab" * 32, "cd" * 32],
                                                       "sizes": {**compare.FULL.__dict__},
                                                       "runtimes": list(compare.RUNTIMES)}))
    network = json.loads((tmp_path / "network.json").read_text())
    network["value"] = {"Begin-Hard": {"n": 1000, "accuracy": 0.7123, "mistakes": []}}
    (tmp_path / "network.json").write_text(json.dumps(network))
    card = compare.strength_card(tmp_path)
    assert card["headline"] == ("Kaggle clock, with the book: Pons Begin-Hard 0.0% (kaggle) / 10.0% (numpy) mistakes, "
                                "other sets <= 5.0%")
    assert card["command"] == "connectx-az compare c.onnx (against s.onnx, sha256 cdcdcdcdcdcd)"
    assert card["network"].startswith("MCTS 800: Begin-Hard 0.0%, Begin-Medium 0.0%")  # `card` says "network alone"
    assert card["network"].endswith("value head W/D/L on Begin-Hard's 1,000 positions 71.2%")
    # against the shipped model, which the candidate replaces once it ships: named as the one shipped before it
    manifest = json.loads((tmp_path / "compare.json").read_text())
    (tmp_path / "compare.json").write_text(json.dumps({**manifest, "against": str(compare.SHIPPED_MODEL)}))
    assert compare.strength_card(tmp_path)["command"] == ("connectx-az compare c.onnx (against the model shipped "
                                                          "before it (default.onnx), sha256 cdcdcdcdcdcd)")


def test_a_smoke_compare_of_two_small_models_grades_resumes_and_writes_the_card(
        tmp_path, small_onnx, wide_onnx, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("kaggle_environments")
    out, card, candidate = tmp_path / "cmp", tmp_path / "card.json", tmp_path / "candidate.onnx"
    candidate.write_bytes(small_onnx.read_bytes())
    args = ["compare", str(candidate), "--against", str(wide_onnx), "--out", str(out), "--runtimes", "numpy",
            "--limit", "1", "--games", "1", "--act-timeout", "0.1", "--duel-opening", "4444333",
            "--duel-cache", str(tmp_path / "duel.sqlite")]
    code = cli_main.main([*args, "--card", str(card)])
    text = capsys.readouterr().out
    assert code == (0 if "verdict: the candidate may ship" in text else 1)
    assert {p.name for p in out.glob("*.json")} >= {f"pons_numpy_{s}.json" for s in pons.SETS} | {
        "negamax_numpy.json", "duel_numpy.json", "network.json", "compare.json", "verdict.json"}
    assert (out / "candidate.py").is_file() and (out / "shipped.py").is_file()
    assert "numpy runtime, under the clock" in text and "network alone, MCTS 800" in text
    written = json.loads(card.read_text())
    assert written["strength"]["headline"].startswith("Kaggle clock, with the book")
    assert written["path"] == "candidate.onnx"
    assert written["sha256"] == hashlib.sha256(candidate.read_bytes()).hexdigest()
    assert "training" not in written
    # a card beside the candidate is the one taken, less the paths that mean nothing on another machine
    candidate.with_suffix(".json").write_text(json.dumps({"path": "/tmp/x/candidate.onnx", "generation": 7,
                                                          "checkpoint": "/tmp/x/run/snapshots/gen_0007.pt"}))
    assert cli_main.main([*args, "--card", str(card)]) == code
    written = json.loads(card.read_text())
    assert written["path"] == "candidate.onnx" and written["generation"] == 7 and "checkpoint" not in written
    capsys.readouterr()
    # run again: every grade is there, nothing is graded twice, the same verdict
    before = {p: p.stat().st_mtime_ns for p in out.glob("pons_*.json")}
    assert cli_main.main(args) == code
    assert {p: p.stat().st_mtime_ns for p in out.glob("pons_*.json")} == before
    # the card of a model exported from a run: --run adds how that run trained it
    run = tmp_path / "run"
    run.mkdir()
    config.save_config(config.make_config("smoke"), run)
    (run / "metrics.jsonl").write_text("".join(json.dumps(
        {"num_games": 4, "num_positions": 50, "num_evaluations": 900, "seconds": 1800}) + "\n" for _ in range(3)))
    assert cli_main.main([*args, "--card", str(card), "--run", str(run)]) == code
    written = json.loads(card.read_text())
    assert written["trained_by"] == "connectx-az train RUN --preset smoke --workers 0" and written["generation"] == 3
    assert written["training"]["hours"] == 1.5 and written["training"]["games"] == 12
    assert cli_main.main([*args, "--card", str(card), "--run", str(tmp_path)]) == 2
    assert "not a training run folder" in capsys.readouterr().err
    # another candidate in the same folder is refused in one line, nothing written; so is the same file changed
    assert cli_main.main(["compare", str(wide_onnx), "--out", str(out), "--runtimes", "numpy"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "holds another compare" in err and "\n" not in err
    candidate.write_bytes(wide_onnx.read_bytes())
    assert cli_main.main(args) == 2
    assert "(since changed)" in capsys.readouterr().err


def test_two_cores_grade_the_two_runtimes_at_once_and_the_networks_last(tmp_path, monkeypatch) -> None:
    ran: list[tuple[str, int | None]] = []

    def fake_child(step, out_dir, core, children):
        ran.append((step.name, core))
        (out_dir / step.file).write_text("{}")
        return True

    monkeypatch.setattr(compare_steps, "_run_child", fake_child)
    monkeypatch.setattr(compare_steps.extras, "is_installed", lambda module: module != "kaggle_environments")
    contender = compare.Contender(tmp_path / "c.py", tmp_path / "c.onnx", "c")
    steps = compare.plan(contender, contender, compare.QUICK)
    (tmp_path / steps[0].file).write_text("{}")  # graded before: not again
    lines: list[str] = []
    skipped = compare_steps.run_steps(steps, tmp_path, cores=[0, 1], log=lines.append)
    assert sorted(skipped) == ["kaggle negamax: skipped, kaggle_environments not installed here",  # lanes: any order
                               "numpy negamax: skipped, kaggle_environments not installed here"]
    cores = {name.split()[0]: core for name, core in ran if name != "network alone"}
    assert cores == {"kaggle": 0, "numpy": 1}
    assert ran[-1] == ("network alone", 0) and steps[0].name not in [name for name, _ in ran]
    assert len(ran) == len(steps) - 1 - 2  # all but the graded one and the two skipped
    assert lines[0] == f"1 of {len(steps)} steps graded before; {len(steps) - 1} to go"
    assert all(line.startswith("[") or "skipped" in line for line in lines[1:])


def test_the_time_left_comes_from_the_steps_timed_in_this_run_and_a_resumed_compare_counts_its_graded_steps(
        tmp_path) -> None:
    contender = compare.Contender(tmp_path / "c.py", tmp_path / "c.onnx", "c")
    steps = compare.plan(contender, contender, compare.Sizes(limit=10, games=2, network_limit=10), ["numpy"])
    assert [s.kind for s in steps] == [("numpy", "pons")] * 6 + [("numpy", "negamax"), ("numpy", "duel"),
                                                                 ("", "network")]
    now = [0.0]
    lines: list[str] = []
    progress = compare_steps._Progress(len(steps), steps[2:], lines.append, clock=lambda: now[0])
    for k, seconds in zip(range(2, 6), (20.0, 50.0, 40.0, 40.0), strict=True):  # four Pons sets, 10 positions each
        progress.starting(steps[k])
        now[0] += seconds
        progress.finished(steps[k])
    progress.starting(steps[6])
    untimed = "negamax (numpy), duel (numpy), network alone not timed yet"
    # each Pons set still to come at the seconds a position the sets so far took: 20/10, then 70/20, then 110/30
    assert lines == ["2 of 9 steps graded before; 7 to go", "[3/9] numpy Middle-Medium",
                     f"[4/9] numpy Begin-Easy, about 60 s left and {untimed}",
                     f"[5/9] numpy Begin-Medium, about 70 s left and {untimed}",
                     f"[6/9] numpy Begin-Hard, about 37 s left and {untimed}",
                     f"[7/9] numpy negamax, {untimed}"], lines


def test_a_missing_candidate_is_refused_before_anything_is_written(tmp_path) -> None:
    out = tmp_path / "cmp"
    shipped = compare.SHIPPED_MODEL
    for candidate, against in ((tmp_path / "typo.onnx", shipped), (shipped, tmp_path / "x")):
        with pytest.raises(compare.CompareError, match="not found: give an ONNX model"):
            compare.run(candidate, out, against=against)
    assert not out.exists()  # no manifest naming a file that is not there, to refuse the right file later


def test_a_verdict_that_ships_says_the_smallest_difference_its_sample_could_show(tmp_path) -> None:
    assert compare.smallest_worse() == 5  # 0.5 ** 5 = 1/32 < 0.05 <= 1/16
    for n, said in ((3, "no set of 3 positions can be: grade more (--limit) before shipping"),
                    (100, "on 100 a set that is 5% of a set, so a smaller difference can pass unseen")):
        write_grades(tmp_path / str(n), n=n)
        result = compare.verdict(tmp_path / str(n), runtimes=("numpy",))
        lines = compare.format_verdict(result, sizes=compare.Sizes(limit=n), candidate="c.onnx", shipped="s.onnx")
        assert lines[-2] == "verdict: the candidate may ship"
        assert lines[-1] == ("  a set is found worse only where the candidate alone errs on at least 5 positions; "
                             + said)


def test_a_candidate_that_cannot_be_built_leaves_no_folder(tmp_path) -> None:
    (tmp_path / "corrupt.onnx").write_bytes(b"not a model")
    out = tmp_path / "build" / "compare" / "corrupt"
    with pytest.raises(compare.CompareError, match="cannot build"):
        compare.run(tmp_path / "corrupt.onnx", out, runtimes=("numpy",))
    assert not out.exists()
    out.mkdir(parents=True)  # a folder that was there before stays
    with pytest.raises(compare.CompareError):
        compare.run(tmp_path / "corrupt.onnx", out, runtimes=("numpy",))
    assert out.is_dir()
