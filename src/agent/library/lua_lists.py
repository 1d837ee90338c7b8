#!/usr/bin/env python3
# keys.list and scripts.list read (for embed-lua.py, which makes the
# library and the agent's lists of them): every key with what it holds,
# its TTL and what its loss does; every script with its keys and its
# arguments' types and bounds, the bounds read from the agent's headers.
import json
import os
import re
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# keys.list: every key, a line each (see its head). [Key], in the list's order.
class Key:
    FIELDS = ("id", "pattern", "scope", "type", "keys", "holds", "ttl", "loss")

    def __init__(self, words):
        for f, w in zip(self.FIELDS, words):
            setattr(self, f, w)

    # The word after "P:" (a name's key: its suffix).
    def word(self):
        return re.match(KEY_PATTERN[self.scope], self.pattern).group(1)

    # The C format of the key (%s for the prefix, then {%s} for the name
    # or host), and of its form in a Cluster's hash slot (or None).
    def formats(self):
        plain = self.pattern.replace("[:{TAG}]", "")
        fmt = "%s" + re.sub(r"\{[A-Z]+\}", "{%s}", plain[1:])
        tagged = fmt + ":{%s}" if "[:{TAG}]" in self.pattern else None
        return fmt, tagged

    # The key after the prefix as fnmatch(3) globs: its plain form, and
    # its form in a Cluster's hash slot if it has one.
    def globs(self):
        plain = re.sub(r"\{[A-Z]+\}", "{*}", self.pattern.replace("[:{TAG}]", "")[1:])
        return [plain] + ([plain + ":{*}"] if "[:{TAG}]" in self.pattern else [])


KEY_SCOPES = ("name", "slot", "master", "redis", "host")
KEY_TYPES = ("string", "hash", "zset")
KEY_PATTERN = {
    "name": r"^P:\{NAME\}:([a-z_]+)$",
    "slot": r"^P:([a-z_]+)\[:\{TAG\}\]$",
    "master": r"^P:([a-z_]+)\[:\{TAG\}\]$",
    "redis": r"^P:([a-z_]+)$",
    "host": r"^P:([a-z_]+):\{HOST\}$",
}


def key_list(path):
    keys = []
    for line in read(path).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = [w.strip() for w in line.split("|")]
        if len(words) != len(Key.FIELDS) or not all(words):
            sys.exit("%s: %r: %s, each field given" % (path, line[:60], " | ".join(f.upper() for f in Key.FIELDS)))
        k = Key(words)
        if not re.match(r"^[a-z][a-z_]*$", k.id) or any(o.id == k.id for o in keys):
            sys.exit("%s: %r is not a lower-case identifier, or twice" % (path, k.id))
        if k.scope not in KEY_SCOPES or k.type not in KEY_TYPES or k.keys not in ("name", "fleet", "-"):
            sys.exit("%s: %s: scope %s, type %s, keys name, fleet or -" % (path, k.id, "|".join(KEY_SCOPES),
                                                                         "|".join(KEY_TYPES)))
        m = re.match(KEY_PATTERN[k.scope], k.pattern)
        if not m or (k.scope == "name") != (k.keys == "name") or (k.scope == "name" and m.group(1) != k.id):
            sys.exit("%s: %s: %r is no pattern of scope %s (a name's key is P:{NAME}:ID, KEYS name)"
                     % (path, k.id, k.pattern, k.scope))
        if k.keys == "fleet" and k.scope != "slot":
            sys.exit("%s: %s: the keys after the names' are in their hash slot (scope slot)" % (path, k.id))
        if any(o.word() == k.word() and o.scope == k.scope for o in keys):
            sys.exit("%s: %s: its pattern is another key's" % (path, k.id))
        keys.append(k)
    if not any(k.keys == "name" for k in keys):
        sys.exit("%s: no key of a name" % path)
    return keys


# A name's keys' suffixes, in KEYS' order.
def key_suffixes(path):
    return [k.id for k in key_list(path) if k.keys == "name"]


# The keys after the names' in every script on names, in order.
def fleet_keys(path):
    return [k for k in key_list(path) if k.keys == "fleet"]


# The table of keys of docs/protocol.md (tests/check-docs.py compares).
def doc_table(path):
    def cell(text):
        return text.replace("|", "\\|")
    out = ["| key | scope | type | holds | TTL or bound | if it is lost |", "|---|---|---|---|---|---|"]
    for k in key_list(path):
        pattern = k.pattern.replace("P:", "fleetsem:", 1)
        out.append("| `%s` | %s | %s | %s | %s | %s |" % (pattern, k.scope, k.type, cell(k.holds), cell(k.ttl),
                                                       cell(k.loss)))
    return "".join(line + "\n" for line in out)


