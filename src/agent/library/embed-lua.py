#!/usr/bin/env python3
# The Lua scripts as one Redis Functions library, with the lists the agent
# and the scripts share (keys, scripts and their arguments, replies).
#
#   embed-lua.py --c OUT.c KEYS.h ARGS.h REPLIES.c REPLIES.h SCRIPTS.h KEYS.list SCRIPTS.list REPLIES.list VERSION
#                PRELUDE [SCRIPT...]
#       (PRELUDE: the folder of the prelude's files, lua/prelude, put
#       together in the order of PRELUDE_FILES; SCRIPT...: the scripts'
#       files, which must be those SCRIPTS.list names, lua/SCRIPT.lua
#       beside the prelude when none are given)
#       writes the library as a C string with its version and each
#       script's function name and batch name (tables indexed by enum
#       Script), the enum itself (SCRIPTS.h), the key suffixes as
#       key_suffix[N_KEYS] (KEYS.h), each script's arguments as
#       ARG_<SCRIPT>_<NAME> (ARGS.h) and each script's reply shapes with
#       their decoders (REPLIES.c, REPLIES.h);
#   embed-lua.py --library KEYS.list SCRIPTS.list REPLIES.list VERSION PRELUDE [SCRIPT...]
#       prints the library as the agent loads it into Redis (FUNCTION LOAD);
#   embed-lua.py --keys KEYS.list
#       prints a name's key suffixes, one a line, in order (for the tests);
#   embed-lua.py --key-list KEYS.list
#       prints every key: ID PATTERN SCOPE TYPE, tab-separated, a line each
#       (for the key-loss test and the fault harness);
#   embed-lua.py --doc-table KEYS.list
#       prints docs/protocol.md's table of keys (for check-docs);
#   embed-lua.py --scripts SCRIPTS.list
#       prints the scripts' names, one a line, in the list's order;
#   embed-lua.py --doc-args SCRIPTS.list
#       prints docs/protocol.md's table of the scripts' arguments;
#   embed-lua.py --args SCRIPTS.list SCRIPT
#       prints SCRIPT's argument names, one a line, in order (for the tests);
#   embed-lua.py --arg-types KEYS.list SCRIPTS.list
#       prints, as JSON, each script's keys and arguments with their types
#       and bounds as numbers, and the key limits (for the tests of the
#       library's checks);
#   embed-lua.py --constant-headers
#       prints the agent's headers the bounds of SCRIPTS.list are read
#       from, one a line (for meson's rebuild).
#
# KEYS.list holds every key, a line each (see its head); KEYS[n] of every
# name script is P:{NAME}:<the n-th name key>, then the fleet's keys.
# SCRIPTS.list holds a line per script: its name, its keys, then its
# arguments in order, each with its type. The prelude starts with the Lua
# locals K_<SUFFIX> for the keys, then ARG_TYPES and KEY_SHAPES (each
# script's arguments and keys, bounds as numbers read from the agent's
# headers: CONSTANT_HEADERS), against which every function checks its
# call first (bad_call(), prelude/args.lua, put at the top of each
# function here); A_<SCRIPT>_<NAME> in the scripts is written as
# that argument's place in ARGV, and R_<SCRIPT>_<OUTCOME> that reply's tag
# (REPLIES.list: see its head for the grammar). So each list lives in one
# file.
#
# The library ("fleetsem"): the prelude's top level once, then each
# script's body as the callback of the function fleetsem_<SCRIPT>_v<N>,
# its KEYS and ARGV the callback's parameters; fleetsem_version (the same
# name in every version) returns {N, WAKE_COMMAND, SHA256}. N is the last line of
# VERSION ("N SHA256", one line per version there ever was), SHA256 the
# hash of the library's text with N left out: a text that changed without
# a new line there fails the build, so that agents never take a changed
# library for the one they know (fleetsemd(8), THE LIBRARY).
import hashlib
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


# The script files the library is made of: lua/SCRIPT.lua for each line
# of the list, beside the prelude's folder. Files given on the command
# line (meson's, the tests') must be exactly these.
def script_files(scripts_path, prelude_path, given):
    want = [os.path.join(os.path.dirname(os.path.normpath(prelude_path)), s + ".lua") for s in script_args(scripts_path)]
    if given and sorted(script_name(f) for f in given) != sorted(script_name(f) for f in want):
        sys.exit("%s: the scripts given (%s) are not the list's (%s)" % (
            scripts_path, " ".join(sorted(script_name(f) for f in given)),
            " ".join(sorted(script_name(f) for f in want))))
    return given or want


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


def with_arg_places(text, args_path, replies_path):
    places = arg_places(args_path)
    places.update(reply_tags(replies_path))

    def place(m):
        if m.group(0) not in places:
            sys.exit("%r is not in %s or %s" % (m.group(0), args_path, replies_path))
        return str(places[m.group(0)])
    return re.sub(r"\b[AR]_[A-Z][A-Z_]*\b", place, text)


# ---- replies.list ----------------------------------------------------------

