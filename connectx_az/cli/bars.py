"""Progress on stderr: a tqdm bar where tqdm is installed, else a plain line now and then."""

from __future__ import annotations

import sys
import time
from typing import Any


class NoBar:
    """A bar that counts (``n``) and shows nothing."""

    def __init__(self) -> None:
        self.n = 0

    def __enter__(self) -> NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        self.n += n


class LineBar(NoBar):
    """What ``progress_bar`` gives without tqdm: a plain line on stderr at the first step and then every
    ``interval`` seconds, with the count, the time spent and, where the total is known (and ``eta``), the time
    left."""

    interval = 30.0

    def __init__(self, total: int, unit: str, desc: str, eta: bool = True) -> None:
        super().__init__()
        self.total, self.unit, self.desc, self.eta = total, unit, desc, eta
        self._start = time.monotonic()
        self._shown: float | None = None

    def update(self, n: int) -> None:
        super().update(n)
        now = time.monotonic()
        if self._shown is not None and now - self._shown < self.interval:
            return
        self._shown = now
        spent = now - self._start
        count = f"{self.n:,}/{self.total:,}" if self.total else f"{self.n:,}"
        left = (f", about {duration(spent / self.n * (self.total - self.n))} left"
                if self.eta and self.total and 0 < self.n < self.total else "")
        print(f"{self.desc}: {count} {self.unit}, {duration(spent)}{left}", file=sys.stderr, flush=True)


def duration(seconds: float) -> str:
    """``seconds`` in words a person reads at a glance: 45 s, 12 min, 3.4 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def progress_bar(total: int, unit: str, desc: str | None = None, *, eta: bool = True) -> Any:
    """A tqdm bar on stderr where tqdm is installed, else a plain line now and then (``LineBar``; a build-only
    set-up lacks tqdm).  ``eta=False``: no time left, where the steps differ too much in length for the rate of
    the first ones to say it (validate's games against random and against negamax)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return LineBar(total, unit, desc or unit, eta)
    extra = {} if eta else {"bar_format": "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}]"}
    return tqdm(total=total, unit=unit[:-1] if unit.endswith("s") else unit, desc=desc or unit, leave=False,
                **extra)


def write(line: str) -> None:
    """Print ``line`` on stdout above any tqdm bar that is showing (plainly where tqdm is not installed)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        print(line, flush=True)
        return
    tqdm.write(line)
