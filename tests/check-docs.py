#!/usr/bin/env python3
"""Holds the docs to the facts the code knows (HACKING.md, "What a test may
not do", has the shell tests' rules; these are the docs'). Each check is
one TAP line; each difference a diagnostic FILE:LINE: what is wrong.

  verbs       the CLI's commands, from the dispatch table in
              src/cli/fleetsem.c (and the forms its help gives a line of
              their own, as `VERB --OPTION`): each in the help, the bash
              completion, fleetsem(1)'s SYNOPSIS and DESCRIPTION; nothing
              there that is no command. A list of commands in README.md or
              HACKING.md (three or more in backquotes, joined by commas,
              slashes, "and", "or") names every one, or says "e.g." first.
  codes       every `code=X` (and `code=X|Y`) in man/, docs/ and the
              Markdown files is an ERROR_CODE_* of src/shared/protocol.h;
              a list of three or more names them all.
  exits       fleetsem(1)'s EXIT STATUS tags are exactly the exit codes
              the CLI uses: the EXIT_* of src/shared/client.h and
              src/cli/*.c that src/cli or outcome.c returns, and run's
              126 and 127.
  model       model/README.md's tables of checks and of seeded bugs name
              exactly the `queue check` and `queue mutant` of model/run.sh;
              a count of checks, mutants or seeded bugs written in
              HACKING.md or model/README.md is the real one.
  test-counts HACKING.md gives no number of tests (it goes stale with
              every test added to tests/meson.build: name the suites).
  suite-time  the suite's time is given in HACKING.md's "What CI runs"
              table alone: no "takes about N minutes" elsewhere in
              README.md or HACKING.md.
  links       every relative Markdown link resolves: the file exists and
              a #fragment names a heading of it.
  options     each long option of the getopt_long tables of src/cli/*.c
              is in fleetsem(1), and so is each short one, as "-X, --LONG";
              each verb's are exactly its options in the bash completion
              (but COMPLETION_HIDDEN), and those that take a value are in
              its with_arg, short and long.
  on-error    pam_fleetsem(8)'s ON ERROR table names exactly the states of
              src/shared/protocol.c's redis_states[], in its order, each
              "on_error" where the code says ERROR_CODE_UNAVAILABLE and
              "refused" where it says ERROR_CODE_MISCONFIGURED.
  lease-states  docs/design.md's tables of the lease's states and events,
              between its lease-states markers, are exactly what
              src/agent/engine/lease-states.py makes of lease-states.list.
  old-spellings  no `limit --fleet` (fleet-limit's spelling before it was
              a command of its own) in man/, the Markdown files or
              systemd/, but in a sentence that says it is deprecated.

Usage: check-docs.py [SRCDIR] (default: the tree above this file).
"""
import glob
import os
import re
import subprocess
import sys

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                      os.path.join(os.path.dirname(__file__), ".."))


def read(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8") as f:
        return f.read()


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def md_files():
    out = []
    for pat in ("*.md", "docs/*.md", "model/*.md", "bench/*.md", "tests/*/*.md"):
        out += sorted(glob.glob(os.path.join(SRC, pat)))
    return [os.path.relpath(p, SRC) for p in out]


def man_files():
    return [os.path.relpath(p, SRC) for p in sorted(glob.glob(os.path.join(SRC, "man", "*.[1-8]")))]


def man_section(text, name):
    """(start offset, body) of a man page's .SH NAME section."""
    m = re.search(r'^\.SH "?%s"?\s*$' % re.escape(name), text, re.M)
    if not m:
        return None, ""
    end = re.search(r"^\.SH ", text[m.end():], re.M)
    body = text[m.end():m.end() + end.start()] if end else text[m.end():]
    return m.end(), body


# ---------------------------------------------------------------- verbs

def cli_verbs():
    src = read("src/cli/fleetsem.c")
    verbs = re.findall(r'if \(streq\(argv\[1\], "([a-z][a-z-]*)"\)\)\s*\n\s*return verb_\w+\(', src)
    m = re.search(r'"Commands:\\n"(.*?)"Options common', src, re.S)
    help_text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))) if m else ""
    help_text = help_text.replace("\\n", "\n")
    # A form of its own: a help line "  VERB --OPTION ...".
    forms = re.findall(r"^  ([a-z][a-z-]* --[a-z-]+)", help_text, re.M)
    help_verbs = set(re.findall(r"^  ([a-z][a-z-]*)(?![a-z-])", help_text, re.M))
    help_verbs |= set(re.findall(r"\| ([a-z][a-z-]*) [A-Z]", help_text))   # "drain NAME | undrain NAME"
    return verbs, forms, help_verbs