class Field:
    def __init__(self, name, kind, lo=None, hi=None, max_len=None, group=None, more=""):
        self.name, self.kind, self.lo, self.hi = name, kind, lo, hi
        self.max_len, self.group, self.more = max_len, group, more


C_EXPR = re.compile(r"^-?[A-Za-z0-9_+*/]+$")


def parse_field(path, where, word, groups, in_group):
    m = re.match(r"^([a-z][a-z0-9_]*):(.*?)(\?|\.\.\.)?$", word)
    if not m:
        sys.exit("%s: %s: %r is not NAME:TYPE" % (path, where, word))
    name, t, more = m.group(1), m.group(2), m.group(3) or ""
    if more == "...":
        if in_group or t not in groups:
            sys.exit("%s: %s: %r: a rest is NAME:GROUP..., of a group declared before" % (path, where, word))
        return Field(name, "rest", group=t, more=more)
    if t == "lease":
        return Field(name, "lease", more=more)
    m = re.match(r"^int\[([^.\]]*)\.\.([^\]]*)\]$", t)
    if m:
        lo, hi = m.group(1) or None, m.group(2) or None
        if any(x is not None and not C_EXPR.match(x) for x in (lo, hi)):
            sys.exit("%s: %s: %r: a bound is a number or a C constant" % (path, where, word))
        return Field(name, "int", lo=lo, hi=hi, more=more)
    m = re.match(r"^str\[([^\]]+)\]$", t)
    if m and C_EXPR.match(m.group(1)):
        return Field(name, "str", max_len=m.group(1), more=more)
    m = re.match(r"^list\(([a-z_]+)\)$", t)
    if m and not in_group and m.group(1) in groups:
        return Field(name, "list", group=m.group(1), more=more)
    sys.exit("%s: %s: %r: no such type (int[LO..HI], lease, str[MAX], list(GROUP) of a group declared before)"
             % (path, where, word))


# ({group: [Field]}, {script: [(outcome, form, tag, [Field])]}); form "tag"
# ({TAG, ...}), "untagged" ({...}) or "bare" (the integer TAG).
def script_replies(path):
    groups, scripts = {}, {}
    for line in read(path).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "into":
            continue    # reply_into()
        if words[0] == "group":
            if len(words) < 3 or not re.match(r"^[a-z][a-z_]*$", words[1]) or words[1] in groups:
                sys.exit("%s: %r: group NAME FIELD..., each name once" % (path, line))
            fields = [parse_field(path, words[1], w, groups, True) for w in words[2:]]
            if any(f.more for f in fields) or len(set(f.name for f in fields)) != len(fields):
                sys.exit("%s: group %s: a field twice, or optional" % (path, words[1]))
            groups[words[1]] = fields
            continue
        if len(words) < 3:
            sys.exit("%s: %r: SCRIPT OUTCOME TAG FIELD..." % (path, line))
        script, outcome, tag = words[0], words[1], words[2]
        where = "%s %s" % (script, outcome)
        if not re.match(r"^[a-z][a-z_]*$", script) or not re.match(r"^[a-z][a-z_]*$", outcome):
            sys.exit("%s: %s: a script and an outcome are lower-case names" % (path, where))
        m = re.match(r"^\((-?[0-9]+)\)$", tag)
        if m:
            form, tag = "bare", int(m.group(1))
        elif tag == "-":
            form, tag = "untagged", None
        elif re.match(r"^-?[0-9]+$", tag):
            form, tag = "tag", int(tag)
        else:
            sys.exit("%s: %s: the tag is N, (N) or -" % (path, where))
        fields = [parse_field(path, where, w, groups, False) for w in words[3:]]
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            sys.exit("%s: %s: a field twice" % (path, where))
        for i, f in enumerate(fields):
            if f.more == "..." and i != len(fields) - 1:
                sys.exit("%s: %s: a rest only at the end" % (path, where))
            if f.more == "" and i > 0 and fields[i - 1].more == "?":
                sys.exit("%s: %s: a required field after an optional one" % (path, where))
        if form == "bare" and fields:
            sys.exit("%s: %s: a bare integer has no fields" % (path, where))
        if form == "untagged" and not any(f.more == "" for f in fields):
            sys.exit("%s: %s: an untagged reply needs a field that is always there" % (path, where))
        shapes = scripts.setdefault(script, [])
        if any(o == outcome for o, _, _, _ in shapes):
            sys.exit("%s: %s twice" % (path, where))
        shapes.append((outcome, form, tag, fields))
    for script, shapes in scripts.items():
        forms = set(form for _, form, _, _ in shapes)
        tags = [tag for _, _, tag, _ in shapes]
        # One shape per reply: the tag tells them apart, so no reply fits two.
        if len(forms) != 1 or ("untagged" in forms and len(shapes) != 1) or len(set(tags)) != len(tags):
            sys.exit("%s: %s: its shapes are all tagged (each tag once), all bare, or one untagged" % (path, script))
    return groups, scripts


