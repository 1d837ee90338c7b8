#!/usr/bin/env python3
# fake-cluster-node.py PORT HOST REAL_PORT N: a Redis Cluster node that
# answers CLUSTER SLOTS, for the tests: its first N answers give every hash
# slot to a node at a new address each time (a port nothing listens on;
# with $FAKE_NAMES=IP:PORT, to that address), the ones after to
# HOST:REAL_PORT. AUTH is taken; anything else refused. Listens on
# $FAKE_BIND (default 127.0.0.1). Prints "answered K PORT" for each answer
# and "got COMMAND" for each command it is sent (no arguments), flushed.
import os
import socket
import sys
import threading

from resp import bulk, commands

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
        else:
            p = unused_port()
    print("answered %d %d" % (k, p), flush=True)
    node = b"*3\r\n" + bulk(h) + b":%d\r\n" % p + bulk("%040x" % p)
    return b"*1\r\n*3\r\n:0\r\n:16383\r\n" + node


def serve(conn):
    with conn, conn.makefile("rb") as f:
        for args in commands(f):
            args = [a.upper() for a in args]
            print("got %s" % args[0], flush=True)
            if args[:2] == ["CLUSTER", "SLOTS"]:
                conn.sendall(slots_reply())
            elif args[:1] == ["AUTH"]:
                conn.sendall(b"+OK\r\n")
            else:
                conn.sendall(b"-ERR not a real node\r\n")


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((os.environ.get("FAKE_BIND", "127.0.0.1"), port))
srv.listen(64)
print("listening", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
