"""usage: cpuct.py OUT.json NAME=MODEL.onnx ...: MCTS 800 mistakes on Begin-Hard and Begin-Medium of each model at
c_puct 1, 1.5, 2 (the default) and 3: is a network's gap under search a matter of the search's constant?"""
import json
import sys
import time

from connectx_az.agent.backends import OnnxRuntimeEvaluator
from connectx_az.benchmarks import pons
from connectx_az.engine import search_tree

evaluators = {name: OnnxRuntimeEvaluator(path) for name, path in (arg.split("=", 1) for arg in sys.argv[2:])}
out = {}
for c in (1.0, 1.5, 2.0, 3.0):
    for name, ev in evaluators.items():
        t = time.time()
        r = pons.search_mistake_rates(ev, search_tree.SearchConfig(num_simulations=800, c_puct=c),
                                      sets=["Begin-Hard", "Begin-Medium"])
        out[f"{name}@{c}"] = {x.name: x.mistake_rate for x in r}
        print(name, c, {x.name: round(100 * x.mistake_rate, 1) for x in r}, f"{time.time() - t:.0f}s", flush=True)
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
