#!/usr/bin/python3
"""The fenced resource: a small TCP server that jobs write to while they
hold a slot, and that refuses a fencing token lower than the last one it
accepted for a name (as a storage system guarding itself with fleetsem's
tokens would).

    store.py ADDRESS PORT RECORDS FENCED_NAME...

One connection is one job's session with the resource. Lines:

    BEGIN NAME TOKEN JOB MODE LEASE   opens the session (a write)
    WRITE NAME TOKEN JOB              a write in the middle
    DONE NAME TOKEN JOB               the last write; closes the session

Each is answered "OK" or "STALE LAST" (LAST: the highest token accepted for
NAME). Only the names given as FENCED_NAME are fenced: a token tells one
holder from the next, so it fences names of one slot; writes to the others
are recorded and always accepted. A refused BEGIN closes the connection. Every line is recorded in
RECORDS (JSON lines) with the time it was handled on CLOCK_MONOTONIC (the
harness's one clock): "open" when a BEGIN was accepted, "close" when the
session ended (DONE, or the connection closed: the job died), "write" for
every accepted or refused write. A session counts as a holder of NAME from
its open to its close.
"""
import json
import os
import selectors
import socket
import sys
import time


def main():
    addr, port, path, fenced = sys.argv[1], int(sys.argv[2]), sys.argv[3], set(sys.argv[4:])
    out = open(path, "a", buffering=1)
    last = {}           # name -> highest token accepted
    sessions = {}       # socket -> dict (an open session) or None
    bufs = {}

    def rec(**kw):
        kw["t"] = round(time.monotonic(), 6)
        out.write(json.dumps(kw, separators=(",", ":")) + "\n")

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port))
    srv.listen(256)
    srv.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    # Ready to serve: the harness waits for this file.
    open(path + ".ready", "w").close()

    def close(s, how):
        sess = sessions.pop(s, None)
        if sess:
            rec(ev="close", how=how, **sess)
        bufs.pop(s, None)
        sel.unregister(s)
        s.close()

    def write(s, name, token, job, kind):
        ok = name not in fenced or token >= last.get(name, 0)
        if ok:
            last[name] = max(token, last.get(name, 0))
        rec(ev="write", kind=kind, name=name, token=token, job=job, ok=ok, last=last.get(name, 0))
        try:
            s.sendall(b"OK\n" if ok else b"STALE %d\n" % last.get(name, 0))
        except OSError:
            pass
        return ok

    def line(s, text):
        f = text.split()
        if len(f) < 4 or f[0] not in ("BEGIN", "WRITE", "DONE") or not f[2].isdigit():
            rec(ev="bad", line=text[:200])
            close(s, "bad")
            return
        verb, name, token, job = f[0], f[1], int(f[2]), f[3]
        if verb == "BEGIN":
            if sessions.get(s) or len(f) != 6:
                close(s, "bad")
                return
            if write(s, name, token, job, "begin"):
                sessions[s] = dict(name=name, token=token, job=job, mode=f[4], lease=f[5])
                rec(ev="open", **sessions[s])
            else:
                close(s, "refused")
            return
        sess = sessions.get(s)
        if not sess or sess["name"] != name or sess["token"] != token:
            close(s, "bad")
            return
        write(s, name, token, job, verb.lower())
        if verb == "DONE":
            close(s, "done")

    while True:
        events = sel.select()
        # Open sessions first: a job that ended or died and one that began
        # in the same round are taken in the order that makes no overlap.
        events.sort(key=lambda e: 0 if sessions.get(e[0].fileobj) else 1)
        for key, _ in events:
            s = key.fileobj
            if s is srv:
                try:
                    c, _ = srv.accept()
                except OSError:
                    continue
                c.setblocking(False)
                bufs[c] = b""
                sessions[c] = None
                sel.register(c, selectors.EVENT_READ)
                continue
            if s not in bufs:
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                close(s, "eof")
                continue
            bufs[s] += data
            while s in bufs and b"\n" in bufs[s]:
                ln, bufs[s] = bufs[s].split(b"\n", 1)
                line(s, ln.decode(errors="replace"))
            if s in bufs and len(bufs[s]) > 4096:
                close(s, "bad")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        os._exit(0)
