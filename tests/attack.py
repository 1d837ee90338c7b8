#!/usr/bin/env python3
# attack.py NAMESPACE VERB ARGS...: what an unprivileged local user can do
# to an agent, for the security tests (run under setpriv as nobody).
#
#   stuff LEASE              connect to @NS/lease/LEASE and close, until its
#                            backlog is full; prints "full after N"
#   ask-stuffed NAME         (as the owner) creates an anchor, fills its
#                            backlog itself, asks for NAME without waiting;
#                            prints the reply, waits for stdin to close it
#   flood N                  N connections to the agent in every state: idle,
#                            mid-request, STATUS asked and never read; prints
#                            "open N refused M busy K" (K: told they are past
#                            max_clients_per_user, then closed; M: connect()
#                            failed), holds the N open until stdin closes
#   hoard N [NAME]           N connections asking STATUS (of NAME or of all
#                            names) that never read; prints "asked N",
#                            holds until stdin closes
#   leases N NAME            N anchors, each asking for NAME (slots 1000,
#                            no wait); the connection goes after the first
#                            reply; prints one summary line per reply kind
#                            ("GRANTED k", "ERROR code=busy ... k"), holds
#                            the anchors until stdin closes
#   names N PREFIX FIRST     as leases, each for a name of its own:
#                            PREFIX followed by FIRST, FIRST+1, ...
#   churn SECONDS PREFIX LEN for SECONDS, takes and gives back fresh names
#                            (PREFIX, then a count, padded with x to LEN
#                            bytes), each with a new anchor, as fast as the
#                            agent answers; prints "made N" (names granted)
#                            and a summary line per reply kind
#   bad N NAME               N requests in a burst for NAME (not permitted);
#                            prints the distinct first reply lines
#   connflood SECONDS MODE   for SECONDS, connects to the agent again and
#                            again: MODE garbage sends "X" and closes, stall
#                            sends half a request and keeps the last 200
#                            such connections open; prints "connections N"
#   sockets N                N listening unix sockets of random abstract
#                            names; prints "listening N", holds until stdin
#                            closes
#   stuffed-leases N NAME    N leases of NAME whose anchors then fill their
#                            backlog and end the agent's watch (so the agent
#                            can watch them by name only); prints a summary
#                            of the replies, holds until stdin closes
#   unit-exited              asks with unit=1 over a connection made by a
#                            child that exited before the request; prints the
#                            reply
import collections
import os
import re
import resource
import select
import socket
import sys
import time
import urllib.parse

ns, verb, args = sys.argv[1], sys.argv[2], sys.argv[3:]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def agent():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0%s/agent" % ns)
    return s


def first_line(s, timeout=20.0):
    s.settimeout(timeout)
    buf = b""
    try:
        while b"\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        return "(timeout)"
    # Field values are %-encoded on the wire: readable for the tests.
    return urllib.parse.unquote(buf.split(b"\n")[0].decode("latin-1")) or "(closed)"


def ask(s, line):
    # A refused connection may be closed before the request is out: its
    # reply is still there to read.
    try:
        s.sendall(line.encode())
    except OSError:
        pass
    return s


def summary(lines):
    # Replies without their variable parts (tokens, leases, positions).
    kinds = collections.Counter(
        re.sub(r"[0-9a-f]{32}", "LEASE", l) if l.startswith("ERROR") else l.split(" ")[0] for l in lines)
    for k, n in sorted(kinds.items()):
        print("%s %d" % (k, n), flush=True)


def stuff(path):
    n = 0
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect("\0" + path)
        except BlockingIOError:
            s.close()
            return n
        finally:
            s.close()
        n += 1
        if n > 100000:
            return -1


def hold():
    sys.stdin.read()


if verb == "stuff":
    print("full after %d" % stuff("%s/lease/%s" % (ns, args[0])), flush=True)
elif verb == "ask-stuffed":
    lease = os.urandom(16).hex()
    anchor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    anchor.bind("\0%s/lease/%s" % (ns, lease))
    anchor.listen(16)
    stuff("%s/lease/%s" % (ns, lease))
    s = agent()
    s.sendall(("ACQUIRE name=%s slots=1 lease=%s wait=0\n" % (args[0], lease)).encode())
    print(first_line(s), flush=True)
    hold()
elif verb == "connflood":
    seconds, mode, n, stalled = float(args[0]), args[1], 0, collections.deque()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            s = agent()
        except OSError:
            continue
        n += 1
        try:
            if mode == "garbage":
                s.sendall(b"X\n")
            else:
                s.sendall(b"ACQUIRE name=flood slots=1 lea")
        except OSError:
            pass
        if mode == "garbage":
            s.close()
        else:
            stalled.append(s)
            if len(stalled) > 200:
                stalled.popleft().close()
    print("connections %d" % n, flush=True)
elif verb == "sockets":
    held = []
    for i in range(int(args[0])):
        a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        a.bind("\0flood/%s" % os.urandom(12).hex())
        a.listen(1)
        held.append(a)
    print("listening %d" % len(held), flush=True)
    hold()
