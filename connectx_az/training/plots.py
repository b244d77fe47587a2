"""Training curves from ``metrics.jsonl`` as PNG files (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from connectx_az.training.runs import read_metrics

PANELS: list[tuple[str, list[str]]] = [
    # seen / fresh: the last generation's games and the new ones, scored before the steps (train.held_out_losses)
    ("policy loss", ["policy_loss", "seen_policy_loss", "fresh_policy_loss", "solved_policy_loss"]),
    ("value loss", ["value_loss", "seen_value_loss", "fresh_value_loss", "solved_value_loss"]),
    ("policy entropy", ["policy_entropy"]),
    ("game length (plies)", ["mean_length"]),
    ("first-player win rate / draw rate", ["first_player_win_rate", "draw_rate"]),
    ("raw-policy Pons mistake rate", []),  # filled from the pons_policy/* keys present
    ("self-play evaluations per second", ["evals_per_second"]),
]


def figure(rows: list[dict[str, Any]]) -> Any:
    """A matplotlib figure with one panel per group of metrics."""
    from matplotlib.figure import Figure

    # a bare Figure needs no pyplot backend: headless, and a notebook's inline backend is left alone
    fig = Figure(figsize=(20, 8))
    axes = fig.subplots(2, 4)
    gens = [r["generation"] for r in rows]
    pons_keys = sorted({k for r in rows for k in r if k.startswith("pons_policy/")})
    for ax in axes.flat[len(PANELS):]:
        ax.set_axis_off()
    for ax, (title, keys) in zip(axes.flat, PANELS, strict=False):
        for key in keys or pons_keys:
            ys = [r.get(key) for r in rows]
            if any(y is not None for y in ys):
                ax.plot(gens, ys, label=key.removeprefix("pons_policy/"))
        ax.set_title(title)
        ax.set_xlabel("generation")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write ``training.png`` for the run; returns the paths written."""
    rows = read_metrics(run_dir)
    out = Path(out_dir) if out_dir else Path(run_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    fig = figure(rows)
    path = out / "training.png"
    fig.savefig(path, dpi=100)
    return [path]