# {script: (STRUCT, PREFIX)}: the scripts whose replies decode straight
# into a struct of the engine ("into SCRIPT STRUCT PREFIX"): each field
# into its member of the same name, the outcome into .outcome as
# PREFIX_<OUTCOME>.
def reply_into(path, scripts):
    into = {}
    for line in read(path).splitlines():
        words = line.split()
        if not words or words[0] != "into":
            continue
        if (len(words) != 4 or words[1] not in scripts or words[1] in into or not re.match(r"^[A-Z][A-Za-z]*$", words[2])
                or not re.match(r"^[A-Z][A-Z_]*$", words[3])):
            sys.exit("%s: %r: into SCRIPT STRUCT PREFIX, of a script with shapes, once" % (path, line))
        if any(f.kind in ("list", "rest") for _, _, _, fields in scripts[words[1]] for f in fields):
            sys.exit("%s: %s: only a reply without lists or rests decodes into a struct of the engine" % (path, words[1]))
        into[words[1]] = (words[2], words[3])
    return into


# R_<SCRIPT>_<OUTCOME>: the tag of that reply, for the scripts.
def reply_tags(path):
    _, scripts = script_replies(path)
    return {"R_%s_%s" % (s.upper(), o.upper()): tag for s, shapes in scripts.items()
            for o, form, tag, _ in shapes if form != "untagged"}


def camel(name):
    return "".join(w.capitalize() for w in name.split("_"))


def c_member(f):
    if f.kind == "int":
        return "long long %s;" % f.name
    if f.kind == "lease":
        return "char %s[LEASE_ID_LEN + 1];" % f.name
    if f.kind == "str":
        return "char %s[(%s) + 1];" % (f.name, f.max_len)
    return "ReplyList %s;" % f.name


# member: the C lvalue the field decodes into, as in T, for offsetof()
# and sizeof() (an integer is stored at its member's width).
def c_field(f, struct, member):
    kind = {"int": "REPLY_INT", "lease": "REPLY_LEASE", "str": "REPLY_STRING", "list": "REPLY_LIST",
            "rest": "REPLY_REST"}[f.kind]
    lo = "(long long) (%s)" % f.lo if f.lo is not None else "LLONG_MIN"
    hi = "(long long) (%s)" % f.hi if f.hi is not None else "LLONG_MAX"
    max_len = "(size_t) (%s)" % f.max_len if f.max_len else "0"
    group = "&reply_group_%s" % f.group if f.group else "NULL"
    size = "sizeof(((%s *) NULL)->%s)" % (struct, member) if f.kind == "int" else "0"
    return ('        { .name = "%s", .type = %s, .min = %s, .max = %s, .max_len = %s, .group = %s, .offset = offsetof(%s, %s), '
            '.size = %s },\n' % (f.name, kind, lo, hi, max_len, group, struct, member, size))


# Checks at compile time that a struct of the engine holds each field
# whole: an integer's member as wide as its bound needs (and signed when it
# may be negative), a string's array long enough.
def c_into_checks(struct, fields):
    out = []
    for f in fields:
        m = "((%s *) NULL)->%s" % (struct, f.name)
        if f.kind == "int":
            fits = "sizeof(%s) == 8" % m
            if f.hi is not None:
                fits += " || (sizeof(%s) == 4 && (%s) <= UINT32_MAX)" % (m, f.hi)
            out.append('_Static_assert(%s, "%s.%s: 64 bits, or 32 that hold its bound");\n' % (fits, struct, f.name))
            if f.lo is not None and f.lo.startswith("-"):
                out.append('_Static_assert((typeof(%s)) -1 < 0, "%s.%s is signed");\n' % (m, struct, f.name))
        elif f.kind in ("str", "lease"):
            n = "LEASE_ID_LEN" if f.kind == "lease" else f.max_len
            out.append('_Static_assert(sizeof(%s) >= (%s) + 1, "%s.%s holds its longest");\n' % (m, n, struct, f.name))
    return "".join(out)


# The decoder of a script whose replies go straight into the engine's
# struct (reply_into()): no struct of its own, no copy after.
def write_decode_into(h, script, shapes, struct, prefix):
    S = script.upper()
    h.write("extern const ReplyScript reply_script_%s;\n\n" % script)
    h.write("/* reply as one of %s.lua's shapes, straight into the engine's %s: its\n"
            " * outcome %s_<OUTCOME>, each field in range into the member of its name;\n"
            " * -EBADMSG, ret untouched, when it fits none (an error reply, NULL and\n"
            " * nil included). */\n" % (script, struct, prefix))
    h.write("static inline int reply_decode_%s(const RedisReply *reply, %s *ret) {\n" % (script, struct))
    h.write("        static const typeof(((%s *) NULL)->outcome) outcome_of[N_REPLY_%s] = {\n" % (struct, S))
    for o, _, _, _ in shapes:
        h.write("                [REPLY_%s_%s] = %s_%s,\n" % (S, o.upper(), prefix, o.upper()))
    h.write("        };\n")
    h.write("        %s d = {};\n        size_t n = 0;\n" % struct)
    h.write("        int k = reply_decode(&reply_script_%s, reply, &d, &n);\n\n" % script)
    h.write("        if (k < 0)\n                return k;\n")
    h.write("        d.outcome = outcome_of[k];\n")
    for o, _, _, fields in shapes:
        for i, f in enumerate(fields):
            if f.more == "?":
                h.write("        if (k == REPLY_%s_%s)\n                d.has_%s = n > %d;\n" % (S, o.upper(), f.name, i))
    h.write("        *ret = d;\n        return k;\n}\n\n")


