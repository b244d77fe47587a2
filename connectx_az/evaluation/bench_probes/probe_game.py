# ruff: noqa: F821
# exec_submission and kaggle_dicts come from kaggle_io.sandbox_prelude(), which bench.py puts before this.
"""Runs in a fresh interpreter that imitates Kaggle's sandbox (the blocked packages are passed in): the built
submission's own Agent, with the backend order given, plays the first player's moves of a scripted game under
Kaggle's clock (the bank pays each move's excess over actTimeout), loading its model inside the first move as a real
game does.  Each move waits for a line on stdin and answers with one JSON line, so the parent can make two runtimes
take turns. argv: submission, comma-separated backends, moves string (1-based columns), actTimeout, bank.
"""
import dataclasses
import json
import sys
import time

submission, order, line, act_timeout, bank = sys.argv[1:6]
act_timeout, bank = float(act_timeout), float(bank)
sys.stdin.readline()  # executing the file belongs to the first move's turn
agent, env = exec_submission(submission)
template, game = env["_template"], env["_MODULES"]["game"]
config = dataclasses.replace(template.CONFIG, backends=tuple(order.split(",")))
player = template.Agent(config, model_b64=env["MODEL_B64"], model_sha256=env["MODEL_SHA256"],
                        preload_seconds=env["_agent"].preload_seconds)
position, mask = 0, 0
for ply, char in enumerate(line):
    if ply % 2 == 0:
        if ply:
            sys.stdin.readline()
        obs, cfg = kaggle_dicts(game.to_kaggle(position, mask, 1), 1, ply, bank, act_timeout)
        start = time.perf_counter()
        col = player(obs, cfg)
        seconds = time.perf_counter() - start
        bank -= max(0.0, seconds - act_timeout)
        print(json.dumps({"seconds": seconds, "simulations": int(player.info.get("simulations", 0)),
                          "source": player.info.get("source"), "bank": bank}), flush=True)
    position, mask = game.play(position, mask, int(char) - 1)
with open("/proc/self/status") as status:
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"backend": player.backend, "load_error": player.load_error,
                  "load_seconds": player.load_seconds, "peak_rss_mb": peak_kb / 1024}), flush=True)
