"""Is a candidate better than the shipped file? ``connectx-az compare``: both built with the shipped book, graded
paired on the same positions, and a verdict by the release rule (``RULE``).

Each grade is a JSON file in the output folder, written when its step ends (a killed compare resumes where it
stopped; ``compare.json`` records what is compared and at what sizes, and another compare is refused there):

``pons_RUNTIME_SET.json``  both files under the Kaggle clock on one Pons set, in turns (``eval pons --submission``)
``negamax_RUNTIME.json``   the candidate against kaggle-environments' ``negamax``, each seat (``validate``)
``duel_RUNTIME.json``      the candidate against the perfect opponent that errs 20% of the time (``duel``)
``network.json``           the two networks alone: MCTS 800, raw policy, value head (``eval pons --model --compare``)

Each step is a child ``connectx-az`` process (``compare_steps``), since the runtimes block packages for the whole
process; a step whose packages are missing here is skipped with a line saying so.  Paired counts: on each set,
``only_candidate`` positions the candidate gets wrong and the shipped file right, ``only_shipped`` the reverse."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from connectx_az import extras, files, paths
from connectx_az.evaluation import grading
from connectx_az.testsets import pons
from connectx_az.tools.compare_steps import CompareError, Step, run_steps

RUNTIMES = ("kaggle", "numpy")
#: a set counts as worse only where the one-sided sign test on its discordant positions gives p below this
ALPHA = 0.05
SIMULATIONS = 800
RULE = (f"The candidate may ship when no Pons set is worse in either runtime (worse: a one-sided exact sign test "
        f"on the positions only one file gets wrong gives p < {ALPHA:g}), every game against negamax is won, the "
        f"duel against the noisy perfect opponent has no value-losing move and no timeout or error, and the "
        f"network alone (MCTS {SIMULATIONS}) is not worse on any set by the same test.")
SHIPPED_MODEL = paths.DEFAULT_MODEL


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """How much a compare grades: ``limit`` positions a Pons set (None: all), ``games`` a seat against negamax
    and in the duel, ``network_limit`` positions a set for the networks alone, ``act_timeout`` seconds a move,
    ``duel_opening`` the moves (1-based columns) every duel game starts from ("": the empty board)."""

    limit: int | None = None
    games: int = 100
    network_limit: int | None = None
    act_timeout: float = 2.0
    duel_opening: str = ""

    @property
    def label(self) -> str:
        positions = "all positions" if self.limit is None else f"{self.limit} positions a set"
        clock = "" if self.act_timeout == 2.0 else f", {self.act_timeout:g} s a move (not Kaggle's clock)"
        opening = f", duel from {self.duel_opening}" if self.duel_opening else ""
        return f"{positions}, {self.games} game{'s' * (self.games != 1)} a seat{clock}{opening}"


FULL = Sizes()
#: a sample of each set and a few games (its time: README, *Is my model better than the shipped one?*)
QUICK = Sizes(limit=100, games=10, network_limit=200)


def smallest_worse() -> int:
    """The fewest positions only the candidate gets wrong, none the other way, that the sign test finds worse
    (5 at ``ALPHA`` 0.05): a set graded on fewer positions than this can never be found worse."""
    return next(k for k in range(1, 64) if grading.sign_test(k, 0) < ALPHA)


def paired_sets(candidate: dict[str, dict], shipped: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Per set both graded: ``n``, each file's mistakes, the discordant counts and ``p`` (``grading.sign_test``).

    ``candidate`` and ``shipped`` map a set's name to an ``eval pons --json`` cell (``n``, ``mistakes``); a set
    graded on different positions raises ``CompareError``."""
    try:
        counts = grading.paired(candidate, shipped)
    except ValueError as exc:
        raise CompareError(f"the two files were graded on different positions ({exc})") from None
    return {name: {"n": c["n"], "candidate": c["only_a"] + c["both"], "shipped": c["only_b"] + c["both"],
                   "only_candidate": c["only_a"], "only_shipped": c["only_b"],
                   "p": grading.sign_test(c["only_a"], c["only_b"])} for name, c in counts.items()}


# --------------------------------------------------------------------------- what is compared


@dataclass(frozen=True)
class Contender:
    """One side of a compare: its built file, and its ONNX model where one is known (for the network alone)."""

    submission: Path
    model: Path | None
    source: str


