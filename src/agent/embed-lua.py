#!/usr/bin/env python3
# The Lua scripts, the key list and the argument list, as the agent loads
# them.
#
#   embed-lua.py --c OUT.c KEYS.h ARGS.h KEYS.list ARGS.list PRELUDE SCRIPT...
#       writes the scripts as C strings (in the order of enum Script in
#       agent.h), the key suffixes as key_suffix[N_KEYS] (KEYS.h) and each
#       script's arguments as ARG_<SCRIPT>_<NAME> (ARGS.h);
#   embed-lua.py --lua KEYS.list ARGS.list PRELUDE SCRIPT
#       prints one script as the agent sends it to Redis: prelude, a
#       newline, the script;
#   embed-lua.py --keys KEYS.list
#       prints the key suffixes, one a line, in order (for the tests);
#   embed-lua.py --args ARGS.list SCRIPT
#       prints SCRIPT's argument names, one a line, in order (for the tests).
#
# KEYS.list holds one key suffix per line; KEYS[n] of every name script is
# P:{NAME}:<line n>. ARGS.list holds a line per script: its name, then its
# arguments in order. The prelude starts with the Lua locals K_<SUFFIX> for
# the keys; A_<SCRIPT>_<NAME> in the scripts is written as that argument's
# place in ARGV. So each list lives in one file.
import re
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def key_suffixes(path):
    suffixes = [line.strip() for line in read(path).splitlines()]
    suffixes = [s for s in suffixes if s and not s.startswith("#")]
    for s in suffixes:
        if not s.isidentifier() or not s.isascii():
            sys.exit("%s: %r is not a valid key suffix" % (path, s))
    if not suffixes or len(set(suffixes)) != len(suffixes):
        sys.exit("%s: no key suffixes, or one twice" % path)
    return suffixes


# {script: [(name, kind)]}, kind "" (required), "?" (optional) or "..." (the rest).
def script_args(path):
    scripts = {}
    for line in read(path).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        script, args, seen_optional = words[0], [], False
        for w in words[1:]:
            kind = "..." if w.endswith("...") else "?" if w.endswith("?") else ""
            name = w[:len(w) - len(kind)]
            if not name.isidentifier() or not name.isascii() or name in [a for a, _ in args]:
                sys.exit("%s: %s: %r is not a valid argument name, or twice" % (path, script, w))
            if (seen_optional and kind == "") or (args and args[-1][1] == "..."):
                sys.exit("%s: %s: %r after an optional or rest argument" % (path, script, w))
            seen_optional = seen_optional or kind == "?"
            args.append((name, kind))
        if not script.isidentifier() or script in scripts or not args:
            sys.exit("%s: %r twice, or without arguments" % (path, script))
        scripts[script] = args
    return scripts


# For each script, A_<SCRIPT>_<NAME>: where that argument is in ARGV (a
# rest argument: where it starts), and A_<SCRIPT>_NEED: how many a call
# cannot do without. Written into the text as numbers, as a C macro would
# be: a name costs a script nothing per call.
def arg_places(args_path):
    places = {}
    for script, args in script_args(args_path).items():
        for i, (name, _) in enumerate(args):
            places["A_%s_%s" % (script.upper(), name.upper())] = i + 1
        places["A_%s_NEED" % script.upper()] = sum(1 for _, kind in args if kind == "")
    return places


def with_arg_places(text, args_path):
    places = arg_places(args_path)

    def place(m):
        if m.group(0) not in places:
            sys.exit("%r is not in %s" % (m.group(0), args_path))
        return str(places[m.group(0)])
    return re.sub(r"\bA_[A-Z][A-Z_]*\b", place, text)