VERB_ITEM = r"`(?:fleetsem )?([a-z][a-z-]*(?: --[a-z-]+)?)(?: [^`]*)?`"
# Between two: a comma, a slash, "and", "or"; after a remark in brackets too.
VERB_SEP = r"(?:\s*\([^()`]*\))?(?:\s*(?:,|/)\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+)"


def check_verb_lists(rel, verbs, forms):
    """Runs of 3+ backquoted commands joined by list separators."""
    text = read(rel)
    known = set(verbs) | set(forms)
    want = known
    bad = []
    run = re.compile(VERB_ITEM + r"(?:" + VERB_SEP + VERB_ITEM + r")+")
    for m in run.finditer(text):
        items = re.findall(VERB_ITEM, m.group(0))
        named = [i for i in items if i in known or i.split(" ")[0] in verbs]
        if len(set(named)) < 3 or len(named) != len(items):
            continue
        before = text[max(0, m.start() - 12):m.start()]
        if "e.g." in before:
            continue
        missing = sorted(want - set(named))
        if missing:
            bad.append("%s:%d: a list of commands without %s (name them all, or say \"e.g.\")"
                       % (rel, line_of(text, m.start()), ", ".join(missing)))
    return bad


def check_verbs():
    verbs, forms, help_verbs = cli_verbs()
    bad = []
    if len(verbs) < 5:
        return ["src/cli/fleetsem.c: cannot read the verb table (found %s)" % verbs]
    for v in verbs:
        if v not in help_verbs:
            bad.append("src/cli/fleetsem.c: %s is not in the help's Commands" % v)
    for v in help_verbs - set(verbs):
        bad.append("src/cli/fleetsem.c: the help names %s, which is no command" % v)
    comp = read("src/cli/completion/fleetsem")
    m = re.search(r"local commands='([^']*)'", comp)
    cv = set(m.group(1).split()) - {"help"} if m else set()
    for v in sorted(set(verbs) ^ cv):
        bad.append("src/cli/completion/fleetsem:%d: commands: %s %s"
                   % (line_of(comp, m.start()) if m else 0, v,
                      "missing" if v in verbs else "is no command"))
    man = read("man/fleetsem.1")
    start, syn = man_section(man, "SYNOPSIS")
    syn_forms = re.findall(r"^\.B fleetsem ([a-z][a-z\\-]*(?: \\-\\-[a-z-]+)?)\s*$", syn, re.M)
    syn_forms = {s.replace("\\-", "-") for s in syn_forms}
    for v in verbs + forms:
        if v not in syn_forms:
            bad.append("man/fleetsem.1:%d: SYNOPSIS lacks fleetsem %s" % (line_of(man, start), v))
    for s in sorted(syn_forms):
        if s.split(" ")[0] not in verbs:
            bad.append("man/fleetsem.1:%d: SYNOPSIS names fleetsem %s, which is no command"
                       % (line_of(man, start), s))
    dstart, desc = man_section(man, "DESCRIPTION")
    for v in verbs + forms:
        pat = r"^\.BR? " + re.escape(v.replace("-", "\\-")) + r"\b"
        if not re.search(pat, desc, re.M):
            bad.append("man/fleetsem.1:%d: DESCRIPTION does not describe %s" % (line_of(man, dstart), v))
    for rel in ("README.md", "HACKING.md"):
        bad += check_verb_lists(rel, verbs, forms)
    return bad


# ---------------------------------------------------------------- codes

def error_codes():
    return set(re.findall(r'#define ERROR_CODE_\w+ "([a-z_]+)"', read("src/shared/protocol.h")))