elif verb == "stuffed-leases":
    anchors, replies = [], []
    for i in range(int(args[0])):
        lease = os.urandom(16).hex()
        path = "%s/lease/%s" % (ns, lease)
        anchor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        anchor.bind("\0" + path)
        anchor.listen(4)
        s = agent()
        s.sendall(("ACQUIRE name=%s slots=1000 lease=%s wait=0\n" % (args[1], lease)).encode())
        line = first_line(s)
        replies.append(line)
        s.close()
        anchors.append(anchor)
        if not line.startswith("GRANTED"):
            continue
        # The agent's watch is first in the backlog: take it, fill its
        # place and the rest, then end it. The agent sees its watch end
        # while the name still listens, and no new watch sticks.
        watch, _ = anchor.accept()
        stuff(path)
        watch.close()
    summary(replies)
    print("done", flush=True)
    hold()
elif verb == "flood":
    n, conns, refused = int(args[0]), [], 0
    for i in range(n):
        try:
            s = agent()
        except OSError:
            refused += 1
            continue
        try:
            if i % 3 == 1:
                s.sendall(b"ACQUIRE name=flood slots=1")   # no end of line: mid-request
            elif i % 3 == 2:
                s.sendall(b"STATUS\n")                      # never read
        except OSError:
            pass   # refused and closed before we wrote: its reply says why
        conns.append(s)
    # A refused connection is told why at once: peek at the first replies
    # (the STATUS answers stay unread) until none has come for a second.
    busy, pending, quiet_until = 0, set(conns), time.monotonic() + 1
    while pending and time.monotonic() < quiet_until:
        ready, _, _ = select.select(list(pending), [], [], 0.1)
        for s in ready:
            pending.discard(s)
            quiet_until = time.monotonic() + 1
            try:
                head = s.recv(512, socket.MSG_PEEK)
            except OSError:
                continue
            if head.startswith(b"ERROR code=busy") and b"max_clients_per_user" in head:
                busy += 1
                conns.remove(s)
                s.close()
    print("open %d refused %d busy %d" % (len(conns), refused, busy), flush=True)
    hold()
elif verb == "hoard":
    n, conns = int(args[0]), []
    req = ("STATUS name=%s\n" % args[1]) if len(args) > 1 else "STATUS\n"
    for i in range(n):
        try:
            s = agent()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(req.encode())
            conns.append(s)
        except OSError:
            pass
    print("asked %d" % len(conns), flush=True)
    hold()
elif verb in ("leases", "names"):
    n, name, anchors, lines = int(args[0]), args[1], [], []
    for i in range(n):
        if verb == "names":
            name = "%s%d" % (args[1], int(args[2]) + i)
        lease = os.urandom(16).hex()
        a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        a.bind("\0%s/lease/%s" % (ns, lease))
        a.listen(16)
        anchors.append(a)
        s = ask(agent(), "ACQUIRE name=%s slots=1000 lease=%s wait=0\n" % (name, lease))
        lines.append(first_line(s))
        s.close()       # the anchor holds the slot
    summary(lines)
    print("done", flush=True)
    hold()
elif verb == "churn":
    secs, prefix, width = float(args[0]), args[1], int(args[2])
    end, i, made, lines = time.monotonic() + secs, 0, 0, []
    while time.monotonic() < end:
        name = ("%s%d" % (prefix, i)).ljust(width, "x")
        i += 1
        lease = os.urandom(16).hex()
        a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        a.bind("\0%s/lease/%s" % (ns, lease))
        a.listen(16)
        s = ask(agent(), "ACQUIRE name=%s slots=1000 lease=%s wait=0\n" % (name, lease))
        line = first_line(s, max(end - time.monotonic(), 1.0))
        s.close()
        a.close()       # and so the slot goes
        made += line.startswith("GRANTED")
        lines.append(line)
        if line.startswith("ERROR"):
            time.sleep(0.01)    # refused: again a little later, not in a spin
    print("made %d" % made, flush=True)
    summary(lines)
elif verb == "bad":
    n, name, conns, lines = int(args[0]), args[1], [], []
    for i in range(n):
        try:
            conns.append(ask(agent(), "ACQUIRE name=%s slots=1 lease=%s wait=0\n" % (name, os.urandom(16).hex())))
        except OSError:
            continue
        if len(conns) >= 100:
            lines += [first_line(c) for c in conns]
            for c in conns:
                c.close()
            conns = []
    lines += [first_line(c) for c in conns]
    summary(lines)
elif verb == "unit-exited":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        s.connect("\0%s/agent" % ns)    # SO_PEERCRED: the child's pid
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.1)
    s.sendall(("ACQUIRE name=unit slots=1 lease=%s wait=0 unit=1\n" % os.urandom(16).hex()).encode())
    print(first_line(s), flush=True)
else:
    sys.exit("unknown verb " + verb)
