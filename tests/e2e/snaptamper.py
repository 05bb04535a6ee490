#!/usr/bin/env python3
"""Tampers with a snapshot's state file the way a deliberate attacker
would: changes a field and recomputes the checksums, so only the checks
behind them (docs/snapshot.md) stand in the way.

  snaptamper.py STATE queue-outside-ram   first virtio device, queue 0's
                                          descriptor table at 2^64 - 4096
  snaptamper.py STATE queue-misaligned    the same table 8 bytes off"""
import struct
import sys

HEADER = 32


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def sections(buf):
    off = HEADER
    while off + 8 <= len(buf):
        tag, n = struct.unpack_from("<4sI", buf, off)
        yield tag, off + 8, n
        off += 8 + n


path, mode = sys.argv[1], sys.argv[2]
buf = bytearray(open(path, "rb").read())
virt = next(o for t, o, n in sections(buf) if t == b"VIRT")
# The transport record: device id u32, features u64, driver features
# u64, status u32, 3 selectors u32, isr u32, generation u32, queue count
# u32, then per queue: size u16, ready u8, desc u64, ...
q0_desc = virt + 4 + 8 + 8 + 4 + 12 + 4 + 4 + 4 + 2 + 1
(desc,) = struct.unpack_from("<Q", buf, q0_desc)
if mode == "queue-outside-ram":
    struct.pack_into("<Q", buf, q0_desc, 0xFFFFFFFFFFFFF000)
elif mode == "queue-misaligned":
    struct.pack_into("<Q", buf, q0_desc, desc + 8)
else:
    sys.exit(f"unknown mode {mode}")
struct.pack_into("<I", buf, 24, crc32c(bytes(buf[HEADER:])))
struct.pack_into("<I", buf, 28, crc32c(bytes(buf[:28])))
open(path, "wb").write(buf)
print(f"queue 0 descriptor table 0x{desc:x} -> 0x{struct.unpack_from('<Q', buf, q0_desc)[0]:x}")