def check_codes():
    codes = error_codes()
    bad = []
    if len(codes) < 5:
        return ["src/shared/protocol.h: cannot read the ERROR_CODE_* (found %s)" % sorted(codes)]
    for rel in md_files() + man_files():
        text = read(rel)
        for m in re.finditer(r"code=((?:[a-z_]+\|)*[a-z_]+)", text):
            named = m.group(1).split("|")
            for c in named:
                if c not in codes:
                    bad.append("%s:%d: code=%s is no error code (%s)"
                               % (rel, line_of(text, m.start()), c, "|".join(sorted(codes))))
            if len(named) >= 3 and set(named) != codes:
                bad.append("%s:%d: the list of codes lacks %s"
                           % (rel, line_of(text, m.start()), "|".join(sorted(codes - set(named)))))
    return bad


# ---------------------------------------------------------------- exits

def cli_exit_codes():
    srcs = sorted(glob.glob(os.path.join(SRC, "src/cli/*.c"))) + [os.path.join(SRC, "src/shared/outcome.c")]
    defs = {}
    for p in [os.path.join(SRC, "src/shared/client.h")] + sorted(glob.glob(os.path.join(SRC, "src/cli/*.h"))) + srcs:
        with open(p, encoding="utf-8") as f:
            for name, val in re.findall(r"#define (EXIT_[A-Z_]+) (\d+)", f.read()):
                defs[name] = int(val)
    used = set()
    for p in srcs:
        with open(p, encoding="utf-8") as f:
            body = re.sub(r"#define EXIT_\w+ \d+", "", f.read())
        used |= {defs[n] for n in re.findall(r"\b(EXIT_[A-Z_]+)\b", body) if n in defs}
        for call in re.findall(r"\b_exit\(([^;]*)\);", body):      # run's exec failing
            used |= {int(n) for n in re.findall(r"\b12[67]\b", call)}
    return used


def check_exits():
    used = cli_exit_codes()
    bad = []
    if not {64, 69, 75} <= used:
        return ["src/cli: cannot read the exit codes (found %s)" % sorted(used)]
    man = read("man/fleetsem.1")
    start, body = man_section(man, "EXIT STATUS")
    documented = {}
    for m in re.finditer(r"^\.TP\n\.B ([\d, ]+)$", body, re.M):
        for n in re.findall(r"\d+", m.group(1)):
            documented[int(n)] = line_of(man, start + m.start())
    # 0 and 1 (acquire --skip) are in the section's opening prose.
    for n in (0, 1):
        if n in used and re.search(r"exits %s\b|, %s when" % (n, n), body):
            documented.setdefault(n, 0)
    for n in sorted(used - set(documented)):
        bad.append("man/fleetsem.1:%d: EXIT STATUS lacks %d, which the CLI exits with"
                   % (line_of(man, start), n))
    for n in sorted(set(documented) - used):
        bad.append("man/fleetsem.1:%d: EXIT STATUS gives %d, which the CLI never exits with"
                   % (documented[n], n))
    return bad


# ---------------------------------------------------------------- keys

def generated_table(option, list_path, what):
    """(bad, have): docs/protocol.md's table of WHAT against the one
    embed-lua.py OPTION makes from LIST_PATH, line by line."""
    import subprocess
    got = subprocess.run([sys.executable, os.path.join(SRC, "src/agent/library/embed-lua.py"), option,
                          os.path.join(SRC, list_path)], capture_output=True, text=True)
    if got.returncode != 0:
        return ["%s: %s" % (list_path, got.stderr.strip())]
    want = got.stdout.splitlines()
    text = read("docs/protocol.md")
    m = re.search(r"^%s\n(?:\|.*\n)+" % re.escape(want[0]), text, re.M)
    if not m:
        return ["docs/protocol.md: no table of %s (its header: %s)" % (what, want[0])]
    have = m.group(0).splitlines()
    bad = []
    for i in range(max(len(have), len(want))):
        h = have[i] if i < len(have) else None
        w = want[i] if i < len(want) else None
        if h != w:
            bad.append("docs/protocol.md:%d: the table of %s says %r where %s makes %r (embed-lua.py %s)"
                       % (line_of(text, m.start()) + i, what, (h or "")[:80], os.path.basename(list_path),
                          (w or "")[:80], option))
    return bad


