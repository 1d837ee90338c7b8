#!/usr/bin/env python3
# A batch (batch.lua) is exactly its calls: the same random sequence of
# calls runs on two real redis-servers, grouped into batches at random
# boundaries on A (on one name or several, each name's calls together or
# interleaved with another's) and as one script a call (acquire.lua,
# release.lua, renew.lua, reassert.lua, adopt.lua) on B, with reassert, drain, revoke
# and limit also alone between the batches, over several names and hosts whose leases run out (hosts die
# and come back) while the clock moves on and is stepped. After every step
# the replies, the wake messages and every key (type, contents, scores,
# fields, expiry time) must be the same on both; no acquire may say a
# negative wait.
#
# Both servers read one wall clock that stands still between steps
# (tests/chaos/clockstep.c, "=MS"), so they see the same time to the
# microsecond: everything is compared exactly but the fleet clock key's
# run id, each server's own. The library is made as the agent loads it
# (src/agent/library/embed-lua.py, keys.list, scripts.list).
#
# SEED=N replays a run (the seed is printed); STEPS=N (default 1000). The
# run stops at the first step whose servers differ (the plan comes last).
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from library import CENSUS, FLEET_CLOCK, SERVER, Args, Tap, key_contents, keys_of, published, start_redis  # noqa: E402
from resp import Redis  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = int(os.environ.get("SEED") or random.SystemRandom().randrange(1, 1 << 31))
STEPS = int(os.environ.get("STEPS") or 1000)



# A lease's id (32 lower-case hex digits, as scripts.list types it) for
# the word the run names it by.
def lease_id(word):
    return hashlib.md5(word.encode()).hexdigest()


TAP = Tap("SEED=%d" % SEED)
ok, not_ok, bail = TAP.ok, TAP.not_ok, TAP.bail


class Server:
    def __init__(self, name, tmp, shim, clock):
        self.dir = os.path.join(tmp, name)
        os.mkdir(self.dir)
        self.sock = os.path.join(self.dir, "sock")
        self.proc, self.c, self.function = start_redis(self.dir, bail,
                                                       dict(os.environ, LD_PRELOAD=shim, CLOCKSTEP_FILE=clock))
        info = self.c.call("INFO", "server")
        self.run_id = [ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("run_id:")][0]
        # The wake messages of every name, in order.
        self.sub = Redis(self.sock, None, None)
        self.sub.call("PSUBSCRIBE", "fleetsem:{*}:wake")

    def script(self, name, script, argv):
        k = keys_of(name)
        return self.c.call("FCALL", self.function[script], len(k), *k, *argv)

    def batch(self, names, argv):
        """batch.lua on the keys of names (each name's, then the fleet's)."""
        k = [key for n in names for key in keys_of(n)[:-2]] + [FLEET_CLOCK, CENSUS]
        return self.c.call("FCALL", self.function["batch"], len(k), *k, *argv)

    def wakes(self):
        """The wake messages published since the last look."""
        return published(self.sub)

    def state(self):
        """Every key: its type, contents and expiry time, the run id masked."""
        out = {}
        for key in sorted(self.c.call("KEYS", "*")):
            kind = self.c.call("TYPE", key)
            v = key_contents(self.c, key, kind)
            if key == FLEET_CLOCK and kind == "string":
                w = v.split(" ")
                if len(w) >= 5 and w[4] == self.run_id:
                    w[4] = "RUN_ID"
                v = " ".join(w)
            out[key] = (kind, v, self.c.call("PEXPIRETIME", key))
        return out

    def stop(self):
        self.proc.kill()
        self.proc.wait()


# ---- The scripts and their arguments --------------------------------------------
KINDS = ["acquire", "release", "renew", "reassert", "adopt"]
OPERATOR = ["reassert", "drain", "revoke", "limit"]
ARGS = Args(KINDS + OPERATOR)
SPEC = ARGS.spec


def args(script, **kv):
    """script's ARGV in the order of scripts.list; a list value fills a rest argument."""
    try:
        return ARGS(script, **kv)
    except ValueError as e:
        bail(str(e))


