"""Writing an answer whose records are ``FileSlice``s of segment files (``kraft.log.file_slice``)
straight to the socket: buffers with ``writev``, slices with ``sendfile`` (page cache to
socket: the records never pass through Python). When the socket is full the connection waits
until it is writable (``loop.add_writer`` on its own duplicate of the socket's descriptor, so
the transport's registration is untouched and the descriptor cannot be closed and reused under
it) and goes on from where it stopped.

The connection writes directly only when its transport has nothing buffered (bytes written
around a non-empty buffer would overtake it) and writes nothing through the transport until a
direct answer is done. TLS connections (the bytes must be encrypted) and platforms without
``sendfile`` read every slice into memory instead (``in_memory``).
"""

from __future__ import annotations

import asyncio
import os

from kraft.errors import KraftError
from kraft.log.file_slice import FileSlice

HAS_SENDFILE = hasattr(os, "sendfile")
#: Buffers per writev (Linux's IOV_MAX is 1,024).
_IOV_MAX = 512


def has_slices(parts) -> bool:
    return any(type(p) is FileSlice for p in parts)


def in_memory(parts) -> list:
    """``parts`` with every slice read into memory."""
    return [p.materialize() if type(p) is FileSlice else p for p in parts]


def _size(b) -> int:
    return b.nbytes if type(b) is memoryview else len(b)


def send_parts(fd: int, parts: list, i: int = 0, off: int = 0) -> tuple[int, int]:
    """Write ``parts[i:]`` (the first of them from byte ``off``) in order to the non-blocking
    socket ``fd`` for as long as it takes them. Returns where it stopped: ``(len(parts), 0)``
    when everything is written, else the part and the byte within it to go on from. OSError
    (or a FatalLogError from a slice): the connection cannot carry this answer."""
    n = len(parts)
    while i < n:
        p = parts[i]
        if type(p) is FileSlice and p.data is None:
            off = _sendfile(fd, p, off)
            if off < p.length:
                if p.data is not None:
                    continue  # the file was cut meanwhile: on from its bytes, read into memory first
                return i, off  # the socket is full
            i, off = i + 1, 0
            continue
        bufs, j = [], i
        while j < n and len(bufs) < _IOV_MAX:
            q = parts[j]
            if type(q) is FileSlice:
                if q.data is None:
                    break
                q = q.data
            bufs.append(memoryview(q)[off:] if off and j == i else q)
            j += 1
        try:
            written = os.writev(fd, bufs)
        except BlockingIOError:
            written = 0
        for k, b in enumerate(bufs):
            size = _size(b)
            if written < size:
                return i + k, (off if k == 0 else 0) + written
            written -= size
        i, off = j, 0
    return n, 0


def remainder(parts: list, i: int, off: int) -> list:
    """``parts[i:]`` from byte ``off`` of the first, in memory: for the transport to write."""
    if i >= len(parts):
        return []
    first = parts[i]
    first = first.materialize() if type(first) is FileSlice else first
    return [memoryview(first)[off:] if off else first, *in_memory(parts[i + 1:])]


def _sendfile(fd: int, s: FileSlice, sent: int) -> int:
    """Bytes of ``s`` the socket has taken, from ``sent``: all of them, or fewer when it is full."""
    source = s.source
    while sent < s.length:
        try:
            n = os.sendfile(fd, source.fd, s.position + sent, s.length - sent)
        except BlockingIOError:
            break
        if n == 0:
            if s.data is not None:
                break  # cut meanwhile, after its bytes were read into memory: those go next
            raise OSError(f"{source.path} ends before the {s.length} bytes at {s.position} an answer carries")
        sent += n
    return sent


class DirectWriter:
    """One plaintext connection's writer of answers with file slices straight to its socket,
    through its own duplicate of the socket's descriptor (closed by ``close``, before the
    transport's: the socket stays open while either is). ``write`` sends what the socket takes
    and, when it is full, goes on when it is writable (``busy`` meanwhile: the connection
    writes nothing else); ``on_done()`` when the answer is out (the rest handed to
    ``transport`` once only buffers are left), ``on_error(exc)`` when the connection cannot
    carry it."""

    __slots__ = ("_loop", "_on_done", "_on_error", "_pending", "_transport", "fd")

    def __init__(self, sock_fd: int, on_done, on_error):
        self.fd = os.dup(sock_fd)
        self._on_done, self._on_error = on_done, on_error
        self._pending = self._loop = self._transport = None

    @property
    def busy(self) -> bool:
        return self._pending is not None

    def write(self, parts: list, transport) -> None:
        """Raises OSError / FatalLogError at once when the first attempt fails (the caller
        closes the connection); later failures go to ``on_error``."""
        self._transport = transport
        self._go(parts, 0, 0)

    def _go(self, parts: list, i: int, off: int) -> None:
        i, off = send_parts(self.fd, parts, i, off)
        if i < len(parts) and has_slices(parts[i:]):
            if self._pending is None:
                self._loop = asyncio.get_running_loop()
                self._loop.add_writer(self.fd, self._writable)
            self._pending = (parts, i, off)
            return
        if i < len(parts):  # only buffers are left: the transport writes them
            self._transport.writelines(remainder(parts, i, off))
        self._stop()
        self._on_done()

    def _writable(self) -> None:
        if self._pending is None:
            return
        try:
            self._go(*self._pending)
        except (OSError, KraftError) as exc:
            self._stop()
            self._on_error(exc)

    def _stop(self) -> None:
        if self._pending is not None:
            self._pending = None
            self._loop.remove_writer(self.fd)
        self._transport = None

    def close(self) -> None:
        self._stop()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
