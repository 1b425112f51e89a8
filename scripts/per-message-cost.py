#!/usr/bin/env python3
"""Instructions and atomic read-modify-writes per message, from two callgrind runs.

    scripts/per-message-cost.py [IA [MODE [N [SIZE]]]]      (defaults: shm suppress 20000 8)

Builds `crates/dapl/examples/per_message.rs` (release), runs it under
`valgrind --tool=callgrind --dump-instr=yes` for N and 2N messages, and divides the
difference by N: the instructions of one message (both sides, one thread), and its atomic
read-modify-writes (the executions of the binary's `lock`-prefixed instructions and of its
`xchg`s with a memory operand, found by address with `objdump -d`), per function. docs/architecture.md ("Where the time
goes") quotes these figures. Needs valgrind and objdump.
"""
import collections
import re
import signal
import subprocess
import sys
import tempfile


def parse(path, binary):
    """Self cost per instruction address of `binary`'s code, and each address's function."""
    costs, fn_of, names = collections.Counter(), {}, {}
    ob = fn = None
    addr, skip = 0, False
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        m = re.match(r"(c?)(ob|fn|fl|fi|fe)=\((\d+)\)(?: (.*))?", line)
        if m:
            key = (m.group(2), m.group(3))
            if m.group(4):
                names[key] = m.group(4)
            if not m.group(1) and m.group(2) == "ob":
                ob = names.get(key)
            elif not m.group(1) and m.group(2) == "fn":
                fn = names.get(key)
            continue
        if line.startswith("calls="):
            skip = True
            continue
        if line[0] in "0123456789+-*":
            t = line.split()
            a = t[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] in "+-":
                d = int(a[1:], 16) if a[1:].startswith("0x") else int(a[1:])
                addr += d if a[0] == "+" else -d
            if skip:
                skip = False
                continue
            if ob and ob.endswith(binary) and len(t) >= 3:
                costs[addr] += int(t[2])
                fn_of[addr] = fn
    return costs, fn_of


def total(path):
    for line in open(path):
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise SystemExit(f"no summary in {path}")


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    ia = sys.argv[1] if len(sys.argv) > 1 else "shm"
    mode = sys.argv[2] if len(sys.argv) > 2 else "suppress"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    size = sys.argv[4] if len(sys.argv) > 4 else "8"
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "dapl", "--example",
                    "per_message"], check=True)
    exe = "target/release/examples/per_message"
    outs = []
    with tempfile.TemporaryDirectory() as d:
        for k in (n, 2 * n):
            out = f"{d}/cg.{k}"
            subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes",
                            f"--callgrind-out-file={out}", exe, ia, str(k), mode, size],
                           check=True, capture_output=True)
            outs.append((out, parse(out, "per_message"), total(out)))
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe],
                             capture_output=True, text=True, check=True).stdout
    # `xchg` locks only with a memory operand (`xchg %ax,%ax` is a two-byte nop).
    locked = {int(m.group(1), 16) for m in
              re.finditer(r"^\s*([0-9a-f]+):\s+(?:lock |xchg\s+\S*\()", dis, re.M)}
    (_, (c1, f1), t1), (_, (c2, f2), t2) = outs
    per_fn, rmw = collections.Counter(), 0
    for a in locked:
        d = c2.get(a, 0) - c1.get(a, 0)
        if d:
            per_fn[f2.get(a) or f1.get(a)] += d
            rmw += d
    print(f"per_message {ia} {mode} {size} B: {(t2 - t1) / n:.0f} instructions, "
          f"{rmw / n:.2f} atomic read-modify-writes per message")
    for f, v in per_fn.most_common():
        if v / n >= 0.05:
            print(f"  {v / n:6.2f}  {f}")


if __name__ == "__main__":
    main()
