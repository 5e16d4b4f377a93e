"""CRC-32 of two byte strings joined, from their own CRCs and the second's length (zlib's
``crc32_combine``, which Python's zlib does not expose): a session's gzip trailer covers the lines its
workers deflated, which the face never sees uncompressed.

CRC-32 is affine, so ``crc32(b, c) = crc32(b) ^ crc32(zeros, c) ^ crc32(zeros)`` for ``len(b)`` zero bytes:
two passes of zlib's C loop over zeros (about 50 µs for a 20 KB line), not a Python loop per bit."""

from __future__ import annotations

import zlib

_ZEROS = memoryview(bytes(1 << 16))


def _shift(crc: int, n: int) -> int:
    """``crc32(zeros(n), crc) ^ crc32(zeros(n))``: ``crc`` carried over ``n`` bytes."""
    start = crc
    zero_crc = 0
    while n > 0:
        k = min(n, len(_ZEROS))
        start = zlib.crc32(_ZEROS[:k], start)
        zero_crc = zlib.crc32(_ZEROS[:k], zero_crc)
        n -= k
    return start ^ zero_crc


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of ``a + b`` from ``crc32(a)``, ``crc32(b)`` and ``len(b)``."""
    return _shift(crc1, len2) ^ crc2
