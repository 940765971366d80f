"""One PySyncObj node for the benchmarks (bench_quorum's Python anchor, bench_peers' peer).
Not a test.

A replicated store of 256-byte values with a journal file on disk. PySyncObj never fsyncs
its journal (an mmap'd file), so ``Store`` adds fdatasync where Raft needs durability: at
the end of every tick in which the log changed (so a leader's own entries are on disk before
the next tick counts the leader toward a commit) and before a follower acknowledges appended
entries. ``--no-fsync`` restores PySyncObj's own behaviour.

Modes:
  * ``--load SECONDS``: this node also submits commands itself with a bounded window and
    prints ``{"committed": n, "seconds": s}`` as JSON when done (bench_quorum);
  * ``--serve PORT``: a small TCP front end so client processes can write through this
    node (bench_peers). Request ``<IHI`` (request id, count, payload bytes) + ``count``
    equal-size values; count 0 asks "are you the leader?". Reply ``<IB`` (request id,
    status: 0 committed / leader, 1 failed / not leader), sent when the command commits.
"""

import argparse
import json
import os
import socket
import struct
import threading
import time

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated

REQ = struct.Struct("<IHI")
REP = struct.Struct("<IB")


class Store(SyncObj):
    def __init__(self, self_addr, partners, journal, durable=True):
        self._durable = durable
        self._dirty = False
        self.applied = 0
        super().__init__(self_addr, partners, SyncObjConf(journalFile=journal, dynamicMembershipChange=False))
        log = self._SyncObj__raftLog
        for name in ("add", "deleteEntriesFrom", "deleteEntriesTo", "clear"):
            setattr(log, name, self._marking(getattr(log, name)))

    def _marking(self, method):
        def call(*args):
            self._dirty = True
            return method(*args)
        return call

    def _sync(self):
        if self._durable and self._dirty:
            self._dirty = False
            journal_file = self._SyncObj__raftLog._FileJournal__journalFile
            os.fdatasync(journal_file._ResizableFile__f.fileno())  # covers the mmap'd pages on Linux

    def _onTick(self, timeToWait=0.0):
        super()._onTick(timeToWait)
        self._sync()  # leader: before the next tick counts its own entries toward a commit

    def _SyncObj__sendNextNodeIdx(self, node, reset=False, nextNodeIdx=None, success=False):
        if success:
            self._sync()  # follower: entries on disk before the ack
        SyncObj._SyncObj__sendNextNodeIdx(self, node, reset, nextNodeIdx, success)

    def wake(self):
        """Commands submitted from another thread wait for the next tick; wake it now."""
        notifier = getattr(self, "_SyncObj__pipeNotifier", None)
        if notifier is not None:
            notifier.notify()

    @replicated
    def put(self, value):
        self.applied += 1
        return self.applied

    @replicated
    def put_many(self, values):
        self.applied += len(values)
        return self.applied


def serve(node, port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(128)

    def handle(conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lock = threading.Lock()

        def reply(rid, status):
            try:
                with lock:
                    conn.sendall(REP.pack(rid, status))
            except OSError:
                pass

        buf = bytearray()
        try:
            while True:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    return
                buf += chunk
                pos = 0
                while len(buf) - pos >= REQ.size:
                    rid, count, size = REQ.unpack_from(buf, pos)
                    if len(buf) - pos - REQ.size < size:
                        break
                    payload = bytes(buf[pos + REQ.size:pos + REQ.size + size])
                    pos += REQ.size + size
                    if count == 0:
                        reply(rid, 0 if node._isLeader() else 1)
                        continue

                    def done(result, error, rid=rid):
                        reply(rid, 0 if error == FAIL_REASON.SUCCESS else 1)

                    if count == 1:
                        node.put(payload, callback=done)
                    else:
                        step = size // count
                        node.put_many([payload[i:i + step] for i in range(0, size, step)], callback=done)
                del buf[:pos]
                node.wake()  # once per read: let the tick pick these commands up now
        except (OSError, ValueError):
            pass
        finally:
            conn.close()

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--self", required=True)
    ap.add_argument("--partners", required=True)
    ap.add_argument("--journal", required=True)
    ap.add_argument("--load", type=float, default=0.0)
    ap.add_argument("--window", type=int, default=2000)
    ap.add_argument("--lifetime", type=float, default=120.0)
    ap.add_argument("--serve", type=int, default=0, help="TCP front-end port for client processes")
    ap.add_argument("--no-fsync", action="store_true", help="PySyncObj as shipped: journal never fsynced")
    args = ap.parse_args()
    node = Store(args.self, args.partners.split(","), args.journal, durable=not args.no_fsync)
    if args.serve:
        serve(node, args.serve)
        return
    if not args.load:
        time.sleep(args.lifetime)
        return
    while node._getLeader() is None:
        time.sleep(0.05)
    value = b"v" * 256
    lock = threading.Lock()
    state = {"inflight": 0, "ok": 0}

    def done(result, error):
        with lock:
            state["inflight"] -= 1
            if error == FAIL_REASON.SUCCESS:
                state["ok"] += 1

    start = time.monotonic()
    end = start + args.load
    while time.monotonic() < end:
        if state["inflight"] < args.window:
            with lock:
                state["inflight"] += 1
            node.put(value, callback=done)
        else:
            time.sleep(0.0005)
    elapsed = time.monotonic() - start
    ok_at_end = state["ok"]
    print(json.dumps({"committed": ok_at_end, "seconds": elapsed}), flush=True)


if __name__ == "__main__":
    main()
