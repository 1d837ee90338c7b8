#!/usr/bin/env python3
# The model's Redis-side steps, replayed against the library: a run of
# model/fleetsem.pml under spin -i, whose choices a generator seeded with
# the run's seed makes (trace()), prints each step its Redis takes (the
# "MSC: redis: ..." lines, the tick, resets, agents that connect and
# crash), and each is done again here, in order, on a real redis-server
# with the agent's library loaded, as the agent would call it. After each
# step what the model said (granted, queued, refused; which leases a
# release, a revoke or an undrain hands the slot to; renewed or missing;
# held or lost; adopted; the grace's ticks; a revoke's free-in) must be what
# Redis replied, and the tokens must be the same up to a renaming that
# keeps their order (the model's are small numbers, Redis' microseconds).
#
# Time: a tick of the model is a third of a lease. Redis' wall clock is
# stopped (tests/chaos/clockstep.c, "=MS") and moved TICK_MS at each tick,
# so that a lease the model ends at a tick ends in Redis at the same one;
# a reset moves it 1 ms (a restart takes time: the tokens' clock, from
# which a lost counter starts, must pass the tokens handed out before it).
# The model's Redis ends leases at the tick whether anybody calls it or
# not; the library when a script next looks, and it takes a silence of
# more than half a lease in every agent's calls for a clock step (observe()
# in prelude/clocks.lua), which ends no lease. So at each tick a script
# looks (an adoption of a lease nobody has), as the agents of a fleet call
# at least every third of a lease.
#
# Usage: model-replay.py SOCKET CLOCK_FILE FIRST_SEED SEEDS NAME:DEFINES...
# Prints for each configuration (NAME, the model's -D DEFINES) a line a
# seed, "ok WHAT" or "not_ok WHAT" followed by "# " lines (the first
# difference, the sequence so far and how to replay it), and at the end
# one for the kinds of step the runs took together. A NAME that starts
# with "!" is a seeded bug (a rule changed in the model, not in the
# library): some seed must differ from Redis.
import os
import random
import re
import select
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from library import CENSUS, SUFFIXES, Args, keys_of  # noqa: E402
from resp import Error, Redis  # noqa: E402

MODEL = os.path.join(os.path.dirname(HERE), "model", "fleetsem.pml")
TICK_MS = 1000
TTL_MS = 3 * TICK_MS            # the model's TTL: 3 ticks
IDLE_MS = 86400000
UID = "1000"
MAX_CHOICES, IDLE_TICKS, FAULT_ODDS = 3000, 12, 0.02


SCRIPTS = ["acquire", "release", "renew", "reassert", "adopt", "epoch", "drain", "revoke"]
EPOCH = "fleetsem:epoch"
NAME = "replay"


ARGS = Args(SCRIPTS)


def args(script, **kv):
    try:
        return ARGS(script, **kv)
    except ValueError as e:
        raise SystemExit(str(e))


def lease_of(j):
    return "%032x" % (0xfeed0 + j)


class Differs(Exception):
    pass


class Config:
    def __init__(self, name, defines):
        self.name, self.defines = name, defines.split()
        d = dict(re.match(r"-D(\w+)(?:=(\S+))?$", x).groups() for x in self.defines)
        self.d = d
        self.nj = int(d.get("NJ", 2))
        self.slots = [int(d.get("SL%d" % j, 1)) for j in range(3)]
        self.weight = [int(d.get("W%d" % j, 1)) for j in range(3)]
        for k in ("TTL", "FENCE", "RENEW", "USTEPS", "STEPS", "REVERTS", "FORGETS"):
            if k in d and d[k] not in {"TTL": ["3"], "FENCE": ["2"], "RENEW": ["1"]}.get(k, ["0"]):
                raise SystemExit("model-replay: %s=%s is not replayed (a tick a third of a lease, no clock steps,"
                                 " no kept master, no keys lost while Redis stays up)" % (k, d[k]))


class Host:
    def __init__(self, h):
        self.id = "h%d" % h
        self.fresh = True       # knows no epoch: adopts its leases when it connects
        self.epoch_id, self.grace_until = "", 0
        self.n = 0


