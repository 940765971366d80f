"""Whole-block compression codecs for RecordBatch v2, as Kafka frames them.

gzip is a gzip stream, lz4 is the LZ4 *frame* format (64 KiB independent blocks, no
content size or checksum, like Kafka's KafkaLZ4BlockOutputStream), snappy is raw snappy or
the xerial "SNAPPY" chunked framing Kafka's Java client writes, zstd is a zstd frame.
gzip and lz4 are always available; snappy and zstd are default dependencies too, and an
environment that lacks their packages gets :class:`UnsupportedCodecError` for those codecs. Output is capped at ``MAX_DECOMPRESSED_BYTES`` so a
malicious batch cannot exhaust memory. This module works on whole byte strings only; it
must not know anything about record layout.
"""

from __future__ import annotations

import struct
import zlib

from kraft.errors import CorruptRecordError, RecordListTooLargeError, UnsupportedCodecError
from kraft.records.format import MAX_DECOMPRESSED_BYTES, Compression

try:
    import lz4.frame as _lz4
except ImportError:  # pragma: no cover - lz4 is a hard dependency
    _lz4 = None
try:
    import snappy as _snappy
except ImportError:
    _snappy = None
try:
    import zstandard as _zstd
except ImportError:
    _zstd = None

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024


def available(codec: int) -> bool:
    """True when this process can both read and write ``codec``."""
    return {
        Compression.NONE: True,
        Compression.GZIP: True,
        Compression.LZ4: _lz4 is not None,
        Compression.SNAPPY: _snappy is not None,
        Compression.ZSTD: _zstd is not None,
    }.get(codec, False)


def _require(codec: int, module):
    if module is None:
        name = Compression(codec).name.lower()
        raise UnsupportedCodecError(f"compression codec {name} needs its Python package ({name})")
    return module