def write_replies(out_c, out_h, replies_path):
    groups, scripts = script_replies(replies_path)
    into = reply_into(replies_path, scripts)
    with open(out_h, "w", encoding="utf-8") as h:
        h.write("/* Generated from src/agent/library/replies.list; do not edit. */\n#pragma once\n\n")
        h.write('#include "names.h"\n#include "protocol.h"\n#include "replies.h"\n#include "engine.h"\n\n')
        for g, fields in groups.items():
            h.write("typedef struct Reply%s {\n" % camel(g))
            for f in fields:
                h.write("        %s\n" % c_member(f))
            h.write("} Reply%s;\nextern const ReplyGroup reply_group_%s;\n\n" % (camel(g), g))
        for script, shapes in scripts.items():
            S, T = script.upper(), camel(script)
            h.write("/* %s.lua */\ntypedef enum Reply%sOutcome {\n" % (script, T))
            for o, _, _, _ in shapes:
                h.write("        REPLY_%s_%s,\n" % (S, o.upper()))
            h.write("        N_REPLY_%s\n} Reply%sOutcome;\n\n" % (S, T))
            if script in into:
                write_decode_into(h, script, shapes, *into[script])
                continue
            h.write("typedef struct Reply%s {\n        Reply%sOutcome outcome;\n" % (T, T))
            for o, _, _, fields in shapes:
                if fields:
                    h.write("        struct {\n")
                    for f in fields:
                        h.write("                %s\n" % c_member(f))
                    for f in fields:
                        if f.more == "?":
                            h.write("                bool has_%s;    /* the reply had it */\n" % f.name)
                    h.write("        } %s;\n" % o)
            h.write("} Reply%s;\nextern const ReplyScript reply_script_%s;\n\n" % (T, script))
            h.write("/* reply as one of %s.lua's shapes, with its fields in range; -EBADMSG, ret\n"
                    " * untouched, when it fits none (an error reply, NULL and nil included). */\n" % script)
            h.write("static inline int reply_decode_%s(const RedisReply *reply, Reply%s *ret) {\n" % (script, T))
            h.write("        Reply%s d = {};\n        size_t n = 0;\n" % T)
            h.write("        int k = reply_decode(&reply_script_%s, reply, &d, &n);\n\n" % script)
            h.write("        if (k < 0)\n                return k;\n")
            h.write("        d.outcome = (Reply%sOutcome) k;\n" % T)
            # An optional field is there when the reply reached it: said
            # here, from the list, so that no reader counts fields.
            for o, _, _, fields in shapes:
                for i, f in enumerate(fields):
                    if f.more == "?":
                        h.write("        if (k == REPLY_%s_%s)\n                d.%s.has_%s = n > %d;\n"
                                % (S, o.upper(), o, f.name, i))
            h.write("        *ret = d;\n        return k;\n}\n\n")
        h.write("/* Every script's shapes, for the tests. */\n#define N_REPLY_SCRIPTS %d\n" % len(scripts))
        h.write("extern const ReplyScript *const reply_scripts[N_REPLY_SCRIPTS];\n")
    with open(out_c, "w", encoding="utf-8") as c:
        c.write("/* Generated from src/agent/library/replies.list; do not edit. */\n")
        c.write("#include <limits.h>\n#include <stddef.h>\n#include <stdint.h>\n\n#include \"lua-replies.h\"\n\n")
        for g, fields in groups.items():
            c.write("static const ReplyField group_%s[] = {\n" % g)
            for f in fields:
                c.write(c_field(f, "Reply%s" % camel(g), f.name))
            c.write("};\nconst ReplyGroup reply_group_%s = { \"%s\", group_%s, ELEMENTSOF(group_%s), sizeof(Reply%s) };\n\n"
                    % (g, g, g, g, camel(g)))
        for script, shapes in scripts.items():
            T = camel(script)
            if script in into:
                seen = {}
                for _, _, _, fields in shapes:
                    seen.update((f.name, f) for f in fields)
                c.write(c_into_checks(into[script][0], seen.values()))
            for o, _, _, fields in shapes:
                if fields:
                    c.write("static const ReplyField %s_%s[] = {\n" % (script, o))
                    for f in fields:
                        if script in into:
                            c.write(c_field(f, into[script][0], f.name))
                        else:
                            c.write(c_field(f, "Reply%s" % T, "%s.%s" % (o, f.name)))
                    c.write("};\n")
            # Indexed by the outcome's enum: reply_decode() returns the index.
            c.write("static const ReplyShape %s_shapes[N_REPLY_%s] = {\n" % (script, script.upper()))
            for o, form, tag, fields in shapes:
                need = sum(1 for f in fields if f.more == "")
                c.write('        [REPLY_%s_%s] = { .outcome = "%s", .form = REPLY_FORM_%s, .tag = %d, .fields = %s, .n_fields = %d, '
                        '.n_required = %d },\n' % (script.upper(), o.upper(), o, form.upper(), tag or 0, "%s_%s" % (script, o) if fields else "NULL",
                                                    len(fields), need))
            c.write("};\nconst ReplyScript reply_script_%s = { \"%s\", %s_shapes, ELEMENTSOF(%s_shapes) };\n\n"
                    % (script, script, script, script))
        c.write("const ReplyScript *const reply_scripts[N_REPLY_SCRIPTS] = {\n")
        for script in scripts:
            c.write("        &reply_script_%s,\n" % script)
        c.write("};\n")


