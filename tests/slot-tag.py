#!/usr/bin/env python3
"""The hash tag the agent gives a Redis Cluster hash slot's keys (its
epoch, clock and census: hash_slot_tag()): the first of 0, 1, 2, … in
base 62, least significant digit first, whose CRC16 falls in the slot.

  slot-tag.py SLOT          prints SLOT's tag
  slot-tag.py --census      reads slot ranges ("A-B" or "A") on standard
                            input, prints a ZADD that seeds each slot's
                            census (fleetsemd(8), SAFETY)"""
import sys

DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def crc16(b):
    crc = 0
    for c in b:
        crc ^= c << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def tags():
    out, n = {}, 0
    while len(out) < 16384:
        s, m = "", n
        while True:
            s += DIGITS[m % 62]
            m //= 62
            if not m:
                break
        out.setdefault(crc16(s.encode()) & 16383, s)
        n += 1
    return out


def main(argv):
    t = tags()
    if argv[1:] == ["--census"]:
        for r in sys.stdin.read().split():
            a, _, b = r.partition("-")
            for slot in range(int(a), int(b or a) + 1):
                print("ZADD fleetsem:census:{%s} NX -1 ." % t[slot])
    elif len(argv) == 2 and argv[1].isdigit() and int(argv[1]) < 16384:
        print(t[int(argv[1])])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
