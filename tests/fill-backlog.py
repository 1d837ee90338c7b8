#!/usr/bin/env python3
# fill-backlog.py NAMESPACE: connects to @NAMESPACE/agent without blocking
# until the kernel refuses (EAGAIN: the listen backlog is full), prints
# "full N", and holds the connections until killed. What any local user can
# do to an agent that is stopped or slow.
import socket
import sys
import time

held = []
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect("\0" + sys.argv[1] + "/agent")
    except BlockingIOError:
        s.close()
        break
    held.append(s)
print("full", len(held), flush=True)
while True:
    time.sleep(3600)
