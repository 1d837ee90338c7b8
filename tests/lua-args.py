#!/usr/bin/env python3
# Every script of the library refuses a call whose KEYS or ARGV are not
# those scripts.list declares, before it writes anything: on a real
# redis-server with the library as the agent loads it, each script is
# called with too few and too many arguments, each argument in turn given
# each kind of bad value of its type (and each bound crossed by one, the
# bounds being the agent's own constants: embed-lua.py --arg-types), and
# with keys of the wrong number or shape; each call must get
# "ERR fleetsem: ..." naming the argument (or key) and why, and Redis must
# hold exactly what it held before (every key's DUMP, contents and expiry
# time) with no wake message published. A well-formed call of each script
# is made first, and must not be refused: the checks refuse what is bad,
# not everything.
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from library import (CENSUS, FLEET_CLOCK, KEYS_LIST, SCRIPTS_LIST, Tap, embed, key_contents, keys_of,  # noqa: E402
                     published, start_redis)
from resp import Error, Redis  # noqa: E402

TYPES = json.loads(embed("--arg-types", KEYS_LIST, SCRIPTS_LIST))
SCRIPTS = TYPES["scripts"]
IDENT_MAX_LEN, NAME_MAX_LEN = TYPES["constants"]["IDENT_MAX_LEN"], TYPES["constants"]["NAME_MAX_LEN"]
LEASE = "0123456789abcdef0123456789abcdef"
EPOCH_KEY, MODEL_KEY = "fleetsem:epoch", "fleetsem:model"

TAP = Tap()
ok, not_ok, bail = TAP.ok, TAP.not_ok, TAP.bail


# A value of each argument that its type takes, the script's call sound
# with it (an epoch's model "N V", a follow's epoch value "ID UNTIL").
SOUND = {"model": "2 0.2", "value": LEASE + " 0", "ttl_ms": "10000", "idle_ms": "600000", "slots": "2",
         "uid": "1000"}


def sound(a):
    if a["name"] in SOUND:
        return SOUND[a["name"]]
    t = a["type"]
    if t == "int":
        return str(a["lo"] if a["lo"] is not None else 0)
    return {"lease": LEASE, "str": "x", "word": "w", "flag": "0", "choice": (a["words"] or [""])[0]}[t]


# (value, why) pairs: the bad values of argument a's type, each with the
# reason the library must give.
def bad_values(a):
    t, out = a["type"], []
    if t == "int":
        out += [("x", "not an integer"), ("1.5", "not an integer"), ("0x10", "not an integer"),
                ("1e3", "not an integer"), (" 1", "not an integer"), ("-", "not an integer"),
                ("1" * 18, "not an integer"), (str(2 ** 53), "not below 2^53"), ("-" + str(2 ** 53), "not below 2^53"),
                ("inf", "not an integer"), ("nan", "not an integer")]
        if not a["empty"]:
            out.append(("", "not an integer"))
        if a["lo"] is not None:
            out.append((str(a["lo"] - 1), "below %d" % a["lo"]))
        if a["hi"] is not None:
            out.append((str(a["hi"] + 1), "above %d" % a["hi"]))
    elif t == "lease":
        why = "not a lease id (32 lower-case hex digits)"
        out += [(LEASE.upper(), why), (LEASE[:-1], why), (LEASE + "0", why), ("g" + LEASE[1:], why),
                (".", why), (" " + LEASE[1:], why)]
        if not a["empty"]:
            out.append(("", why))
    elif t == "str":
        out += [("x" * (a["max"] + 1), "longer than %d bytes" % a["max"]), ("a\nb", "a control character"),
                ("a\x00b", "a control character"), ("\x7f", "a control character")]
    elif t == "word":
        out += [("x" * (a["max"] + 1), "longer than %d bytes" % a["max"]),
                ("a b", "a space or a control character"), ("a\tb", "a space or a control character"),
                ("a\nb", "a space or a control character")]
        if not a["empty"]:
            out.append(("", "empty"))
    elif t == "flag":
        out += [("2", "not 1 or 0"), ("", "not 1 or 0"), ("yes", "not 1 or 0"), ("01", "not 1 or 0")]
    elif t == "choice":
        out += [("x", "not one of " + ", ".join(a["words"])), ("", "not one of " + ", ".join(a["words"]))]
    return out


class Server:
    def __init__(self, tmp):
        self.sock = os.path.join(tmp, "sock")
        self.proc, self.c, self.function = start_redis(tmp, bail)
        self.sub = Redis(self.sock, None, None)
        self.sub.call("PSUBSCRIBE", "fleetsem:*")

    def fcall(self, script, keys, argv):
        return self.c.call("FCALL", self.function[script], len(keys), *keys, *argv)

    def wakes(self):
        """The messages published since the last look."""
        return published(self.sub)

    def snapshot(self):
        """Every key: its DUMP, type, contents and absolute expiry time."""
        out = {}
        for key in sorted(self.c.call("KEYS", "*")):
            kind = self.c.call("TYPE", key)
            out[key] = (kind, self.c.call("DUMP", key), key_contents(self.c, key, kind),
                        self.c.call("PEXPIRETIME", key))
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