def prepare(source: str | Path, out_dir: Path, name: str, *, card: dict[str, Any] | None = None) -> Contender:
    """The built file of ``source`` in ``out_dir`` (``NAME.py``, with the shipped book), and its model.

    ``source``: an ONNX model, a training run folder (its checkpoint exported to ``NAME.onnx``: needs torch) or a
    built ``submission.py`` (used as it is, once its network loads: ``kaggle_io.check_network``; its embedded model
    is written to ``NAME.onnx``).  A file already built in ``out_dir`` is kept (a resumed compare)."""
    from connectx_az.tools import builder

    path = Path(source)
    submission, model = out_dir / f"{name}.py", out_dir / f"{name}.onnx"
    if path.is_dir():
        if not (path / "checkpoint.pt").is_file():
            raise CompareError(f"{path} is a folder without checkpoint.pt: give a training run folder")
        if not model.is_file():
            extras.require("torch", "onnx", needed_by="compare of a run folder (export)")
            from connectx_az.training import export
            from connectx_az.training.network import load_checkpoint

            net, data = load_checkpoint(path / "checkpoint.pt")
            report = export.export_onnx(net, model)
            card = export.checkpoint_card(report.path, net, path / "checkpoint.pt", data)
            files.atomic_write_bytes(model.with_suffix(".json"), (json.dumps(card, indent=2) + "\n").encode())
    elif path.suffix == ".py":
        from connectx_az.evaluation import kaggle_io

        try:  # a file that is not a submission, or whose network does not load, is refused before any grade
            kaggle_io.check_network(path)
        except kaggle_io.SubmissionError as exc:
            raise CompareError(str(exc)) from None
        if not model.is_file():
            try:
                files.atomic_write_bytes(model, builder.embedded_model(path))
            except builder.BuildError as exc:
                raise CompareError(str(exc)) from None
        return Contender(path, model, str(source))
    elif path.suffix == ".onnx":
        model = path
    else:
        raise CompareError(f"{path}: give an ONNX model (.onnx), a training run folder or a built submission.py")
    if not submission.is_file():
        from connectx_az import cards

        try:
            builder.build_submission(model, submission, metadata=card or cards.load(model.with_suffix(".json")))
        except (builder.BuildError, ValueError) as exc:
            raise CompareError(f"cannot build {path}: {exc}") from None
    return Contender(submission, model, str(source))


# --------------------------------------------------------------------------- the steps


def plan(candidate: Contender, shipped: Contender, sizes: Sizes, runtimes: Sequence[str] = RUNTIMES, *,
         duel_cache: str = "build/duel_cache.sqlite", replays: str = "build/compare-replays") -> list[Step]:
    """The steps of a compare, in order: per runtime the six sets, negamax and the duel; then the networks.
    ``duel_cache``: the duel referee's solved positions (shared between compares); ``replays``: the games'."""
    limit = () if sizes.limit is None else ("--limit", str(sizes.limit))
    clock = ("--act-timeout", f"{sizes.act_timeout:g}")
    steps = []
    for runtime in runtimes:
        needs = ("numba",) if runtime == "kaggle" else ()
        for name in pons.SETS:
            positions = len(pons.load_set(name, limit=sizes.limit))
            steps.append(Step(f"{runtime} {name}", f"pons_{runtime}_{name}.json",
                              ("eval", "pons", "--submission", str(candidate.submission), str(shipped.submission),
                               "--runtime", runtime, "--sets", name, *limit, *clock, "--json"), needs,
                              weight=positions * sizes.act_timeout))
        steps.append(Step(f"{runtime} negamax", f"negamax_{runtime}.json",
                          ("validate", str(candidate.submission), "--runtime", runtime, "--opponents", "negamax",
                           "--games", str(sizes.games), *(clock if sizes.act_timeout != 2.0 else ()), "--json",
                           "--replays", f"{replays}/{runtime}"),
                          (*needs, "kaggle_environments"), weight=sizes.games * sizes.act_timeout))
        steps.append(Step(f"{runtime} duel", f"duel_{runtime}.json",
                          ("duel", str(candidate.submission), "--games", str(sizes.games), "--noise", "0.2",
                           "--runtime", runtime, "--cache", duel_cache, *clock, "--json",
                           *(("--opening", sizes.duel_opening) if sizes.duel_opening else ())),
                          needs, weight=sizes.games * sizes.act_timeout))
    if candidate.model is not None and shipped.model is not None:
        limit = () if sizes.network_limit is None else ("--limit", str(sizes.network_limit))
        positions = pons.num_positions(limit=sizes.network_limit)
        steps.append(Step("network alone", "network.json",
                          ("eval", "pons", "--model", str(candidate.model), "--compare", str(shipped.model),
                           "--sims", str(SIMULATIONS), *limit, "--json"), ("onnxruntime", "onnx", "torch"),
                          weight=positions))
    return steps


