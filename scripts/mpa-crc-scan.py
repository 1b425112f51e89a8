#!/usr/bin/env python3
"""Walks the MPA FPDUs of every TCP stream in a capture and checks their CRCs.

    scripts/mpa-crc-scan.py CAPTURE.pcap

Each stream is reassembled by tshark (`-z follow,tcp,raw`), each direction that begins with an
MPA Request or Reply is cut into FPDUs (markers off, as dapl-rs and siw use them), and every
FPDU of a direction that negotiated CRC is checked (CRC32c, RFC 5044, little-endian on the
wire). Prints a line per direction and one per bad FPDU, saying whether its CRC is that of its
bytes with the DDP payload counted twice (Linux siw's defect, docs/interop-siw.md). Exits 1 if
any FPDU is bad. Used to tell a bad frame on the wire from one misread by the receiver: run
`dumpcap -i lo -f 'tcp port PORT' -w CAPTURE.pcap` beside the failing program. Needs tshark.
"""
import struct
import subprocess
import sys

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for x in data:
        c = TABLE[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def streams(capture):
    ids = subprocess.run(["tshark", "-r", capture, "-T", "fields", "-e", "tcp.stream"],
                         capture_output=True, text=True, check=True).stdout.split()
    for sid in sorted({int(x) for x in ids if x}):
        out = subprocess.run(["tshark", "-r", capture, "-qz", f"follow,tcp,raw,{sid}"],
                             capture_output=True, text=True, check=True).stdout
        data = [bytearray(), bytearray()]
        for line in out.splitlines():
            if not line.strip() or line.startswith(("=", "Follow", "Filter", "Node")):
                continue
            data[1 if line.startswith("\t") else 0] += bytes.fromhex(line.strip())
        yield sid, data


def scan(sid, node, b, crc):
    pd = struct.unpack(">H", b[18:20])[0]
    p, n, bad = 20 + pd, 0, 0
    while p + 2 <= len(b):
        ulpdu = struct.unpack(">H", b[p:p + 2])[0]
        covered = 2 + ulpdu + (-(2 + ulpdu)) % 4
        end = p + covered + 4
        if end > len(b):
            break
        if crc:
            frame = bytes(b[p:end])
            want = crc32c(frame[:covered])
            got = struct.unpack("<I", frame[covered:])[0]
            if got != want:
                bad += 1
                header = 14 if frame[2] & 0x80 else 18
                payload = frame[2 + header:2 + ulpdu]
                twice = crc32c(frame[2 + ulpdu:covered],
                               crc32c(payload, crc32c(frame[:2 + ulpdu]))) == got
                print(f"  BAD stream {sid} node {node} FPDU {n} at byte {p}: ULPDU {ulpdu}, "
                      f"CRC {got:08x}, computed {want:08x}"
                      + (" (the CRC counts the payload twice: siw's defect)" if twice else ""))
        n += 1
        p = end
    print(f"stream {sid} node {node}: CRC {'on' if crc else 'off'}, {n} FPDUs, {bad} bad, "
          f"{len(b) - p} bytes after the last whole FPDU")
    return bad


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bad = 0
    for sid, data in streams(sys.argv[1]):
        frames = [d if d.startswith((b"MPA ID Req Frame", b"MPA ID Rep Frame")) else None
                  for d in data]
        if None in frames:
            continue
        # CRC is on when the Reply's C flag is set (the responder's decision).
        reply = next(d for d in frames if d.startswith(b"MPA ID Rep Frame"))
        crc = bool(reply[16] & 0x40)
        for node, d in enumerate(frames):
            bad += scan(sid, node, d, crc)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
