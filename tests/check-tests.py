#!/usr/bin/env python3
"""Holds the shell tests (tests/*.sh) to the rules of HACKING.md, "What a
test may not do": a check that cannot fail is worse than none.

  negated-grep  `! grep ...`: passes on a missing file or a reworded
                message. Assert on state, or use log_lacks/agent_lacks
                (lib.sh), which first require a line that must be there.
  or-true       `|| true` or `|| :`: goes on whether the step worked.
                Allowed only for clean-up: in a function whose name ends
                in "cleanup", on a trap line, or on a line ending in the
                comment "# cleanup".
  sleep         `sleep` as a pause of the test: wait_for a condition, or
                still_after SECONDS CMD for what must not happen within a
                time. Allowed: sleep as a process (`-- sleep 300`, `exec
                sleep`, `sleep 60 |`, `sleep 30 &`, `sleep infinity`), the
                sleep of a poll on one line (`while/until ...; do sleep N;
                done`), text that is data for another program (a here
                document), and a line carrying "# not synchronisation:"
                with the reason (a job's run time, the poll of a helper).
  count-zero    `is "$(grep -c PATTERN FILE)" 0` (or `[ "$(grep -c ...)" = 0 ]`):
                a count of nothing is what a missing file, a command that
                failed or a reworded message give too. As negated-grep:
                state, or log_lacks.
  if-grep       `if grep ...; then not_ok ...; else ok ...`: the else passes
                when grep could not read its file (status 2) as when it
                found nothing. Require the files first and tell grep's
                status 2 apart (case $?), or use log_lacks.
  lacks-word    a log_lacks/agent_lacks/lacks PATTERN that is, or has as
                an alternative, a single word of prose, unanchored
                (`refused`, `Suppressed`): it matches lines it does not
                mean ("Connection refused" in a reconnect warning). Name
                the message whole (`LOST slot of NAME \(token`), or assert
                on state. An all-capitals word is a code (Redis' `NOPERM`),
                not prose.
  timed         a verdict on time (a comparison of a duration: `took`,
                `elapsed`, `*_ms`, a p99, `$(now_ms)`, "within N s"
                in its text) that neither compares with a floor measured
                in the same run (a variable named *floor*, or a comment
                "# floor: ..." naming it) nor says, in a comment
                "# headroom: ..." on the line or in the comment right
                above it, what it measured under load (tests/run.sh
                --busy) and that its bound is 5 times that or more.
  float-arith   shell arithmetic (`$(( ))`, `[ A -lt B ]`, `test A -gt B`)
                on what awk, bc, python or jq printed, or on `date
                +%s.%N`: mawk prints a number past 2^31 as 3.64546e+09
                (and clamps its printf %d there), python may print 1.0.
                A number from such a tool reaches arithmetic through
                lib.sh's `int_of VAR TEXT`, which bails on anything but a
                decimal integer.
  skip          `exit 77` nowhere (meson takes it from a TAP test for an
                error); a "1..0 # SKIP" plan only in lib.sh's skip_all (a
                failure under CI=true) and skip_build (a skip even under
                CI=true), and skip_build only in the tests of SKIP_BUILD.

Usage: check-tests.py [FILE...] (default: every shell script of the tests,
tests/*.sh, tests/*/*.sh beside it (the fault harness', the fuzz runner),
and model/run.sh). TAP, one line per file; each finding as a diagnostic
FILE:LINE: RULE: text.
"""
import glob
import os
import re
import shlex
import sys

# The tests that may skip under CI=true too, each for a property of the
# build that CI's build does not have: nothing to run, not a missing tool.
SKIP_BUILD = {
    "ha-tls.sh": "needs a build with TLS to Redis (hiredis_ssl): Debian 12's "
                 "hiredis has none; tests/debian13.sh runs it with one",
}
# lib.sh's functions that are the skips, and those that check text absent.
SKIP_FUNCS = {"skip_all", "skip_build"}
LACKS_FUNCS = {"lacks", "log_lacks"}

NEG_GREP = re.compile(r"(^|[\s;&|({\"'])!\s*[ef]?grep\b")
# A count of grep's compared with 0: is "$(... grep -c ...)" 0, or a test
# [ "$(... grep -c ...)" = 0 ] (-eq, ==).
GREP_C = r"\$\((?:[^()]|\([^()]*\))*\b[ef]?grep\s+(?:-[A-Za-z]+\s+)*-[A-Za-z]*c[A-Za-z]*\b(?:[^()]|\([^()]*\))*\)"
COUNT_ZERO = re.compile(r"\bis\s+\"" + GREP_C + r"\"\s+[\"']?0[\"']?(\s|\\?$)"
                        r"|\[\s+\"?" + GREP_C + r"\"?\s+(=|==|-eq)\s+[\"']?0[\"']?\s+\]")