# The prelude's files, by topic, in the order the library has them: a
# file uses only what it or one before it declares (a Lua local is seen
# only after its declaration).
PRELUDE_FILES = ["args.lua", "records.lua", "forgot.lua", "clocks.lua", "line.lua", "calls.lua"]


# The prelude's text: its files one after the other, a blank line between.
# A .lua file in the folder that is not in PRELUDE_FILES (or one missing)
# fails: the library never leaves a part out unseen.
def read_prelude(prelude_dir):
    if not os.path.isdir(prelude_dir):
        sys.exit("%s: the prelude is a folder of %s" % (prelude_dir, ", ".join(PRELUDE_FILES)))
    present = sorted(f for f in os.listdir(prelude_dir) if f.endswith(".lua"))
    if present != sorted(PRELUDE_FILES):
        sys.exit("%s: has %s, not the prelude's files %s (PRELUDE_FILES)"
                 % (prelude_dir, ", ".join(present), ", ".join(PRELUDE_FILES)))
    parts = [read(os.path.join(prelude_dir, f)) for f in PRELUDE_FILES]
    return "\n".join(p if p.endswith("\n") else p + "\n" for p in parts)


def prelude_text(keys_path, args_path, prelude_path):
    suffixes = key_suffixes(keys_path)
    names = ", ".join("K_" + s.upper() for s in suffixes)
    fleet = fleet_keys(keys_path)
    text = read_prelude(prelude_path)
    check_state_reset(prelude_path, text)
    check_key_places(prelude_path, text, ["K_" + s.upper() for s in suffixes], ["K_" + k.id.upper() for k in fleet])
    return ("-- Generated from keys.list: begin_name() sets these for each name a\n"
            "-- call works on: its keys P:{NAME}:<suffix>, in that order in KEYS,\n"
            "-- then (the last %s KEYS) %s.\n"
            "local %s\n"
            "local %s\n"
            "local NAME_KEYS = %d  -- how many keys a name has (a batch's KEYS: a run of them per name)\n"
            "-- ARGV[A_<SCRIPT>_<NAME>] is that argument of scripts.list, and R_<SCRIPT>_<OUTCOME>\n"
            "-- the tag of that reply of replies.list, each written here as a number.\n"
            % (["one", "two", "three", "four"][len(fleet) - 1],
               ", and ".join(k.pattern.replace("[:{TAG}]", "") + (", the fleet's" if k.id == "fleet_clock" else "")
                             for k in fleet),
               names, ", ".join("K_" + k.id.upper() for k in fleet), len(suffixes))) + lua_arg_types(keys_path, args_path) + text


# begin_name() takes a name's keys from KEYS in keys.list's order, and the
# fleet's after every name's: its two assignments name them in that order.
def check_key_places(path, text, names, fleet):
    got = [[n.strip() for n in m.group(1).split(",")]
           for m in re.finditer(r"^\s*(K_[A-Z_]+(?:, *K_[A-Z_]+)*) = ", text, re.M)]
    if got != [names, fleet]:
        sys.exit("%s: begin_name() sets %s, not %s then %s (keys.list's order)"
                 % (path, " then ".join(", ".join(g) for g in got), ", ".join(names), ", ".join(fleet)))


# No state carries from one call to the next: every variable the
# prelude's top level declares (but functions and CONSTANTS), in any of
# its files, is set again by begin_call() or begin_name(), which every
# script on a name runs first. `text` is the whole prelude.
def check_state_reset(path, text):
    declared = []
    for m in re.finditer(r"^local (?!function\b)([A-Za-z_][A-Za-z0-9_]*(?:, *[A-Za-z_][A-Za-z0-9_]*)*)", text, re.M):
        declared += [n.strip() for n in m.group(1).split(",")]
    state = [n for n in declared if not re.match(r"^[A-Z][A-Z0-9_]*$", n)]
    bodies = "".join(re.findall(r"^local function begin_(?:call|name)\b.*?^end$", text, re.M | re.S))
    if not bodies:
        sys.exit("%s: no begin_call() or begin_name()" % path)
    missing = [n for n in state if not re.search(r"(^|[\s,])%s\s*[,=]" % re.escape(n), bodies, re.M)]
    if missing:
        sys.exit("%s: begin_call()/begin_name() do not set %s: it would carry from one call to the next"
                 % (path, ", ".join(missing)))


