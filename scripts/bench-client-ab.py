#!/usr/bin/env python3
"""The two halves of scripts/bench-client-ab.sh.

  bench-client-ab.py oha SERVEGATE CELL STREAMS
      oha's CPU per token against `servegate sim --stamp-tokens`, paced as
      the cell is (paced: TTFT and ITL 10 ms, 128 tokens; unpaced: none,
      256 tokens, PACK to a write), the simulator on the last CPU and oha
      on the first: one line `oha CELL STREAMS SECONDS_PER_TOKEN TOKENS`.
  bench-client-ab.py summary DIR REF NEW
      medians of the bench-client tables in DIR (CELL.ref.N, CELL.new.N)
      and of its oha lines, with new/ref ratios.

The tables are read as bench-client prints them (every version since its
columns were set), so any commit can be the reference (the unpaced cell's
`--pack` since 212a76e).
"""

import json
import os
import re
import resource
import statistics
import subprocess
import sys
from pathlib import Path

UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
# What oha is run against, per cell: the simulator's pace (TTFT and ITL,
# s), tokens per answer, tokens per write — as bench-client-ab.sh's cells.
CELLS = {"paced": (0.010, 128, 1), "unpaced": (0.0, 256, 16)}


def secs(word):
    """A duration as bench-client shows it (`874us`, `1.86ms`), or None."""
    m = re.fullmatch(r"([0-9.]+)(ns|us|µs|ms|s)", word)
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def rows(text):
    """(threads, ITL, streams) -> figures, for each row of the main table."""
    out = {}
    for line in text.splitlines():
        w = line.split()
        if len(w) < 18 or not w[0].isdigit() or w[4] == "/":
            continue
        out[(int(w[0]), w[1], int(w[2]))] = {
            "tok_s": float(w[3]),
            "cpu": secs(w[4]),
            "ttft_err": secs(w[10]),
            "itl_err": secs(w[14]),
            "errors": int(w[16]),
            "verdict": w[17],
        }
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def shown(v, unit=1e-6, fmt="{:.2f}"):
    return "-" if v is None else fmt.format(v / unit)


def ratio(new, ref):
    return "-" if not new or not ref else f"{new / ref:.2f}×"


def oha(servegate, cell, streams):
    pace, tokens_each, pack = CELLS[cell]
    last = max(os.sched_getaffinity(0))
    ms = f"{pace * 1000:g}ms"
    sim = subprocess.Popen(
        [servegate, "sim", "--port", "0", "--ttft", ms, "--itl", ms,
         "--capacity", "1000000", "--stamp-tokens", "--pack-tokens", str(pack)],
        stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {last}),
    )
    try:
        url = next(w for w in sim.stdout.readline().split() if w.startswith("http://"))
        # Every request completes (-n, not -z): CPU is counted for whole
        # answers only. About five seconds of paced streams; unpaced, some
        # 5M tokens (about as long here).
        if pace:
            n = streams * max(1, round(5 / (pace * (tokens_each + 1))))
        else:
            n = max(streams, 5_000_000 // tokens_each)
        body = json.dumps({
            "model": "bench", "max_tokens": tokens_each, "stream": True, "ignore_eos": True,
            "temperature": 0, "messages": [{"role": "user", "content": "Tell me a story."}],
        })
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            ["oha", "--no-tui", "--output-format", "json", "-n", str(n), "-c", str(streams),
             "-m", "POST", "-H", "Content-Type: application/json", "-d", body,
             f"{url}/v1/chat/completions"],
            capture_output=True, text=True, check=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {0}),
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        sim.kill()
        sim.wait()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ok = json.loads(done.stdout).get("statusCodeDistribution", {}).get("200", 0)
    tokens = ok * tokens_each
    print(f"oha {cell} {streams} {cpu / tokens if tokens else 'nan'} {tokens}")


def summary(folder, ref, new):
    folder = Path(folder)
    runs = {}
    for f in sorted(folder.glob("*.*.*")):
        cell, who, _ = f.name.split(".")
        for key, figures in rows(f.read_text()).items():
            runs.setdefault((cell, key), {}).setdefault(who, []).append(figures)
    floor = {}
    if (folder / "oha").exists():
        for line in (folder / "oha").read_text().splitlines():
            _, cell, streams, cpu, _ = line.split()
            if cpu != "nan":
                floor.setdefault((cell, int(streams)), []).append(float(cpu))
    n = max((len(v) for r in runs.values() for v in r.values()), default=0)
    print(f"bench-client A/B: new = {new}, ref = {ref}; {n} runs each, alternating; medians")
    print("CPU: the whole process per token received; |err| p99: against the simulator's stamps")
    print()
    head = ("cell", "threads", "ITL", "streams", "CPU/token ref", "new", "new/ref",
            "TTFT |err| p99 ref", "new", "ITL |err| p99 ref", "new", "verdicts ref", "new")
    print("{:<8} {:>7} {:>7} {:>7} {:>13} {:>8} {:>7} {:>18} {:>9} {:>17} {:>9}  {:<12} {}".format(*head))
    for (cell, (threads, itl, streams)), by in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1][1], kv[0][1][2])):
        med = {who: {k: median([r[k] for r in rs]) for k in ("cpu", "ttft_err", "itl_err")}
               for who, rs in by.items()}
        verdicts = {who: ",".join(r["verdict"] for r in rs) for who, rs in by.items()}
        r, w = med.get("ref", {}), med.get("new", {})
        print("{:<8} {:>7} {:>7} {:>7} {:>11}µs {:>6}µs {:>7} {:>16}µs {:>7}µs {:>15}µs {:>7}µs  {:<12} {}".format(
            cell, threads, itl, streams,
            shown(r.get("cpu")), shown(w.get("cpu")), ratio(w.get("cpu"), r.get("cpu")),
            shown(r.get("ttft_err"), fmt="{:.0f}"), shown(w.get("ttft_err"), fmt="{:.0f}"),
            shown(r.get("itl_err"), fmt="{:.0f}"), shown(w.get("itl_err"), fmt="{:.0f}"),
            verdicts.get("ref", "-"), verdicts.get("new", "-")))
    if floor:
        print()
        print("the floor: oha (parses no tokens), the same stamped simulator paced as the cell")
        print("{:<8} {:>7} {:>13} {:>14}".format("cell", "streams", "CPU/token", "new/oha"))
        for (cell, streams), cpus in sorted(floor.items()):
            new_cpu = next((median([r["cpu"] for r in by.get("new", [])])
                            for (c, (_, itl, s)), by in runs.items()
                            if c == cell and s == streams), None)
            print("{:<8} {:>7} {:>11}µs {:>14}".format(
                cell, streams, shown(median(cpus)), ratio(new_cpu, median(cpus))))


if __name__ == "__main__":
    if sys.argv[1] == "oha":
        oha(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "summary":
        summary(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
