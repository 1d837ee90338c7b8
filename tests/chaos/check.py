#!/usr/bin/python3
"""Reads what a chaos run recorded and reports (README.md, "The report"):

    check.py WORKDIR REPORT.json

  - grants: sessions the fenced resource opened (a job got in with its token);
  - over-grants: for each name, every moment the resource had more sessions
    open at once than the name's limit, split into those the design covers
    (a violation) and those explained by holders it cannot protect (jobs with
    --on-lost=ignore, a host frozen past the lease), with what the tokens
    caught;
  - stale writes the resource accepted (a write whose token is lower than
    one it accepted before for the name; names of one slot are fenced):
    must be 0 under any fault;
  - slots lost and waiters stuck behind a free slot (from the monitor);
  - what `forget` took from the live master (every key, one name's, the
    epoch) and what it cost;
  - the slots hosts hold themselves (fleetsem reboot): their lease is
    host_lease; they outlive an agent's restart (re-adopted, renewed by the
    new agent); they end only by their host's release, or once host_lease
    ran out unrenewed (a host gone), never before;
  - time to recover after each kind of fault.

Exits 1 on any violation, after printing the seed and the events around the
first one.
"""
import glob
import json
import os
import statistics
import sys

CANARY = "canary"       # chaos.py plants its faults on this name
HOST_FAULTS = ("partition-short", "partition-long", "agent-kill-short", "agent-kill-long",
               "agent-stop-short", "agent-stop-long", "host-freeze", "holder-kill", "host-gone")
# Faults after which Redis may have lost slots (a reset of the state the
# agents knew: a new epoch, re-assertion, a grace).
RESETS = ("restart-empty", "restart-stale", "master-kill", "forget")
# What each variant of `forget` (chaos.py: FLUSHALL, a name's keys, or one
# key of keys.list, "del-ID") may do: "reset", what a reset may (the
# holders put back, a grace; a slot the host holds may be lost or run out
# at host_lease), or "nothing" a holder could see (written again by the
# agents: the model marker at the next connect, the names index at the
# next renewals, the host index within a renewal tick). A variant not here
# fails the run: a key added to keys.list needs its line.
FORGET_MAY = {"flushall": "reset", "del-name": "reset", "del-holders": "reset", "del-queue": "reset",
              "del-waiters": "reset", "del-clock": "reset", "del-fleet_clock": "reset", "del-census": "reset",
              "del-epoch": "reset", "del-model": "nothing", "del-loading": "nothing", "del-names": "nothing", "del-host": "nothing"}
# Faults that keep a host's agent from renewing its slots.
NO_RENEWAL = ("partition-short", "partition-long", "agent-kill-short", "agent-kill-long",
              "agent-stop-short", "agent-stop-long", "host-freeze", "host-gone")


