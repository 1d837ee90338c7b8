#!/usr/bin/env python3
# Turns the Lua scripts into C strings: embed-lua.py OUTPUT PRELUDE SCRIPT...
# (scripts in the order of enum Script in agent.h).
import sys

def c_string(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = []
    for line in text.splitlines():
        line = line.replace("\\", "\\\\").replace('"', '\\"')
        lines.append('        "%s\\n"' % line)
    return "\n".join(lines) or '""'

out, prelude, scripts = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "w", encoding="utf-8") as f:
    f.write("/* Generated from the Lua scripts in src/agent/lua; do not edit. */\n")
    f.write('#include "agent.h"\n\n')
    f.write("const char *const lua_prelude =\n%s;\n\n" % c_string(prelude))
    f.write("const char *const lua_scripts[N_SCRIPTS] = {\n")
    for s in scripts:
        f.write("%s,\n" % c_string(s))
    f.write("};\n")