def check_keys():
    """docs/protocol.md's table of keys is the one keys.list makes, its
    table of the scripts' arguments the one scripts.list makes, and
    tests/redis-key-loss.sh has a case (key_ID) for each key, and no other."""
    import subprocess
    bad = []
    ids = {ln.split("\t")[0] for ln in subprocess.run(
        [sys.executable, os.path.join(SRC, "src/agent/library/embed-lua.py"), "--key-list",
         os.path.join(SRC, "src/agent/library/keys.list")], capture_output=True, text=True).stdout.splitlines()}
    cases = set(re.findall(r"^key_([a-z_]+)\(\)", read("tests/redis-key-loss.sh"), re.M))
    for i in sorted(ids - cases):
        bad.append("tests/redis-key-loss.sh: no case key_%s() for keys.list's key %s" % (i, i))
    for i in sorted(cases - ids):
        bad.append("tests/redis-key-loss.sh: key_%s() is the case of no key of keys.list" % i)
    bad += generated_table("--doc-table", "src/agent/library/keys.list", "keys")
    bad += generated_table("--doc-args", "src/agent/library/scripts.list", "arguments")
    return bad


# ---------------------------------------------------------------- model

def md_table_first_column(text, header):
    """(offset, [first cells]) of the Markdown table whose header row
    starts with | HEADER |."""
    m = re.search(r"^\| %s \|.*\n\|[-| ]+\|\n((?:\|.*\n)+)" % re.escape(header), text, re.M)
    if not m:
        return None, []
    return m.start(), [r.split("|")[1].strip() for r in m.group(1).splitlines()]


def check_model():
    run = read("model/run.sh")
    checks = re.findall(r"^\s*queue check(?:_reboot)? ([\w-]+)", run, re.M)
    mutants = re.findall(r"^\s*queue mutant(?:_reboot)? ([\w-]+)", run, re.M)
    bad = []
    if len(checks) < 5 or len(mutants) < 5:
        return ["model/run.sh: cannot read the checks and mutants"]
    readme = read("model/README.md")
    for header, real, what in (("check", checks, "checks"), ("mutant", mutants, "mutants")):
        pos, rows = md_table_first_column(readme, header)
        if pos is None:
            bad.append("model/README.md: no table of %s (| %s | ...)" % (what, header))
            continue
        rows = [r.strip("`") for r in rows]
        for n in sorted(set(real) - set(rows)):
            bad.append("model/README.md:%d: the table of %s lacks %s" % (line_of(readme, pos), what, n))
        for n in sorted(set(rows) - set(real)):
            bad.append("model/README.md:%d: the table of %s names %s, which model/run.sh does not run"
                       % (line_of(readme, pos), what, n))
    for rel in ("HACKING.md", "model/README.md"):
        text = read(rel)
        for m in re.finditer(r"\b(\d+) (checks|mutants|seeded bugs)\b", text):
            real = len(checks) if m.group(2) == "checks" else len(mutants)
            if int(m.group(1)) != real:
                bad.append("%s:%d: %s %s; model/run.sh has %d"
                           % (rel, line_of(text, m.start()), m.group(1), m.group(2), real))
    return bad


# ---------------------------------------------------------------- CI

def hacking_ci_section():
    text = read("HACKING.md")
    m = re.search(r"^## What CI runs\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return text, (m.start(1), m.group(1)) if m else (None, "")


def check_test_counts():
    text = read("HACKING.md")
    return ["HACKING.md:%d: \"%s\": a count of tests goes stale; name the suites"
            % (line_of(text, m.start()), m.group(0)) for m in re.finditer(r"\b\d+ tests\b", text)]


SUITE_TIME = re.compile(r"\btakes? about [\d½]+\s*(?:\n\s*)?(?:min|minutes)\b")


def check_suite_time():
    text, (start, body) = hacking_ci_section()
    bad = []
    if start is None or not re.search(r"^\| tests \|.*\| \d+ min( \d+ s)? \|$", body, re.M):
        bad.append("HACKING.md: \"What CI runs\" has no time for the tests phase")
    for rel in ("README.md", "HACKING.md"):
        t = read(rel)
        for m in SUITE_TIME.finditer(t):
            if rel == "HACKING.md" and start is not None and start <= m.start() < start + len(body):
                continue
            bad.append("%s:%d: \"%s\": the suite's time is HACKING.md's \"What CI runs\" alone; link there"
                       % (rel, line_of(t, m.start()), m.group(0).replace("\n", " ")))
    return bad


def seconds_of(cell):
    """Seconds of "12 min 3 s", "45 s" (bold, a note after it allowed); None."""
    m = re.match(r"^\**(?:(\d+) min)?\s*(?:(\d+) s)?\**(?:\s|$)", cell.strip())
    if not m or not (m.group(1) or m.group(2)):
        return None
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0)


