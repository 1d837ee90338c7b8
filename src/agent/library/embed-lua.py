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
# keys.list and scripts.list are read in lua_lists.py, replies.list and
# its C decoders in lua_replies.py; this file puts the library together
# and writes what the agent is built from.
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

sys.dont_write_bytecode = True         # (its modules are read from the source tree: nothing written there)
from lua_lists import (CONSTANT_HEADERS, ROOT, arg_places, arg_types_json, c_constant_checks, doc_args, doc_table,
                       fleet_keys, key_list, key_suffixes, lua_arg_types, read, script_args)
from lua_replies import reply_tags, write_replies


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


def with_arg_places(text, args_path, replies_path):
    places = arg_places(args_path)
    places.update(reply_tags(replies_path))

    def place(m):
        if m.group(0) not in places:
            sys.exit("%r is not in %s or %s" % (m.group(0), args_path, replies_path))
        return str(places[m.group(0)])
    return re.sub(r"\b[AR]_[A-Z][A-Z_]*\b", place, text)


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