# --------------------------------------------------------------------------- reading the grades and the verdict


def _read(out_dir: Path, name: str) -> dict[str, Any] | None:
    path = out_dir / name
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CompareError(f"{path} is not readable JSON ({type(exc).__name__}); delete it to grade again") from None


def _two_files(rows: dict[str, dict]) -> tuple[dict, dict]:
    """The candidate's and the shipped file's cells of an ``eval pons --submission A B --json`` object."""
    modes = [m for m in rows if "@" in m]
    if len(modes) != 2:
        raise CompareError(f"expected the grades of two files, found modes {', '.join(rows)}")
    return rows[modes[0]], rows[modes[1]]


def verdict(out_dir: Path, runtimes: Sequence[str] = RUNTIMES) -> dict[str, Any]:
    """The grades in ``out_dir`` read back, paired, and judged by ``RULE``.

    Returns ``runtimes`` (per runtime: ``sets`` as ``paired_sets`` gives them, ``negamax`` and ``duel``
    summaries, each None where not graded), ``network`` (per mode: paired sets), ``fails`` (a line each),
    ``missing`` (grades not there) and ``ships``."""
    out: dict[str, Any] = {"runtimes": {}, "fails": [], "missing": []}
    for runtime in runtimes:
        sets: dict[str, dict] = {}
        for name in pons.SETS:
            rows = _read(out_dir, f"pons_{runtime}_{name}.json")
            if rows is None:
                out["missing"].append(f"{runtime} {name}")
                continue
            sets.update(paired_sets(*_two_files(rows)))
        for name, s in sets.items():
            if s["p"] < ALPHA:
                out["fails"].append(f"{runtime} {name}: worse ({s['candidate']} mistakes against {s['shipped']}, "
                                    f"paired {s['only_candidate']} / {s['only_shipped']}, p = {s['p']:.3g})")
        negamax, duel = (_games(out_dir, f"{kind}_{runtime}.json", summary, out["missing"], f"{runtime} {kind}")
                         for kind, summary in (("negamax", _negamax), ("duel", _duel)))
        if negamax is not None and (negamax["won"] < negamax["games"] or negamax["bad"] or not negamax["games"]):
            out["fails"].append(f"{runtime} negamax: {negamax['won']} of {negamax['games']} won, "
                                f"{negamax['bad']} timeouts or errors")
        if duel is not None and (duel["value_losses"] or duel["failures"]):
            out["fails"].append(f"{runtime} duel: {duel['value_losses']} value-losing moves, "
                                f"{len(duel['failures'])} timeouts or errors")
        out["runtimes"][runtime] = {"sets": sets, "negamax": negamax, "duel": duel}
    network = _read(out_dir, "network.json")
    out["network"] = None
    if network is None:
        out["missing"].append("network alone")
    else:
        mode = f"mcts{SIMULATIONS}"
        # eval pons --compare: "this" is the candidate, the control the shipped network
        out["network"] = {m: {name: {"n": c["n"], "candidate": len(c["mistakes"]),
                                     "shipped": len(c["control"]["mistakes"]),
                                     "only_candidate": c["only_control_right"], "only_shipped": c["only_this_right"],
                                     "p": grading.sign_test(c["only_control_right"], c["only_this_right"])}
                              for name, c in cells.items()}
                          for m, cells in network.items() if m in ("policy", mode)}
        for name, s in out["network"].get(mode, {}).items():
            if s["p"] < ALPHA:
                out["fails"].append(f"network alone {name}: worse at MCTS {SIMULATIONS} ({s['candidate']} against "
                                    f"{s['shipped']}, paired {s['only_candidate']} / {s['only_shipped']}, "
                                    f"p = {s['p']:.3g})")
    out["ships"] = not out["fails"]
    return out