OR_TRUE = re.compile(r"\|\|\s*true\b|\|\|\s*:(\s|;|$)")
CLEANUP_MARK = re.compile(r"#\s*cleanup\s*$")
SLEEP = re.compile(r"(?<![\w./:=^-])sleep(?=\s)")
SLEEP_OK_MARK = re.compile(r"#\s*not synchronisation:\s*\S")
POLL_LOOP = re.compile(r"\b(while|until)\b.*;\s*do\s+sleep\s+\S+\s*;\s*done")
EXIT77 = re.compile(r"\bexit\s+77\s*($|[;}&|]|\)\s*($|[;}&|]))")
SKIP_PLAN = re.compile(r"1\.\.0\s*#\s*SKIP")
SKIP_BUILD_CALL = re.compile(r"(^|[\s;&|{])skip_build\b")
# A command substitution whose output is a number another tool formatted.
FLOAT_TOOL = r"\$\((?:[^()]|\([^()]*\))*(?:\b(?:awk|bc|python3?|jq)\b|\bdate\s+\+%s\.)"
FLOAT_ASSIGN = re.compile(r"^\s*(?:local\s+|export\s+)?([A-Za-z_]\w*)=(" + FLOAT_TOOL + ")?")
ARITH = re.compile(r"\$\(\((.*?)\)\)")
NUM_TEST = re.compile(r"(\S+)\s+-(?:lt|le|gt|ge|eq|ne)\s+(\S+)")
# A comparison of numbers (test, [ ], python) on a line that speaks of time.
COMPARE = re.compile(r"\s-(?:lt|le|gt|ge)\s|[^<>=-]<=?\s|\s>=?\s*[\d\"$]")
TIME_WORD = re.compile(r"now_ms|\$\{?(?:took|elapsed|dt|ms|late|gap|\w+_ms|p\d\d)\b"
                       r"|\bwithin\s+[\d.]+\s*(?:ms|s)\b|\$\{?\w+\}?\s*ms\b")
