#!/usr/bin/env python3
# pty-screen.py DIR COMMAND [ARG...]: runs COMMAND on a pseudo-terminal of
# its own. What it drew last (the text after its last clear-screen) is
# kept in DIR/screen, how many screens it drew in DIR/frames; the bytes of
# a file DIR/keys, when it appears, are typed and the file removed (so the
# caller renames it into place whole); its exit status goes to DIR/rc
# when it ends (128+N: killed by signal N).
import os
import pty
import select
import sys

d, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)

CLEAR = b"\x1b[H\x1b[2J"
buf, frames = b"", 0


def save():
    screen = buf[buf.rfind(CLEAR) + len(CLEAR):] if CLEAR in buf else buf
    for name, data in (("screen", screen), ("frames", str(frames).encode())):
        with open(os.path.join(d, name + ".new"), "wb") as f:
            f.write(data)
        os.replace(os.path.join(d, name + ".new"), os.path.join(d, name))


save()
while True:
    r, _, _ = select.select([fd], [], [], 0.02)
    if r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        frames += data.count(CLEAR)
        buf = (buf + data)[-65536:]
        save()
    keys = os.path.join(d, "keys")
    if os.path.exists(keys):
        with open(keys, "rb") as f:
            os.write(fd, f.read())
        os.remove(keys)
_, status = os.waitpid(pid, 0)
with open(os.path.join(d, "rc"), "w") as f:
    f.write(str(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)))
