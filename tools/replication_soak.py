"""Soak the partition-replication simulator: many seeds x long runs (the "soak" profile: 60
simulated seconds of faults each), optionally on several processes. Separate from CI (which
runs 500 "ci" seeds in tests/sim/test_replication_chaos.py).

    python tools/replication_soak.py --seeds 10000 --first 100000 --jobs 2
    python tools/replication_soak.py --minutes 30 --profile ci     # new seeds until time is up

Prints every failure with its one-line replay command, and seeds per second at the end;
exits 1 if any seed failed.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft.testing.replication_chaos import PROFILES, run_replication_chaos  # noqa: E402
from seed_soak import soak_main  # noqa: E402  (tools/ is on sys.path when run as a script)


def main() -> int:
    return soak_main(__doc__.split("\n\n")[0], run_replication_chaos, PROFILES, "replication")


if __name__ == "__main__":
    sys.exit(main())
