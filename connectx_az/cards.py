"""Model cards: the JSON written beside an exported model (``export.model_card``) and read by ``build``.

Facts read from the file (``path``, ``num_bytes``, ``sha256``, ``net``, ``opset``, ``ops``) and, where known:
``trained_by`` (one line), ``training`` (``generations``, ``games``, ``hours``, ...), ``provenance``
(``summary``, ``steps``) and ``strength`` (``headline``, ``command``, ``network``).  Standard library only."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from connectx_az.errors import UserError


class CardError(UserError, ValueError):
    """A model card that cannot be read."""


def load(path: str | Path) -> dict[str, Any]:
    """The card at ``path``; ``{}`` where there is none; ``CardError`` (one line) if it is not a JSON object."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        card = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CardError(f"model card {path} is not readable JSON ({type(exc).__name__})") from exc
    if not isinstance(card, dict):
        raise CardError(f"model card {path} is not a JSON object")
    return card


def mismatch(card: dict[str, Any], model: str | Path) -> str:
    """How the file ``model`` differs from what ``card`` records of it (its size, then its sha256), in words; ``""``
    where they agree or the card records neither (``OSError`` where the file cannot be read)."""
    import hashlib

    data = Path(model).read_bytes()
    size, sha256 = card.get("num_bytes"), card.get("sha256")
    if isinstance(size, int) and size != len(data):
        return f"it holds {len(data):,} bytes, the card {size:,} (cut short or replaced since it was exported)"
    actual = hashlib.sha256(data).hexdigest()
    if isinstance(sha256, str) and sha256 and sha256.lower() != actual:
        return f"its sha256 is {actual[:12]}, the card's {sha256[:12]} (changed since it was exported)"
    return ""


def _training_facts(card: dict[str, Any]) -> str:
    t = card.get("training") or {}
    facts = [f"{t['generations']:,} generations" if isinstance(t.get("generations"), int) else "",
             f"{t['games']:,} games" if isinstance(t.get("games"), int) else "",
             f"{t['hours']} h" if isinstance(t.get("hours"), int | float) else ""]
    return ", ".join(f for f in facts if f)


def _short_command(command: str, width: int) -> str:
    """``command`` where it fits in ``width``, else its words before the first ``--set`` and how many follow
    (``connectx-az card`` shows them all)."""
    head, *sets = command.split(" --set ")
    return command if len(command) <= width or not sets else f"{head} +{len(sets)} --set"


def summary_lines(card: dict[str, Any], *, model: str | Path, sha256: str, net_label: str) -> list[str]:
    """The model in at most three short lines: name, network and checksum; training; headline strength."""
    lines = [f"model: {Path(model).name}, {net_label} ResNet, sha256 {sha256[:12]}"]
    trained = "; ".join(p for p in (_short_command(str(card.get("trained_by", "")).strip(), 64),
                                    _training_facts(card)) if p)
    if trained:
        lines.append(f"trained: {trained}")
    headline = (card.get("strength") or {}).get("headline") if isinstance(card.get("strength"), dict) else None
    if headline:
        lines.append(f"strength: {headline}")
    return lines


def describe(card: dict[str, Any], *, width: int = 100, model: str | Path | None = None) -> list[str]:
    """Every field of ``card`` worth reading, as wrapped lines (``connectx-az card``); ``model``: the file it
    was read beside (the name it was exported under follows where the two differ)."""
    if not card:
        return ["(no model card: export writes one beside the model, e.g. build/model.json)"]
    out: list[str] = []

    def field(name: str, text: Any) -> None:
        out.extend(textwrap.wrap(f"{name}: {text}", width, subsequent_indent="    ") or [f"{name}:"])

    net = card.get("net") or {}
    exported = str(card.get("path", "?"))
    name = Path(model).with_suffix(".onnx").name if model is not None else exported
    field("model", f"{name} ({'' if name == exported else f'exported as {exported}; '}"
                   f"{card.get('num_bytes', 0):,} bytes, sha256 {card.get('sha256', '?')})")
    if net:
        field("network", f"{net.get('label', '?')} ResNet" + (f", {card['parameters']:,} parameters"
                                                               if isinstance(card.get("parameters"), int) else ""))
    if "trained_by" in card:  # without the pointer to this very command that `build`'s line may carry
        field("trained by", str(card["trained_by"]).replace(" (`connectx-az card`)", ""))
    if _training_facts(card):
        field("training", _training_facts(card))
    provenance = card.get("provenance") or {}
    if provenance.get("summary"):
        field("provenance", provenance["summary"])
    for i, step in enumerate(provenance.get("steps") or [], 1):
        out.extend(textwrap.wrap(f"({i}) {step}", width, initial_indent="  ", subsequent_indent="      "))
    strength = card.get("strength") or {}
    for key in ("headline", "network", "command"):
        if strength.get(key):
            field({"headline": "strength", "network": "network alone", "command": "measured by"}[key],
                  strength[key])
    return out
