#!/usr/bin/env python3
# fake-cluster-node.py PORT HOST REAL_PORT N: a Redis Cluster node that
# answers CLUSTER SLOTS, for the tests: its first N answers give every hash
# slot to a node at a new address each time (a port nothing listens on;
# with $FAKE_NAMES=IP:PORT, to that address), the ones after to
# HOST:REAL_PORT. AUTH is taken; anything else refused. Listens on
# $FAKE_BIND (default 127.0.0.1). Prints "answered K PORT" for each answer
# and "got COMMAND" for each command it is sent (no arguments), flushed.
#
# With $FAKE_LIVE=1 each new address is a live node of its own instead: a
# master that takes the agent's set-up (AUTH, its library's version, ROLE,
# INFO, the epoch function) and its subscriptions, then idles, and answers CLUSTER
# SLOTS as the first node does. It prints "accepted PORT" and "closed PORT"
# for each connection made to it and closed by the agent. With
# $FAKE_PASSWORD_FILE a live node counts a connection only once it sent
# AUTH with the password that file's first line holds: a port the kernel
# gave a live node may be one another test's Redis had, whose agent still
# tries it; its connections ("stranger PORT") are refused and closed.
import os
import socket
import sys
import threading
import time

from resp import bulk, commands, say

port, host, real_port, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lock = threading.Lock()
answers = 0
given = set()


def unused_port():
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p not in given and p != real_port:
            given.add(p)
            return p


def slots_reply():
    global answers
    h = host
    with lock:
        answers += 1
        k = answers
        if k > n:
            p = real_port
        elif os.environ.get("FAKE_NAMES"):
            h, p = os.environ["FAKE_NAMES"].rsplit(":", 1)
            p = int(p)
        elif os.environ.get("FAKE_LIVE"):
            p = listen(0)
        else:
            p = unused_port()
    say("answered %d %d" % (k, p))
    node = b"*3\r\n" + bulk(h) + b":%d\r\n" % p + bulk("%040x" % p)
    return b"*1\r\n*3\r\n:0\r\n:16383\r\n" + node


LIVE_RUN_ID = "%040x" % 7


def live_reply(args, raw):
    """A live node's answer to what the agent sends it (args: upper case,
    raw: as sent); None: not one of those."""
    if args[:2] == ["FCALL", "FLEETSEM_VERSION"]:
        # No library: the agent loads its own (taken, not kept).
        return b"-ERR Function not found\r\n"
    if args[:2] == ["FUNCTION", "LOAD"]:
        return bulk("fleetsem")
    if args[0] == "ROLE":
        return b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"
    if args[0] == "INFO":
        return bulk("run_id:%s\r\nuptime_in_seconds:100000\r\nmaxmemory_policy:noeviction\r\n" % LIVE_RUN_ID)
    if args[0] == "FCALL":
        # The epoch function (the only one called before anything needs
        # a slot): there was none, made now, no grace.
        value = "%032x 0 %s" % (1, LIVE_RUN_ID)
        return b"*3\r\n:1\r\n" + bulk(value) + b":%d\r\n" % int(time.time() * 1000)
    if args[0] in ("SUBSCRIBE", "SSUBSCRIBE"):
        return b"*3\r\n" + bulk(args[0].lower()) + bulk(raw[1]) + b":1\r\n"
    return None


def password():
    path = os.environ.get("FAKE_PASSWORD_FILE")
    if not path:
        return None
    with open(path) as f:
        return f.readline().rstrip("\n")


def serve(conn, live=False, on_auth=None):
    with conn, conn.makefile("rb") as f:
        for args in commands(f):
            raw = args
            args = [a.upper() for a in args]
            if on_auth:
                # The first command of a live node's connection: the
                # test's own agent is known by its password.
                if args[0] != "AUTH" or raw[-1] != on_auth[0]:
                    conn.sendall(b"-WRONGPASS not this test's agent\r\n")
                    return
                on_auth[1]()
                on_auth = None
            say("got %s" % args[0])
            reply = live_reply(args, raw) if live else None
            if reply is not None:
                conn.sendall(reply)
            elif args[:2] == ["CLUSTER", "SLOTS"]:
                conn.sendall(slots_reply())
            elif args[:1] == ["AUTH"]:
                conn.sendall(b"+OK\r\n")
            else:
                conn.sendall(b"-ERR not a real node\r\n")


def accept_live(srv, p):
    pw = password()
    while True:
        c, _ = srv.accept()

        def run(c=c):
            counted = []

            def count():
                counted.append(1)
                say("accepted %d" % p)
            if pw is None:
                count()
            try:
                serve(c, live=True, on_auth=None if pw is None else (pw, count))
            except OSError:
                pass            # reset by the agent (it closed with replies unread): closed all the same
            say(("closed %d" if counted else "stranger %d") % p)
        threading.Thread(target=run, daemon=True).start()


def listen(p):
    """A live node on port p (0: any free one); its port."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", p))
    srv.listen(64)
    p = srv.getsockname()[1]
    given.add(p)
    threading.Thread(target=accept_live, args=(srv, p), daemon=True).start()
    return p


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((os.environ.get("FAKE_BIND", "127.0.0.1"), port))
srv.listen(64)
say("listening")
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
