#!/usr/bin/env python3
"""Sums up a `cargo test --no-fail-fast` log the way libtest reported it.

Each test binary's section starts with cargo's `Running <file>` (or
`Doc-tests`) line; its own result is the LAST `test result:` line of the
section, since a failure message may quote other runs' output, `test
result:` lines included. The failing trials are the names of the section's
last `failures:` list. Prints `ci: N passed, M failed, K ignored` and the
failing trials, one per line, prefixed by their test file, and the
binaries that took longest (libtest's `finished in`), where CI's time goes.

    python3 scripts/test-summary.py LOG
"""
import re
import sys

RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored;"
    r"(?:.*finished in ([0-9.]+)s)?"
)
SECTION = re.compile(r"^\s+(?:Running (\S+)|Doc-tests (\S+))")


def sections(lines):
    name, body = None, []
    for line in lines:
        m = SECTION.match(line)
        if m:
            if name is not None:
                yield name, body
            name, body = m.group(1) or m.group(2), []
        elif name is not None:
            body.append(line)
    if name is not None:
        yield name, body


def summary(lines):
    passed = failed = ignored = 0
    failing, unfinished, took = [], [], []
    for name, body in sections(lines):
        results = [RESULT.match(l) for l in body]
        results = [m for m in results if m]
        if not results:
            unfinished.append(name)
            continue
        p, f, i = (int(x) for x in results[-1].groups()[:3])
        if results[-1].group(4):
            took.append((float(results[-1].group(4)), name))
        passed, failed, ignored = passed + p, failed + f, ignored + i
        if f:
            starts = [k for k, l in enumerate(body) if l.rstrip() == "failures:"]
            if starts:
                for l in body[starts[-1] + 1 :]:
                    if not l.startswith("    "):
                        break
                    failing.append(f"{name}: {l.strip()}")
    return passed, failed, ignored, failing, unfinished, took


def main():
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    passed, failed, ignored, failing, unfinished, took = summary(lines)
    slowest = sorted(took, reverse=True)[:5]
    if slowest:
        shown = ", ".join(f"{name} {secs:.0f} s" for secs, name in slowest)
        print(f"ci: longest: {shown} (of {sum(s for s, _ in took):.0f} s in tests)")
    print(f"ci: {passed} passed, {failed} failed, {ignored} ignored")
    for t in failing:
        print(f"ci: FAILED {t}")
    for t in unfinished:
        print(f"ci: {t} printed no result (it crashed or did not build)")


if __name__ == "__main__":
    main()
