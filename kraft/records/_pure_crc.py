"""Pure-Python CRC-32C for the reference codec.

Uses the ``crc32c`` package (a runtime dependency, C inside) when importable, because a
byte-at-a-time Python loop is ~1000x slower; the table fallback below keeps the reference
implementation self-contained and is what the tests compare both against.
"""

from __future__ import annotations

_POLY = 0x82F63B78


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c_table(data, value: int = 0) -> int:
    """Bit-exact reference: CRC-32C of ``data`` continuing from a previous CRC ``value``."""
    crc = value ^ 0xFFFFFFFF
    table = _TABLE
    for b in bytes(data):
        crc = (crc >> 8) ^ table[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


try:
    from crc32c import crc32c as _pkg_crc32c

    def crc32c(data, value: int = 0) -> int:
        return _pkg_crc32c(data, value)

except ImportError:  # pragma: no cover - crc32c is a declared dependency
    crc32c = crc32c_table