# ---- scripts.list ----------------------------------------------------------

# A bound of scripts.list: a number, or an expression of the agent's constants.
C_EXPR = re.compile(r"^-?[A-Za-z0-9_+*/]+$")



class Arg:
    def __init__(self, name, kind, type_, lo=None, hi=None, max_len=None, words=None, empty=False):
        self.name, self.kind, self.type = name, kind, type_
        self.lo, self.hi, self.max_len, self.words, self.empty = lo, hi, max_len, words, empty

    # The type as the list writes it (for the docs).
    def spelled(self):
        empty = "|empty" if self.empty else ""
        if self.type == "int":
            return "int[%s..%s]%s" % (self.lo or "", self.hi or "", empty)
        if self.type in ("str", "word"):
            return "%s[%s]%s" % (self.type, self.max_len, empty)
        if self.type == "choice":
            return "choice[%s]" % "|".join(self.words)
        return self.type + empty


def parse_arg(path, script, word):
    m = re.match(r"^([a-z][a-z0-9_]*):(.*?)(\?|\.\.\.)?$", word)
    if not m:
        sys.exit("%s: %s: %r is not NAME:TYPE" % (path, script, word))
    name, t, kind = m.group(1), m.group(2), m.group(3) or ""
    if t in ("lease", "lease|empty", "flag", "call"):
        return Arg(name, kind, t.split("|")[0], empty=t.endswith("|empty"))
    m = re.match(r"^int\[([^.\]]*)\.\.([^\]]*)\](\|empty)?$", t)
    if m:
        lo, hi = m.group(1) or None, m.group(2) or None
        if any(x is not None and not C_EXPR.match(x) for x in (lo, hi)):
            sys.exit("%s: %s: %r: a bound is a number or a C constant" % (path, script, word))
        return Arg(name, kind, "int", lo=lo, hi=hi, empty=bool(m.group(3)))
    m = re.match(r"^(str|word)\[([^\]]+)\](\|empty)?$", t)
    if m and C_EXPR.match(m.group(2)) and (m.group(1) == "word" or not m.group(3)):
        return Arg(name, kind, m.group(1), max_len=m.group(2), empty=bool(m.group(3)))
    m = re.match(r"^choice\[([^\]]+)\]$", t)
    if m and all(re.match(r"^[a-z0-9]+$", w) for w in m.group(1).split("|")):
        return Arg(name, kind, "choice", words=m.group(1).split("|"))
    sys.exit("%s: %s: %r: no such type (int[LO..HI], lease, str[MAX], word[MAX], flag, choice[A|B], call)"
             % (path, script, word))


# A script's KEYS, the second word of its line: "name" (a name's keys,
# then the fleet's: keys.list's "keys" name, then fleet), "names" (those
# of one name or more, one name after the other, then the fleet's), or
# keys.list ids of scope master, comma-separated, "?" after those that may
# be left out (only at the end).
def parse_keys(path, script, word):
    if word in ("name", "names"):
        return word
    ids = word.split(",")
    if not all(re.match(r"^[a-z][a-z_]*\??$", i) for i in ids):
        sys.exit("%s: %s: KEYS %r: name, names or ID[,ID...] (keys.list's)" % (path, script, word))
    if any(a.endswith("?") and not b.endswith("?") for a, b in zip(ids, ids[1:])):
        sys.exit("%s: %s: KEYS %r: an optional key only at the end" % (path, script, word))
    return ids


# {script: (KEYS, [Arg])}, in the list's order (the enum's); Arg.kind ""
# (required), "?" (optional) or "..." (the rest); KEYS as parse_keys().
def script_lines(path):
    scripts = {}
    for line in read(path).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        script, args, seen_optional = words[0], [], False
        if not re.match(r"^[a-z][a-z_]*$", script) or script in scripts or script == "version" or len(words) < 3:
            sys.exit("%s: %r: SCRIPT KEYS ARG... or SCRIPT KEYS -, each script once (lower-case, not version)"
                     % (path, line))
        keys = parse_keys(path, script, words[1])
        for w in words[2:] if words[2:] != ["-"] else []:
            a = parse_arg(path, script, w)
            if a.name in [o.name for o in args]:
                sys.exit("%s: %s: %r twice" % (path, script, a.name))
            if (seen_optional and a.kind == "") or (args and args[-1].kind == "..."):
                sys.exit("%s: %s: %r after an optional or rest argument" % (path, script, w))
            if a.type == "call" and (a.kind != "..." or keys != "names"):
                sys.exit("%s: %s: %r: calls are a rest (NAME:call...), of a script on names" % (path, script, w))
            seen_optional = seen_optional or a.kind == "?"
            args.append(a)
        scripts[script] = (keys, args)
    if not scripts:
        sys.exit("%s: no script" % path)
    return scripts