VERDICT = re.compile(r"^\s*(check|is|like|not_ok|\[|test|python3|if|.*\|\||.*&&)\b|^\s*\[")
HEADROOM_MARK = re.compile(r"#\s*(?:headroom|floor):\s*\S")
LACKS_CALL = re.compile(r"(?:^|[\s;&|({])(agent_lacks|log_lacks|lacks)\s+(.*)")
FUNC = re.compile(r"^(\s*)(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)\s*\{(.*)$")
HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(['\"]?)([A-Za-z_]\w*)\2")


def sleep_allowed(line, m):
    before = line[:m.start()]
    after = line[m.end():]
    if re.search(r"(--|\bexec|-f)\s+['\"]?$", before):
        return True             # the command a job runs, or a pattern
    if re.match(r"\s+(infinity\b|\S+\s*(&(?!&)|\|(?!\|)))", after):
        return True             # a process: in the background, or a pipe's
    return False


def headroom(lines, i):
    """Line I (0-based) carries "# headroom: ...", or the comment lines
    right above it, or those above the check it continues, do."""
    if HEADROOM_MARK.search(lines[i]):
        return True
    j = i - 1
    while j >= 0 and lines[j].rstrip().endswith("\\"):
        if HEADROOM_MARK.search(lines[j]):
            return True
        j -= 1
    while j >= 0 and lines[j].strip().startswith("#"):
        if HEADROOM_MARK.search(lines[j]):
            return True
        j -= 1
    return False


def lacks_word(line):
    """LINE calls a lacks function with a pattern of one bare word."""
    m = LACKS_CALL.search(line)
    if not m:
        return False
    try:
        args = shlex.split(m.group(2), comments=True)
    except ValueError:
        return False            # continued on the next line: its start is read
    if len(args) < 2:
        return False
    return any(re.fullmatch(r"[A-Za-z]+", alt) and not alt.isupper() for alt in args[1].split("|"))


def float_arith(line, floats):
    """Arithmetic of LINE on a tool's output (the names in FLOATS, which it
    updates with LINE's assignment): the offending operands."""
    bad = []
    for m in ARITH.finditer(line):
        if re.search(FLOAT_TOOL, m.group(1)):
            bad.append(m.group(1))
        bad += [v for v in floats if re.search(r"(^|[^\w])\$?\{?" + v + r"\b", m.group(1))]
    for m in NUM_TEST.finditer(line):
        for operand in m.groups():
            if re.search(FLOAT_TOOL, operand) or \
                    any(re.fullmatch(r"[\"']?\$\{?" + v + r"\}?[\"']?", operand) for v in floats):
                bad.append(operand)
    a = FLOAT_ASSIGN.match(line)
    if a and a.group(2) and re.search(r"\|\s*wc\s+-l\s*\)\s*$", line):
        a = None                # a count of lines: an integer
        floats.discard(FLOAT_ASSIGN.match(line).group(1))
    if a:
        (floats.add if a.group(2) else floats.discard)(a.group(1))
    i = re.match(r"^\s*int_of\s+([A-Za-z_]\w*)\b", line)
    if i:
        floats.discard(i.group(1))
    return bad


def check_file(path):
    name = os.path.basename(path)
    findings = []
    funcs = []                  # (indent, name) of the functions open here
    heredoc = None              # (strip, word) while in a here document
    floats = set()              # variables holding what such a tool printed
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if heredoc:
            body = line.lstrip("\t") if heredoc[0] else line
            if body == heredoc[1]:
                heredoc = None
            else:
                # Data for another program (a unit, a script): the rules
                # other than sleep still hold.
                if NEG_GREP.search(line):
                    findings.append((n, "negated-grep", line))
                continue
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        fm = FUNC.match(line)
        one_liner = False
        if fm:
            rest = fm.group(3).strip()
            one_liner = rest.endswith("}")
            if not one_liner:
                funcs.append((fm.group(1), fm.group(2)))
        names = [fn for _, fn in funcs] + ([fm.group(2)] if one_liner else [])
        in_cleanup = any(fn.endswith("cleanup") for fn in names)
        hm = HEREDOC.search(line)
        if hm and "<<<" not in line[max(0, hm.start() - 1):hm.start() + 3]:
            heredoc = (hm.group(1) == "-", hm.group(3))

        in_lacks = name == "lib.sh" and any(fn in LACKS_FUNCS for fn in names)
        if NEG_GREP.search(line) and not in_lacks:
            findings.append((n, "negated-grep", line))
        if COUNT_ZERO.search(line):
            findings.append((n, "count-zero", line))
        if OR_TRUE.search(line) and not in_cleanup and not CLEANUP_MARK.search(line) \
                and not re.search(r"\btrap\b", line):
            findings.append((n, "or-true", line))
        if not SLEEP_OK_MARK.search(line) and not POLL_LOOP.search(line):
            for m in SLEEP.finditer(line):
                if not sleep_allowed(line, m):
                    findings.append((n, "sleep", line))
                    break
        if COMPARE.search(line) and TIME_WORD.search(line) and "floor" not in line \
                and not headroom(lines, n - 1) and not re.match(r"\s*(echo|printf|local|deadline=|while|until)\b", line) \
                and name not in ("lib.sh", "check-tests.py"):
            findings.append((n, "timed", line))
        if name != "lib.sh" and re.match(r"\s*if\b.*\b[ef]?grep\b", line) \
                and re.search(r"\bthen\b(?:(?!\belse\b).)*\bnot_ok\b", " ".join(lines[n - 1:n + 1])):
            findings.append((n, "if-grep", line))
        if not (name == "lib.sh" and fm) and lacks_word(line):
            findings.append((n, "lacks-word", line))
        findings += [(n, "float-arith", line) for _ in float_arith(line, floats)[:1]]
        in_skip = name == "lib.sh" and any(fn in SKIP_FUNCS for fn in names)
        if (EXIT77.search(line) or SKIP_PLAN.search(line)) and not in_skip:
            findings.append((n, "skip", line))
        if SKIP_BUILD_CALL.search(line) and name not in SKIP_BUILD and not in_skip:
            findings.append((n, "skip", line))

        if funcs and not fm and re.match(r"^" + re.escape(funcs[-1][0]) + r"\}\s*(#.*)?$", line):
            funcs.pop()
    return findings


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(here)
    tests = sorted(glob.glob(os.path.join(here, "*.sh")))
    if not sys.argv[1:] and not tests:
        print("Bail out! no shell tests found beside this script")
        return 1
    files = sys.argv[1:] or (tests + sorted(glob.glob(os.path.join(here, "*", "*.sh")))
                             + [os.path.join(top, "model", "run.sh")])
    print(f"1..{len(files)}")
    failed = 0
    for i, path in enumerate(files, 1):
        findings = check_file(path)
        rel = os.path.relpath(os.path.abspath(path), top)
        if findings:
            failed += 1
            print(f"not ok {i} - {rel}")
            for n, rule, text in findings:
                print(f"#   {rel}:{n}: {rule}: {text.strip()}")
        else:
            print(f"ok {i} - {rel}")
    print(f"# {len(files) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