# ---- The random sequence --------------------------------------------------------
rng = random.Random(SEED)
NAMES = ["n1", "n2", "n3"]
USUAL_SLOTS = {"n1": 1, "n2": 2, "n3": 3}


class Host:
    def __init__(self, i):
        self.id = "h%d" % i
        self.ttl = rng.choice([200, 250, 300, 400, 500])
        # As the agent: renewals the name's idle time, requests and
        # releases at most 10 minutes of it, adoptions none.
        self.idle = rng.choice([60000, 86400000])
        self.idle_new = min(self.idle, 600000)
        self.uid = "1000"
        self.grace = 0
        self.dead = 0            # steps left dead (its leases run out)
        self.leases = {n: {} for n in NAMES}   # lease -> token known (0: waits or unknown)
        self.n = 0

    def common(self):
        return dict(host=self.id, grace_until_ms=self.grace)


HOSTS = [Host(i) for i in range(1, 5)]
clock_ms = 1_700_000_000_000 + rng.randrange(1 << 20)


def call_for(h, name):
    """One random call of host h on name: (kind, argv)."""
    known = list(h.leases[name])
    c = h.common()
    roll = rng.random()
    if roll < 0.35 or not known:
        if known and rng.random() < 0.3:
            lease = rng.choice(known)        # asked again (woken, or a duplicate)
        else:
            h.n += 1
            lease = lease_id("%s-%s-%d" % (h.id, name, h.n))
        slots = 0 if rng.random() < 0.1 else USUAL_SLOTS[name] if rng.random() < 0.8 else rng.randint(1, 4)
        extra = {"proof": lease_id("p%d" % rng.randrange(1000))} if rng.random() < 0.5 else {}
        return "acquire", args("acquire", lease=lease, slots=slots, ttl_ms=h.ttl, description="job " + lease,
                               uid=h.uid, idle_ms=h.idle_new, weight=2 if rng.random() < 0.15 else 1,
                               hold=1 if rng.random() < 0.1 else 0, **extra, **c)
    if roll < 0.7:
        leases = [l for l in known if rng.random() < 0.9]
        if rng.random() < 0.1:
            leases.append(lease_id("%s-%s-gone" % (h.id, name)))
        return "renew", args("renew", ttl_ms=h.ttl, idle_ms=h.idle, leases=leases, **c)
    lease = rng.choice(known)
    if rng.random() < 0.05:
        lease = rng.choice([l for o in HOSTS for l in o.leases[name]] or [lease])   # maybe another's
    if roll > 0.92:
        # Its holders put back, as after a reset (maybe one Redis still has,
        # or another's, or one gone).
        if rng.random() < 0.2:
            lease = lease_id("%s-%s-back%d" % (h.id, name, rng.randrange(9)))
        token = h.leases[name].get(lease) or clock_ms * 1000 - rng.randrange(10 ** 6)
        return "reassert", args("reassert", lease=lease, slots=USUAL_SLOTS[name], token=token,
                                since_ms=clock_ms - rng.randrange(10000), ttl_ms=h.ttl, description="back " + lease,
                                uid=h.uid, idle_ms=h.idle, weight=1, hold=0, **c)
    if roll < 0.9:
        return "release", args("release", lease=lease, uid=h.uid, idle_ms=h.idle_new, **c)
    return "adopt", args("adopt", lease=lease, ttl_ms=h.ttl, uid=h.uid, idle_ms=0, **c)


def learn(h, name, kind, argv, reply):
    """What the caller's agent would keep of a reply (B's)."""
    leases = h.leases[name]
    spec = [s.rstrip("?.") for s in SPEC[kind]]
    lease = argv[spec.index("lease")] if "lease" in spec else None
    if kind == "reassert":
        if reply == 1:
            leases[lease] = int(argv[spec.index("token")])
        elif reply in (0, -1):
            leases.pop(lease, None)
        return
    if not isinstance(reply, list):
        return
    if kind == "acquire":
        if reply[0] in (-1, -2, -3):
            leases.pop(lease, None)
        elif argv[spec.index("host")] == h.id:
            leases[lease] = reply[1] if reply[0] == 1 else leases.get(lease, 0)
    elif kind == "release":
        if lease in leases and reply != [-1]:
            leases.pop(lease)
        for o in HOSTS:                      # those it handed slots to
            for i in range(1, len(reply) - 2, 3):
                if reply[i] in o.leases[name]:
                    o.leases[name][reply[i]] = reply[i + 1]
    elif kind == "renew":
        for l in reply:
            leases.pop(l, None)
    elif kind == "adopt" and reply == [-1]:
        leases.pop(lease, None)



