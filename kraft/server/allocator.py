"""Keep the pages of large buffers a node frees, instead of handing them back to the kernel.

glibc's malloc serves a block over its mmap threshold (128 KiB to start) with a fresh
mapping, and gives the top of its heap back once more than its trim threshold (also
128 KiB to start) is free there. A node allocates such blocks all the time under load: a
follower's Fetch answers of hundreds of KB (the socket's reads, the frame they are cut
into), the leader's reads of the log tail, the batches a Produce joins. Every one of those
pages is then faulted in again on first touch; on this project's VMs a page fault costs
about 4 µs, so a 700 KB frame cost ~0.7 ms to receive instead of ~30 µs (measured with
``bytearray`` growth and with three 256 KiB reads joined: 690-760 µs against 31-35 µs with
the thresholds below).

Raising both thresholds (as the ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``
environment variables would) keeps up to ``TRIM_THRESHOLD`` bytes of freed memory per
arena resident for reuse: a bounded cost for a server. An operator's own ``MALLOC_*``
settings win; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import os
import platform

#: Blocks up to this size come from the heap (glibc's largest allowed value on 64-bit).
MMAP_THRESHOLD = 32 << 20
#: Free memory kept at the top of a heap before it is returned to the kernel.
TRIM_THRESHOLD = 128 << 20

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


def keep_freed_pages(environ=os.environ) -> bool:
    """Set glibc's thresholds for this process; True if they were set."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if "MALLOC_MMAP_THRESHOLD_" in environ or "MALLOC_TRIM_THRESHOLD_" in environ:
        return False  # the operator chose
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