def check_ci_times():
    """HACKING.md's table of CI's phases: exactly .ci/run's phases in their
    order, then "all", each with a time, the rows adding up to it (as
    .ci/times.py writes them from a run's log)."""
    run = read(".ci/run")
    phases = re.findall(r"^phase (\S+) ", run, re.M)
    text, (start, body) = hacking_ci_section()
    if start is None:
        return ["HACKING.md: no \"What CI runs\""]
    m = re.search(r"^\| phase \| command \| time \|\n\|[-| ]+\|\n((?:\|.*\n)+)", body, re.M)
    if not m or len(phases) < 3:
        return ["HACKING.md: \"What CI runs\" has no table | phase | command | time | of .ci/run's phases"]
    at = line_of(text, start + m.start())
    rows = [r.split("|") for r in m.group(1).splitlines()]
    names = [r[1].strip() for r in rows]
    bad = []
    if names != phases + ["all"]:
        bad.append("HACKING.md:%d: the phases %s are not .ci/run's %s, then all" % (at, names, phases))
    times = [seconds_of(r[3]) if len(r) > 3 else None for r in rows]
    for name, t in zip(names, times):
        if t is None:
            bad.append("HACKING.md:%d: the %s row has no time" % (at, name))
    if not bad and abs(sum(times[:-1]) - times[-1]) > len(phases) + 5:
        bad.append("HACKING.md:%d: the phases add up to %d s, the \"all\" row says %d s: write the times of one run "
                   "(.ci/times.py LOG)" % (at, sum(times[:-1]), times[-1]))
    if not re.search(r"Measured on 2 cores on a clean clone of `\w+`", body):
        bad.append("HACKING.md:%d: \"What CI runs\" does not say which commit its times are of" % at)
    return bad


# ---------------------------------------------------------------- links

def slug(heading):
    h = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip()).lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    seen = {}
    out = set()
    for h in re.findall(r"^#{1,6} (.*)$", text, re.M):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def check_links():
    bad = []
    for rel in md_files():
        text = read(rel)
        code_free = re.sub(r"^```.*?^```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.M | re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", code_free):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(SRC, os.path.dirname(rel), path)) if path else os.path.join(SRC, rel)
            where = "%s:%d" % (rel, line_of(text, m.start()))
            if not os.path.exists(full):
                bad.append("%s: %s: no such file" % (where, target))
            elif frag and full.endswith(".md") and frag not in anchors(full):
                bad.append("%s: %s: no such heading" % (where, target))
    return bad


# ---------------------------------------------------------------- options

# Options the completion does not offer, each with why.
COMPLETION_HIDDEN = {
    ("fleet-limit", "fleet"): "what makes limit --fleet, the deprecated spelling, still work",
}