def operator_call():
    """One operator's script on a random name: (name, script, argv, host)."""
    name, h = rng.choice(NAMES), rng.choice(HOSTS)
    c = dict(host=h.id, grace_until_ms=h.grace, idle_ms=h.idle)
    kind = rng.choice(OPERATOR)
    every = [(o, l) for o in HOSTS for l in o.leases[name]]
    if kind == "reassert":
        o, lease = rng.choice(every) if every and rng.random() < 0.7 else (h, lease_id("%s-%s-back%d" % (h.id, name, rng.randrange(9))))
        token = o.leases[name].get(lease) or clock_ms * 1000 - rng.randrange(10 ** 6)
        return name, kind, args(kind, lease=lease, slots=USUAL_SLOTS[name], token=token,
                                since_ms=clock_ms - rng.randrange(10000), ttl_ms=o.ttl, description="back " + lease,
                                host=o.id, uid=o.uid, grace_until_ms=o.grace, idle_ms=o.idle, weight=1, hold=0), o
    if kind == "drain":
        return name, kind, args(kind, on=rng.choice("0011"), uid=0, user="root", reason="r", **c), h
    if kind == "revoke":
        lease = rng.choice(every)[1] if every else lease_id("nobody")
        return name, kind, args(kind, lease=lease, uid=0, user="root", reason="r", waiters=rng.choice("00w1"), **c), h
    return name, kind, args(kind, n=rng.choice([0, 0, 1, 2, 3]), uid=0, user="root", reason="r", **c), h


