#!/usr/bin/env python3
# The Lua scripts and the key list, as the agent loads them.
#
#   embed-lua.py --c OUT.c OUT.h KEYS.list PRELUDE SCRIPT...
#       writes the scripts as C strings (in the order of enum Script in
#       agent.h) and the key suffixes as key_suffix[N_KEYS];
#   embed-lua.py --lua KEYS.list PRELUDE SCRIPT
#       prints one script as the agent sends it to Redis: prelude, a
#       newline, the script;
#   embed-lua.py --keys KEYS.list
#       prints the key suffixes, one a line, in order (for the tests).
#
# KEYS.list holds one key suffix per line; KEYS[n] of every name script is
# P:{NAME}:<line n>. The prelude starts with the Lua locals K_<SUFFIX> for
# them, so the list lives in that one file.
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


def prelude_text(keys_path, prelude_path):
    suffixes = key_suffixes(keys_path)
    names = ", ".join("K_" + s.upper() for s in suffixes)
    values = ", ".join("KEYS[%d]" % (i + 1) for i in range(len(suffixes)))
    return ("-- Generated from keys.list: KEYS[n] is P:{NAME}:<suffix n>; the\n"
            "-- one after them is P:clock, the fleet's.\n"
            "local %s = %s\n"
            "local NAME_KEYS = {%s}\n"
            "local K_FLEET_CLOCK = KEYS[%d]\n" % (names, values, names, len(suffixes) + 1)) + read(prelude_path)


def c_string(text):
    lines = []
    for line in text.splitlines():
        line = line.replace("\\", "\\\\").replace('"', '\\"')
        lines.append('        "%s\\n"' % line)
    return "\n".join(lines) or '""'


def write_c(out_c, out_h, keys_path, prelude_path, scripts):
    suffixes = key_suffixes(keys_path)
    with open(out_h, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/keys.list; do not edit. */\n")
        f.write("#pragma once\n\n")
        f.write("#define N_KEYS %d\n" % len(suffixes))
        f.write("/* A name script's KEYS: the name's, then the fleet's clock key. */\n")
        f.write("#define N_SCRIPT_KEYS %d\n\n" % (len(suffixes) + 1))
        f.write("extern const char *const key_suffix[N_KEYS];\n")
    with open(out_c, "w", encoding="utf-8") as f:
        f.write("/* Generated from src/agent/keys.list and the Lua scripts in src/agent/lua; do not edit. */\n")
        f.write('#include "agent.h"\n#include "lua-keys.h"\n\n')
        f.write("const char *const key_suffix[N_KEYS] = {\n")
        for s in suffixes:
            f.write('        "%s",\n' % s)
        f.write("};\n\n")
        f.write("const char *const lua_prelude =\n%s;\n\n" % c_string(prelude_text(keys_path, prelude_path)))
        f.write("const char *const lua_scripts[N_SCRIPTS] = {\n")
        for s in scripts:
            f.write("%s,\n" % c_string(read(s)))
        f.write("};\n")


def main(argv):
    if len(argv) >= 6 and argv[1] == "--c":
        write_c(argv[2], argv[3], argv[4], argv[5], argv[6:])
    elif len(argv) == 5 and argv[1] == "--lua":
        sys.stdout.write(prelude_text(argv[2], argv[3]) + "\n" + read(argv[4]))
    elif len(argv) == 3 and argv[1] == "--keys":
        sys.stdout.write("".join(s + "\n" for s in key_suffixes(argv[2])))
    else:
        sys.exit("usage: embed-lua.py --c OUT.c OUT.h KEYS.list PRELUDE SCRIPT...\n"
                 "       embed-lua.py --lua KEYS.list PRELUDE SCRIPT\n"
                 "       embed-lua.py --keys KEYS.list")


main(sys.argv)
