"""One PySyncObj node for bench/bench_quorum.py (the Python anchor). Not a test.

Runs a replicated counter with a journal file on disk. With ``--load SECONDS`` the node also
submits 256-byte commands with a bounded window and prints
``{"committed": n, "seconds": s}`` as JSON when done.
"""

import argparse
import json
import threading
import time

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated


class Store(SyncObj):
    def __init__(self, self_addr, partners, journal):
        super().__init__(self_addr, partners, SyncObjConf(journalFile=journal, dynamicMembershipChange=False))
        self.applied = 0

    @replicated
    def put(self, value):
        self.applied += 1
        return self.applied


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--self", required=True)
    ap.add_argument("--partners", required=True)
    ap.add_argument("--journal", required=True)
    ap.add_argument("--load", type=float, default=0.0)
    ap.add_argument("--window", type=int, default=2000)
    ap.add_argument("--lifetime", type=float, default=120.0)
    args = ap.parse_args()
    node = Store(args.self, args.partners.split(","), args.journal)
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