class Replay:
    def __init__(self, conn, clock_fd, cfg, seed, clock_ms):
        self.c, self.clock_fd, self.cfg, self.seed = conn, clock_fd, cfg, seed
        self.now = clock_ms
        self.hosts = [Host(0), Host(1)]
        self.m2r, self.r2m = {}, {}     # tokens: the model's <-> Redis'
        self.epochs = {}                # the model's epoch -> Redis' id
        self.grace_until = 0            # the current epoch's
        self.since = {}
        self.done = []                  # the sequence so far, for a failure's report
        self.count = dict(steps=0, granted=0, queued=0, refused=0, handed=0, renewed=0, missing=0, held_again=0,
                          lost=0, adopted=0, resets=0, ticks=0, expired=0, drains=0, revokes=0)

    # ---- Redis
    def set_clock(self):
        os.pwrite(self.clock_fd, b"=%015d" % self.now, 0)

    def fcall(self, script, argv, keys=None):
        k = keys if keys is not None else keys_of(NAME)
        r = self.c.call("FCALL", "fleetsem_%s_v%d" % (script, self.version), len(k), *k, *argv)
        if isinstance(r, Error):
            raise Differs("%s: Redis answered the error %s" % (script, r))
        return r

    def fresh_redis(self):
        """A new Redis: nothing held before it (fleetsemd(8), A NEW REDIS)."""
        self.c.call("FLUSHALL")
        self.c.call("ZADD", CENSUS, "-1", ".")

    # ---- tokens
    def token(self, mt, rt, what):
        if mt in self.m2r:
            if self.m2r[mt] != rt:
                raise Differs("%s: token %d in the model is %d in Redis, earlier %d" % (what, mt, rt, self.m2r[mt]))
            return
        if rt in self.r2m:
            raise Differs("%s: Redis' token %d is the model's %d, which here is %d" % (what, rt, self.r2m[rt], mt))
        for a, b in self.m2r.items():
            if (mt > a) != (rt > b):
                raise Differs("%s: the model's token %d is %s its %d, Redis' %d %s its %d" % (
                    what, mt, "above" if mt > a else "below", a, rt, "not above" if mt > a else "not below", b))
        self.m2r[mt], self.r2m[rt] = rt, mt

    def expect(self, cond, what):
        if not cond:
            raise Differs(what)

    # ---- the steps
    def grants(self, reply, at, mask, toks, what):
        """reply[at:]: lease, token, since of each granted; mask and toks the model's."""
        got = {}
        for i in range(at, len(reply) - 2, 3):
            got[reply[i]] = reply[i + 1]
        want = {lease_of(j) for j in range(self.cfg.nj) if mask & (1 << j)}
        self.expect(set(got) == want, "%s: the model hands the slot to %s, Redis to %s" % (
            what, sorted(self.jobs(want)), sorted(self.jobs(got))))
        for j in range(self.cfg.nj):
            if mask & (1 << j):
                self.token(toks[j], got[lease_of(j)], what)
                self.since[j] = reply[at + 2 + 3 * list(got).index(lease_of(j))]
        self.count["handed"] += len(want)

    def jobs(self, leases):
        return ["job %d" % j for j in range(3) if lease_of(j) in leases] + \
               [x for x in leases if x not in [lease_of(j) for j in range(3)]]

    def step(self, line):
        s = line
        m = re.fullmatch(r"--- tick ---", s)
        if m:
            self.now += TICK_MS
            self.set_clock()
            self.count["ticks"] += 1
            # The model's Redis ends leases at the tick; the library when
            # a script next looks: one looks now (an adoption of a lease
            # nobody has, which sweeps and changes nothing else), so that
            # the time passes as a fleet's calls see it, without a step.
            r = self.fcall("adopt", args("adopt", lease="0" * 32, ttl_ms=TTL_MS,
                                         host="beat", uid=UID, grace_until_ms=self.grace_until, idle_ms=IDLE_MS))
            self.expect(r == [-1], "the tick's look at the name says %r" % (r,))
            return "clock %d" % self.now
        m = re.fullmatch(r"redis: lease (\d) expires", s)
        if m:
            j = int(m.group(1))
            k = keys_of(NAME)
            for z in (k[SUFFIXES.index("holders")], k[SUFFIXES.index("waiters")]):
                score = self.c.call("ZSCORE", z, lease_of(j))
                self.expect(score is None or float(score) <= self.now,
                            "job %d's lease ends in the model; in Redis it runs until %s, now %d" % (j, score, self.now))
            self.count["expired"] += 1
            return "ok"
        if s == "redis: reset (all state lost)":
            self.now += 1
            self.set_clock()
            # (No census in the model without FORGETS: a Redis that says
            # nobody held anything before it; the grace is the epoch's.)
            self.fresh_redis()
            self.count["resets"] += 1
            return "FLUSHALL"
        m = re.fullmatch(r"agent (\d): crash", s)
        if m:
            self.hosts[int(m.group(1))].fresh = True
            return None
        m = re.fullmatch(r"redis: adopt\((\d)\) by host (\d) -> (\d) token (\d+)", s)
        if m:
            self.adopting.append(tuple(int(x) for x in m.groups()))
            return None
        m = re.fullmatch(r"agent (\d): connected, epoch (\d+), grace (\d+) ticks", s)
        if m:
            return self.connect(*(int(x) for x in m.groups()))
        m = re.fullmatch(r"redis: acquire\((\d)\) by host (\d) -> (\d) \(.*\) token (\d+)", s)
        if m:
            j, h, val, tok = (int(x) for x in m.groups())
            host = self.hosts[h]
            r = self.fcall("acquire", args("acquire", lease=lease_of(j), slots=self.cfg.slots[j], ttl_ms=TTL_MS,
                                           description="INFO job %d" % j, host=host.id, uid=UID,
                                           grace_until_ms=host.grace_until, idle_ms=IDLE_MS,
                                           weight=self.cfg.weight[j], hold=0))
            what = "acquire of job %d by host %d" % (j, h)
            want = {0: "queued", 1: "granted", 2: "refused"}[val]
            got = {0: "queued", 1: "granted", -1: "refused"}.get(r[0] if isinstance(r, list) else None, repr(r))
            self.expect(want == got, "%s: the model says %s, Redis %r" % (what, want, r))
            if val == 1:
                self.token(tok, r[1], what)
                self.since[j] = r[2]
            self.count[want] += 1
            return r
        m = re.fullmatch(r"redis: release\((\d)\) by host (\d) -> (-?\d)(?: \(.*\)|, granted mask (\d+), tokens (\d+) (\d+) (\d+))", s)
        if m:
            j, h, val = (int(x) for x in m.groups()[:3])
            r = self.fcall("release", args("release", lease=lease_of(j), host=self.hosts[h].id, uid=UID,
                                           grace_until_ms=self.hosts[h].grace_until, idle_ms=IDLE_MS))
            what = "release of job %d by host %d" % (j, h)
            self.expect(isinstance(r, list) and r and r[0] == val,
                        "%s: the model says %d (1 held, 0 waited or not there, -1 refused), Redis %r" % (what, val, r))
            if m.group(4) is not None:
                self.grants(r, 1, int(m.group(4)), [int(x) for x in m.groups()[4:]], what)
            else:
                self.expect(len(r) == 1, "%s: the model hands nothing on, Redis %r" % (what, r))
            if val == -1:
                self.count["refused"] += 1
            return r
        m = re.fullmatch(r"redis: renew by host (\d): renewed mask (\d+), missing mask (\d+)", s)
        if m:
            h, ok, miss = (int(x) for x in m.groups())
            asked = [j for j in range(self.cfg.nj) if (ok | miss) & (1 << j)]
            r = self.fcall("renew", args("renew", ttl_ms=TTL_MS, host=self.hosts[h].id,
                                         grace_until_ms=self.hosts[h].grace_until, idle_ms=IDLE_MS,
                                         leases=[lease_of(j) for j in asked]))
            what = "renewal by host %d of %s" % (h, ", ".join("job %d" % j for j in asked))
            self.expect(isinstance(r, list) and r and r[0] == 0,
                        "%s: Redis says %r" % (what, r))
            want = {lease_of(j) for j in asked if miss & (1 << j)}
            self.expect(set(r[1:]) == want and len(r) - 1 == len(want),
                        "%s: missing in the model %s, in Redis %s" % (what, sorted(self.jobs(want)),
                                                                      sorted(self.jobs(r[1:]))))
            self.count["renewed"] += len(asked) - len(want)
            self.count["missing"] += len(want)
            return r
        m = re.fullmatch(r"redis: reassert\((\d)\) token (\d+) by host (\d) -> (\d)", s)
        if m:
            j, tok, h, val = (int(x) for x in m.groups())
            what = "re-assertion of job %d by host %d" % (j, h)
            self.expect(tok in self.m2r, "%s: the model's token %d was never handed out" % (what, tok))
            host = self.hosts[h]
            r = self.fcall("reassert", args("reassert", lease=lease_of(j), slots=self.cfg.slots[j], token=self.m2r[tok],
                                            since_ms=self.since.get(j, self.now), ttl_ms=TTL_MS,
                                            description="INFO job %d" % j, host=host.id, uid=UID,
                                            grace_until_ms=host.grace_until, idle_ms=IDLE_MS,
                                            weight=self.cfg.weight[j], hold=0))
            # (The model says 0 for lost and for another's or revoked.)
            self.expect(r == 1 if val == 1 else r in (0, -1),
                        "%s: the model says %s, Redis %r" % (what, "held" if val else "lost", r))
            self.count["held_again" if val else "lost"] += 1
            return r
        if s == "redis: drain":
            r = self.fcall("drain", self.operator("drain", on=1))
            self.expect(isinstance(r, list) and r[0] == 1 and len(r) == 2, "drain: Redis says %r" % (r,))
            self.count["drains"] += 1
            return r
        m = re.fullmatch(r"redis: undrain(?:, granted mask (\d+), tokens (\d+) (\d+) (\d+)| of a name not drained)", s)
        if m:
            r = self.fcall("drain", self.operator("drain", on=0))
            if m.group(1) is None:
                self.expect(isinstance(r, list) and r[:2] == [0, ""] and len(r) == 2,
                            "undrain of a name not drained: Redis says %r" % (r,))
            else:
                self.expect(isinstance(r, list) and r[0] == 1, "undrain: Redis says %r" % (r,))
                self.grants(r, 2, int(m.group(1)), [int(x) for x in m.groups()[1:]], "undrain")
            self.count["drains"] += 1
            return r
        if s.startswith("assertion violated"):
            raise Differs("the model's own %s" % s)
        if s == "root: revokes lease 0":
            self.revoking = True
            return None
        raise Differs("a step of the model's Redis this replay does not know: %r" % s)

    def operator(self, script, **kv):
        """An operator's script through a connected agent (the model's
        OP_AGENT); its grace is the current epoch's."""
        return args(script, host="h0", uid=0, user="root", reason="replay", grace_until_ms=self.grace_until,
                    idle_ms=IDLE_MS, **kv)

    def revoke(self, line):
        """root: revokes lease 0, then what the model's Redis did with it."""
        self.revoking = False
        now = "1" if self.cfg.d.get("REVOKE_NOW", "0") == "1" else "0"
        r = self.fcall("revoke", self.operator("revoke", lease=lease_of(0), waiters="0", now=now))
        self.count["revokes"] += 1
        what = "revoke of job 0"
        m = re.fullmatch(r"redis: lease 0 revoked, expires in (\d+) ticks", line)
        if m:
            self.expect(isinstance(r, list) and r[0] == 5, "%s: the model keeps it counted, Redis says %r" % (what, r))
            ticks = -(-r[3] // TICK_MS)
            self.expect(ticks == int(m.group(1)), "%s: free in %s ticks in the model, in %d ms in Redis" % (
                what, m.group(1), r[3]))
            return r
        m = re.fullmatch(r"redis: release\(0\) by host (\d) -> 1, granted mask (\d+), tokens (\d+) (\d+) (\d+)", line)
        if m:
            self.expect(isinstance(r, list) and r[0] == 1, "%s: the model frees it, Redis says %r" % (what, r))
            self.grants(r, 3, int(m.group(2)), [int(x) for x in m.groups()[2:]], what)
            return r
        raise Differs("%s: the model's Redis then says %r, which this replay does not know" % (what, line))

    def connect(self, h, epoch, grace):
        host = self.hosts[h]
        new_id = "%08x%024x" % (self.seed, len(self.epochs) * 2 + h + 1 + 16 * host.n)
        host.n += 1
        r = self.fcall("epoch", args("epoch", id=new_id, grace_ms=3 * TICK_MS, master_id="",
                                     failover_grace_ms=3 * TICK_MS, known_id=host.epoch_id,
                                     known_grace_until_ms=host.grace_until if host.epoch_id else ""), [EPOCH])
        what = "host %d connects" % h
        self.expect(isinstance(r, list) and r[0] in (0, 1), "%s: epoch says %r" % (what, r))
        rid, until = r[1].split()[:2]
        if epoch in self.epochs:
            self.expect(r[0] == 0 and self.epochs[epoch] == rid,
                        "%s: the model's epoch %d is the one it had, Redis' %r" % (what, epoch, r))
        else:
            self.expect(r[0] == 1, "%s: the model made epoch %d, Redis says %r" % (what, epoch, r))
            self.epochs[epoch] = rid
        host.epoch_id, host.grace_until = rid, int(until)
        self.grace_until = int(until)
        left = -(-max(0, int(until) - self.now) // TICK_MS)
        self.expect(left == grace, "%s: a grace of %d ticks in the model, %d ms in Redis" % (
            what, grace, int(until) - self.now))
        replies = [r]
        if host.fresh:
            said = {a[0]: a for a in self.adopting}
            for j in range(h, self.cfg.nj, 2):
                a = self.fcall("adopt", args("adopt", lease=lease_of(j), ttl_ms=TTL_MS, host=host.id, uid=UID,
                                              grace_until_ms=host.grace_until, idle_ms=IDLE_MS))
                replies.append(a)
                w = "%s: adoption of job %d" % (what, j)
                if j in said:
                    held, tok = said[j][2], said[j][3]
                    self.expect(isinstance(a, list) and a[0] == held,
                                "%s: the model says %s, Redis %r" % (w, "held" if held else "queued", a))
                    if held:
                        self.token(tok, a[1], w)
                    self.count["adopted"] += 1
                else:
                    self.expect(a == [-1], "%s: the model has it not, Redis says %r" % (w, a))
        else:
            self.expect(not self.adopting, "%s: the model adopts, the agent knew an epoch" % what)
        host.fresh = False
        self.adopting = []
        return replies

    def run(self, lines):
        self.adopting, self.revoking = [], False
        self.set_clock()
        self.fresh_redis()
        for line in lines:
            if self.revoking:
                r = self.revoke(line)
            else:
                r = self.step(line)
            if r is not None:
                self.count["steps"] += 1
            self.done.append("%-72s  %s" % (line, "" if r is None else "Redis: " + (
                r if isinstance(r, str) else repr(r)[:100])))


# The guard of a holder's end ("a holder ends: the anchor closes"), as
# spin prints it: taken seldom, so that holders hold across faults.
HOLDER_ENDS = re.compile(rb"\(+j_st\[j\]==2\)&&!\(j_frz\[j\]\)+")


class Menu:
    """One of spin -i's menus: the lines before its prompt."""

    CHOICE = re.compile(rb"choice (\d+): proc\s+(\d+) \(([^()]*?):\d+\).*?\[(.*)\]$")

    def __init__(self, text):
        self.msc, self.procs, self.local, self.violated = [], [], [], None
        for ln in text.split(b"\n"):
            ln = ln.strip()
            i = ln.find(b"MSC: ")
            if i >= 0:
                self.msc.append(ln[i + 5:].decode())
            if b"assertion violated" in ln:
                self.violated = ln.decode()
            c = self.CHOICE.match(ln)
            if b"unexecutable" in ln:
                continue
            if c:
                self.procs.append((int(c.group(1)), int(c.group(2)), c.group(3).decode(), c.group(4)))
            elif re.match(rb"choice \d+: (?!other process)", ln):
                self.local.append(int(ln.split()[1].rstrip(b":")))
        own = re.search(rb"Select stmnt \(proc\s+(\d+) ", text)
        self.own = int(own.group(1)) if own else None


def trace(cfg, seed, model):
    """A run of the model with spin -i, each choice made here from a
    random generator seeded with seed: a reset or an agent's crash one
    step in 1/FAULT_ODDS, a holder's end and the operator's drain and
    undrain seldom, anything else alike. (A random simulation, spin -n,
    takes its faults and the drain first, before anyone holds or waits,
    and ends each holder at once.) Returns the lines the
    model's printf()s wrote ("MSC: " taken off), up to an assertion that
    fails; stops after MAX_CHOICES choices, or once only the clock has
    had anything to do for IDLE_TICKS choices."""
    rng = random.Random(seed)
    # (In a folder of its own: spin writes pan.pre where it runs, and two
    # runs in one folder, of this test or another, read each other's.)
    work = tempfile.TemporaryDirectory(prefix="fleetsem-spin.")
    p = subprocess.Popen(["spin", "-i"] + cfg.defines + [model], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, bufsize=0, cwd=work.name)
    prompt = re.compile(rb"Select \[\d+-\d+\]: ")
    buf, out, made, inside, idle = b"", [], 0, None, 0
    try:
        while made < MAX_CHOICES and idle < IDLE_TICKS:
            # spin waits for an answer only at a prompt that ends what it
            # wrote: where it had one choice only, it took it and wrote
            # its number after the prompt.
            while not (re.search(rb"Select \[\d+-\d+\]: $", buf) and not select.select([p.stdout], [], [], 0)[0]):
                chunk = os.read(p.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise EOFError
                buf += chunk
                # (Only the clock left, a choice spin takes alone, on and on.)
                if buf.count(b"Select [") > 4 * IDLE_TICKS:
                    raise EOFError
            menus = prompt.split(buf)
            for text in menus[:-2]:
                menu = Menu(text)
                out += menu.msc
                if inside is not None and any(c[1] == inside for c in menu.procs):
                    inside = None       # (taken by spin, the only choice)
            menu = Menu(menus[-2])
            out += menu.msc
            buf = b""
            if menu.violated:
                out.append("assertion violated: " + menu.violated)
                break
            made += 1
            if menu.own is not None:
                # Within a process' atomic sequence: one of its own
                # choices; an else, which spin lists only in the menu of
                # every process, comes next from the same process.
                if menu.local:
                    pick = rng.choice(menu.local)
                else:
                    pick, inside = 0, menu.own
            elif inside is not None:
                mine = [c[0] for c in menu.procs if c[1] == inside]
                if not mine:
                    raise SystemExit("spin -i: process %d left in its atomic sequence (%s, seed %d)" % (
                        inside, cfg.name, seed))
                pick, inside = rng.choice(mine), None
            elif not menu.procs:
                break
            else:
                faults = [c for c in menu.procs if b"n_reset<" in c[3] or b"n_crash<" in c[3]]
                rest = [c for c in menu.procs if c not in faults]
                idle = idle + 1 if rest and all(c[2] == "clock" for c in rest) else 0
                if faults and (not rest or rng.random() < FAULT_ODDS):
                    pick = rng.choice(faults)[0]
                else:
                    pick = rng.choices(rest, [0.02 if HOLDER_ENDS.fullmatch(c[3]) else 0.05 if c[2] == "operator" else 1.0
                                              for c in rest])[0][0]
            p.stdin.write(b"%d\n" % pick)
    except (BrokenPipeError, EOFError):
        out += Menu(buf).msc
    finally:
        p.kill()
        p.wait()
        work.cleanup()
    if not out:
        raise SystemExit("spin -i printed nothing for %s (seed %d): %r" % (cfg.name, seed, buf[-400:]))
    return [ln for ln in out if ln.startswith(("redis: ", "--- tick", "root: revokes", "assertion violated")) or
            re.fullmatch(r"agent \d: (crash|connected.*)", ln)]


# Each kind of step the model's runs are to take, by what the model said
# (the line's pattern): the runs together must take each one.
KINDS = [
    ("a grant", r"redis: acquire\(.*-> 1 "),
    ("a waiter queued", r"redis: acquire\(.*-> 0 "),
    ("an acquire refused", r"redis: acquire\(.*-> 2 "),
    ("a release refused", r"redis: release\(.*-> -1 "),
    ("a release that hands the slot on", r"redis: release\(.*granted mask [1-7],"),
    ("a renewal that finds a lease missing", r"redis: renew .*missing mask [1-7]$"),
    ("a lease that ends", r"redis: lease \d expires"),
    ("a reset", r"redis: reset"),
    ("a holder put back", r"redis: reassert\(.*-> 1$"),
    ("a holder adopted", r"redis: adopt\(.*-> 1 "),
    ("a waiter adopted", r"redis: adopt\(.*-> 0 "),
    ("a drain", r"redis: drain$"),
    ("an undrain that grants", r"redis: undrain, granted mask [1-7],"),
    ("a revoke kept counted to its fence point", r"redis: lease 0 revoked"),
    ("a revoke that frees the slot at once", r"root: revokes lease 0"),
]


def kinds_of(lines):
    return {k for k, pat in KINDS if any(re.match(pat, ln) for ln in lines)}


def replay_config(c, version, clock_fd, clock_ms, cfg, first, n, caught, covered):
    """The seeds of one configuration; returns the clock where they left it."""
    total = {}
    differed = []
    seen = set()
    todo = [(seed, trace(cfg, seed, MODEL)) for seed in range(first, first + n)]
    if caught:
        # (The seeded bug's own assertions may stop its run: what came
        # before is replayed.)
        todo = [(seed, [ln for ln in lines if not ln.startswith("assertion violated")]) for seed, lines in todo]
    for _, lines in todo:
        seen |= kinds_of(lines)
    for seed, lines in todo:
        clock_ms += 3_600_000
        rp = Replay(c, clock_fd, cfg, seed, clock_ms)
        rp.version = version
        replay_cmd = "MODEL_REPLAY_FIRST=%d MODEL_REPLAY_SEEDS=1 (configuration %s: %s)" % (
            seed, cfg.name, " ".join(cfg.defines))
        try:
            rp.run(lines)
        except Differs as e:
            differed.append(seed)
            if caught:
                print("# %s, seed %d: %s" % (cfg.name, seed, e))
                continue
            print("not_ok %s, seed %d: the model's %d Redis steps the same in Redis" % (cfg.name, seed, len(lines)))
            print("# the first difference, at step %d: %s" % (len(rp.done) + 1, e))
            print("# the sequence (the model's step, then what Redis replied):")
            for d in rp.done[-40:]:
                print("#   " + d)
            print("#   %s  <- here" % lines[len(rp.done)] if len(rp.done) < len(lines) else "#")
            print("# replay the model's run: %s" % replay_cmd)
            continue
        finally:
            clock_ms = rp.now
        for k, v in rp.count.items():
            total[k] = total.get(k, 0) + v
        if not caught:
            print("ok %s, seed %d: %d Redis steps the same in Redis (%d granted, %d queued, %d refused, %d handed on,"
                  " %d renewed, %d missing, %d re-asserted, %d lost, %d adopted, %d resets)" % (
                      cfg.name, seed, rp.count["steps"], rp.count["granted"], rp.count["queued"],
                      rp.count["refused"], rp.count["handed"], rp.count["renewed"], rp.count["missing"],
                      rp.count["held_again"], rp.count["lost"], rp.count["adopted"], rp.count["resets"]))
    if caught:
        if differed:
            print("ok %s: the changed rule differs from Redis in %d of %d seeds (first: seed %d)" % (
                cfg.name, len(differed), n, differed[0]))
        else:
            print("not_ok %s: the changed rule never differed from Redis in %d seeds" % (cfg.name, n))
        return clock_ms
    print("# %s: %d seeds replayed, %d steps" % (cfg.name, len(todo), total.get("steps", 0)))
    covered.update(seen)
    return clock_ms


def main():
    sock, clock_file, first, n = sys.argv[1:5]
    c = Redis(sock, None, 10.0)
    version = c.call("FCALL", "fleetsem_version", 0)[0]
    clock_fd = os.open(clock_file, os.O_WRONLY)
    clock_ms = 1_800_000_000_000
    covered = set()
    for spec in sys.argv[5:]:
        name, defines = spec.split(":", 1)
        caught = name.startswith("!")
        clock_ms = replay_config(c, version, clock_fd, clock_ms, Config(name.lstrip("!"), defines), int(first),
                                 int(n), caught, covered if not caught else set())
    # The runs did what they are for: each kind of step came up.
    lacking = [k for k, _ in KINDS if k not in covered]
    if lacking:
        print("not_ok the runs together took every kind of step (none took %s)" % ", ".join(lacking))
    else:
        print("ok the runs together took every kind of step (%d kinds)" % len(KINDS))


if __name__ == "__main__":
    main()