def cli_options():
    """{verb: [(long, takes_arg, short or None)]}: each getopt_long table of
    src/cli/*.c, as the verb's whose verb_*() it is in or, in a helper, the
    first verb_*() after it."""
    funcs = dict((f, v) for v, f in re.findall(
        r'if \(streq\(argv\[1\], "([a-z][a-z-]*)"\)\)\s*\n\s*return (verb_\w+)\(', read("src/cli/fleetsem.c")))
    # The options every verb takes (cli-util.h), as each table names them.
    common = re.search(r"^#define CLI_COMMON_OPTIONS (.*)$", read("src/cli/cli-util.h"), re.M).group(1)
    out = {}
    for path in sorted(glob.glob(os.path.join(SRC, "src/cli/*.c"))):
        with open(path, encoding="utf-8") as f:
            text = f.read().replace("CLI_COMMON_OPTIONS", common)
        defs = [(m.start(), m.group(1)) for m in
                re.finditer(r"^(?:static )?[a-z][\w *]*?\b(\w+)\([^;{]*\)\s*\{", text, re.M)]
        for t in re.finditer(r"static const struct option \w+\[\] = \{(.*?)\n\s*\};", text, re.S):
            inside = [n for pos, n in defs if pos < t.start()][-1:]
            after = [n for pos, n in defs if pos > t.start() and n in funcs]
            func = inside[0] if inside and inside[0] in funcs else (after[0] if after else None)
            if func is None:
                continue
            for name, arg, val in re.findall(r'\{ "([a-z][a-z-]*)", (no|required|optional)_argument, NULL, ([^ }]+) \}',
                                             t.group(1)):
                short = re.match(r"'(.)'$", val)
                out.setdefault(funcs[func], []).append((name, arg != "no", short.group(1) if short else None))
    return out


def check_options():
    opts = cli_options()
    bad = []
    if len(opts) < 5 or not all(opts.values()):
        return ["src/cli: cannot read the getopt_long tables (found %s)" % sorted(opts)]
    man_rel = "man/fleetsem.1"
    man = "\n".join(plain_lines(man_rel, read(man_rel)))
    comp_rel = "src/cli/completion/fleetsem"
    comp = read(comp_rel)
    m = re.search(r"local with_arg='@\(([^)]*)\)'", comp)
    with_arg = set(m.group(1).split("|")) if m else set()
    if not m:
        bad.append("%s: no with_arg='@(...)' to read" % comp_rel)
    man_lacks = {}
    for verb, table in sorted(opts.items()):
        for name, takes_arg, short in table:
            if not re.search(r"(?<![\w-])--%s(?![\w-])" % re.escape(name), man):
                man_lacks.setdefault("--" + name, []).append(verb)
            if short and not re.search(r"(?<![\w-])-%s\s*,\s*--%s(?![\w-])" % (re.escape(short), re.escape(name)), man):
                man_lacks.setdefault("\"-%s, --%s\"" % (short, name), []).append(verb)
            if takes_arg:
                for o in ["--" + name] + (["-" + short] if short else []):
                    if o not in with_arg:
                        bad.append("%s:%d: with_arg lacks %s (fleetsem %s)" % (comp_rel, line_of(comp, m.start()) if m else 0, o, verb))
        cm = re.search(r"^\s*\[%s\]='([^']*)'" % re.escape(verb), comp, re.M)
        if not cm:
            bad.append("%s: no options for %s" % (comp_rel, verb))
            continue
        want = {"--" + n for n, _, _ in table if (verb, n) not in COMPLETION_HIDDEN}
        have = set(cm.group(1).split())
        where = "%s:%d" % (comp_rel, line_of(comp, cm.start()))
        for o in sorted(want - have):
            bad.append("%s: %s lacks %s" % (where, verb, o))
        for o in sorted(have - want):
            bad.append("%s: %s offers %s, which it does not take" % (where, verb, o))
    for o, verbs in man_lacks.items():
        bad.append("%s: lacks %s (fleetsem %s)" % (man_rel, o, ", ".join(verbs)))
    return bad


# ---------------------------------------------------------------- old spellings

OLD_SPELLINGS = [(re.compile(r"\blimit\s+--fleet\b"), "fleetsem fleet-limit")]


def plain_lines(rel, text):
    """TEXT's lines as a reader sees their words: a man page's font
    escapes, quotes and \\- gone, its macros' names too (a line of a
    macro alone, .PP or .TP, left empty: it ends a paragraph)."""
    if not rel.startswith("man/"):
        return text.split("\n")
    out = []
    for line in text.split("\n"):
        if line.startswith(".") or line.startswith("'"):
            m = re.match(r"[.'](?:B|I|BR|RB|IR|RI|BI|IB)\s+(.*)$", line)
            line = m.group(1) if m else ""
        line = re.sub(r"\\f[BIRP]|\\&|\"", "", line).replace("\\-", "-")
        out.append(line)
    return out


