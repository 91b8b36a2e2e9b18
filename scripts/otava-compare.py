#!/usr/bin/env python3
"""Writes fixtures/history/otava.json: seeded synthetic series of one figure
night after night, with the changes of level planted in them and the ones
Apache Otava finds, for tests that hold servegate's detector
(`src/history/changepoint.rs`) beside it (`tests/cli/history.rs`).

The series are drawn here, once, and kept in the fixture, so both tools
read the same numbers. Otava runs as its documentation sets it up: its
`compute_change_points` (E-Divisive means in windows of 50 points, then its
merge of weak change points), at its default significance 0.001, with the
permutation detector's seed fixed.

    python3 -m venv /tmp/otava && /tmp/otava/bin/pip install apache-otava==0.8.0
    /tmp/otava/bin/python scripts/otava-compare.py > fixtures/history/otava.json

Groups (level 100, Gaussian noise as a share of it):
- `planted`: eight series, seven with one to three changes each: among
  them an excursion that comes back and a 3% step six and four nights
  before the end;
- `no_change`: 50 series of 40 nights at 1% noise, nothing planted;
- `step_4pct`: 50 series of 40 nights at 2% noise, a 4% step at night 20.
"""

import json
import random
import sys
from importlib.metadata import version

from otava.analysis import compute_change_points


def series(rng, n, noise, steps):
    """`n` nights around 100 with `noise` (a share), each (night, share)
    of `steps` moving the level from that night on."""
    level, out = 100.0, []
    steps = dict(steps)
    for night in range(n):
        if night in steps:
            level *= 1.0 + steps[night]
        out.append(round(level * (1.0 + rng.gauss(0.0, noise)), 4))
    return out


def main():
    rng = random.Random(20261206)
    planted = [
        ("step_down_10pct", 40, 0.02, [(20, -0.10)]),
        ("step_up_6pct", 50, 0.01, [(25, 0.06)]),
        ("two_steps_down", 60, 0.01, [(20, -0.06), (40, -0.06)]),
        ("excursion_back", 60, 0.01, [(25, 0.08), (35, -0.08 / 1.08)]),
        ("three_steps", 90, 0.015, [(30, -0.05), (50, 0.08), (70, -0.07)]),
        ("noisy_no_change", 60, 0.05, []),
        ("late_step_3pct", 40, 0.01, [(34, -0.03)]),
        ("later_step_3pct", 40, 0.01, [(36, -0.03)]),
    ]
    groups = [("planted", name, n, noise, steps) for name, n, noise, steps in planted]
    groups += [("no_change", f"no_change_{i}", 40, 0.01, []) for i in range(50)]
    groups += [("step_4pct", f"step_4pct_{i}", 40, 0.02, [(20, 0.04)]) for i in range(50)]
    out = []
    for group, name, n, noise, steps in groups:
        values = series(rng, n, noise, steps)
        found, _ = compute_change_points(values)
        out.append(
            {
                "group": group,
                "name": name,
                "noise": noise,
                "truth": [night for night, _ in steps],
                "otava": sorted(int(c.index) for c in found),
                "values": values,
            }
        )
    json.dump(
        {
            "otava": version("apache-otava"),
            "how": "otava.analysis.compute_change_points(values): window_len 50, max_pvalue 0.001",
            "series": out,
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