# {script: [Arg]}, in the list's order.
def script_args(path):
    return {s: args for s, (_, args) in script_lines(path).items()}


# ---- The agent's constants that scripts.list's bounds name -----------------

# The headers they are read from: the agent's own limits, never copied by
# hand. lua-scripts.c asserts at compile time that each is the value the
# library was given (c_constant_checks()).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CONSTANT_HEADERS = ["src/shared/names.h", "src/shared/protocol.h", "src/shared/config.h", "src/shared/time-util.h",
                    "src/agent/engine/engine.h"]
STANDARD_CONSTANTS = {"UINT32_MAX": (1 << 32) - 1}   # <stdint.h>'s
# What the key checks bound besides the arguments' types (prelude/args.lua).
KEY_CONSTANTS = ["IDENT_MAX_LEN", "NAME_MAX_LEN"]


def c_defines():
    defines = {}
    for h in CONSTANT_HEADERS:
        for m in re.finditer(r"^#define ([A-Z][A-Z0-9_]*)[ \t]+(.*?)[ \t]*(?:/\*.*)?$", read(os.path.join(ROOT, h)), re.M):
            defines.setdefault(m.group(1), m.group(2))
    return defines


# The value of a C integer expression of the headers' constants (literals,
# casts to an integer type, + - * / and parentheses); exits on anything
# else rather than guess.
def c_value(expr, defines, depth=0):
    if depth > 8:
        sys.exit("%s: %r: constants nested too deep" % (", ".join(CONSTANT_HEADERS), expr))
    e = re.sub(r"\(\s*(?:usec_t|uint64_t|uint32_t|size_t|unsigned|long long|unsigned long long)\s*\)", "", expr)
    e = re.sub(r"\b([0-9]+)(?:ULL|ull|UL|ul|LL|ll|U|u|L|l)\b", r"\1", e)

    def name(m):
        n = m.group(0)
        if n in STANDARD_CONSTANTS:
            return str(STANDARD_CONSTANTS[n])
        if n not in defines:
            sys.exit("%r: %s is defined in none of %s" % (expr, n, ", ".join(CONSTANT_HEADERS)))
        return "(%d)" % c_value(defines[n], defines, depth + 1)
    e = re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b", name, e)
    if not re.match(r"^[0-9+\-*/() ]+$", e):
        sys.exit("%r: not an integer expression of the headers' constants (%s)" % (expr, e))
    return int(eval(e.replace("/", "//"), {"__builtins__": {}}))


# {expression: value} of every bound and length scripts.list names that is
# not a number, and of KEY_CONSTANTS.
def list_constants(args_path):
    defines, out = c_defines(), {}
    exprs = list(KEY_CONSTANTS)
    for _, args in script_lines(args_path).values():
        exprs += [x for a in args for x in (a.lo, a.hi, a.max_len) if x is not None]
    for x in exprs:
        if not re.match(r"^-?[0-9]+$", x):
            out[x] = c_value(x, defines)
    return out


def lua_number(x, constants):
    return "nil" if x is None else str(constants.get(x, x if re.match(r"^-?[0-9]+$", x) else None))


