#!/usr/bin/python3
"""The fault harness: three hosts, Redis with a replica and three Sentinels,
and a fenced resource, each in network namespaces of its own linked by a
bridge in one more; jobs under `fleetsem run` on every host; and a nemesis
that injects faults picked at random from a seed. Writes everything into
WORKDIR for check.py. Started by run.sh (see README.md there).

Addresses are from 192.0.2.0/24 (TEST-NET-1) and exist only inside the
namespaces made here: nothing leaves the machine.
"""
import argparse
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))     # tests/: resp.py
from resp import Redis, RedisError, master_of  # noqa: E402

NET = "192.0.2."
REDIS_IP, STORE_IP = NET + "1", NET + "2"
HOST_IP = {"h1": NET + "11", "h2": NET + "12", "h3": NET + "13"}
HOSTS = sorted(HOST_IP)
# Agents that tell a grant without WAITing for the replica (min_replicas_acked
# = 0): their waiters are granted by the release's wake message (with its
# proof), the others ask Redis and WAIT. A grant the failover lost is then
# the reset case (re-assertion, grace).
NO_WAIT_HOSTS = ("h3",)
REDIS_PORTS = (6379, 6380)
SENTINEL_PORTS = (26379, 26380, 26381)
STORE_PORT = 7000
MASTER = "fsm"
NAMES = {"one": 1, "solo": 1, "two": 2, "three": 3}   # names of one slot are fenced
CANARY = "canary"       # planted faults that the monitor and the checker must see
# The name of the hosts' rolling reboots (rebooter.sh): one slot fleet-wide
# (fleetsem fleet-limit), held by the host itself, fenced like the others.
REBOOT = "reboot"
HOST_LEASE = 4          # host_lease, in leases: longer than any fault but host-gone cuts a host off

# What the nemesis does, and whether the design promises anything under it
# (README.md: "What is covered").
KINDS = ["partition-short", "partition-long", "agent-kill-short", "agent-kill-long",
         "agent-stop-short", "agent-stop-long", "holder-kill", "host-freeze",
         "master-kill", "restart-empty", "restart-stale", "clock-forward", "clock-back", "flood", "revoke",
         "forget", "host-gone"]
# What `forget` makes the live master lose (design.md, "What Redis forgets"):
# everything (the census, the epoch and the fleet clock too), one name's
# keys, or any one key of src/agent/library/keys.list ("del-ID"), read at run
# time: a key added there is drawn here too (check.py knows what the loss
# of each may do, and fails on one it does not know).
KEYS_LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "agent", "library")


def key_list():
    """[(id, pattern, scope, type)] of keys.list."""
    out = subprocess.run([sys.executable, os.path.join(KEYS_LIST, "embed-lua.py"), "--key-list",
                          os.path.join(KEYS_LIST, "keys.list")], check=True, stdout=subprocess.PIPE, text=True).stdout
    return [tuple(ln.split("\t")) for ln in out.splitlines() if ln]


KEYS = key_list()
FORGETS = ("flushall", "del-name") + tuple("del-" + k[0] for k in KEYS)


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