# The keys a well-formed call of script takes (a name's on "n", or two
# names' for a batch; the epoch and the model marker).
def keys_for(script):
    shape = SCRIPTS[script]["keys"]
    if shape == "name":
        return keys_of("n")
    if shape == "names":
        return keys_of("n")[:-2] + keys_of("m")
    return ["fleetsem:" + w for w, _ in shape]


def sound_argv(script):
    return [sound(a) for a in SCRIPTS[script]["args"] if a["type"] != "call"]


def main():
    tmp = tempfile.mkdtemp(prefix="fleetsem-lua-args.")
    srv = Server(tmp)
    try:
        run(srv)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(TAP.end())


def run(srv):
    # Well-formed calls first: each script runs (Redis then holds a name's
    # state, a holder, the epoch and the model marker for the refused calls
    # below to leave alone). A batch holds one call of each kind it runs.
    for script in SCRIPTS:
        argv = sound_argv(script)
        if script in ("batch", "keep"):
            kinds = ("release", "renew") if script == "keep" else ("acquire", "renew", "adopt")
            argv = []
            for kind in kinds:
                a = sound_argv(kind)
                argv += [kind, "2", str(len(a))] + a
        if script == "acquire":
            argv[1] = "1"           # slots: it holds, and a waiter queues behind it
            srv.fcall(script, keys_for(script), argv)
            argv[0] = LEASE[::-1]
        r = srv.fcall(script, keys_for(script), argv)
        if isinstance(r, Error):
            not_ok("%s: a well-formed call runs" % script, ["reply %r" % r, "ARGV %r" % argv])
        else:
            ok("%s: a well-formed call runs (%s)" % (script, json.dumps(r)[:60]))
    srv.wakes()
    before = srv.snapshot()
    if not any(k.startswith("fleetsem:{n}:") for k in before) or EPOCH_KEY not in before:
        bail("the well-formed calls left no name's keys or no epoch: %s" % ", ".join(before))

    # refused(WHAT, SCRIPT, KEYS, ARGV, TEXT): the call is an error reply
    # that is TEXT, and nothing changed.
    def refused(what, script, keys, argv, text):
        r = srv.fcall(script, keys, argv)
        heard = srv.wakes()
        after = srv.snapshot()
        why = []
        if not isinstance(r, Error) or r != text:
            why.append("reply %r, not the error %r" % (r, text))
        if heard:
            why.append("published %r" % heard)
        if after != before:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            why.append("Redis changed: %s" % ", ".join(changed))
        if why:
            not_ok(what, why + ["ARGV %r" % argv, "KEYS %r" % keys])
        else:
            ok(what)

    for script, spec in SCRIPTS.items():
        args, keys = spec["args"], keys_for(script)
        argv = sound_argv(script)
        need = sum(1 for a in args if a["kind"] == "")
        rest = bool(args) and args[-1]["kind"] == "..."
        most = " or more" if rest else (" to %d" % len(args) if len(args) > need else "")
        if need > 0:
            refused("%s: one argument too few" % script, script, keys, argv[:need - 1],
                    "ERR fleetsem: %s takes %d%s arguments, not %d" % (script, need, most, need - 1))
        if not rest:
            refused("%s: one argument too many" % script, script, keys, argv + ["1"],
                    "ERR fleetsem: %s takes %d%s arguments, not %d" % (script, need, most, len(args) + 1))
        for i, a in enumerate(args):
            if a["type"] == "call":
                continue
            for value, why in bad_values(a):
                bad = list(argv)
                bad[i] = value
                refused("%s: argument %d (%s) %r: %s" % (script, i + 1, a["name"], value[:20], why), script, keys,
                        bad, "ERR fleetsem: argument %d (%s) of %s: %s" % (i + 1, a["name"], script, why))
            if a["kind"] == "..." and bad_values(a):
                # Each of the rest is checked, not only the first.
                value, why = bad_values(a)[0]
                refused("%s: a bad %s after good ones: %s" % (script, a["name"], why), script, keys,
                        argv + [sound(a), value],
                        "ERR fleetsem: argument %d (%s) of %s: %s" % (len(argv) + 2, a["name"], script, why))
        check_keys(script, spec, argv, refused)
    check_batches(refused)
    check_memos(srv, refused)
    check_bounds(srv)


