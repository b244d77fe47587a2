"""The offline probes' table (docs/ablations.md, ablation 13): raw policy per set, and paired against
ablation 11's arm at generation 61 as it is (only the probe wrong / only the base wrong).
weight "row": train.train_steps (finetune.py), each proven row weighs as a self-play row in the policy mean;
a number: finetune2.py, that times the proven rows' own mean added to the self-play rows' mean."""
import json
from pathlib import Path

d = Path("runs/abl13")
base = json.loads((d / "ft_base.json").read_text())
rows = [("uniform", "ft_5e-5_64"), ("uniform", "ft_5e-5_256"), ("uniform", "ft_3e-4_64"), ("uniform", "ft_3e-4_256"),
        ("any", "ft2_set_5e-5_64_w025"), ("any", "ft2_set_3e-4_256"), ("any", "ft2_set_3e-4_256_w3"),
        ("any", "ft2_set_3e-4_256_3k")]
sets = list(base["policy"])
print("| target | lr | rows a batch | steps | weight | " + " | ".join(sets) + " | value Begin-Hard |")
print("|---" * (len(sets) + 6) + "|")
print("| (none: generation 61) | | | 0 | | " + " | ".join(f"{100 * base['policy'][s]:.1f}%" for s in sets)
      + f" | {100 * base['value']['Begin-Hard']:.1f}% |")
for target, name in rows:
    r = json.loads((d / f"{name}.json").read_text())
    cells = []
    for s in sets:
        a, b = set(r["wrong"][s]), set(base["wrong"][s])
        cells.append(f"{100 * r['policy'][s]:.1f}% {len(a - b)} / {len(b - a)}")
    print(f"| {target} | {r['lr']:g} | {r['per']} | {r['steps']} | {r.get('weight', 'row')} | " + " | ".join(cells)
          + f" | {100 * r['value']['Begin-Hard']:.1f}% |")
