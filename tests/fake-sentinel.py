#!/usr/bin/env python3
# fake-sentinel.py PORT MASTER_NAME HOST PORT2: a Sentinel that lies, for
# the tests: it names HOST:PORT2 the master of MASTER_NAME, and to a client
# that subscribes to +switch-master it says, a second later, that the
# master moved there. Prints "got COMMAND" for each command, flushed.
import socket
import sys
import threading
import time

from resp import bulk, commands

port, name, host, port2 = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


def serve(conn):
    with conn, conn.makefile("rb") as f:
        for args in commands(f):
            cmd = [a.upper() for a in args[:2]]
            print("got %s" % cmd[0], flush=True)
            if cmd == ["SENTINEL", "GET-MASTER-ADDR-BY-NAME"]:
                conn.sendall(b"*2\r\n" + bulk(host) + bulk(port2))
            elif cmd[:1] == ["AUTH"]:
                conn.sendall(b"+OK\r\n")
            elif cmd[:1] == ["SUBSCRIBE"]:
                conn.sendall(b"*3\r\n" + bulk("subscribe") + bulk(args[1]) + b":1\r\n")
                time.sleep(1)
                msg = "%s 127.0.0.1 1 %s %s" % (name, host, port2)
                conn.sendall(b"*3\r\n" + bulk("message") + bulk("+switch-master") + bulk(msg))
                print("switched", flush=True)
            else:
                conn.sendall(b"-ERR not a real Sentinel\r\n")


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(16)
print("listening", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
