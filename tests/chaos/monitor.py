#!/usr/bin/python3
"""Watches Redis and the hosts' anchors, five times a second, and records
two kinds of episodes (JSON lines, CLOCK_MONOTONIC):

  lost   a lease Redis counts as held (expiry after Redis' TIME) whose anchor
         is gone from its host for longer than the lease: a slot nobody can
         use, kept past the point where even a dead host's slot is free.
  stuck  a name with waiters in its queue and fewer holders than its limit,
         for longer than STUCK_S: a waiter left waiting while a slot is free.

and the life of every slot a host holds itself (the flag `+host` in its
record, "HOST UID SLOTS TOKEN SINCE_MS PROOF [*WEIGHT ][+host ]DESCRIPTION":
no anchor, so never "lost"): "hh" each time Redis' expiry of it moves (a
renewal; EXP and Redis' NOW_MS), "hh-gone" when Redis no longer counts it
held (NOW_MS < EXP: taken away; otherwise it ran out).

    monitor.py CONFIG.json   (run inside the namespace Redis lives in)

Each sample reads one MULTI/EXEC snapshot of the master the Sentinels name
and /proc/PID/net/unix of one process in each host's network namespace
(abstract socket names are per network namespace).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))     # tests/: resp.py
from resp import Redis, RedisError, master_of  # noqa: E402


def anchors(pid):
    try:
        with open("/proc/%d/net/unix" % pid) as f:
            return {ln.rsplit("/", 1)[1].strip() for ln in f if "@fleetsem/lease/" in ln}
    except OSError:
        return None


def main():
    cfg = json.load(open(sys.argv[1]))
    out = open(cfg["monitor_log"], "a", buffering=1)
    ttl = cfg["ttl_ms"] / 1000.0
    stuck_s = cfg["stuck_s"]
    names = cfg["names"]
    sentinels = [tuple(s) for s in cfg["sentinels"]]
    conn, addr = None, None
    orphan = {}         # lease -> {since, name, host, reported}
    stuck = {}          # name -> {since, ..., reported}
    host_held = {}      # lease -> {name, host, exp, t}: slots hosts hold themselves, as last seen
    samples = failures = 0

    def rec(**kw):
        kw.setdefault("t", round(time.monotonic(), 3))
        out.write(json.dumps(kw, separators=(",", ":")) + "\n")

    def end(kind, key, st, now):
        if st["reported"]:
            rec(ev=kind + "-end", key=key, since=st["since"], dur=round(now - st["since"], 3), **st["info"])

    while not os.path.exists(cfg["stop_file"]):
        time.sleep(cfg["period_s"])
        now = time.monotonic()
        try:
            a = master_of(sentinels, cfg["master_name"])
            if a != addr or conn is None:
                if conn:
                    conn.close()
                conn, addr = (Redis(a[0], a[1], 0.5), a) if a else (None, None)
            if conn is None:
                raise ConnectionError("no master")
            cmds = [("TIME",)]
            for n in names:
                cmds += [("ZRANGE", "fleetsem:{%s}:holders" % n, 0, -1, "WITHSCORES"),
                         ("ZRANGE", "fleetsem:{%s}:queue" % n, 0, -1),
                         ("HGETALL", "fleetsem:{%s}:clock" % n)]
            r = conn.multi(cmds)
        except (OSError, RedisError, ConnectionError):
            if conn:
                conn.close()
            conn = None
            failures += 1
            continue        # no snapshot: the episodes neither start nor end
        samples += 1
        live = {h: anchors(pid) for h, pid in cfg["host_pids"].items()}
        now_ms = int(r[0][0]) * 1000 + int(r[0][1]) // 1000
        seen_orphans, seen_stuck, seen_hh = set(), set(), set()
        for i, n in enumerate(names):
            hz, queue, ow = r[1 + 3 * i], r[2 + 3 * i], r[3 + 3 * i]
            owner = dict(zip(ow[0::2], ow[1::2]))     # lease -> "HOST UID ..." (and "." -> the state)
            held = [(hz[j], float(hz[j + 1])) for j in range(0, len(hz), 2) if float(hz[j + 1]) > now_ms]
            for lease, exp in held:
                host = owner.get(lease, "? ?").split()[0]
                if "+host" in owner.get(lease, "").split()[6:8]:
                    seen_hh.add(lease)
                    st = host_held.get(lease)
                    if st is None or st["exp"] != exp:
                        rec(ev="hh", key=lease, name=n, host=host, exp=int(exp), now_ms=now_ms)
                    host_held[lease] = dict(name=n, host=host, exp=int(exp), t=round(now, 3))
                    continue
                if live.get(host) is None or lease in live[host]:
                    continue
                seen_orphans.add(lease)
                st = orphan.setdefault(lease, dict(since=now, reported=False,
                                                   info=dict(name=n, lease=lease, host=host)))
                if not st["reported"] and now - st["since"] > ttl + cfg["slack_s"]:
                    st["reported"] = True
                    rec(ev="lost", key=lease, since=st["since"], **st["info"])
            if queue and len(held) < names[n]:
                seen_stuck.add(n)
                st = stuck.setdefault(n, dict(since=now, reported=False, info=dict(name=n)))
                st["info"].update(held=len(held), queue=len(queue),
                                  head=[owner.get(q, "? ?").split()[0] for q in queue[:names[n]]])
                if not st["reported"] and now - st["since"] > stuck_s:
                    st["reported"] = True
                    rec(ev="stuck", key=n, since=st["since"], **st["info"])
        for lease in list(host_held):
            if lease not in seen_hh:
                st = host_held.pop(lease)
                rec(ev="hh-gone", key=lease, name=st["name"], host=st["host"], exp=st["exp"], now_ms=now_ms,
                    last_t=st["t"], ran_out=now_ms >= st["exp"])
        for lease in list(orphan):
            if lease not in seen_orphans:
                end("lost", lease, orphan.pop(lease), now)
        for n in list(stuck):
            if n not in seen_stuck:
                end("stuck", n, stuck.pop(n), now)
    now = time.monotonic()
    for lease, st in orphan.items():
        end("lost", lease, st, now)
    for n, st in stuck.items():
        end("stuck", n, st, now)
    rec(ev="monitor-done", samples=samples, failures=failures)


if __name__ == "__main__":
    main()