# The Lua tables prelude/args.lua checks each call against: ARG_TYPES
# (each script's arguments, as arg_fault() reads them; need: how many
# a call cannot do without, rest: the last takes the rest) and KEY_SHAPES
# (one: a name's keys; else the runs of names'; ids: keys.list's words).
def lua_arg_types(keys_path, args_path):
    constants = list_constants(args_path)
    words = {k.id: k.word() for k in key_list(keys_path)}
    out = ["-- Generated from scripts.list (and the agent's headers for its limits):",
           "-- each script's arguments and keys, which bad_call() checks a call against.",
           "local %s = %s" % (", ".join(KEY_CONSTANTS), ", ".join(str(constants[c]) for c in KEY_CONSTANTS)),
           "local NAME_SUFFIXES = {%s}" % ", ".join("'%s'" % x for x in key_suffixes(keys_path)),
           "local FLEET_WORDS = {%s}" % ", ".join("'%s'" % k.word() for k in fleet_keys(keys_path)),
           "local ARG_TYPES = {"]
    shapes = []
    for script, (keys, args) in script_lines(args_path).items():
        cells = []
        for a in args:
            if a.type == "int":
                cell = "'int', %s, %s, %s" % (lua_number(a.lo, constants), lua_number(a.hi, constants),
                                               "true" if a.empty else "false")
            elif a.type in ("str", "word"):
                cell = "'%s', %s, %s" % (a.type, lua_number(a.max_len, constants), "true" if a.empty else "false")
            elif a.type == "lease":
                cell = "'lease', %s" % ("true" if a.empty else "false")
            elif a.type == "choice":
                cell = "'choice', {%s}, '%s'" % (", ".join("['%s'] = true" % w for w in a.words), ", ".join(a.words))
            else:
                cell = "'%s'" % a.type
            cells.append("{'%s', %s}" % (a.name, cell))
        out.append("  %s = {need = %d, rest = %s%s}," % (
            script, sum(1 for a in args if a.kind == ""), "true" if args and args[-1].kind == "..." else "false",
            "".join(", " + c for c in cells)))
        if keys in ("name", "names"):
            shapes.append("  %s = {one = %s}," % (script, "true" if keys == "name" else "false"))
        else:
            for i in keys:
                if i.rstrip("?") not in words:
                    sys.exit("%s: %s: KEYS %s is not in %s" % (args_path, script, i, keys_path))
            shapes.append("  %s = {need = %d, ids = {%s}}," % (
                script, sum(1 for i in keys if not i.endswith("?")),
                ", ".join("'%s'" % words[i.rstrip("?")] for i in keys)))
    out.append("}")
    out.append("local KEY_SHAPES = {")
    out += shapes
    out.append("}")
    return "\n".join(out) + "\n"


# {"constants": {NAME: N}, "name_keys": [SUFFIX...], "fleet_words": [WORD...],
#  "scripts": {SCRIPT: {"keys": "name"|"names"|[[WORD, OPTIONAL]...],
#   "args": [{"name", "type", "kind", "lo", "hi", "max", "empty", "words"}]}}}
# with every bound a number (--arg-types).
def arg_types_json(keys_path, args_path):
    import json
    constants = list_constants(args_path)
    words = {k.id: k.word() for k in key_list(keys_path)}

    def number(x):
        return None if x is None else int(constants.get(x, x))
    out = {"constants": {c: constants[c] for c in KEY_CONSTANTS}, "name_keys": key_suffixes(keys_path),
           "fleet_words": [k.word() for k in fleet_keys(keys_path)], "scripts": {}}
    for script, (keys, args) in script_lines(args_path).items():
        out["scripts"][script] = {
            "keys": keys if keys in ("name", "names") else [[words[i.rstrip("?")], i.endswith("?")] for i in keys],
            "args": [{"name": a.name, "type": a.type, "kind": a.kind, "lo": number(a.lo), "hi": number(a.hi),
                      "max": number(a.max_len), "empty": a.empty, "words": a.words} for a in args]}
    return json.dumps(out, indent=1) + "\n"


# C's check of the values the library was given: each constant as the
# compiler sees it.
def c_constant_checks(args_path):
    return "".join('_Static_assert((%s) == %dLL, "scripts.list: %s is not the value the Lua library checks");\n'
                   % (x, v, x) for x, v in sorted(list_constants(args_path).items()))


# The table of arguments of docs/protocol.md (tests/check-docs.py compares).
def doc_args(path):
    out = ["| script | keys (KEYS) | arguments (ARGV, in order) |", "|---|---|---|"]
    for script, (keys, args) in script_lines(path).items():
        cells = ", ".join("`%s:%s%s`" % (a.name, a.spelled(), a.kind) for a in args) or "none"
        keys = keys if keys in ("name", "names") else ", ".join(keys)
        out.append("| `%s` | %s | %s |" % (script, keys, cells.replace("|", "\\|")))
    return "".join(line + "\n" for line in out)


# For each script, A_<SCRIPT>_<NAME>: where that argument is in ARGV (a
# rest argument: where it starts). Written into the text as numbers, as a
# C macro would be: a name costs a script nothing per call.
def arg_places(args_path):
    places = {}
    for script, args in script_args(args_path).items():
        for i, a in enumerate(args):
            places["A_%s_%s" % (script.upper(), a.name.upper())] = i + 1
    return places
