# An "agent" that accepts connections and never answers:
#   python3 agent-hung.py NAMESPACE
import socket
import sys

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1] + "/agent")
s.listen(16)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