# Values at their bounds are taken (the calls run: their replies are no
# errors), as are a name of NAME_MAX_LEN bytes and a prefix of
# IDENT_MAX_LEN: each bound is the last value taken, not one before it.
def check_bounds(srv):
    long_keys = ["p" * IDENT_MAX_LEN + ":{%s}:%s" % ("n" * NAME_MAX_LEN, s) for s in TYPES["name_keys"]] + \
        ["p" * IDENT_MAX_LEN + ":" + w for w in TYPES["fleet_words"]]
    r = srv.fcall("status", long_keys, [])
    if isinstance(r, Error):
        not_ok("a name of %d bytes under a prefix of %d is taken" % (NAME_MAX_LEN, IDENT_MAX_LEN), ["reply %r" % r])
    else:
        ok("a name of %d bytes under a prefix of %d is taken" % (NAME_MAX_LEN, IDENT_MAX_LEN))
    for script, spec in SCRIPTS.items():
        if spec["keys"] != "name":
            continue
        for i, a in enumerate(spec["args"]):
            edges = []
            if a["type"] == "int":
                # (Without a bound above: the largest a Lua number holds
                # exactly, 16 digits, as the tokens from the clock in µs.)
                edges = [str(x) for x in (a["lo"], a["hi"] if a["hi"] is not None else 2 ** 53 - 1) if x is not None]
            elif a["type"] in ("str", "word"):
                edges = ["y" * a["max"]]
            for value in edges:
                argv = sound_argv(script)
                argv[i] = value
                r = srv.fcall(script, keys_for(script), argv)
                what = "%s: argument %d (%s) %s is taken" % (script, i + 1, a["name"], value[:20])
                if isinstance(r, Error):
                    not_ok(what, ["reply %r" % r])
                else:
                    ok(what)


def check_keys(script, spec, argv, refused):
    shape = spec["keys"]
    if shape in ("name", "names"):
        n = keys_of("n")
        runs = "the" if shape == "name" else "the runs of"
        for k in ([n[:-1]] + ([n[:-2] + n] if shape == "name" else []) + [n[1:]]):
            refused("%s: %d keys" % (script, len(k)), script, k, argv,
                    "ERR fleetsem: %s takes %s keys of a name then 2, not %d keys" % (script, runs, len(k)))
        # (place, key, its word, why, the name's other keys made alike):
        # only that key (or only that name's prefix or name) is wrong.
        cases = [
            (0, "fleetsem:{n}:queue", "holders", "not of its shape", False),
            (1, "fleetsem:{m}:queue", "queue", "not fleetsem:{n}:queue", False),
            (3, "fleetsem:{n}:waiters", "clock", "not fleetsem:{n}:clock", False),
            (0, "fleetsem:{}:holders", "holders", "not of its shape", True),
            (0, "fleetsem:n:holders", "holders", "not of its shape", False),
            (0, "fleet sem:{n}:holders", "holders", "its prefix is no identifier", True),
            (0, "x" * (IDENT_MAX_LEN + 1) + ":{n}:holders", "holders", "its prefix is no identifier", True),
            (0, "fleetsem:{%s}:holders" % ("n" * (NAME_MAX_LEN + 1)), "holders",
             "its name is longer than %d bytes" % NAME_MAX_LEN, True),
            (0, "fleetsem:{a b}:holders", "holders", "its name has a space or a control character", True),
            (0, "fleetsem:{a\x01}:holders", "holders", "its name has a space or a control character", True),
            (4, "other:clock", "clock", "another prefix than the first key's", False),
            (4, FLEET_CLOCK + ":x", "clock", "not of its shape", False),
            (5, "fleetsem:holders", "census", "not of its shape", False),
            (5, CENSUS + ":{t}", "census", "another tag than the key before's", False),
        ]
        for at, key, word, why, alike in cases:
            k = list(n)
            k[at] = key
            if alike:
                k[1:len(TYPES["name_keys"])] = [key[:-len(word)] + s for s in TYPES["name_keys"][1:]]
            refused("%s: key %d %r: %s" % (script, at + 1, key[:40], why), script, k, argv,
                    "ERR fleetsem: key %d (%s) of %s: %s" % (at + 1, word, script, why))
        return
    need = sum(1 for _, optional in shape if not optional)
    for k in ([], ["fleetsem:" + w for w, _ in shape] + ["fleetsem:x"]):
        if len(k) < need or len(k) > len(shape):
            refused("%s: %d keys" % (script, len(k)), script, k, argv,
                    "ERR fleetsem: %s takes %d to %d keys, not %d" % (script, need, len(shape), len(k)))
    first = shape[0][0]
    refused("%s: key 1 of another word" % script, script, ["fleetsem:x"], argv,
            "ERR fleetsem: key 1 (%s) of %s: not of its shape" % (first, script))
    if len(shape) > 1:
        second = shape[1][0]
        refused("%s: key 2 of another prefix" % script, script, ["fleetsem:" + first, "other:" + second], argv,
                "ERR fleetsem: key 2 (%s) of %s: another prefix than the first key's" % (second, script))
        refused("%s: key 2 of another tag" % script, script,
                ["fleetsem:%s:{a}" % first, "fleetsem:%s:{b}" % second], argv,
                "ERR fleetsem: key 2 (%s) of %s: another tag than the first key's" % (second, script))