def prelude_text(keys_path, args_path, prelude_path):
    suffixes = key_suffixes(keys_path)
    names = ", ".join("K_" + s.upper() for s in suffixes)
    values = ", ".join("KEYS[%d]" % (i + 1) for i in range(len(suffixes)))
    return ("-- Generated from keys.list: KEYS[n] is P:{NAME}:<suffix n>; the\n"
            "-- two after them are P:clock, the fleet's, and P:census.\n"
            "local %s = %s\n"
            "local NAME_KEYS = {%s}\n"
            "local K_FLEET_CLOCK, K_CENSUS = KEYS[%d], KEYS[%d]\n"
            "-- ARGV[A_<SCRIPT>_<NAME>] is that argument of args.list, written here as a number.\n"
            % (names, values, names, len(suffixes) + 1, len(suffixes) + 2)) + read(prelude_path)


def write_args_h(out_h, args_path):
    with open(out_h, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/args.list; do not edit. */\n")
        f.write("#pragma once\n\n")
        f.write("/* Each script's arguments: ARG_<SCRIPT>_<NAME> is its place in ARGV;\n")
        f.write(" * N_<SCRIPT>_ARGS counts them (without those of a rest argument). */\n")
        for script, args in script_args(args_path).items():
            f.write("enum {\n")
            for name, _ in args:
                f.write("        ARG_%s_%s,\n" % (script.upper(), name.upper()))
            f.write("        N_%s_ARGS\n};\n" % script.upper())


def c_string(text):
    lines = []
    for line in text.splitlines():
        line = line.replace("\\", "\\\\").replace('"', '\\"')
        lines.append('        "%s\\n"' % line)
    return "\n".join(lines) or '""'


def write_c(out_c, out_h, args_h, keys_path, args_path, prelude_path, scripts):
    suffixes = key_suffixes(keys_path)
    write_args_h(args_h, args_path)
    with open(out_h, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/keys.list; do not edit. */\n")
        f.write("#pragma once\n\n")
        f.write("#define N_KEYS %d\n" % len(suffixes))
        f.write("/* A name script's KEYS: the name's, then the fleet's clock key and the census. */\n")
        f.write("#define N_SCRIPT_KEYS %d\n\n" % (len(suffixes) + 2))
        f.write("extern const char *const key_suffix[N_KEYS];\n")
    with open(out_c, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/keys.list and the Lua scripts in src/agent/lua; do not edit. */\n")
        f.write('#include "agent.h"\n#include "lua-keys.h"\n\n')
        f.write("const char *const key_suffix[N_KEYS] = {\n")
        for s in suffixes:
            f.write('        "%s",\n' % s)
        f.write("};\n\n")
        f.write("const char *const lua_prelude =\n%s;\n\n" %
                c_string(with_arg_places(prelude_text(keys_path, args_path, prelude_path), args_path)))
        f.write("const char *const lua_scripts[N_SCRIPTS] = {\n")
        for s in scripts:
            f.write("%s,\n" % c_string(with_arg_places(read(s), args_path)))
        f.write("};\n")


def main(argv):
    if len(argv) >= 8 and argv[1] == "--c":
        write_c(argv[2], argv[3], argv[4], argv[5], argv[6], argv[7], argv[8:])
    elif len(argv) == 6 and argv[1] == "--lua":
        sys.stdout.write(with_arg_places(prelude_text(argv[2], argv[3], argv[4]) + "\n" + read(argv[5]), argv[3]))
    elif len(argv) == 3 and argv[1] == "--keys":
        sys.stdout.write("".join(s + "\n" for s in key_suffixes(argv[2])))
    elif len(argv) == 4 and argv[1] == "--args":
        args = script_args(argv[2]).get(argv[3]) or sys.exit("%s: no script %r" % (argv[2], argv[3]))
        sys.stdout.write("".join(name + kind + "\n" for name, kind in args))
    else:
        sys.exit("usage: embed-lua.py --c OUT.c KEYS.h ARGS.h KEYS.list ARGS.list PRELUDE SCRIPT...\n"
                 "       embed-lua.py --lua KEYS.list ARGS.list PRELUDE SCRIPT\n"
                 "       embed-lua.py --keys KEYS.list\n"
                 "       embed-lua.py --args ARGS.list SCRIPT")


main(sys.argv)
