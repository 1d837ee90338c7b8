#!/usr/bin/env python3
# fake-cluster-many.py REAL_PORT N: a Redis Cluster of N masters
# for the tests, each a node of its own on a loopback port that forwards
# what it is sent to the one real node at 127.0.0.1:REAL_PORT (which owns
# every hash slot), and answers CLUSTER SLOTS itself: the 16384 slots
# shared out in N ranges, one a master. The seed is a node of the same
# kind that no map names, for the URL, on a port the kernel gives it.
#
# "FAKE READDRESS", sent to the seed, moves every master to a new port at
# once, as a redeploy does: N new nodes, the same ranges. From then on the
# old nodes answer each command on a key with MOVED to the new owner, and
# CLUSTER SLOTS (on every node) gives the new map once one MOVED went out
# (so that a MOVED is what the agent hears of it first). Answers +OK once
# the new nodes listen.
#
# Prints, a line each, flushed: "listening PORT" (the seed, once every
# master listens), "master GEN PORT",
# "readdressed", "accepted PORT" and "closed PORT" (a connection to a
# master, made and closed by the client), "fcall PORT KEY" (a call of a
# library function forwarded, KEY its first key), "moved PORT NEWPORT SLOT".
import os
import socket
import sys
import threading

from resp import bulk, commands, encode, raw_reply, say

real_port, n = int(sys.argv[1]), int(sys.argv[2])
SLOTS = 16384
lock = threading.Lock()
gens = []               # per generation: its masters' ports, in slot order
moved_sent = False

# Commands that name no key: forwarded by an old node too.
KEYLESS = {"AUTH", "PING", "ROLE", "INFO", "CLUSTER", "FUNCTION", "SELECT", "ASKING", "HELLO", "CLIENT",
           "READONLY", "WAIT", "SUBSCRIBE", "SSUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "SUNSUBSCRIBE",
           "PUNSUBSCRIBE", "QUIT", "COMMAND"}
SUBSCRIBE = {"SUBSCRIBE", "SSUBSCRIBE", "PSUBSCRIBE"}


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    k = key.encode()
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % SLOTS


def range_of(i):
    return i * SLOTS // n, (i + 1) * SLOTS // n - 1


def owner(gen, slot):
    ports = gens[gen]
    for i in range(n):
        lo, hi = range_of(i)
        if lo <= slot <= hi:
            return ports[i]
    raise ValueError(slot)


def slots_reply(gen):
    out = [b"*%d\r\n" % n]
    for i, p in enumerate(gens[gen]):
        lo, hi = range_of(i)
        node = b"*3\r\n" + bulk("127.0.0.1") + b":%d\r\n" % p + bulk("%040x" % p)
        out.append(b"*3\r\n:%d\r\n:%d\r\n" % (lo, hi) + node)
    return b"".join(out)


def pump(real, conn):
    """A pub/sub connection: whatever the real node sends, on to the client."""
    try:
        while True:
            data = real.recv(65536)
            if not data:
                break
            conn.sendall(data)
    except OSError:
        pass


def key_of(args):
    """The first key a command names, or None."""
    cmd = args[0].upper()
    if cmd in ("FCALL", "FCALL_RO"):
        return args[3] if len(args) > 3 and args[2] != "0" else None
    if cmd in KEYLESS or len(args) < 2:
        return None
    return args[1]


def serve(conn, my_port, my_gen):
    """my_gen: the generation of a master, None for the seed."""
    global moved_sent
    real = socket.create_connection(("127.0.0.1", real_port))
    streaming = False
    with conn, real, conn.makefile("rb") as f, real.makefile("rb") as rf:
        for args in commands(f):
            cmd = args[0].upper()
            if streaming:
                real.sendall(encode(args))
                continue
            if cmd == "FAKE" and my_gen is None:
                readdress()
                conn.sendall(b"+OK\r\n")
                continue
            if cmd == "CLUSTER" and len(args) > 1 and args[1].upper() == "SLOTS":
                with lock:
                    gen = len(gens) - 1 if moved_sent or len(gens) == 1 else len(gens) - 2
                    reply = slots_reply(gen)
                conn.sendall(reply)
                continue
            key = key_of(args)
            with lock:
                old = my_gen is not None and my_gen < len(gens) - 1
                to = owner(len(gens) - 1, key_slot(key)) if old and key is not None else None
                if to is not None:
                    moved_sent = True
            if to is not None:
                say("moved %d %d %d" % (my_port, to, key_slot(key)))
                conn.sendall(b"-MOVED %d 127.0.0.1:%d\r\n" % (key_slot(key), to))
                continue
            if cmd in ("FCALL", "FCALL_RO") and key is not None:
                say("fcall %d %s" % (my_port, key))
            real.sendall(encode(args))
            if cmd in SUBSCRIBE:
                streaming = True
                threading.Thread(target=pump, args=(real, conn), daemon=True).start()
                continue
            try:
                conn.sendall(raw_reply(rf))
            except (EOFError, OSError, ValueError):
                break
        if streaming:
            try:
                real.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def accept(srv, p, gen):
    while True:
        c, _ = srv.accept()
        if gen is not None:
            say("accepted %d" % p)

        def run(c=c):
            try:
                serve(c, p, gen)
            except OSError:
                pass
            except Exception as e:      # said, and the close still counted
                say("error %d %r" % (p, e))
            finally:
                if gen is not None:
                    say("closed %d" % p)
        threading.Thread(target=run, daemon=True).start()


def listen(p, gen):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", p))
    srv.listen(128)
    p = srv.getsockname()[1]
    threading.Thread(target=accept, args=(srv, p, gen), daemon=True).start()
    return p


def new_generation():
    gen = len(gens)
    ports = [listen(0, gen) for _ in range(n)]
    for p in ports:
        say("master %d %d" % (gen, p))
    with lock:
        gens.append(ports)


def readdress():
    new_generation()
    say("readdressed")


new_generation()
say("listening %d" % listen(0, None))
threading.Event().wait()