def write_args_h(out_h, args_path):
    with open(out_h, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/library/scripts.list; do not edit. */\n")
        f.write("#pragma once\n\n")
        f.write("/* Each script's arguments: ARG_<SCRIPT>_<NAME> is its place in ARGV;\n")
        f.write(" * N_<SCRIPT>_ARGS counts them (without those of a rest argument). */\n")
        for script, args in script_args(args_path).items():
            if not args or args[-1].type == "call":
                continue
            f.write("enum {\n")
            for a in args:
                f.write("        ARG_%s_%s,\n" % (script.upper(), a.name.upper()))
            f.write("        N_%s_ARGS\n};\n" % script.upper())


def c_string(text):
    lines = []
    for line in text.splitlines():
        line = line.replace("\\", "\\\\").replace('"', '\\"')
        lines.append('        "%s\\n"' % line)
    return "\n".join(lines) or '""'


LIBRARY_NAME = "fleetsem"
VERSION_MARK = "@LIBRARY_VERSION@"
# Where the text's own hash goes: the hash VERSION records for it (of the
# text with both marks left in), which fleetsem_version returns beside the
# version, so that an agent knows the text under its version by a call of
# a few bytes (fleetsemd(8), THE LIBRARY).
HASH_MARK = "@LIBRARY_HASH@"
# The prelude's functions that read or keep no state of a call: a script
# that does not start with begin_call(KEYS) calls no other (its state
# would be the last call's: the library's top level runs once).
PURE = {"digits"}


def script_name(path):
    name = os.path.basename(path)
    if not name.endswith(".lua") or not re.match(r"^[a-z][a-z_]*$", name[:-4]):
        sys.exit("%s: a script is NAME.lua, NAME lower-case" % path)
    return name[:-4]


def function_name(script, version):
    return "%s_%s_v%d" % (LIBRARY_NAME, script, version)


def check_script(path, text, prelude):
    code = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("--")]
    if code and code[0].strip() == "begin_call(KEYS)":
        return
    functions = set(re.findall(r"^local function ([A-Za-z_][A-Za-z0-9_]*)", prelude, re.M))
    used = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", "\n".join(code))) & functions
    if used - PURE:
        sys.exit("%s: does not start with begin_call(KEYS), yet calls %s: the prelude's state would be the last "
                 "call's" % (path, ", ".join(sorted(used - PURE))))


# A script's flags for Redis (register_function's), from its first line
# "-- FLAGS: FLAG..." (words after the flags are a comment): allow-oom, for
# a script that grows nothing in Redis and must run when Redis is full (a
# holder's renewal, its release). None: Redis refuses the script while it
# is past its maxmemory.
SCRIPT_FLAGS = {"allow-oom"}


def script_flags(path, body):
    m = re.match(r"-- FLAGS: ([a-z-]+(?: [a-z-]+)*)(?: \(.*\))?\n", body)
    if not m:
        if re.search(r"^-- FLAGS", body, re.M):
            sys.exit("%s: FLAGS only on its first line, as '-- FLAGS: allow-oom'" % path)
        return ""
    flags = m.group(1).split()
    if set(flags) - SCRIPT_FLAGS:
        sys.exit("%s: unknown flags %s (known: %s)" % (path, ", ".join(sorted(set(flags) - SCRIPT_FLAGS)),
                                                       ", ".join(sorted(SCRIPT_FLAGS))))
    return "flags = {%s}, " % ", ".join("'%s'" % f for f in flags)


# The library with VERSION_MARK where its version goes.
def library_template(keys_path, args_path, replies_path, prelude_path, scripts):
    prelude = read_prelude(prelude_path)
    if VERSION_MARK in prelude or HASH_MARK in prelude or "WAKE_COMMAND" not in prelude:
        sys.exit("%s: has %s or %s, or no WAKE_COMMAND" % (prelude_path, VERSION_MARK, HASH_MARK))
    out = ["#!lua name=%s\n" % LIBRARY_NAME,
           "-- fleetsem's scripts, version %s, generated by src/agent/library/embed-lua.py from\n"
           "-- src/agent/library/lua/ and its lists; loaded with FUNCTION LOAD REPLACE.\n" % VERSION_MARK,
           prelude_text(keys_path, args_path, prelude_path), "\n",
           "-- ---- The functions: each script's body, KEYS and ARGV its parameters.\n",
           "redis.register_function{function_name = '%s_version', flags = {'no-writes'},\n"
           "  callback = function() return {%s, WAKE_COMMAND, '%s'} end}\n" % (LIBRARY_NAME, VERSION_MARK, HASH_MARK)]
    names = set()
    # (In the order of their names: the text is the same whatever order
    # the scripts are given in.)
    for path in sorted(scripts, key=script_name):
        name = script_name(path)
        if name in names or name == "version":
            sys.exit("%s: a script twice, or named version" % path)
        names.add(name)
        body = read(path)
        check_script(path, body, prelude)
        out.append("redis.register_function{function_name = '%s_%s_v%s', %scallback = function(KEYS, ARGV)\n"
                   "local bad = bad_call('%s', KEYS, ARGV)\nif bad then return bad end\n%s%s"
                   "end}\n" % (LIBRARY_NAME, name, VERSION_MARK, script_flags(path, body), name, body,
                               "" if body.endswith("\n") else "\n"))
    return with_arg_places("".join(out), args_path, replies_path)