class Harness:
    def __init__(self, o):
        self.o = o
        self.T = o.workdir
        self.P = "fsc%d" % os.getpid()
        self.ttl = o.ttl
        self.rng = random.Random(o.seed)
        self.procs = []             # everything started, for the teardown
        self.redis = {}             # port -> Popen
        self.agents = {}            # host -> Popen
        self.workers = {}           # host -> [Popen]
        self.rebooters = {}         # host -> Popen
        self.gen = {h: 0 for h in HOSTS}    # how many times the host came back (host-gone)
        self.cgroups = {}
        self.ev = open(os.path.join(self.T, "events.jsonl"), "a", buffering=1)
        self.records = os.path.join(self.T, "records.jsonl")
        self.rec_pos = 0
        self.last_open = {h: 0.0 for h in HOSTS}
        self.stop_file = os.path.join(self.T, "stop")
        self.snapshot, self.snapshot_t = os.path.join(self.T, "snapshot.rdb"), None
        self.forgets = []           # the variants of `forget` left in this round

    # ---- the log everything is checked against ------------------------------------------
    def log(self, ev, **kw):
        kw.update(t=round(time.monotonic(), 6), ev=ev)
        self.ev.write(json.dumps(kw, separators=(",", ":")) + "\n")

    def say(self, msg):
        print("# [%6.1fs] %s" % (time.monotonic() - self.t0, msg), flush=True)

    # ---- namespaces ------------------------------------------------------------------
    def ns(self, name):
        return "%s-%s" % (self.P, name)

    def nsexec(self, name, *args):
        return ["ip", "netns", "exec", self.ns(name)] + list(args)

    def make_network(self):
        sh("ip", "netns", "add", self.ns("net"))
        sh("ip", "-n", self.ns("net"), "link", "set", "lo", "up")
        sh("ip", "-n", self.ns("net"), "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.ns("net"), "link", "set", "br0", "up")
        for name, ip in [("redis", REDIS_IP), ("store", STORE_IP)] + sorted(HOST_IP.items()):
            sh("ip", "netns", "add", self.ns(name))
            sh("ip", "-n", self.ns("net"), "link", "add", "p-" + name, "type", "veth",
               "peer", "name", "eth0", "netns", self.ns(name))
            sh("ip", "-n", self.ns("net"), "link", "set", "p-" + name, "master", "br0", "up")
            sh("ip", "-n", self.ns(name), "addr", "add", ip + "/24", "dev", "eth0")
            sh("ip", "-n", self.ns(name), "link", "set", "eth0", "up")
            sh("ip", "-n", self.ns(name), "link", "set", "lo", "up")
        for h in HOSTS:
            subprocess.run(self.nsexec(h, "nft", "-f", "-"), check=True, text=True, input=(
                "table inet chaos {\n"
                " chain out { type filter hook output priority 0; }\n"
                " chain in { type filter hook input priority 0; }\n}\n"))

    def enter(self, name):
        """Moves this process into namespace `name`, where it talks to Redis."""
        fd = os.open("/run/netns/" + self.ns(name), os.O_RDONLY)
        if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:     # CLONE_NEWNET
            raise SystemExit("Bail out! setns: " + os.strerror(ctypes.get_errno()))
        os.close(fd)

    def remove_network(self):
        for name in ["redis", "store", "net"] + HOSTS:
            sh("ip", "netns", "del", self.ns(name), check=False)

    # ---- a cgroup per host, so that a host can be frozen whole ------------------------------
    def make_cgroups(self):
        root = None
        for ln in open("/proc/mounts"):
            f = ln.split()
            if f[2] == "cgroup2":
                root = f[1]
                break
        for h in HOSTS:
            d = os.path.join(root, self.ns(h)) if root else None
            if d:
                os.makedirs(d, exist_ok=True)
                if not os.path.exists(os.path.join(d, "cgroup.freeze")):
                    os.rmdir(d)
                    d = None
            self.cgroups[h] = d
        if not all(self.cgroups.values()):
            raise SystemExit("Bail out! no cgroup2 freezer (needed to freeze a host)")

    def remove_cgroups(self):
        for d in self.cgroups.values():
            if d:
                try:
                    open(os.path.join(d, "cgroup.freeze"), "w").write("0")
                    os.rmdir(d)
                except OSError:
                    pass

    def freeze(self, h, on):
        open(os.path.join(self.cgroups[h], "cgroup.freeze"), "w").write("1" if on else "0")

    def spawn(self, argv, log, host=None, env=None, stamp=False):
        """stamp: each line of the log starts with the harness' clock (the
        agents': their logs have no time of their own)."""
        cg = self.cgroups.get(host) if host else None

        def enter():
            os.setpgrp()
            if cg:
                open(os.path.join(cg, "cgroup.procs"), "w").write(str(os.getpid()))
        out = open(log, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if stamp else out,
                             stderr=subprocess.STDOUT, preexec_fn=enter, env=env)
        if stamp:
            def copy():
                for line in p.stdout:
                    out.write(b"%.3f %s" % (time.monotonic(), line))
                    out.flush()
                out.close()
            threading.Thread(target=copy, daemon=True).start()
        else:
            out.close()
        self.procs.append(p)
        return p

    # ---- Redis, its replica and the Sentinels ----------------------------------------------
    def clock_file(self, port):
        return os.path.join(self.T, "clock-%d" % port)

    def set_clock(self, port, ms):
        fd = os.open(self.clock_file(port), os.O_WRONLY | os.O_CREAT, 0o644)
        os.pwrite(fd, ("%+023d\n" % ms).encode(), 0)   # one write, same size: never read half-done
        os.close(fd)

    def start_redis(self, port, replicaof=None):
        d = os.path.join(self.T, "r%d" % port)
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(self.clock_file(port)):
            self.set_clock(port, 0)
        env = dict(os.environ, LD_PRELOAD=self.o.clockstep, CLOCKSTEP_FILE=self.clock_file(port))
        argv = ["redis-server", "--bind", REDIS_IP, "--port", str(port), "--protected-mode", "no",
                "--dir", d, "--save", "", "--appendonly", "no", "--logfile", os.path.join(d, "log")]
        if replicaof:
            argv += ["--replicaof", REDIS_IP, str(replicaof)]
        self.redis[port] = self.spawn(self.nsexec("redis", *argv), os.path.join(d, "out"), env=env)
        self.wait_for(30, lambda: self.rcmd(port, "PING") == "PONG", "redis-server on %d" % port)

    def rcmd(self, port, *args):
        try:
            r = Redis(REDIS_IP, port, 0.5)
            try:
                return r.cmd(*args)
            finally:
                r.close()
        except (OSError, RedisError, ConnectionError):
            return None

    def start_sentinels(self):
        for port in SENTINEL_PORTS:
            conf = os.path.join(self.T, "s%d.conf" % port)
            open(conf, "w").write(
                "port %d\nbind %s\nprotected-mode no\ndaemonize no\nlogfile %s/s%d.log\ndir %s\n"
                "sentinel monitor %s %s %d 2\nsentinel down-after-milliseconds %s 1000\n"
                "sentinel failover-timeout %s 4000\nsentinel parallel-syncs %s 1\n"
                % (port, REDIS_IP, self.T, port, self.T, MASTER, REDIS_IP, REDIS_PORTS[0],
                   MASTER, MASTER, MASTER))
            self.spawn(self.nsexec("redis", "redis-sentinel", conf), os.path.join(self.T, "s%d.out" % port))
        self.wait_for(30, lambda: all(
            len(self.scmd(p, "SENTINEL", "replicas", MASTER) or []) == 1 for p in SENTINEL_PORTS),
            "the Sentinels to see the replica")

    def scmd(self, port, *args):
        return self.rcmd(port, *args)

    def master(self):
        """The master all three Sentinels name, or None while they disagree."""
        seen = {(self.scmd(p, "SENTINEL", "get-master-addr-by-name", MASTER) or [None, None])[1]
                for p in SENTINEL_PORTS}
        if len(seen) == 1 and None not in seen:
            return int(seen.pop())
        return None

    # ---- hosts ------------------------------------------------------------------------
    def start_agent(self, h):
        url = "sentinel://" + ",".join("%s:%d" % (REDIS_IP, p) for p in SENTINEL_PORTS) + "/" + MASTER
        conf = "nowait.conf" if h in NO_WAIT_HOSTS else "empty.conf"
        p = self.spawn(self.nsexec(h, self.o.fleetsemd, "--redis", url, "--host-id", h,
                                   "--lease-ttl", "%gs" % self.ttl),
                       os.path.join(self.T, "agent-%s.log" % h), host=h,
                       env=dict(os.environ, FLEETSEM_CONFIG=os.path.join(self.T, conf)), stamp=True)
        self.agents[h] = p
        self.wait_for(30, lambda: self.listening(p.pid), "agent on " + h)

    @staticmethod
    def listening(pid):
        try:
            return "@fleetsem/agent" in open("/proc/%d/net/unix" % pid).read()
        except OSError:
            return False

    def start_workers(self, h):
        self.workers[h] = []
        for i in range(self.o.workers):
            names = ["%s:%d" % kv for kv in sorted(NAMES.items())]
            seed = self.o.seed * 100 + HOSTS.index(h) * 10 + i + 100000 * self.gen[h]
            self.workers.setdefault(h, []).append(self.spawn(
                self.nsexec(h, os.path.join(HERE, "worker.sh"), self.o.fleetsem, os.path.join(HERE, "job.sh"),
                            h, str(i + 100 * self.gen[h]), str(seed), STORE_IP, str(STORE_PORT), self.stop_file,
                            os.path.join(self.T, "worker-%s-%d.log" % (h, i)), str(self.o.ignore_pct),
                            str(self.o.long_pct), str(int(self.ttl * 1000)), *names),
                os.path.join(self.T, "worker-%s-%d.out" % (h, i)), host=h))
        self.rebooters[h] = self.spawn(
            self.nsexec(h, os.path.join(HERE, "rebooter.sh"), self.o.fleetsem, h, str(self.gen[h]),
                        str(self.o.seed * 100 + HOSTS.index(h) * 10 + 9 + 100000 * self.gen[h]), STORE_IP,
                        str(STORE_PORT), self.stop_file, os.path.join(self.T, "reboot-%s.jsonl" % h),
                        os.path.join(self.T, "state-%s" % h), str(int(self.ttl * 1000)), REBOOT),
            os.path.join(self.T, "reboot-%s.out" % h), host=h)

    def reboot_holder(self):
        """The host that holds the slot of REBOOT now, as the master says, or None."""
        m = self.master()
        if m is None:
            return None
        for lease in self.rcmd(m, "ZRANGE", "fleetsem:{%s}:holders" % REBOOT, 0, -1) or []:
            rec = self.rcmd(m, "HGET", "fleetsem:{%s}:clock" % REBOOT, lease)
            if rec and rec.split()[0] in HOSTS:
                return rec.split()[0]
        return None

    # ---- waiting on conditions ----------------------------------------------------------
    def wait_for(self, secs, cond, what):
        deadline = time.monotonic() + secs
        while not cond():
            if time.monotonic() > deadline:
                raise SystemExit("Bail out! timed out waiting for " + what)
            time.sleep(0.05)

    def read_records(self):
        """The sessions the resource opened since last time: when each host last got in."""
        with open(self.records) as f:
            f.seek(self.rec_pos)
            data = f.read()
        end = data.rfind("\n") + 1
        self.rec_pos += len(data[:end].encode())
        for ln in data[:end].splitlines():
            r = json.loads(ln)
            if r["ev"] == "open" and r["name"] != CANARY:
                h = r["job"].split(".")[0]
                self.last_open[h] = max(self.last_open[h], r["t"])

    def wait_recovered(self, since, limit):
        """Until every host has had a job get in after `since`."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            self.read_records()
            if all(t > since for t in self.last_open.values()):
                return True
            time.sleep(0.1)
        return False

    # ---- the faults ------------------------------------------------------------------
    def u(self, a, b):
        return round(self.rng.uniform(a, b), 3)

    def fault(self, kind):
        L = self.ttl
        h = self.rng.choice(HOSTS)
        # Half the faults against a host (every host-gone) hit the one that
        # holds the reboot slot, if one does: the slot must outlive them.
        if kind == "host-gone" or self.rng.random() < 0.5:
            h = self.reboot_holder() or h
        if kind.startswith("partition"):
            dur = self.u(0.2 * L, 0.6 * L) if kind.endswith("short") else self.u(1.5 * L, 3 * L)
            rules = "add rule inet chaos out ip daddr %s drop\nadd rule inet chaos in ip saddr %s drop\n" % (
                REDIS_IP, REDIS_IP)
            subprocess.run(self.nsexec(h, "nft", "-f", "-"), input=rules, text=True, check=True)
            self.log("inject", kind=kind, target=h, dur=dur)
            time.sleep(dur)
            subprocess.run(self.nsexec(h, "nft", "-f", "-"), text=True, check=True,
                           input="flush chain inet chaos out\nflush chain inet chaos in\n")
        elif kind.startswith("agent-kill"):
            dur = self.u(0.2 * L, 0.6 * L) if kind.endswith("short") else self.u(1.5 * L, 2.5 * L)
            p = self.agents[h]
            p.send_signal(signal.SIGKILL)
            p.wait()
            self.log("inject", kind=kind, target=h, dur=dur)
            time.sleep(dur)
            self.start_agent(h)
        elif kind.startswith("agent-stop"):
            dur = self.u(0.2 * L, 0.6 * L) if kind.endswith("short") else self.u(1.5 * L, 2.5 * L)
            self.agents[h].send_signal(signal.SIGSTOP)
            self.log("inject", kind=kind, target=h, dur=dur)
            time.sleep(dur)
            self.agents[h].send_signal(signal.SIGCONT)
        elif kind == "host-gone":
            # The host dies (every process of it at once) and stays away past
            # its host_lease: its reboot slot must be freed once host_lease
            # ran out unrenewed, never before. Then it comes back, afresh.
            dur = self.u(HOST_LEASE * L + 0.5 * L, HOST_LEASE * L + L)
            self.agents[h].send_signal(signal.SIGKILL)
            open(os.path.join(self.cgroups[h], "cgroup.kill"), "w").write("1")
            self.log("inject", kind=kind, target=h, dur=dur)
            self.agents[h].wait()
            for p in self.workers[h] + [self.rebooters[h]]:
                p.wait()
            time.sleep(dur)
            self.gen[h] += 1
            self.start_agent(h)
            self.start_workers(h)
        elif kind == "host-freeze":
            dur = self.u(1.5 * L, 2.5 * L)
            self.freeze(h, True)
            self.log("inject", kind=kind, target=h, dur=dur)
            time.sleep(dur)
            self.freeze(h, False)
        elif kind == "flood":
            # A local user (nobody) floods one host's agent: connections
            # sending garbage, and half requests left to stall. Promised:
            # nothing of anyone else's suffers.
            dur = self.u(1.5 * L, 3 * L)
            attack = os.path.join(self.T, "attack.py")
            if not os.path.exists(attack):
                shutil.copy(os.path.join(HERE, "..", "attack.py"), attack)
                os.chmod(attack, 0o644)
                os.chmod(self.T, 0o711)
            self.log("inject", kind=kind, target=h, dur=dur)
            floods = [self.spawn(self.nsexec(h, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                             sys.executable, attack, "fleetsem", "connflood", "%g" % dur, mode),
                                 os.path.join(self.T, "flood-%s.log" % h), host=h) for mode in ("garbage", "stall")]
            for p in floods:
                p.wait()
        elif kind in ("holder-kill", "revoke"):
            victim = None
            for _ in range(100):
                victim = self.running_holder(h)
                if victim:
                    break
                time.sleep(0.05)
            if not victim:
                self.log("skip", kind=kind, target=h, why="no holder running")
                return None
            run_pid, job, env = victim
            if kind == "holder-kill":
                os.kill(run_pid, signal.SIGKILL)
                self.log("inject", kind=kind, target=h, job=job, pid=run_pid)
            else:
                # Root on another host revokes the job's slot (fleetsem
                # revoke). Promised: a successor only with a higher token,
                # the job told at its agent's next renewal; the overlap
                # until then is the design's (check.py, "revoked").
                by = self.rng.choice([x for x in HOSTS if x != h])
                out = sh(*self.nsexec(by, self.o.fleetsem, "revoke", "--reason", "chaos",
                                      env.get("FLEETSEM_LEASE", "")), check=False)
                self.log("inject", kind=kind, target=h, job=job, by=by,
                         token=int(env.get("FLEETSEM_TOKEN", "0") or 0), rc=out.returncode,
                         said=out.stdout.strip()[-200:])
        elif kind == "forget":
            return self.forget()
        else:
            # Redis' own faults hit the master the Sentinels name.
            m = self.master()
            if m is None:
                self.log("skip", kind=kind, why="the Sentinels disagree on the master")
                return None
            h = "redis:%d" % m
            if kind.startswith("clock"):
                step = int(self.u(1.5 * L, 3 * L) * 1000) * (1 if kind == "clock-forward" else -1)
                hold = self.u(1, 2 * L)
                self.set_clock(m, step)
                self.log("inject", kind=kind, target=h, step_ms=step, dur=hold)
                time.sleep(hold)
                self.set_clock(m, 0)
            else:
                if kind == "restart-stale" and not self.snapshot_t:
                    self.log("skip", kind=kind, why="no snapshot yet")
                    return None
                self.redis[m].send_signal(signal.SIGKILL)
                self.redis[m].wait()
                self.log("inject", kind=kind, target=h)
            if kind == "master-kill":
                ok = True
                try:
                    self.wait_for(30, lambda: self.master() not in (None, m), "a failover")
                except SystemExit:
                    ok = False
                new = self.master()
                self.log("note", kind=kind, what="failover" if ok else "no failover", master=new)
                self.set_clock(m, 0)
                self.start_redis(m, replicaof=new if ok else None)
            elif kind == "restart-empty":
                # Really empty: a server that was a replica wrote the data
                # it got from its master into its directory, and would load it.
                self.remove_rdb(m)
                self.start_redis(m)
            elif kind == "restart-stale":
                shutil.copy(self.snapshot, os.path.join(self.T, "r%d" % m, "dump.rdb"))
                self.start_redis(m)
                self.log("note", kind=kind, what="restarted from the snapshot of %.3f" % self.snapshot_t)
        healed = time.monotonic()
        self.log("heal", kind=kind, target=h)
        return healed

    def forget(self):
        """The master the Sentinels name loses keys while it stays up, as by
        an operator's FLUSHALL or DEL: each variant in turn, in an order
        shuffled from the seed. Promised: what a reset promises (the
        holders put back, nobody granted beside them, tokens never back).
        Nothing the harness planted is put back: the census and epoch it
        seeded at the start are lost as an operator would lose them (and
        the canaries were seen and removed before the first fault)."""
        m = self.master()
        if m is None:
            self.log("skip", kind="forget", why="the Sentinels disagree on the master")
            return None
        if not self.forgets:
            self.forgets = list(FORGETS)
            self.rng.shuffle(self.forgets)
        how, name = self.forgets.pop(), None
        if how == "flushall":
            cmd = ["FLUSHALL"]
        else:
            # A name in use: one that has holders now, if any has; a host:
            # one that holds a slot now, if any does.
            held = [n for n in sorted(NAMES) if (self.rcmd(m, "ZCARD", "fleetsem:{%s}:holders" % n) or 0) > 0]
            name = self.rng.choice(held or sorted(NAMES))
            holding = [h for h in HOSTS if (self.rcmd(m, "HLEN", "fleetsem:host:{%s}" % h) or 0) > 0]
            host = self.rng.choice(holding or HOSTS)
            # (A Sentinel's master: no Cluster, no {TAG}.)
            keys = {k[0]: k[1].replace("[:{TAG}]", "").replace("P:", "fleetsem:", 1).replace("{NAME}", "{%s}" % name)
                    .replace("{HOST}", "{%s}" % host) for k in KEYS}
            if how == "del-name":
                cmd = ["DEL"] + [keys[k[0]] for k in KEYS if k[2] == "name"]
            else:
                cmd = ["DEL", keys[how[len("del-"):]]]
                scope = next(k[2] for k in KEYS if k[0] == how[len("del-"):])
                name = name if scope == "name" else host if scope == "host" else None
        said = self.rcmd(m, *cmd)
        h = "redis:%d" % m
        if said is None:
            self.log("skip", kind="forget", target=h, how=how, why="the master did not answer")
            return None
        self.log("inject", kind="forget", target=h, how=how, name=name, said=said)
        healed = time.monotonic()
        self.log("heal", kind="forget", target=h)
        return healed

    def remove_rdb(self, port):
        try:
            os.unlink(os.path.join(self.T, "r%d" % port, "dump.rdb"))
        except FileNotFoundError:
            pass

    def take_snapshot(self):
        """What the master holds now, for restart-stale to go back to later
        (a restore from an old backup, or an RDB file left behind)."""
        m = self.master()
        if m is None or self.rcmd(m, "SAVE") != "OK":
            return
        shutil.copy(os.path.join(self.T, "r%d" % m, "dump.rdb"), self.snapshot)
        self.remove_rdb(m)
        self.snapshot_t = time.monotonic()
        self.log("snapshot", master=m)

    def running_holder(self, h):
        """A `fleetsem run` on h whose job is running: (its pid, the job's
        id, the job's FLEETSEM_* environment)."""
        for w in self.workers[h]:
            for run in self.children(w.pid):
                for job in self.children(run):
                    try:
                        argv = open("/proc/%d/cmdline" % job).read().split("\0")
                        environ = open("/proc/%d/environ" % job).read().split("\0")
                    except OSError:
                        continue
                    if len(argv) > 5 and argv[1].endswith("job.sh"):
                        return run, argv[5], dict(v.split("=", 1) for v in environ if v.startswith("FLEETSEM_"))
        return None

    @staticmethod
    def children(pid):
        try:
            return [int(x) for x in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]
        except OSError:
            return []

    # ---- the run ------------------------------------------------------------------------
    def setup(self):
        host_lease = "host_lease = %dms\n" % int(HOST_LEASE * self.ttl * 1000)
        with open(os.path.join(self.T, "empty.conf"), "w") as f:
            f.write(host_lease)
        with open(os.path.join(self.T, "nowait.conf"), "w") as f:
            f.write("min_replicas_acked = 0\n" + host_lease)
        self.make_network()
        self.enter("redis")
        self.make_cgroups()
        self.start_redis(REDIS_PORTS[0])
        self.start_redis(REDIS_PORTS[1], replicaof=REDIS_PORTS[0])
        self.wait_for(10, lambda: "master_link_status:up" in (self.rcmd(REDIS_PORTS[1], "INFO", "replication") or ""),
                      "the replica to sync")
        self.start_sentinels()
        # A new Redis: nobody held anything before it (tests/lib-ha.sh).
        # The epoch names the master by its run id and replication id.
        info = dict(ln.strip().split(":", 1) for ln in self.rcmd(REDIS_PORTS[0], "INFO", "default").splitlines()
                    if ":" in ln)
        self.rcmd(REDIS_PORTS[0], "SET", "fleetsem:epoch",
                  "%032x 0 %s%s" % (os.getpid(), info["run_id"], info["master_replid"]))
        self.rcmd(REDIS_PORTS[0], "ZADD", "fleetsem:census", "-1", ".")
        self.spawn(self.nsexec("store", "python3", os.path.join(HERE, "store.py"), STORE_IP, str(STORE_PORT),
                               self.records, CANARY, REBOOT, *[n for n, k in NAMES.items() if k == 1]),
                   os.path.join(self.T, "store.out"))
        self.wait_for(10, lambda: os.path.exists(self.records + ".ready"), "the fenced resource")
        # One process per host namespace whose /proc/PID/net shows the host's anchors.
        ref = {h: self.spawn(self.nsexec(h, "sleep", "infinity"), os.devnull).pid for h in HOSTS}
        time.sleep(0.2)
        cfg = dict(sentinels=[(REDIS_IP, p) for p in SENTINEL_PORTS], master_name=MASTER,
                   names=dict(NAMES, **{CANARY: 1, REBOOT: 1}),
                   host_pids=ref, ttl_ms=int(self.ttl * 1000), stuck_s=2.0, slack_s=0.5, period_s=0.2,
                   monitor_log=os.path.join(self.T, "monitor.jsonl"), stop_file=self.stop_file + "-monitor")
        json.dump(cfg, open(os.path.join(self.T, "monitor.json"), "w"))
        self.monitor = self.spawn(self.nsexec("redis", "python3", os.path.join(HERE, "monitor.py"),
                                              os.path.join(self.T, "monitor.json")),
                                  os.path.join(self.T, "monitor.out"))
        self.plant_canaries()
        for h in HOSTS:
            self.start_agent(h)
        out = sh(*self.nsexec(HOSTS[0], self.o.fleetsem, "fleet-limit", REBOOT, "1", "--reason", "chaos"),
                 check=False)
        if out.returncode != 0:
            raise SystemExit("Bail out! fleetsem fleet-limit %s 1: %s" % (REBOOT, out.stdout.strip()))
        for h in HOSTS:
            self.start_workers(h)

    def plant_canaries(self):
        """Each check must be able to fail: a slot held in Redis by a lease
        with no anchor, with a waiter behind it (the monitor must report a
        lost slot, then a stuck waiter), and two sessions of the resource
        at once on a fenced name, the older one writing after the newer got
        in (an over-grant the tokens catch). check.py expects exactly these
        on CANARY and keeps them out of the counts."""
        ttl_ms = int(self.ttl * 1000)
        m = REDIS_PORTS[0]
        now = self.rcmd(m, "TIME")
        expiry = int(now[0]) * 1000 + int(now[1]) // 1000 + 2 * ttl_ms
        self.rcmd(m, "ZADD", "fleetsem:{%s}:holders" % CANARY, expiry, "0" * 32)
        # Records only: the first call on the name counts its state from the ZSETs.
        self.rcmd(m, "HSET", "fleetsem:{%s}:clock" % CANARY, "0" * 32, "h1 0 1 1 0 - canary", "f" * 32,
                  "h2 0 1 0 0 - canary")
        self.rcmd(m, "ZADD", "fleetsem:{%s}:queue" % CANARY, 1, "f" * 32)
        a, b = (socket.create_connection((STORE_IP, STORE_PORT), 5) for _ in range(2))
        for sock, text in ((a, "BEGIN %s 10 canary.a term %s\n" % (CANARY, "0" * 32)),
                           (b, "BEGIN %s 11 canary.b term %s\n" % (CANARY, "f" * 32)),
                           (a, "WRITE %s 10 canary.a\n" % CANARY), (b, "DONE %s 11 canary.b\n" % CANARY),
                           (a, "DONE %s 10 canary.a\n" % CANARY)):
            sock.sendall(text.encode())
            sock.recv(100)
        a.close()
        b.close()
        mlog = os.path.join(self.T, "monitor.jsonl")
        self.wait_for(3 * self.ttl + 10, lambda: os.path.exists(mlog) and all(
            '"ev":"%s","key":"%s"' % (ev, key) in open(mlog).read()
            for ev, key in (("lost", "0" * 32), ("stuck", CANARY))), "the monitor to see the canaries")
        self.rcmd(m, "DEL", *["fleetsem:{%s}:%s" % (CANARY, k) for k in ("holders", "queue", "waiters", "clock")])

    def run(self):
        self.t0 = time.monotonic()
        self.log("start", seed=self.o.seed, ttl_ms=int(self.ttl * 1000), names=dict(NAMES, **{REBOOT: 1}),
                 host_held=[REBOOT], host_lease_ms=int(HOST_LEASE * self.ttl * 1000), hosts=HOSTS,
                 no_wait_hosts=NO_WAIT_HOSTS, minutes=self.o.minutes, workers=self.o.workers, ignore_pct=self.o.ignore_pct,
                 long_pct=self.o.long_pct, weights=self.o.weights)
        self.setup()
        self.log("ready")
        self.say("ready: 3 hosts x %d workers, lease %gs, seed %d" % (self.o.workers, self.ttl, self.o.seed))
        end = self.t0 + self.o.minutes * 60
        if not self.wait_recovered(time.monotonic() - 3600, 60):
            raise SystemExit("Bail out! not every host got a slot within a minute of the start")
        kinds = [k for k in KINDS if k in self.o.kinds]
        order = []
        while time.monotonic() < end:
            if not order:
                order = [k for k in kinds for _ in range(self.o.weights.get(k, 1))]
                self.rng.shuffle(order)
            kind = order.pop()
            healed = self.fault(kind)
            if healed is None:
                continue
            ok = self.wait_recovered(healed, 30 + 3 * self.ttl)
            self.log("recovered" if ok else "not-recovered", kind=kind, after=round(time.monotonic() - healed, 3))
            self.say("%-16s %s" % (kind, "recovered" if ok else "NOT recovered in %ds" % (30 + 3 * self.ttl)))
            time.sleep(self.u(0.5, 1.5 * self.ttl))
            # Now and then, what Redis holds, for restart-stale to go back to
            # a fault or more later.
            if self.rng.random() < 0.5:
                self.take_snapshot()
        self.log("stop")

    def teardown(self):
        open(self.stop_file, "w").close()
        for h in HOSTS:
            if self.cgroups.get(h):
                self.freeze(h, False)
            if h in self.agents:
                self.agents[h].send_signal(signal.SIGCONT)
        # Workers finish the job they run (a waiting one gives up after --wait).
        deadline = time.monotonic() + 20
        for ws in list(self.workers.values()) + [list(self.rebooters.values())]:
            for w in ws:
                try:
                    w.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        open(self.stop_file + "-monitor", "w").close()
        if getattr(self, "monitor", None):
            try:
                self.monitor.wait(5)
            except subprocess.TimeoutExpired:
                pass
        time.sleep(0.3)
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        # Whatever is left in a host's cgroup (a job whose run was killed).
        for d in self.cgroups.values():
            if d and os.path.exists(d):
                try:
                    open(os.path.join(d, "cgroup.kill"), "w").write("1")
                except OSError:
                    pass
        time.sleep(0.2)
        self.remove_cgroups()
        self.remove_network()
        self.log("teardown")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--ttl", type=float, default=4.0, help="lease TTL in seconds")
    ap.add_argument("--workers", type=int, default=4, help="workers per host")
    ap.add_argument("--ignore-pct", type=int, default=10, help="jobs run with --on-lost=ignore, in percent")
    ap.add_argument("--long-pct", type=int, default=4, help="jobs holding 1-1.5 leases, in percent")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--weights", default="", help="KIND=N,...: KIND comes N times in each round (1)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--fleetsem", required=True)
    ap.add_argument("--fleetsemd", required=True)
    ap.add_argument("--clockstep", required=True)
    o = ap.parse_args()
    o.kinds = o.kinds.split(",")
    try:
        o.weights = {k: int(n) for k, n in (w.split("=", 1) for w in o.weights.split(",") if w)}
    except ValueError:
        raise SystemExit("--weights: KIND=N,... expected, got %r" % o.weights)
    bad = [k for k in list(o.kinds) + list(o.weights) if k not in KINDS]
    if any(n < 0 for n in o.weights.values()):
        raise SystemExit("--weights: a weight is 0 or more")
    if bad:
        raise SystemExit("unknown fault kind(s): %s (known: %s)" % (",".join(bad), ",".join(KINDS)))
    if not any(o.weights.get(k, 1) for k in o.kinds):
        raise SystemExit("--kinds and --weights leave no fault to inject")
    hn = Harness(o)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        hn.run()
    finally:
        hn.teardown()


if __name__ == "__main__":
    main()
