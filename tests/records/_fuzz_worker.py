"""Fuzz the native codec with many random and mutated inputs in a child process.

Run by test_fuzz_native.py as ``python _fuzz_worker.py SEED COUNT``: a segfault kills only
this process (the test sees the signal in the exit code), an untyped exception prints the
input and exits 1, success prints ``ok COUNT``. Pass ``--window`` to feed only Length
values whose ``Length + 12`` overflows int32 (once a segfault).
"""

import random
import struct
import sys
import traceback

import crc32c

import kraft.records
from kraft.errors import CorruptRecordError, UnsupportedCodecError
from kraft.records import Compression, compression

TYPED = (CorruptRecordError, UnsupportedCodecError)
CRASH_WINDOW = range(2**31 - 12, 2**31)
EDGES = [0, 1, -1, 6, 7, 48, 49, 60, 61, 62, 127, 128, 255, 2**15, 2**16, 2**31 - 13,
         2**31 - 12, 2**31 - 1, -(2**31), 2**30]


def corpus(native):
    out = []
    codecs = [c for c in Compression if compression.available(c)]
    for i, codec_id in enumerate(codecs):
        out.append(native.build_batch([b"v%d" % j * (j % 5) for j in range(1 + i * 3)],
                                      keys=[None if j % 2 else b"k" for j in range(1 + i * 3)],
                                      headers=[[("h", b"x"), ("n", None)]] * (1 + i * 3),
                                      timestamps=[j * 7 - 3 for j in range(1 + i * 3)],
                                      compression=codec_id, base_offset=i * 10))
    out.append(native.build_control_batch(2, b"\x00\x00\x00\x00\x00\x01\x02\x00\x00\x00\x01\x00\x01\x00",
                                          timestamp=1))
    out.append(native.build_batch([None], timestamp=0, log_append_time=True, transactional=True))
    out.append(out[0] + out[-1] + out[1])
    return out


def fix_crc(buf: bytearray) -> bytearray:
    if len(buf) >= 61:
        (length,) = struct.unpack_from(">i", buf, 8)
        end = length + 12 if 49 <= length and length + 12 <= len(buf) else len(buf)
        struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:end])))
    return buf


def mutate(rng: random.Random, seeds) -> bytes:
    kind = rng.randrange(8)
    base = bytearray(rng.choice(seeds))
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 200))
    if kind == 1:
        for _ in range(rng.randint(1, 8)):
            base[rng.randrange(len(base))] ^= 1 << rng.randrange(8)
        return bytes(fix_crc(base) if rng.random() < 0.5 else base)
    if kind == 2:
        cut = rng.randrange(len(base) + 1)
        return bytes(fix_crc(base[:cut]) if rng.random() < 0.5 else base[:cut])
    if kind == 3:
        pos = rng.randrange(len(base) + 1)
        base[pos:pos] = rng.randbytes(rng.randint(1, 8))
        return bytes(fix_crc(base) if rng.random() < 0.5 else base)
    if kind == 4:
        fmt, off = rng.choice([(">i", 8), (">i", 57), (">i", 23), (">b", 16), (">h", 21),
                               (">q", 0), (">i", 12), (">q", 27), (">q", 35)])
        if fmt == ">i":
            value = rng.choice(EDGES) if rng.random() < 0.5 else rng.randint(-(2**31), 2**31 - 1)
        else:
            bits = struct.calcsize(fmt) * 8
            value = rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        struct.pack_into(fmt, base, off, value)
        return bytes(fix_crc(base))
    if kind == 5:
        if len(base) > 62:
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(61, len(base))
                chunk = rng.randbytes(rng.randint(1, 4))
                base[pos : pos + len(chunk)] = chunk
        return bytes(fix_crc(base[: len(base)]))
    if kind == 6:
        body = rng.randbytes(rng.randrange(0, 120))
        head = bytearray(base[:61])
        struct.pack_into(">i", head, 8, 49 + len(body))
        struct.pack_into(">i", head, 57, rng.choice([0, 1, 2, 3, 10, 2**31 - 1]))
        return bytes(fix_crc(head + body))
    other = rng.choice(seeds)
    return bytes(base[: rng.randrange(len(base) + 1)] + other[rng.randrange(len(other) + 1):])


def exercise(native, buf: bytes) -> None:
    def read(batch):
        batch.is_valid()
        batch.tobytes()
        try:
            list(batch)
        except TYPED:
            pass
        try:
            batch.values()
        except TYPED:
            pass
        try:
            d = batch.decode()
            for i in range(len(d)):
                d.headers(i)
                d.value(i)
        except TYPED:
            pass

    try:
        read(native.RecordBatch(buf))
    except TYPED:
        pass
    try:
        for batch in native.iter_batches(buf):
            read(batch)
    except TYPED:
        pass
    try:
        native.scan_batches(buf)
    except TYPED:
        pass
    try:
        native.assign_offsets(bytearray(buf), 7, 3)
    except TYPED:
        pass


def main() -> int:
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    window = "--window" in sys.argv
    native = kraft.records.implementation("native")
    rng = random.Random(seed)
    seeds = corpus(native)
    for i in range(count):
        if window:
            buf = bytearray(rng.choice(seeds))
            struct.pack_into(">i", buf, 8, rng.choice(CRASH_WINDOW))
            buf = bytes(buf)
        else:
            buf = mutate(rng, seeds)
        try:
            exercise(native, buf)
        except Exception:
            traceback.print_exc()
            print(f"untyped exception for input #{i} (seed {seed}): {buf.hex()}", file=sys.stderr)
            return 1
    print(f"ok {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