# The version VERSION records for this text; fails when the text is not
# the one recorded for the last version.
def library_version(version_path, template):
    got = hashlib.sha256(template.encode("utf-8")).hexdigest()
    versions = []
    for line in read(version_path).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"^([1-9][0-9]{0,8}) ([0-9a-f]{64})$", line)
        if not m or int(m.group(1)) != len(versions) + 1:
            sys.exit("%s: %r: each line is N SHA256, N counting up from 1" % (version_path, line))
        versions.append(m.group(2))
    if not versions or versions[-1] != got:
        n = len(versions) + 1
        sys.exit("%s: the library's text changed since version %d was recorded (its hash is %s now): add the line\n"
                 "    %d %s\n"
                 "to it. A new version is refused by the agents of older ones (fleetsemd(8), THE LIBRARY), and a\n"
                 "text that changed under an old version would run with an agent that expects the old one."
                 % (version_path, len(versions), got, n, got))
    return len(versions)


def library(keys_path, args_path, replies_path, version_path, prelude_path, scripts):
    template = library_template(keys_path, args_path, replies_path, prelude_path, scripts)
    version = library_version(version_path, template)
    digest = hashlib.sha256(template.encode("utf-8")).hexdigest()
    return template.replace(VERSION_MARK, str(version)).replace(HASH_MARK, digest), version, digest