def _games(out_dir: Path, name: str, summary: Callable[[dict], dict], missing: list[str], label: str) -> dict | None:
    """``summary`` of the games file ``name`` in ``out_dir``, or None (and ``label`` added to ``missing``)."""
    data = _read(out_dir, name)
    if data is None:
        missing.append(label)
        return None
    return summary(data)


def _negamax(data: dict[str, Any]) -> dict[str, Any]:
    """Games won of those played against negamax, the timeouts and errors, the slowest move (``validate --json``)."""
    results = data["results"]
    return {"won": sum(r["wins"] for r in results), "games": sum(r["wins"] + r["draws"] + r["losses"] for r in results),
            "bad": sum(len(r["bad_statuses"]) for r in results),
            "slowest_s": max((r["max_move_s"] for r in results), default=0.0)}


def _duel(data: dict[str, Any]) -> dict[str, Any]:
    """The duel's figures the verdict reads (``duel --json``'s summary)."""
    return {k: data["summary"][k] for k in ("games", "value_losses", "file_moves", "unconverted", "won_positions",
                                            "failures", "slowest_move_s")}


def format_verdict(result: dict[str, Any], *, sizes: Sizes, candidate: str, shipped: str) -> list[str]:
    """The table and the verdict, as ``compare`` prints them."""
    lines = [f"compare: {candidate} (candidate) against {shipped} (shipped); {sizes.label}"]
    for runtime, r in result["runtimes"].items():
        lines.append(f"{runtime} runtime, under the clock: mistakes (candidate / shipped), paired (only the "
                     f"candidate wrong / only the shipped file wrong), p")
        lines += _set_lines(r["sets"])
        n = r["negamax"]
        if n is not None:
            lines.append(f"  negamax        {n['won']} of {n['games']} won, {n['bad']} timeouts or errors, slowest "
                         f"move {n['slowest_s']:.2f} s")
        d = r["duel"]
        if d is not None:
            lines.append(f"  duel           {d['value_losses']} value-losing moves of {d['file_moves']:,}, "
                         f"{d['unconverted']} unconverted of {d['won_positions']} won, {len(d['failures'])} timeouts "
                         f"or errors, slowest move {d['slowest_move_s']:.2f} s")
    for mode, sets in (result["network"] or {}).items():
        label = "raw policy" if mode == "policy" else f"MCTS {SIMULATIONS}"
        lines.append(f"network alone, {label}: mistakes (candidate / shipped), paired, p")
        lines += _set_lines(sets)
    if result["missing"]:
        lines.append(f"not graded: {', '.join(result['missing'])}")
    if result["ships"]:
        lines.append("verdict: the candidate may ship" + (" (on what was graded)" if result["missing"] else ""))
        sizes_graded = [s["n"] for r in result["runtimes"].values() for s in r["sets"].values()] + [
            s["n"] for sets in (result["network"] or {}).values() for s in sets.values()]
        k = smallest_worse()
        if sizes_graded:
            n = min(sizes_graded)
            lines.append(f"  a set is found worse only where the candidate alone errs on at least {k} positions; "
                         + (f"on {n} a set that is {k / n:.0%} of a set, so a smaller difference can pass unseen"
                            if n >= k else f"no set of {n} positions can be: grade more (--limit) before shipping"))
    else:
        lines.append("verdict: keep the shipped file; " + "; ".join(result["fails"]))
    return lines


def _set_lines(sets: dict[str, dict]) -> list[str]:
    return [f"  {name:<14} {s['candidate']:>4} / {s['shipped']:<4} of {s['n']:<5} paired {s['only_candidate']:>3} / "
            f"{s['only_shipped']:<3}  p {s['p']:.3f}" + ("  worse" if s["p"] < ALPHA else "")
            for name, s in sets.items()]


# --------------------------------------------------------------------------- the whole compare