def compress(codec: int, data, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` at ``level`` (Kafka's ``compression.<codec>.level``;
    None or gzip's -1: the codec's default; snappy has no levels)."""
    if codec == Compression.GZIP:
        c = zlib.compressobj(6 if level is None or level < 0 else level, zlib.DEFLATED, 31)  # wbits 31: gzip
        return c.compress(data) + c.flush()
    if codec == Compression.LZ4:
        return _require(codec, _lz4).compress(
            data,
            # python-lz4 takes 0-16 (3 and up: high compression); Kafka's 1-17 with 9 the default
            compression_level=0 if level is None else min(level, 16),
            block_size=_lz4.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == Compression.SNAPPY:
        snappy = _require(codec, _snappy)
        out = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
        view = memoryview(data)
        for i in range(0, len(view), _XERIAL_BLOCK):
            block = snappy.compress(bytes(view[i : i + _XERIAL_BLOCK]))
            out.append(struct.pack(">i", len(block)))
            out.append(block)
        return b"".join(out)
    if codec == Compression.ZSTD:
        zstd = _require(codec, _zstd)
        return (zstd.ZstdCompressor() if level is None else zstd.ZstdCompressor(level=level)).compress(data)
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def _check_size(n: int, limit: int) -> None:
    if n > limit:
        raise RecordListTooLargeError(f"decompressed records exceed {limit} bytes")


def decompress(codec: int, data, limit: int | None = None) -> bytes:
    """Decompress one batch's records block; any malformed input is CorruptRecordError,
    output beyond ``limit`` bytes RecordListTooLargeError (stopped at the limit, never
    allocated in full). The default limit is ``MAX_DECOMPRESSED_BYTES``."""
    if limit is None:
        limit = MAX_DECOMPRESSED_BYTES
    if codec not in (Compression.GZIP, Compression.LZ4, Compression.SNAPPY, Compression.ZSTD):
        raise UnsupportedCodecError(f"unknown compression codec {codec}")
    try:
        if codec == Compression.GZIP:
            d = zlib.decompressobj(47)  # 47 = auto-detect gzip or zlib header
            out = d.decompress(data, limit + 1)
            _check_size(len(out), limit)
            if not d.eof:
                raise CorruptRecordError("truncated gzip stream")
            return out
        if codec == Compression.LZ4:
            return _lz4_decompress(_require(codec, _lz4), data, limit)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(_require(codec, _snappy), bytes(data), limit)
        return _zstd_decompress(_require(codec, _zstd), bytes(data), limit)
    except (CorruptRecordError, UnsupportedCodecError):
        raise
    except Exception as exc:  # every codec library has its own error types
        raise CorruptRecordError(f"cannot decompress {Compression(codec).name} records: {exc}") from exc


#: Output asked of python-lz4 per call. It allocates ``max_length`` bytes up front, so asking
#: for the whole limit (a request's 64 MiB) cost an allocation that size per batch: a 16 KiB
#: batch took 20 us to decompress instead of 5, and the brokers' CPU in a 1,000-partition
#: acks=1 flood fell by a quarter without it (measured).
LZ4_STEP = 1 << 20


def _lz4_decompress(lz4, data, limit: int) -> bytes:
    d = lz4.LZ4FrameDecompressor()
    out = d.decompress(bytes(data), max_length=min(limit + 1, LZ4_STEP))
    if d.eof:
        _check_size(len(out), limit)
        return out
    parts, total = [out], len(out)
    # More output than one step (or a truncated frame): continue from what the decompressor
    # holds, never past limit + 1 bytes in all.
    while not d.eof and not d.needs_input and total <= limit:
        more = d.decompress(b"", max_length=min(limit + 1 - total, LZ4_STEP))
        if not more:
            break  # nothing more to give: not at eof, so truncated (below)
        parts.append(more)
        total += len(more)
    _check_size(total, limit)
    if not d.eof:
        raise CorruptRecordError("truncated lz4 frame")
    return b"".join(parts)


#: A zstd block inflates to at most 128 KiB from a 4-byte RLE block: at most ~32 KiB of output
#: per input byte, so feeding ``budget >> ZSTD_RATIO_BITS`` bytes at a time cannot overshoot
#: the budget by more than about itself.
ZSTD_RATIO_BITS = 15
#: Idle decompressors: making one costs ~17 us (its context), as much as decompressing a 16 KiB
#: batch. One may not serve two calls at once, so a call takes one off this list (``pop`` and
#: ``append`` are atomic) and puts it back when it succeeded; at most ``_ZSTD_POOL_MAX`` wait.
_zstd_pool: list = []
_ZSTD_POOL_MAX = 8


def _zstd_decompress(zstd, data: bytes, limit: int) -> bytes:
    try:
        dctx = _zstd_pool.pop()
    except IndexError:
        dctx = zstd.ZstdDecompressor()
    out = _zstd_decompress_with(zstd, dctx, data, limit)
    if len(_zstd_pool) < _ZSTD_POOL_MAX:
        _zstd_pool.append(dctx)  # not after a failure: that one is dropped with its state
    return out


def _zstd_decompress_with(zstd, dctx, data: bytes, limit: int) -> bytes:
    size = zstd.frame_content_size(data)
    if size >= 0:
        # The frame says how much it holds (kraft's own writer, zstd's one-shot API): refused
        # before anything is allocated if over the limit, else decompressed in one call that
        # fails on a truncated frame or a size that does not match.
        _check_size(size, limit)
        return dctx.decompress(data, max_output_size=size)
    # No content size (librdkafka, Java's zstd-jni streams): one pass fed in chunks small
    # enough that a bomb is stopped near the cap instead of after allocating all of it
    # (64 bytes inflate to at most ~2 MiB; larger chunks while the budget left is larger);
    # ``eof`` tells a whole frame from a truncated one.
    d = dctx.decompressobj()
    out, total, pos, end = [], 0, 0, len(data)
    while pos < end:
        step = max(64, (limit - total) >> ZSTD_RATIO_BITS)
        chunk = d.decompress(data[pos : pos + step])
        pos += step
        if chunk:
            total += len(chunk)
            _check_size(total, limit)
            out.append(chunk)
        if d.eof:
            break
    if not d.eof:
        raise CorruptRecordError("truncated zstd frame")
    return b"".join(out)


def _snappy_raw(snappy, block: bytes, budget: int) -> bytes:
    """Raw snappy, refusing before decompression if its preamble announces more than budget."""
    n, shift = 0, 0
    for i, b in enumerate(block[:5]):
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    else:
        raise CorruptRecordError("bad snappy length preamble")
    if n > budget:
        raise RecordListTooLargeError(f"decompressed records exceed {budget} bytes")
    return snappy.decompress(block)


def _snappy_decompress(snappy, data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_raw(snappy, data, limit)
    pos, out, total = _XERIAL_HEADER.size, [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy chunk header")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError("bad xerial snappy chunk length")
        block = _snappy_raw(snappy, data[pos : pos + n], limit - total)
        total += len(block)
        _check_size(total, limit)
        out.append(block)
        pos += n
    return b"".join(out)
