#!/usr/bin/env python3
"""Writes the times of a CI run into HACKING.md's "What CI runs":

    python3 .ci/times.py LOG

LOG is what `bash .ci/run` printed. Its summary (the phases in order,
each with its time, and the run's total) and the commit it ran on (the
"=== ci: on COMMIT" line) replace the table's time column, its "all" row
and the commit of the sentence above it; the Debian 13 phase's row also
gets the time its suites took (the TAP lines of tests/debian13.sh). The
text of the table but the times stays as it is. Exits non-zero, changing
nothing, when LOG is not a whole run, is of an unknown commit or of a
machine that had the Debian 13 root already, a phase of it failed, or its
phases are not the table's (tests/check-docs.py's ci-times holds the table to
.ci/run's phases).
"""
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HACKING = os.path.join(TOP, "HACKING.md")


def human(secs):
    m, s = divmod(int(secs), 60)
    return "%d min %d s" % (m, s) if m else "%d s" % s


def parse_log(text):
    on = re.search(r"^=== ci: on (\w+)", text, re.M)
    summary = re.search(r"^=== ci: summary \((\d+) min (\d+) s in all\)\n((?:  .*\n?)+)", text, re.M)
    if not on or not summary:
        return None
    phases = []
    for line in summary.group(3).splitlines():
        m = re.match(r"^  (\S+)\s+(passed|FAILED.*?)\s+(\d+) s$", line)
        if m:
            phases.append((m.group(1), m.group(2).strip(), int(m.group(3))))
    steps = {m.group(1): int(m.group(2))
             for m in re.finditer(r"^ok \d+ - Debian 13, (\w+): .*\((\d+) s\)$", text, re.M)}
    return on.group(1), int(summary.group(1)) * 60 + int(summary.group(2)), phases, steps


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    log = open(sys.argv[1], encoding="utf-8", errors="replace").read()
    parsed = parse_log(log)
    if not parsed:
        print("%s: no \"=== ci: on\" line or summary: not the log of a whole run" % sys.argv[1], file=sys.stderr)
        return 1
    commit, total, phases, steps = parsed
    # CI's machine is fresh: its run builds the Debian 13 root (and the
    # Debian 12 one of the systemd suite), and the table says so.
    if commit == "unknown" or "# building the Debian 13 root" not in log:
        print("%s: a run on an unknown commit, or on a machine that had the Debian 13 root already (CI's "
              "builds it): not CI's times" % sys.argv[1], file=sys.stderr)
        return 1
    failed = [p[0] for p in phases if p[1] != "passed"]
    if failed:
        print("%s: %s failed: the times of a failed run are not CI's" % (sys.argv[1], ", ".join(failed)),
              file=sys.stderr)
        return 1
    text = open(HACKING, encoding="utf-8").read()
    m = re.search(r"^\| phase \| command \| time \|\n\|[-| ]+\|\n((?:\|.*\n)+)", text, re.M)
    if not m:
        print("HACKING.md: no table | phase | command | time |", file=sys.stderr)
        return 1
    rows = m.group(1).splitlines()
    names = [r.split("|")[1].strip() for r in rows]
    if names[:-1] != [p[0] for p in phases] or names[-1] != "all":
        print("HACKING.md's phases %s are not the run's %s, then all" % (names, [p[0] for p in phases]),
              file=sys.stderr)
        return 1
    out = []
    for row, (name, result, secs) in zip(rows, phases):
        cells = row.split("|")
        cells[3] = " %s " % human(secs)
        out.append("|".join(cells))
    cells = rows[-1].split("|")
    cells[3] = " **%s** " % human(total)
    out.append("|".join(cells))
    text = text[:m.start(1)] + "\n".join(out) + "\n" + text[m.end(1):]
    text, n = re.subn(r"(Measured on 2 cores on a clean clone of )`?\w+`?", r"\g<1>`%s`" % commit, text, count=1)
    if n != 1:
        print("HACKING.md: no \"Measured on 2 cores on a clean clone of COMMIT\"", file=sys.stderr)
        return 1
    if steps:
        text = re.sub(r"(\| debian13 \|.*?)(\(steps: [^)]*\) )?\|( [^|]*\|)$",
                      lambda mm: "%s(steps: %s) |%s" % (mm.group(1), ", ".join("%s %s" % (k, human(v))
                                                                                for k, v in steps.items()),
                                                        mm.group(3)),
                      text, count=1, flags=re.M)
    open(HACKING, "w", encoding="utf-8").write(text)
    print("HACKING.md: the times of the run on %s, %s in all" % (commit, human(total)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