def write_scripts_h(out_h, scripts_path):
    with open(out_h, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/library/scripts.list; do not edit. */\n")
        f.write("#pragma once\n\n")
        f.write("/* The scripts of the Redis Functions library, as the agent (and the\n"
                " * tests that run them) name them: scripts.list's lines, in its order. */\n")
        f.write("typedef enum Script {\n")
        for script in script_args(scripts_path):
            f.write("        SCRIPT_%s,\n" % script.upper())
        f.write("        N_SCRIPTS,\n} Script;\n\n")
        f.write("/* lua-scripts.c: the Redis Functions library \"%s\" (FUNCTION LOAD), its\n"
                " * version, each script's function (FCALL) and its name in a batch, each\n"
                " * table indexed by Script. */\n" % LIBRARY_NAME)
        f.write("#define LUA_LIBRARY_NAME \"%s\"\n" % LIBRARY_NAME)
        f.write("#define LUA_VERSION_FUNCTION \"%s_version\"     /* {version, wake command}: the same in every "
                "version */\n" % LIBRARY_NAME)
        f.write("extern const unsigned lua_library_version;\n")
        f.write("/* The sha256 of the library's text with its version and this left out\n"
                " * (lua/library.version's), which fleetsem_version returns third. */\n")
        f.write("#define LUA_LIBRARY_HASH_LEN 64\n")
        f.write("extern const char lua_library_hash[LUA_LIBRARY_HASH_LEN + 1];\n")
        f.write("extern const char *const lua_library;\n")
        f.write("extern const char *const lua_function[N_SCRIPTS];\n")
        f.write("extern const char *const script_name[N_SCRIPTS];\n")


def write_c(out_c, out_h, args_h, replies_c, replies_h, scripts_h, keys_path, args_path, replies_path, version_path,
            prelude_path, scripts):
    suffixes = key_suffixes(keys_path)
    fleet = fleet_keys(keys_path)
    scripts = script_files(args_path, prelude_path, scripts)
    text, version, digest = library(keys_path, args_path, replies_path, version_path, prelude_path, scripts)
    write_args_h(args_h, args_path)
    write_scripts_h(scripts_h, args_path)
    write_replies(replies_c, replies_h, replies_path)
    with open(out_h, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/library/keys.list; do not edit. */\n")
        f.write("#pragma once\n\n")
        f.write("#define N_KEYS %d\n" % len(suffixes))
        f.write("/* A name script's KEYS: the name's, then %s. */\n" % ", ".join(k.id for k in fleet))
        f.write("#define N_SCRIPT_KEYS %d\n\n" % (len(suffixes) + len(fleet)))
        f.write("extern const char *const key_suffix[N_KEYS];\n")
        f.write("/* The word of each key after the names' (P:WORD, P:WORD:{TAG} in a Cluster). */\n")
        f.write("extern const char *const key_fleet[N_SCRIPT_KEYS - N_KEYS];\n\n")
        globs = [g for k in key_list(keys_path) for g in k.globs()]
        f.write("/* Every key of the list after the prefix, as fnmatch(3) globs (\"{*}\" for a\n"
                " * name, a host or a tag). */\n")
        f.write("#define N_KEY_GLOBS %d\n" % len(globs))
        f.write("extern const char *const key_globs[N_KEY_GLOBS];\n\n")
        f.write("/* Every other key: KEY_<ID> the word after the prefix, KEY_<ID>_FMT its\n"
                " * format (the prefix, then the host), KEY_<ID>_TAG_FMT its form in a\n"
                " * Cluster's hash slot (the prefix, then the tag). */\n")
        for k in key_list(keys_path):
            if k.scope == "name":
                continue
            fmt, tagged = k.formats()
            f.write("/* %s: %s */\n#define KEY_%s \"%s\"\n#define KEY_%s_FMT \"%s\"\n"
                    % (k.pattern, k.holds.replace("*/", "* /"), k.id.upper(), k.word(), k.id.upper(), fmt))
            if tagged:
                f.write("#define KEY_%s_TAG_FMT \"%s\"\n" % (k.id.upper(), tagged))
    with open(out_c, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/library/keys.list, scripts.list and the Lua scripts in src/agent/library/lua; "
                "do not edit. */\n")
        f.write('#include <stdint.h>\n\n#include "config.h"\n#include "lua-replies.h"\n#include "scripts.h"\n'
                '#include "lua-keys.h"\n\n')
        f.write("/* The limits scripts.list names, as the library checks them (read from\n"
                " * the headers by embed-lua.py): the same as the agent's. */\n")
        f.write(c_constant_checks(args_path) + "\n")
        f.write("const char *const key_suffix[N_KEYS] = {\n")
        for s in suffixes:
            f.write('        "%s",\n' % s)
        f.write("};\n\n")
        f.write("const char *const key_fleet[N_SCRIPT_KEYS - N_KEYS] = {\n")
        for k in fleet:
            f.write('        "%s",\n' % k.word())
        f.write("};\n\n")
        f.write("const char *const key_globs[N_KEY_GLOBS] = {\n")
        for g in globs:
            f.write('        "%s",\n' % g)
        f.write("};\n\n")
        f.write("const unsigned lua_library_version = %d;\n\n" % version)
        f.write("const char lua_library_hash[] = \"%s\";\n\n" % digest)
        f.write("const char *const lua_library =\n%s;\n\n" % c_string(text))
        f.write("const char *const lua_function[N_SCRIPTS] = {\n")
        for s in script_args(args_path):
            f.write('        [SCRIPT_%s] = "%s",\n' % (s.upper(), function_name(s, version)))
        f.write("};\n\n")
        f.write("const char *const script_name[N_SCRIPTS] = {\n")
        for s in script_args(args_path):
            f.write('        [SCRIPT_%s] = "%s",\n' % (s.upper(), s))
        f.write("};\n")


def main(argv):
    if len(argv) >= 13 and argv[1] == "--c":
        write_c(*argv[2:13], argv[13:])
    elif len(argv) >= 7 and argv[1] == "--library":
        sys.stdout.write(library(*argv[2:7], script_files(argv[3], argv[6], argv[7:]))[0])
    elif len(argv) == 3 and argv[1] == "--keys":
        sys.stdout.write("".join(s + "\n" for s in key_suffixes(argv[2])))
    elif len(argv) == 3 and argv[1] == "--key-list":
        sys.stdout.write("".join("%s\t%s\t%s\t%s\n" % (k.id, k.pattern, k.scope, k.type) for k in key_list(argv[2])))
    elif len(argv) == 3 and argv[1] == "--doc-table":
        sys.stdout.write(doc_table(argv[2]))
    elif len(argv) == 3 and argv[1] == "--scripts":
        sys.stdout.write("".join(s + "\n" for s in script_args(argv[2])))
    elif len(argv) == 3 and argv[1] == "--doc-args":
        sys.stdout.write(doc_args(argv[2]))
    elif len(argv) == 4 and argv[1] == "--arg-types":
        sys.stdout.write(arg_types_json(argv[2], argv[3]))
    elif len(argv) == 2 and argv[1] == "--constant-headers":
        sys.stdout.write("".join(os.path.join(ROOT, h) + "\n" for h in CONSTANT_HEADERS))
    elif len(argv) == 4 and argv[1] == "--args":
        args = script_args(argv[2]).get(argv[3])
        if args is None:
            sys.exit("%s: no script %r" % (argv[2], argv[3]))
        sys.stdout.write("".join(a.name + a.kind + "\n" for a in args))
    else:
        sys.exit("usage: embed-lua.py --c OUT.c KEYS.h ARGS.h REPLIES.c REPLIES.h SCRIPTS.h KEYS.list SCRIPTS.list "
                 "REPLIES.list VERSION PRELUDE [SCRIPT...]\n"
                 "       embed-lua.py --library KEYS.list SCRIPTS.list REPLIES.list VERSION PRELUDE [SCRIPT...]\n"
                 "       embed-lua.py --keys KEYS.list\n"
                 "       embed-lua.py --key-list KEYS.list\n"
                 "       embed-lua.py --doc-table KEYS.list\n"
                 "       embed-lua.py --scripts SCRIPTS.list\n"
                 "       embed-lua.py --doc-args SCRIPTS.list\n"
                 "       embed-lua.py --args SCRIPTS.list SCRIPT\n"
                 "       embed-lua.py --arg-types KEYS.list SCRIPTS.list\n"
                 "       embed-lua.py --constant-headers")


main(sys.argv)