def check_old_spellings():
    files = md_files() + man_files()
    files += sorted(os.path.relpath(p, SRC) for p in glob.glob(os.path.join(SRC, "systemd", "*")))
    bad = []
    for rel in files:
        text = "\n".join(plain_lines(rel, read(rel)))
        for pat, now in OLD_SPELLINGS:
            for m in pat.finditer(text):
                # The sentence: from the last full stop or blank line before
                # it to the first after it.
                starts = [x.end() for x in re.finditer(r"\.\s|\n\s*\n", text[:m.start()])]
                after = re.search(r"\.(?:\s|$)|\n\s*\n", text[m.end():])
                sentence = text[starts[-1] if starts else 0:m.end() + after.start() if after else len(text)]
                if "deprecated" not in sentence.lower():
                    bad.append("%s:%d: \"%s\": the deprecated spelling; write %s (or say it is deprecated)"
                               % (rel, line_of(text, m.start()), m.group(0), now))
    return bad


# ---------------------------------------------------------------- on-error

def check_on_error():
    code = re.findall(r'^\s*\{ "([A-Za-z-]+)", ERROR_CODE_(UNAVAILABLE|MISCONFIGURED)',
                      read("src/shared/protocol.c"), re.M)
    if len(code) < 10:
        return ["src/shared/protocol.c: cannot read redis_states[] (found %d rows)" % len(code)]
    want = [(state, "on_error" if kind == "UNAVAILABLE" else "refused") for state, kind in code]
    rel = "man/pam_fleetsem.8"
    text = read(rel)
    m = re.search(r"^\.SH ON ERROR\n(.*?)^\.SH ", text, re.M | re.S)
    if not m:
        return ["%s: no section ON ERROR" % rel]
    got = [(state.replace("\\-", "-"), kind) for state, kind in
           re.findall(r"^\.TP\n\.B (\S+)\n\.BR (on_error|refused) :$", m.group(1), re.M)]
    if got == want:
        return []
    bad = []
    for row in want:
        if row not in got:
            bad.append("%s:%d: ON ERROR lacks %s (%s), a row of redis_states[]" % (rel, line_of(text, m.start()), *row))
    for row in got:
        if row not in want:
            bad.append("%s:%d: ON ERROR's %s (%s) is no row of redis_states[]" % (rel, line_of(text, m.start()), *row))
    if not bad:
        bad.append("%s:%d: ON ERROR's rows are not in redis_states[]'s order" % (rel, line_of(text, m.start())))
    return bad


def check_lease_states():
    text = read("docs/design.md")
    begin, end = "<!-- lease-states begin -->\n", "<!-- lease-states end -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        return ["docs/design.md: no one pair of lease-states markers"]
    at = text.index(begin) + len(begin)
    table = subprocess.run([sys.executable, os.path.join(SRC, "src/agent/engine/lease-states.py"), "--markdown",
                            os.path.join(SRC, "src/agent/engine/lease-states.list")],
                           capture_output=True, text=True)
    if table.returncode != 0:
        return ["src/agent/engine/lease-states.list: %s" % table.stderr.strip()]
    if text[at:text.index(end)] != table.stdout:
        return ["docs/design.md:%d: the lease's tables differ from lease-states.list (write them again with "
                "lease-states.py --markdown)" % line_of(text, at)]
    return []


CHECKS = [
    ("verbs", check_verbs),
    ("codes", check_codes),
    ("exits", check_exits),
    ("model", check_model),
    ("test-counts", check_test_counts),
    ("suite-time", check_suite_time),
    ("ci-times", check_ci_times),
    ("links", check_links),
    ("keys", check_keys),
    ("options", check_options),
    ("on-error", check_on_error),
    ("old-spellings", check_old_spellings),
    ("lease-states", check_lease_states),
]


def main():
    print("1..%d" % len(CHECKS))
    failed = 0
    for i, (name, fn) in enumerate(CHECKS, 1):
        try:
            bad = fn()
        except (OSError, UnicodeDecodeError) as e:
            bad = ["%s" % e]
        print("%s %d - %s" % ("not ok" if bad else "ok", i, name))
        for b in bad:
            print("# " + b)
        failed += bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
