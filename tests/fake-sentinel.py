#!/usr/bin/env python3
# fake-sentinel.py PORT MASTER_NAME HOST PORT2 [--trap FILE]: a Sentinel
# that lies, for the tests: it names HOST:PORT2 the master of MASTER_NAME,
# and to a client that subscribes to +switch-master it says, a second
# later, that the master moved there. Prints "got COMMAND" for each
# command, flushed.
#
# With --trap it says nothing on +switch-master, and while FILE exists the
# next question is a trap: it removes the file, cuts the connections of
# the master's clients (CLIENT KILL, on HOST:PORT2), and 120 ms later
# answers with an error, printing "trapped"; then it answers as before.
import os
import socket
import subprocess
import sys
import threading
import time

from resp import bulk, commands, say

port, name, host, port2 = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
trap = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--trap" else None


def spring():
    os.unlink(trap)
    for kind in ("normal", "pubsub"):
        subprocess.run(["redis-cli", "-h", host, "-p", port2, "CLIENT", "KILL", "TYPE", kind],
                       stdout=subprocess.DEVNULL, check=False)
    time.sleep(0.12)


def serve(conn):
    with conn, conn.makefile("rb") as f:
        for args in commands(f):
            cmd = [a.upper() for a in args[:2]]
            say("got %s" % cmd[0])
            if cmd == ["SENTINEL", "GET-MASTER-ADDR-BY-NAME"]:
                if trap and os.path.exists(trap):
                    spring()
                    conn.sendall(b"-ERR trapped\r\n")
                    say("trapped")
                else:
                    conn.sendall(b"*2\r\n" + bulk(host) + bulk(port2))
            elif cmd[:1] == ["AUTH"]:
                conn.sendall(b"+OK\r\n")
            elif cmd[:1] == ["SUBSCRIBE"]:
                conn.sendall(b"*3\r\n" + bulk("subscribe") + bulk(args[1]) + b":1\r\n")
                if trap:
                    continue
                time.sleep(1)
                msg = "%s 127.0.0.1 1 %s %s" % (name, host, port2)
                conn.sendall(b"*3\r\n" + bulk("message") + bulk("+switch-master") + bulk(msg))
                say("switched")
            else:
                conn.sendall(b"-ERR not a real Sentinel\r\n")


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(16)
say("listening")
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
