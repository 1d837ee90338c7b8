#!/usr/bin/env python3
# replies.list read, and each script's reply shapes written as the agent's
# C decoders (for embed-lua.py; see replies.list's head for the grammar).
import re
import sys

from lua_lists import C_EXPR, read


# ---- replies.list ----------------------------------------------------------

class Field:
    def __init__(self, name, kind, lo=None, hi=None, max_len=None, group=None, more=""):
        self.name, self.kind, self.lo, self.hi = name, kind, lo, hi
        self.max_len, self.group, self.more = max_len, group, more


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
