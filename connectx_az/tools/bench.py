"""What the speed benchmarks share (``connectx-az bench ...``): the machine's line, a timed rate, the table printed.

One module a benchmark: ``bench_selfplay``, ``bench_agent``, ``bench_solver``; the
programs they run in fresh interpreters are the modules of ``bench_probes/`` (``probe_source``)."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any


def cpu_name() -> str:
    """The CPU's model as the system names it ("AMD EPYC", "Intel(R) Xeon(R) ..."): rates differ between machines
    of one architecture, so a figure names the model it was measured on."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    return {"machine": platform.machine(), "cpu": cpu_name(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}


def rate(fn: Any, per_call: int, seconds: float) -> float:
    """Calls of ``fn`` per second times ``per_call``, after one warm-up call."""
    fn()
    n = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        n += 1
    return n * per_call / elapsed


def probe_source(name: str) -> str:
    """The source of a probe program (``bench_probes/probe_NAME.py``), run in a fresh interpreter."""
    return (Path(__file__).parent / "bench_probes" / f"probe_{name}.py").read_text()


def format_result(what: str, result: dict[str, Any]) -> str:
    lines = [f"{what} benchmark ({result.get('date')}, {result.get('machine')}, {result.get('cpu')}, "
             f"{result.get('cpus')} cpus)"]
    for key, value in result.items():
        if key in ("date", "machine", "cpu", "cpus", "python"):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        if isinstance(value, list):
            lines.append(f"  {key}:")
            lines.extend("    " + ", ".join(f"{k} {v}" for k, v in row.items()) for row in value)
            continue
        lines.append(f"  {key:<24}{value}")
    return "\n".join(lines)