def run(candidate: str | Path, out_dir: str | Path, *, against: str | Path = SHIPPED_MODEL, sizes: Sizes = FULL,
        runtimes: Sequence[str] = RUNTIMES, cores: Sequence[int] = (), duel_cache: str = "build/duel_cache.sqlite",
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Build, grade (what is not graded yet) and judge; returns ``verdict``'s result with ``skipped`` added."""
    out_dir = Path(out_dir)
    for path in map(Path, (candidate, against)):  # before the folder and its manifest: a typo leaves nothing
        if not path.exists():
            raise CompareError(f"{path} not found: give an ONNX model, a training run folder or a built "
                               "submission.py")
    manifest = {"candidate": str(Path(candidate).resolve()), "against": str(Path(against).resolve()),
                "sha256": [_sha256(candidate), _sha256(against)], "sizes": asdict(sizes), "runtimes": list(runtimes)}
    saved = _read(out_dir, "compare.json")
    if saved is not None and saved != manifest:
        changed = " (since changed)" if saved.get("candidate") == manifest["candidate"] else ""
        raise CompareError(f"{out_dir} holds another compare ({saved['candidate']}{changed} against "
                           f"{saved['against']}, {Sizes(**saved['sizes']).label}); choose another --out")
    created = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        files.atomic_write_bytes(out_dir / "compare.json", (json.dumps(manifest, indent=2) + "\n").encode())
        first = prepare(candidate, out_dir, "candidate")
        second = prepare(against, out_dir, "shipped")
    except BaseException:  # a candidate that cannot be built or loaded leaves no folder behind it
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    steps = plan(first, second, sizes, runtimes, duel_cache=duel_cache, replays=str(out_dir / "replays"))
    skipped = run_steps(steps, out_dir, cores=cores, log=log)
    result = verdict(out_dir, runtimes)
    result["skipped"] = skipped
    files.atomic_write_bytes(out_dir / "verdict.json", (json.dumps(result, indent=2) + "\n").encode())
    return result


def _sha256(source: str | Path) -> str | None:
    """The checksum of what ``source`` names (a run folder: its checkpoint), so that a changed file is not taken
    for the one graded before; None where there is nothing to read (``prepare`` says why)."""
    path = Path(source)
    path = path / "checkpoint.pt" if path.is_dir() else path
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _against_label(against: str) -> str:
    """What a card names the file a compare was against: the shipped model is named as it was then, since the
    candidate, once it ships, takes its name."""
    if Path(against).resolve() == SHIPPED_MODEL.resolve():
        return f"the model shipped before it ({SHIPPED_MODEL.name})"
    return Path(against).name


def strength_card(out_dir: str | Path) -> dict[str, str]:
    """The model card's ``strength`` of the candidate, read from a compare's grades in ``out_dir``: ``headline``
    (its file under the clock), ``network`` (the network alone) and ``command`` (the compare that measured them)."""
    out_dir = Path(out_dir)
    manifest = _read(out_dir, "compare.json")
    if manifest is None:
        raise CompareError(f"{out_dir} holds no compare (compare.json missing)")
    rates: dict[str, dict[str, float]] = {}
    for runtime in manifest["runtimes"]:
        for name in pons.SETS:
            rows = _read(out_dir, f"pons_{runtime}_{name}.json")
            if rows is None:
                raise CompareError(f"{out_dir}: {runtime} {name} not graded; finish the compare first")
            rates.setdefault(runtime, {})[name] = _two_files(rows)[0][name]["mistake_rate"]
    per_runtime = " / ".join(f"{rates[r]['Begin-Hard']:.1%} ({r})" for r in rates)
    others = max(v for r in rates.values() for n, v in r.items() if n != "Begin-Hard")
    sizes = Sizes(**manifest["sizes"])
    card = {"headline": f"Kaggle clock, with the book: Pons Begin-Hard {per_runtime} mistakes, other sets <= "
                        f"{others:.1%}" + ("" if sizes == FULL else f" ({sizes.label})"),
            "command": f"connectx-az compare {Path(manifest['candidate']).name}"
                       + (" --quick" if sizes == QUICK else "")
                       + f" (against {_against_label(manifest['against'])}, sha256 {manifest['sha256'][1][:12]})"}
    network = _read(out_dir, "network.json")
    if network is not None:
        search = network[f"mcts{SIMULATIONS}"]
        card["network"] = (f"MCTS {SIMULATIONS}: " + ", ".join(
            f"{name} {search[name]['mistake_rate']:.1%}" for name in ("Begin-Hard", "Begin-Medium", "Middle-Medium"))
            + f"; raw policy Begin-Hard {network['policy']['Begin-Hard']['mistake_rate']:.1%}; value head W/D/L on "
            f"Begin-Hard's {network['value']['Begin-Hard']['n']:,} positions "
            f"{network['value']['Begin-Hard']['accuracy']:.1%}")
    return card