def load(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for ln in f:
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    pass        # a line cut short by the teardown
    return out


def main():
    wd, report_path = sys.argv[1], sys.argv[2]
    events = load(os.path.join(wd, "events.jsonl"))
    records = load(os.path.join(wd, "records.jsonl"))
    monitor = load(os.path.join(wd, "monitor.jsonl"))
    start = next(e for e in events if e["ev"] == "start")
    seed, ttl = start["seed"], start["ttl_ms"] / 1000.0
    limits = dict(start["names"], **{CANARY: 1})
    t_end = max([r["t"] for r in records] + [e["t"] for e in events])

    # ---- faults and their windows ------------------------------------------------------
    faults = []
    for e in events:
        if e["ev"] == "inject":
            faults.append(dict(kind=e["kind"], target=e["target"], t=e["t"], heal=None, recovered=None,
                               detail={k: v for k, v in e.items() if k not in ("t", "ev", "kind", "target")}))
        elif e["ev"] == "heal" and faults and faults[-1]["heal"] is None:
            faults[-1]["heal"] = e["t"]
        elif e["ev"] in ("recovered", "not-recovered") and faults:
            faults[-1]["recovered"] = e["after"] if e["ev"] == "recovered" else False
    # A forget that may do nothing a holder sees excuses nothing.
    forget_unknown = sorted({f["detail"].get("how") for f in faults if f["kind"] == "forget"
                             and f["detail"].get("how") not in FORGET_MAY})
    for f in faults:
        if f["kind"] == "forget" and FORGET_MAY.get(f["detail"].get("how")) == "nothing":
            f["kind"] = "forget-nothing"
    for f in faults:
        f["heal"] = f["heal"] or t_end
        # Its consequences may show until a lease after it healed.
        f["until"] = f["heal"] + ttl + 2.0

    # A forget that took the epoch (FLUSHALL, DEL of it) shows again when an
    # agent next connects: that agent makes a new epoch with a grace only it
    # knows (its releases wake nobody meanwhile). Its window opens there too.
    epoch_anew = []
    for h in start["hosts"]:
        with open(os.path.join(wd, "agent-%s.log" % h), errors="replace") as f:
            for ln in f:
                if "lost its state since this agent last saw it" in ln or "holds no fleetsem state yet" in ln:
                    try:
                        epoch_anew.append(float(ln.split(" ", 1)[0]))
                    except ValueError:
                        pass
    epoch_anew.sort()
    aftermath = []
    for f in faults:
        if f["kind"] == "forget" and f["detail"].get("how") in ("flushall", "del-epoch"):
            t = next((x for x in epoch_anew if x >= f["t"]), None)
            f["epoch_anew"] = t
            if t is not None:
                aftermath.append(dict(f, t=t, heal=t, until=t + ttl + 2.0))

    def faults_at(t, pred=lambda f: True):
        return [f for f in faults + aftermath if f["t"] - 0.5 <= t <= f["until"] and pred(f)]

    def label(fs):
        return ",".join(sorted({f["kind"] for f in fs})) or "none"

    # ---- sessions at the resource -----------------------------------------------------
    sessions = {}
    writes = []
    for r in records:
        if r["ev"] == "open":
            sessions[(r["name"], r["token"], r["job"])] = dict(r, open=r["t"], close=None, host=r["job"].split(".")[0],
                                                              refused=[])
        elif r["ev"] == "close":
            s = sessions.get((r["name"], r["token"], r["job"]))
            if s:
                s["close"], s["how"] = r["t"], r["how"]
        elif r["ev"] == "write":
            writes.append(r)
            if not r["ok"]:
                s = sessions.get((r["name"], r["token"], r["job"]))
                if s:
                    s["refused"].append(r["t"])
    for s in sessions.values():
        if s["close"] is None:
            s["close"], s["how"] = t_end, "end"
    grants_per_host = {}
    for s in sessions.values():
        if s["name"] != CANARY:
            grants_per_host[s["host"]] = grants_per_host.get(s["host"], 0) + 1

    # Grants an agent made on a release's wake message (with the waiter's
    # proof) rather than on an answer: only hosts that tell grants without
    # WAIT make them (chaos.py's NO_WAIT_HOSTS).
    no_wait = start.get("no_wait_hosts", [])
    wake_grants = {}
    for h in start["hosts"]:
        path = os.path.join(wd, "agent-%s.log" % h)
        with open(path, errors="replace") as f:
            wake_grants[h] = sum(1 for ln in f if "on the release's wake message" in ln)

    def frozen(s):
        return [f for f in faults if f["kind"] == "host-freeze" and f["target"] == s["host"]
                and f["t"] < s["close"] and f["heal"] > s["open"]]

    # ---- slots hosts hold themselves (fleetsem reboot) ------------------------------------
    host_lease = start.get("host_lease_ms", 0) / 1000.0
    releases = {}       # lease -> when its host gave it back (reboot-job.py)
    for p in glob.glob(os.path.join(wd, "reboot-*.jsonl")):
        for r in load(p):
            if r["ev"] == "released" and r.get("rc") == 0 and r.get("lease"):
                releases.setdefault(r["lease"], r["t"])
    hh = [m for m in monitor if m["ev"] == "hh"]
    hh_gone = [m for m in monitor if m["ev"] == "hh-gone"]

    def redis_fault_near(t):
        # A Redis fault may forget a host-held slot or bring back one given
        # back long ago (an old snapshot): that one runs out at host_lease.
        return [f for f in faults + aftermath if f["kind"] not in HOST_FAULTS and f["kind"] != "flood"
                and f["kind"] not in ("revoke", "forget-nothing") and f["t"] - 0.5 <= t <= f["heal"] + host_lease + ttl + 2.0]
    def reset_near(t):
        # A reset (Redis restarted empty or from a snapshot, a failover, its
        # data or epoch gone) whose host-held wait may still run at t: its
        # grace (a lease), then host_lease; a clock step back in between
        # makes that longer in real time, by the step's size (step_ms is
        # negative for a step back: FINDINGS.md, finding 19).
        back = sum(abs(f["detail"].get("step_ms", 0)) / 1000.0 for f in faults if f["kind"] == "clock-back"
                   and f["t"] <= t and f["t"] >= t - host_lease - 2 * ttl - 2.0)
        return [f for f in faults + aftermath if f["kind"] in RESETS
                and f["t"] - 0.5 <= t <= f["heal"] + ttl + host_lease + back + 2.0]
    hh_bad = []         # a host-held slot that ended otherwise than promised
    hh_freed = dict(released=0, ran_out=0, redis=0)
    for g in hh_gone:
        rel = releases.get(g["key"])
        if not g["ran_out"]:
            # The release may come before Redis hears it: an agent cut off
            # from Redis gives the slot back once it is reachable again.
            if rel is not None and rel <= g["t"] + 1.0:
                hh_freed["released"] += 1
            elif redis_fault_near(g["t"]):
                hh_freed["redis"] += 1
            else:
                hh_bad.append(dict(g, why="taken away before it ran out, not by its host"))
            continue
        # Ran out: its agent cannot have renewed it for host_lease.
        why = [f for f in faults if f["kind"] in NO_RENEWAL and f["target"] == g["host"]
               and f["t"] <= g["t"] and f["heal"] + 1.0 >= g["t"] - host_lease]
        if why or redis_fault_near(g["t"]):
            hh_freed["ran_out"] += 1
        else:
            hh_bad.append(dict(g, why="ran out while its agent could renew it"))
    # Each renewal moves its expiry to host_lease ahead (not lease_ttl's).
    # A grant keeps its waiter's expiry, which may be older (a waiter whose
    # agent was stopped): only never more than host_lease ahead.
    hh_short, seen = [], set()
    for m in hh:
        ahead = (m["exp"] - m["now_ms"]) / 1000.0
        low = host_lease - ttl / 3 - 1.0 if m["key"] in seen else float("-inf")
        seen.add(m["key"])
        if not redis_fault_near(m["t"]) and not low <= ahead <= host_lease + 0.5:
            hh_short.append(m)
    # An agent killed while its host held a slot: renewed by the new agent
    # (re-adopted from the host's index), not lost.
    hh_restarts, hh_not_readopted = 0, []
    for f in faults:
        if not f["kind"].startswith("agent-kill"):
            continue
        before = {}
        for m in monitor:
            if m["t"] > f["t"]:
                break
            if m["ev"] == "hh" and m["host"] == f["target"]:
                before[m["key"]] = m
            elif m["ev"] == "hh-gone":
                before.pop(m["key"], None)
        for lease, m in before.items():
            hh_restarts += 1
            renewed = any(x["key"] == lease and x["t"] > f["heal"] and x["exp"] > m["exp"] for x in hh)
            gone = next((g for g in hh_gone if g["key"] == lease and g["t"] > f["t"]), None)
            if renewed or redis_fault_near(f["heal"]):
                continue
            if gone and not gone["ran_out"] and releases.get(lease) is not None:
                continue        # given back before the new agent's first renewal showed
            hh_not_readopted.append(dict(key=lease, host=f["target"], name=m["name"], kill=f["t"], heal=f["heal"],
                                         t=f["heal"]))
    # A host gone past its host_lease while it held a slot: the slot ran out
    # host_lease after the last renewal, not before, and was then free.
    hh_gone_hosts, hh_gone_bad = 0, []
    for f in faults:
        if f["kind"] != "host-gone":
            continue
        last = {}
        for m in monitor:
            if m["t"] > f["t"]:
                break
            if m["ev"] == "hh" and m["host"] == f["target"]:
                last[m["key"]] = m
            elif m["ev"] == "hh-gone":
                last.pop(m["key"], None)
        for lease, m in last.items():
            hh_gone_hosts += 1
            g = next((g for g in hh_gone if g["key"] == lease and g["t"] > f["t"]), None)
            if redis_fault_near(f["t"]) or (g and redis_fault_near(g["t"])):
                continue
            after = g["t"] - f["t"] if g else None
            if g is None or not g["ran_out"] or after < host_lease - ttl / 3 - 0.5 or after > host_lease + 3.0:
                hh_gone_bad.append(dict(key=lease, host=f["target"], name=m["name"], t=f["t"], freed_after=after,
                                        ran_out=g["ran_out"] if g else None))

    # Slots root revoked (fleetsem revoke): the holder overlaps its
    # successor until its agent's next renewal tells it (or it fences itself).
    revoked = {(f["detail"].get("job"), f["detail"].get("token")): f["t"] for f in faults
               if f["kind"] == "revoke" and f["detail"].get("rc") == 0}

    def uncovered_why(s):
        why = []
        if s["mode"] == "ignore":
            why.append("--on-lost=ignore")
        if frozen(s):
            why.append("host frozen past the lease")
        t = revoked.get((s["job"], s["token"]))
        if t is not None and t <= s["close"]:
            why.append("revoked")
        return why

    # A revoked holder that is told (not --on-lost=ignore, not frozen) ends
    # within a lease of the revoke: its agent renews every third of it.
    revoked_late = []
    for s in sessions.values():
        t = revoked.get((s["job"], s["token"]))
        if t is not None and s["mode"] != "ignore" and not frozen(s) and s["close"] - t > ttl + 1.0:
            revoked_late.append(dict(job=s["job"], name=s["name"], token=s["token"], revoked=t, close=s["close"]))

    # ---- over-grants: more sessions open at once than the limit -----------------------------
    overgrants = {"covered": [], "uncovered": []}
    most = {}
    for name, limit in sorted(limits.items()):
        pts = []
        for s in sessions.values():
            if s["name"] == name:
                pts.append((s["open"], 1, s))
                # Closes before opens at the same time, but never its own.
                pts.append((s["close"], 0 if s["close"] > s["open"] else 2, s))
        pts.sort(key=lambda p: (p[0], p[1]))
        live = []
        most[name] = 0
        for t, kind, s in pts:
            if kind != 1:
                live.remove(s)
                continue
            live.append(s)
            most[name] = max(most[name], len(live))
            if len(live) <= limit:
                continue
            # The stale ones are among the older grants: all but the highest
            # token (which the resource let in last). Not covered if enough
            # of those are holders the design cannot protect.
            newest = max(live, key=lambda x: x["token"])
            unc = [x for x in live if x is not newest and uncovered_why(x)]
            covered = len(live) - len(unc) > limit
            # What the tokens did: writes of the older sessions refused after this one got in.
            older = [x for x in live if x is not s and x["token"] < s["token"]]
            caught = sum(1 for x in older for w in x["refused"] if w >= t)
            ep = dict(name=name, limit=limit, t=t, at_once=len(live), caught=caught, fenced=limit == 1,
                      faults=label(faults_at(t)),
                      sessions=[dict(job=x["job"], token=x["token"], mode=x["mode"], open=x["open"],
                                     close=x["close"], how=x["how"], why=uncovered_why(x) if x is not newest else [])
                                for x in live])
            overgrants["covered" if covered else "uncovered"].append(ep)

    # ---- stale writes accepted (the resource's own promise, checked from its records) ---------
    stale_accepted, refused = [], []
    high = {}
    for w in writes:
        if limits.get(w["name"]) != 1:
            continue            # not fenced (store.py)
        if w["ok"]:
            if w["token"] < high.get(w["name"], 0):
                stale_accepted.append(w)
            high[w["name"]] = max(high.get(w["name"], 0), w["token"])
        else:
            refused.append(w)
    # A refused BEGIN: the job was granted but a higher token had got in first.
    # Caught in an overlap if that holder was still in; otherwise it had
    # already finished (a job frozen between its grant and its first write,
    # or tokens that went back).
    # The second, with no frozen host to explain it, means a new grant got a
    # token lower than an older grant's: tokens went back.
    refused_begin_alone, tokens_back = [], []
    for w in refused:
        if w["kind"] != "begin" or w["name"] == CANARY:
            continue
        newer_in = any(s["name"] == w["name"] and s["token"] > w["token"] and s["open"] <= w["t"] <= s["close"]
                       for s in sessions.values())
        if newer_in:
            continue
        host = w["job"].split(".")[0]
        thawed = faults_at(w["t"], lambda f, host=host: f["kind"] == "host-freeze" and f["target"] == host)
        (refused_begin_alone if thawed else tokens_back).append(dict(w, faults=label(faults_at(w["t"]))))

    # ---- slots lost, waiters stuck ----------------------------------------------------
    lost = [dict(m, faults=label(faults_at(m["since"]))) for m in monitor if m["ev"] == "lost"]
    stuck_all = [m for m in monitor if m["ev"] == "stuck"]
    stuck, stuck_excused = [], []
    for m in stuck_all:
        def explains(f, m=m):
            return f["kind"] not in HOST_FAULTS or f["target"] in m.get("head", [])
        fs = faults_at(m["since"], explains)
        # After a reset, a slot a host holds itself is granted to nobody for
        # host_lease past the reset's grace (its host may be rebooting through
        # it): a host-held name's waiters wait that long by design.
        if not fs and m["name"] in start.get("host_held", []):
            fs = reset_near(m["since"])
        (stuck_excused if fs else stuck).append(dict(m, faults=label(fs or faults_at(m["since"]))))
    ends = {(m["ev"][:-4], m["key"], m["since"]): m["dur"] for m in monitor if m["ev"].endswith("-end")}
    for lst, kind in ((lost, "lost"), (stuck, "stuck"), (stuck_excused, "stuck")):
        for m in lst:
            m["dur"] = ends.get((kind, m["key"], m["since"]), "until the end")

    # ---- the planted faults (chaos.py, plant_canaries): seen, then left out ----------------
    canary = dict(overgrants=[e for e in overgrants["covered"] if e["name"] == CANARY],
                  refused=[w for w in refused if w["name"] == CANARY],
                  lost=[m for m in lost if m["name"] == CANARY], stuck=[m for m in stuck if m["name"] == CANARY])
    canary_ok = (len(canary["overgrants"]) == 1 and len(canary["refused"]) == 2 and len(canary["lost"]) == 1
                 and len(canary["stuck"]) == 1)
    overgrants["covered"] = [e for e in overgrants["covered"] if e["name"] != CANARY]
    refused = [w for w in refused if w["name"] != CANARY]
    lost = [m for m in lost if m["name"] != CANARY]
    stuck = [m for m in stuck if m["name"] != CANARY]
    sessions = {k: v for k, v in sessions.items() if v["name"] != CANARY}
    del limits[CANARY], most[CANARY]

    # ---- recovery per kind of fault ---------------------------------------------------
    per_kind = {}
    opens = sorted((s["open"], s["host"]) for s in sessions.values())
    for f in faults:
        k = per_kind.setdefault(f["kind"], dict(count=0, recovery_s=[], first_s=[], not_recovered=0,
                                                overgrants_covered=0, overgrants_uncovered=0, lost=0, stuck=0))
        k["count"] += 1
        if "how" in f["detail"]:
            k.setdefault("how", {})
            k["how"][f["detail"]["how"]] = k["how"].get(f["detail"]["how"], 0) + 1
        # The first grant after it: on its host, or anywhere for Redis' faults.
        first = next((t for t, h in opens if t > f["heal"] and (f["kind"] not in HOST_FAULTS or h == f["target"])),
                     None)
        if first is not None:
            k["first_s"].append(first - f["heal"])
        if f["recovered"] is False:
            k["not_recovered"] += 1
        elif f["recovered"] is not None:
            k["recovery_s"].append(f["recovered"])
    for cls in ("covered", "uncovered"):
        for ep in overgrants[cls]:
            for kd in ep["faults"].split(","):
                if kd in per_kind:
                    per_kind[kd]["overgrants_" + cls] += 1
    for lst, key in ((lost, "lost"), (stuck, "stuck")):
        for m in lst:
            for kd in m["faults"].split(","):
                if kd in per_kind:
                    per_kind[kd][key] += 1
    for k in per_kind.values():
        r = k.pop("first_s")
        k["first_grant_median_s"] = round(statistics.median(r), 2) if r else None
        k["first_grant_max_s"] = round(max(r), 2) if r else None
        r = k.pop("recovery_s")
        k["recovery_median_s"] = round(statistics.median(r), 2) if r else None
        k["recovery_max_s"] = round(max(r), 2) if r else None

    runs = {}
    for p in glob.glob(os.path.join(wd, "worker-*.log")):
        for ln in open(p):
            f = ln.split()
            if len(f) == 4:
                runs[f[3]] = runs.get(f[3], 0) + 1
    reboot_runs = {}
    for p in glob.glob(os.path.join(wd, "reboot-*.jsonl.runs")):
        for ln in open(p):
            f = ln.split()
            if len(f) == 4:
                reboot_runs[f[3]] = reboot_runs.get(f[3], 0) + 1

    # ---- the checks ------------------------------------------------------------------
    grants = len(sessions)
    minutes = (t_end - start["t"]) / 60.0
    checks = [
        ("check.py knows what each loss `forget` drew may do (FORGET_MAY)%s"
         % (": not " + ", ".join(map(str, forget_unknown)) if forget_unknown else ""), not forget_unknown, None),
        ("the planted faults were seen: %d over-grant, %d refused writes, %d lost slot, %d stuck waiter "
         "(1, 2, 1, 1)" % tuple(len(canary[k]) for k in ("overgrants", "refused", "lost", "stuck")),
         canary_ok, None),
        ("every host got slots (%s)" % ", ".join("%s %d" % kv for kv in sorted(grants_per_host.items())),
         len(grants_per_host) == len(start["hosts"]), None),
        ("wake-message grants only where grants are told without WAIT (%s; without WAIT: %s)"
         % (", ".join("%s %d" % kv for kv in sorted(wake_grants.items())), ", ".join(no_wait) or "none"),
         all((wake_grants[h] > 0) == (h in no_wait) for h in wake_grants), None),
        ("0 over-grants among faults the design covers (%d)" % len(overgrants["covered"]),
         not overgrants["covered"], overgrants["covered"][0]["t"] if overgrants["covered"] else None),
        ("0 stale writes accepted by the fenced resource (%d)" % len(stale_accepted),
         not stale_accepted, stale_accepted[0]["t"] if stale_accepted else None),
        ("tokens never went back: 0 new holders refused by the resource with no newer holder in (%d)"
         % len(tokens_back), not tokens_back, tokens_back[0]["t"] if tokens_back else None),
        ("0 slots lost (%d)" % len(lost), not lost, lost[0]["since"] if lost else None),
        ("0 waiters stuck behind a free slot for more than 2 s (%d)" % len(stuck),
         not stuck, stuck[0]["since"] if stuck else None),
        ("host-held slots: every renewal %g s ahead, not a lease_ttl (%d of %d not)" % (host_lease, len(hh_short), len(hh)),
         bool(hh) and not hh_short, hh_short[0]["t"] if hh_short else None),
        ("host-held slots ended only by their host's release or after host_lease unrenewed "
         "(%d released, %d ran out, %d by Redis faults; %d otherwise)"
         % (hh_freed["released"], hh_freed["ran_out"], hh_freed["redis"], len(hh_bad)),
         hh_freed["released"] > 0 and not hh_bad, hh_bad[0]["t"] if hh_bad else None),
        ("host-held slots outlived their agent's restart: renewed by the new agent (%d restarts, %d not)"
         % (hh_restarts, len(hh_not_readopted)), not hh_not_readopted,
         hh_not_readopted[0]["t"] if hh_not_readopted else None),
        ("a host gone past host_lease: its slot freed host_lease after its last renewal, not before "
         "(%d, %d not)" % (hh_gone_hosts, len(hh_gone_bad)), not hh_gone_bad,
         hh_gone_bad[0]["t"] if hh_gone_bad else None),
        ("revoked holders ended within a lease of the revoke (%d revoked, %d not)" % (len(revoked), len(revoked_late)),
         not revoked_late, revoked_late[0]["revoked"] if revoked_late else None),
        ("every fault was recovered from (%d not)" % sum(k["not_recovered"] for k in per_kind.values()),
         all(k["not_recovered"] == 0 for k in per_kind.values()),
         next((f["heal"] for f in faults if f["recovered"] is False), None)),
    ]
    report = dict(seed=seed, minutes=round(minutes, 2), lease_ttl_s=ttl, limits=limits, grants=grants,
                  grants_per_host=grants_per_host, wake_grants_per_host=wake_grants, grants_per_minute=round(grants / minutes, 1) if minutes else 0,
                  runs_by_exit_code=runs, reboot_runs_by_exit_code=reboot_runs, most_at_once=most, faults=per_kind,
                  overgrants_covered=overgrants["covered"], overgrants_uncovered=overgrants["uncovered"],
                  uncovered_overlaps_fenced=sum(1 for e in overgrants["uncovered"] if e["fenced"]),
                  uncovered_overlaps_caught=sum(1 for e in overgrants["uncovered"] if e["caught"] > 0),
                  stale_writes_accepted=len(stale_accepted), stale_writes_refused=len(refused),
                  refused_begin_after_thaw=refused_begin_alone, tokens_went_back=tokens_back,
                  slots_lost=lost, waiters_stuck=stuck,
                  host_held=dict(host_lease_s=host_lease, renewals=len(hh), freed=hh_freed, bad=hh_bad,
                                 short_renewals=hh_short[:20], agent_restarts_holding=hh_restarts,
                                 not_readopted=hh_not_readopted, hosts_gone_holding=hh_gone_hosts,
                                 hosts_gone_bad=hh_gone_bad), waiters_stuck_explained=stuck_excused,
                  checks=[dict(name=n, ok=ok) for n, ok, _ in checks])
    with open(report_path, "w") as f:
        json.dump(report, f, indent=1)

    # ---- the text report -------------------------------------------------------------
    print("# seed %d, %.1f minutes, lease %gs, limits %s" % (seed, minutes, ttl,
                                                          ", ".join("%s=%d" % kv for kv in sorted(limits.items()))))
    print("# grants: %d (%.0f a minute; %s)" % (grants, report["grants_per_minute"],
                                                ", ".join("%s %d" % kv for kv in sorted(grants_per_host.items()))))
    print("# runs by exit code: %s; fleetsem reboot: %s" % (", ".join("%s: %d" % kv for kv in sorted(runs.items())),
                                                             ", ".join("%s: %d" % kv for kv in sorted(reboot_runs.items()))))
    print("# most holders at once: %s" % ", ".join("%s %d/%d" % (n, most[n], limits[n]) for n in sorted(limits)))
    print("# over-grants: %d where the design covers the fault, %d with holders it cannot protect "
          "(%d on fenced names: in %d the stale holder wrote and every such write was refused, in the rest "
          "it wrote nothing more); %d stale writes refused in all"
          % (len(overgrants["covered"]), len(overgrants["uncovered"]), report["uncovered_overlaps_fenced"],
             report["uncovered_overlaps_caught"], len(refused)))
    print("# stale writes accepted: %d; slots lost: %d; waiters stuck: %d (%d more explained by a fault)"
          % (len(stale_accepted), len(lost), len(stuck), len(stuck_excused)))
    print("# recovery, from the end of a fault: the first grant (on its host; anywhere for Redis' faults), and")
    print("# every host granted again; median / max in seconds. over(c|u): over-grants covered or not.")
    print("# %-17s %5s %13s %13s %7s %7s %5s %5s" % ("fault", "count", "first grant", "every host", "over(c)",
                                                     "over(u)", "lost", "stuck"))
    for kind in sorted(per_kind):
        k = per_kind[kind]
        print("# %-17s %5d %13s %13s %7d %7d %5d %5d" % (
            kind, k["count"], "%s / %s" % (k["first_grant_median_s"], k["first_grant_max_s"]),
            "%s / %s" % (k["recovery_median_s"], k["recovery_max_s"]) if not k["not_recovered"] else
            "%d never" % k["not_recovered"], k["overgrants_covered"], k["overgrants_uncovered"], k["lost"],
            k["stuck"]))
    if "forget" in per_kind:
        fg = [f for f in faults if f["kind"] == "forget"]
        print("# forget: %s; the epoch made anew by the next agent to connect after %s"
              % (", ".join("%s %d" % kv for kv in sorted(per_kind["forget"]["how"].items())),
                 ", ".join("%.1f s" % (f["epoch_anew"] - f["t"]) if f["epoch_anew"] is not None else "never"
                           for f in fg if "epoch_anew" in f) or "none"))
    for cls in ("covered", "uncovered"):
        for ep in overgrants[cls][:20]:
            print("# over-grant (%s) %s at %.3f: %d at once (limit %d), faults: %s, caught %d: %s" % (
                cls, ep["name"], ep["t"], ep["at_once"], ep["limit"], ep["faults"], ep["caught"],
                "; ".join("%s t=%d %s %.3f-%.3f %s%s" % (x["job"], x["token"], x["mode"], x["open"], x["close"],
                                                        x["how"], " [" + ", ".join(x["why"]) + "]" if x["why"] else "")
                          for x in ep["sessions"])))
    print("# host-held slots (%s, host_lease %g s): %d renewals seen; freed: %d released by their host, %d ran out, "
          "%d by Redis faults; %d agent restarts and %d hosts gone while holding one"
          % (",".join(start.get("host_held", [])) or "none", host_lease, len(hh), hh_freed["released"],
             hh_freed["ran_out"], hh_freed["redis"], hh_restarts, hh_gone_hosts))
    for m in hh_bad[:10] + hh_not_readopted[:10] + hh_gone_bad[:10] + hh_short[:10]:
        print("# host-held slot: %s" % json.dumps(m))
    for m in lost[:20]:
        print("# slot lost: %s lease %s on %s, since %.3f for %s s, faults: %s" % (
            m["name"], m["lease"], m["host"], m["since"], m["dur"], m["faults"]))
    for m in stuck[:20] + stuck_excused[:20]:
        print("# waiters stuck%s: %s since %.3f for %s s (held %d, queue %d, head on %s), faults: %s" % (
            "" if m in stuck else " (explained)", m["name"], m["since"], m["dur"], m["held"], m["queue"],
            ",".join(m["head"]), m["faults"]))
    for w in refused_begin_alone[:10]:
        print("# first write refused after the newer holder had left (its host was frozen): %s %s token %d "
              "(last %d) at %.3f, faults: %s" % (w["job"], w["name"], w["token"], w["last"], w["t"], w["faults"]))
    for w in tokens_back[:10]:
        print("# token went back: %s %s token %d, the resource had accepted %d; at %.3f, faults: %s"
              % (w["job"], w["name"], w["token"], w["last"], w["t"], w["faults"]))
    if len(tokens_back) > 10:
        print("# token went back: ... %d in all, the last at %.3f" % (len(tokens_back), tokens_back[-1]["t"]))

    failed = [c for c in checks if not c[1]]
    for i, (n, ok, _) in enumerate(checks, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, n))
    print("1..%d" % len(checks))
    if failed:
        t = min(c[2] for c in failed if c[2] is not None) if any(c[2] is not None for c in failed) else None
        print("# FAILED with seed %d (rerun: bash tests/chaos/run.sh --minutes %g --seed %d)"
              % (seed, start["minutes"], seed))
        if t is not None:
            allev = sorted([dict(e, src="nemesis") for e in events] + [dict(r, src="resource") for r in records] +
                           [dict(m, src="monitor", t=m.get("since", m["t"])) for m in monitor],
                           key=lambda e: e["t"])
            i = min(range(len(allev)), key=lambda j: abs(allev[j]["t"] - t))
            print("# the events around %.3f (the first violation):" % t)
            for e in allev[max(0, i - 30):i + 31]:
                print("#   %s%.3f %-8s %s" % ("> " if abs(e["t"] - t) < 1e-6 else "  ", e["t"], e["src"],
                                              json.dumps({k: v for k, v in e.items() if k not in ("t", "src")})))
            near = [e for e in events if abs(e["t"] - t) < 30 and e["ev"] in ("inject", "heal", "note")]
            print("# faults within 30 s of it:")
            for e in near:
                print("#   %.3f %s" % (e["t"], json.dumps({k: v for k, v in e.items() if k != "t"})))
    print("# %d passed, %d failed" % (len(checks) - len(failed), len(failed)))
    print("# report: %s" % report_path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