# The checks keep what they found of the values and key runs they passed
# (prelude/args.lua's memos): a value taken as a word is still no integer,
# a name's keys that passed once are each compared again, and the memos
# stay bounded: calls with 8 times MEMO_MAX descriptions of 1,000 bytes,
# each new, grow Redis' Lua memory by less than they would hold if kept.
def check_memos(srv, refused):
    argv, keys = sound_argv("release"), keys_for("release")
    host = [a["name"] for a in SCRIPTS["release"]["args"]].index("host")
    uid = [a["name"] for a in SCRIPTS["release"]["args"]].index("uid")
    bad = list(argv)
    bad[uid] = argv[host]
    refused("a value taken as a word, then given as an integer", "release", keys, bad,
            "ERR fleetsem: argument %d (uid) of release: not an integer" % (uid + 1))
    other = list(keys)
    other[2] = other[2].replace("{n}", "{m}")
    refused("a name's keys that passed, with its third key another name's", "release", other, argv,
            "ERR fleetsem: key 3 (%s) of release: not %s" % (TYPES["name_keys"][2], keys[0][:-len(TYPES["name_keys"][0])]
                                                              + TYPES["name_keys"][2]))
    args = [a["name"] for a in SCRIPTS["acquire"]["args"]]
    argv = sound_argv("acquire")
    argv[args.index("uid")] = "x"        # (refused after the description is checked: nothing runs)
    info = lambda: int(re.search(r"used_memory_vm_functions:(\d+)", srv.c.call("INFO", "memory")).group(1))
    n, size = 8 * 256, 1000
    before = info()
    for k in range(n):
        argv[args.index("description")] = ("%06d" % k).ljust(size, "d")
        r = srv.fcall("acquire", keys_for("acquire"), argv)
        if not isinstance(r, Error):
            not_ok("a description memo call is refused", ["reply %r" % r])
            return
    grown = info() - before
    what = "%d new descriptions of %d bytes grow Redis' Lua memory by %d bytes, less than half of %d" % (
        n, size, grown, n * size)
    (ok if grown < n * size // 2 else not_ok)(what)


# A batch's calls: malformed framing, and each kind's arguments checked as
# its own script's, with the place in the batch's ARGV; none runs.
def check_batches(refused):
    keys = keys_of("n")[:-2] + keys_of("m")
    good = sound_argv("renew")
    head = ["renew", "1", str(len(good))] + good
    for script, kinds in (("batch", ("acquire", "release", "renew", "reassert", "adopt")), ("keep", ("release", "renew"))):
        frames = [["status", "1", "0"], ["renew", "0", str(len(good))] + good, ["renew", "3", str(len(good))] + good,
                  ["renew", "1e0", str(len(good))] + good, ["renew", "1", "0x4"] + good,
                  ["renew", "1", str(len(good) + 1)] + good, ["renew"]]
        if script == "keep":
            frames.append(["acquire", "1", "0"])
        for frame in frames:
            at = len(head) + 1
            refused("%s: a malformed call %r after a good one" % (script, " ".join(frame[:3])), script, keys,
                    head + frame, "ERR fleetsem: malformed call at argument %d of %s: not a kind it runs, a name "
                    "among its keys (1 to 2) and how many arguments follow" % (at, script))
        for kind in kinds:
            args = SCRIPTS[kind]["args"]
            argv = sound_argv(kind)
            need = sum(1 for a in args if a["kind"] == "")
            refused("%s: a %s with one argument too few" % (script, kind), script, keys,
                    head + [kind, "2", str(need - 1)] + argv[:need - 1],
                    "ERR fleetsem: call 2 (%s) of %s takes %d%s arguments, not %d" % (
                        kind, script, need, " or more" if args[-1]["kind"] == "..." else
                        (" to %d" % len(args) if len(args) > need else ""), need - 1))
            for i, a in enumerate(args):
                value, why = bad_values(a)[0]
                bad = list(argv)
                bad[i] = value
                place = len(head) + 3 + i + 1
                refused("%s: a %s's argument %d (%s) %r" % (script, kind, i + 1, a["name"], value), script, keys,
                        head + [kind, "2", str(len(bad))] + bad,
                        "ERR fleetsem: argument %d (%s) of call 2 (%s) of %s: %s" % (place, a["name"], kind, script,
                                                                                      why))


main()
