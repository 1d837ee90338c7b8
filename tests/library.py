# The agent's Lua library as the tests that call its scripts directly make
# and call it (lua-batch-diff.py, model-replay.py, lua-args.py): what
# src/agent/library/embed-lua.py says of keys.list and scripts.list; a
# redis-server of their own with it, and their TAP.
import os
import subprocess
import sys
import time

from resp import Redis

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "agent", "library")
KEYS_LIST, SCRIPTS_LIST, REPLIES_LIST, VERSION, PRELUDE = (
    os.path.join(SRC, f) for f in ("keys.list", "scripts.list", "replies.list", "lua/library.version", "lua/prelude"))
FLEET_CLOCK = "fleetsem:clock"
CENSUS = "fleetsem:census"


def embed(*args):
    return subprocess.run([sys.executable, os.path.join(SRC, "embed-lua.py")] + list(args), check=True,
                          capture_output=True, text=True).stdout


SUFFIXES = embed("--keys", KEYS_LIST).split()


def keys_of(name):
    """A name's KEYS, in keys.list's order, then the fleet's clock and the census."""
    return ["fleetsem:{%s}:%s" % (name, s) for s in SUFFIXES] + [FLEET_CLOCK, CENSUS]


def library():
    """The agent's library: every script, each a function fleetsem_SCRIPT_vN."""
    return embed("--library", KEYS_LIST, SCRIPTS_LIST, REPLIES_LIST, VERSION, PRELUDE)


class Args:
    """The ARGV of the scripts given, in scripts.list's order: args(SCRIPT,
    NAME=VALUE...), a list value filling a rest argument; a name scripts.list
    does not have, or a required one missing, raises ValueError."""

    def __init__(self, scripts):
        self.spec = {s: embed("--args", SCRIPTS_LIST, s).split() for s in scripts}

    def __call__(self, script, **kv):
        out = []
        for spec in self.spec[script]:
            name = spec.rstrip("?.")
            if spec.endswith("..."):
                out += [str(v) for v in kv.pop(name, [])]
            elif name in kv:
                out.append(str(kv.pop(name)))
            elif not spec.endswith("?"):
                raise ValueError("args %s: %s is required" % (script, name))
        if kv:
            raise ValueError("scripts.list: %s has no %s" % (script, ", ".join(kv)))
        return out


# The server the tests run: FLEETSEM_TEST_SERVER=valkey for Valkey's.
SERVER = {"redis": "redis-server", "valkey": "valkey-server"}.get(os.environ.get("FLEETSEM_TEST_SERVER", "redis"))


class Tap:
    """A test's TAP: ok(WHAT), not_ok(WHAT, WHY lines), bail(WHY), and end()
    (the plan and the counts; the exit status). note is said with a bail
    out and the counts (a seed that replays the run)."""

    def __init__(self, note=""):
        self.n = self.failed = 0
        self.note = " (%s)" % note if note else ""

    def ok(self, what):
        self.n += 1
        print("ok %d - %s" % (self.n, what), flush=True)

    def not_ok(self, what, why=()):
        self.n += 1
        self.failed += 1
        print("not ok %d - %s" % (self.n, what), flush=True)
        for line in why:
            print("#   " + line, flush=True)

    def bail(self, why):
        print("Bail out! %s%s" % (why, self.note), flush=True)
        sys.exit(1)

    def end(self):
        print("1..%d" % self.n)
        print("# %d passed, %d failed%s" % (self.n - self.failed, self.failed, self.note), flush=True)
        return 1 if self.failed else 0


def start_redis(folder, bail, env=None):
    """A redis-server of the test's own in folder (its socket folder/sock, its
    log folder/log, no persistence), with the library loaded: (its process,
    a client, {script: its function fleetsem_SCRIPT_vN}). bail(WHY) when it
    does not start or the library does not load."""
    sock = os.path.join(folder, "sock")
    proc = subprocess.Popen([SERVER, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
                             "--dir", folder, "--save", "", "--appendonly", "no",
                             "--logfile", os.path.join(folder, "log")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            c = Redis(sock, None, None)
            if c.call("PING") == "PONG":
                break
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            bail("%s did not start" % SERVER)
        time.sleep(0.02)
    loaded = c.call("FUNCTION", "LOAD", "REPLACE", library())
    if loaded != "fleetsem":
        bail("the library does not load: %s" % loaded)
    version = c.call("FCALL", "fleetsem_version", 0)
    if not isinstance(version, list) or not isinstance(version[0], int):
        bail("fleetsem_version says %r" % (version,))
    scripts = embed("--scripts", SCRIPTS_LIST).split()
    return proc, c, {s: "fleetsem_%s_v%d" % (s, version[0]) for s in scripts}


def published(sub):
    """The messages sub (a client subscribed to channels or patterns) got
    since the last look, as "CHANNEL MESSAGE" (a PING's "pong" ends them)."""
    sub.send("PING")
    heard = []
    while True:
        m = sub.read()
        if m[0] == "pong":
            return heard
        heard.append("%s %s" % (m[2], m[3]))


def key_contents(c, key, kind):
    """What key (of TYPE kind) holds, comparable between two looks: a
    zset's members with their scores, a hash's fields and values sorted,
    a string; None for any other type."""
    if kind == "zset":
        return c.call("ZRANGE", key, 0, -1, "WITHSCORES")
    if kind == "hash":
        v = c.call("HGETALL", key)
        return sorted(zip(v[0::2], v[1::2]))
    if kind == "string":
        return c.call("GET", key)
    return None