def main():
    global clock_ms
    tmp = tempfile.mkdtemp(prefix="fleetsem-lua-batch-diff.")
    servers = []
    try:
        shim = os.path.join(tmp, "clockstep.so")
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", shim,
                        os.path.join(HERE, "chaos", "clockstep.c")], check=True)
        clock = os.path.join(tmp, "clock")
        with open(clock, "w") as f:
            f.write("=%015d" % clock_ms)
        clock_fd = os.open(clock, os.O_WRONLY)

        def set_clock(ms):
            os.pwrite(clock_fd, b"=%015d" % ms, 0)     # one length: never read half-done

        a, b = Server("a", tmp, shim, clock), Server("b", tmp, shim, clock)
        servers += [a, b]
        # New servers: nobody held anything before them (fleetsemd(8)).
        for srv in servers:
            srv.c.call("ZADD", CENSUS, "-1", ".")
        print("# SEED=%d STEPS=%d (%s; SEED= replays it)" % (SEED, STEPS, SERVER), flush=True)
        stats = dict(batched=0, calls=0, dropped=0, names=0)
        negative = []
        diverged = None
        for step in range(1, STEPS + 1):
            if diverged:
                print("# steps %d to %d not run: the servers differ since step %d" % (step, STEPS, diverged))
                break
            # The clock: moves on by less than a third of any lease (calls
            # keep the fleet clock fresh), now and then stepped.
            roll = rng.random()
            clock_ms += (rng.randint(1000, 4000) if roll < 0.02 else -rng.randint(100, 1500) if roll < 0.04
                         else 0 if roll < 0.3 else rng.randint(1, 60))
            set_clock(clock_ms)
            for h in HOSTS:
                if h.dead:
                    h.dead -= 1
                elif rng.random() < 0.03:
                    h.dead = rng.randint(5, 40)
            if rng.random() < 0.01:          # a reset: every agent learns the new grace
                for h in HOSTS:
                    h.grace = clock_ms + rng.randint(100, 600)
            what, replies_a, replies_b = "", None, None
            if rng.random() < 0.12:
                name, script, argv, h = operator_call()
                what = "%s on %s" % (script, name)
                replies_a, replies_b = [a.script(name, script, argv)], [b.script(name, script, argv)]
                calls = [(script, argv)]
            else:
                alive = [h for h in HOSTS if not h.dead]
                if not alive:
                    ok("step %d: every host is down" % step)
                    continue
                # One agent's batch: on one name, or on several, their
                # calls grouped by name (as the agent sends them) or
                # interleaved (a name again after another's: the script
                # must be right all the same); now and then with the keys
                # of a name it has no call on.
                h = rng.choice(alive)
                on = rng.sample(NAMES, rng.choice([1, 1, 2, 2, 3]))
                n = rng.choice([1, 2, 2, 3, 3, 4, 5, 6, 8])
                seq = [rng.choice(on) for _ in range(n)]
                if rng.random() < 0.5:
                    seq.sort(key=on.index)
                names = list(on)
                if rng.random() < 0.1:
                    names += [x for x in NAMES if x not in names][:1]
                rng.shuffle(names)
                calls, flat, ran = [], [], []
                for name in seq:
                    kind, argv = call_for(h, name)
                    calls.append((kind, argv))
                    ran.append(name)
                    flat += [kind, str(names.index(name) + 1), str(len(argv))] + argv
                what = "batch of %d on %s by %s: %s" % (len(calls), ",".join(names), h.id,
                                                         " ".join("%s:%s" % (k, x) for (k, _), x in zip(calls, ran)))
                replies_a = a.batch(names, flat)
                replies_b = [b.script(name, kind, argv) for (kind, argv), name in zip(calls, ran)]
                stats["batched"] += 1
                stats["calls"] += len(calls)
                stats["names"] += len(set(ran)) > 1
                for (kind, argv), name, r in zip(calls, ran, replies_b):
                    learn(h, name, kind, argv, r)
                    if kind == "renew" and isinstance(r, list):
                        stats["dropped"] += len(r)
            for side, replies in (("A", replies_a), ("B", replies_b)):
                for (kind, _), r in zip(calls, replies if isinstance(replies, list) else []):
                    if (kind == "acquire" and isinstance(r, list) and r and r[0] == 0 and len(r) >= 5 and
                            (r[4] < -1 or (r[4] == -1 and r[2] > 0))):
                        negative.append("step %d (%s): %s's acquire says wait %d: %r" % (step, what, side, r[4], r))
            wa, wb = a.wakes(), b.wakes()
            sa, sb = a.state(), b.state()
            why = []
            if replies_a != replies_b:
                why.append("replies: batch %r" % (replies_a,))
                why.append("       one by one %r" % (replies_b,))
            if wa != wb:
                why += ["wake messages: batch %r" % wa, "           one by one %r" % wb]
            for key in sorted(set(sa) | set(sb)):
                if sa.get(key) != sb.get(key):
                    why += ["key %s: batch %r" % (key, sa.get(key)), "    one by one %r" % (sb.get(key),)]
            if why:
                why.insert(0, "calls: %r" % (calls,))
                why.append("replay: SEED=%d STEPS=%d" % (SEED, step))
                not_ok("step %d: %s: the same replies, wake messages and keys" % (step, what), why)
                diverged = step
            else:
                ok("step %d: %s: the same replies, wake messages and keys" % (step, what))
        if negative:
            not_ok("no acquire reply says a negative wait", negative[:5] + ["replay: SEED=%d" % SEED])
        else:
            ok("no acquire reply says a negative wait")
        # The sequence did what it is for: leases ran out under renewals.
        if stats["dropped"] > 0 and stats["calls"] > STEPS and stats["names"] > STEPS / 10:
            ok("the run had %d calls in %d batches (%d on several names), %d leases found run out" %
               (stats["calls"], stats["batched"], stats["names"], stats["dropped"]))
        else:
            not_ok("the run had enough calls and leases that ran out", ["%r" % stats])
        return TAP.end()
    finally:
        for s in servers:
            s.stop()
        if TAP.failed:
            for s in servers:
                log = os.path.join(s.dir, "log")
                if os.path.exists(log):
                    with open(log) as f:
                        for line in f.readlines()[-10:]:
                            print("#   %s: %s" % (os.path.basename(s.dir), line.rstrip()))
        shutil.rmtree(tmp, ignore_errors=True)


sys.exit(main())
