"""How long one authorization check takes with many ACLs (in-process, no network).

    PYTHONPATH=$PWD python bench/bench_authorizer.py                 # 10,000 ACLs, 1,000 prefixed
    PYTHONPATH=$PWD python bench/bench_authorizer.py --acls 100000 --prefixed 10000

Workload: ``--acls`` ACLs over TOPIC (most), GROUP and TRANSACTIONAL_ID resources for 100
principals, ``--prefixed`` of them PREFIXED (prefixes of 4 to 12 characters), a few
wildcard (``*`` resource, ``User:*`` principal) and DENY ACLs. Checks: a fixed random mix of
topics with a literal ACL, topics under a prefix, and topics with no ACL, for principals with
and without ACLs; the loop calls ``StandardAuthorizer.authorize`` (median of 7 rounds of
``--checks`` checks; the first round, which fills the index's per-resource cache of matching
ACLs, is printed too). Anchor in the same run: a loop doing one dict lookup per check, the least
Python can do per check. Prints microseconds per check.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid

from kraft.metadata.acls import AclsImage, StandardAcl
from kraft.metadata.authorizer import StandardAuthorizer
from kraft.protocol.messages.acls import (OPERATION_DESCRIBE, OPERATION_READ, OPERATION_WRITE, PATTERN_LITERAL,
                                          PATTERN_PREFIXED, PERMISSION_ALLOW, PERMISSION_DENY, RESOURCE_GROUP,
                                          RESOURCE_TOPIC, RESOURCE_TRANSACTIONAL_ID)


def build(n_acls: int, n_prefixed: int, rng: random.Random):
    acls = {}
    principals = [f"User:u{i}" for i in range(100)]
    ops = (OPERATION_READ, OPERATION_WRITE, OPERATION_DESCRIBE)
    for i in range(n_acls):
        prefixed = i < n_prefixed
        rtype = RESOURCE_TOPIC if i % 10 < 8 else (RESOURCE_GROUP if i % 10 == 8 else RESOURCE_TRANSACTIONAL_ID)
        name = f"pre{i:05d}"[:rng.randint(2, 8)] + f"{i}-" if prefixed else f"topic-{i}"
        perm = PERMISSION_DENY if i % 97 == 0 else PERMISSION_ALLOW
        acls[uuid.UUID(int=i + 2)] = StandardAcl(rtype, name, PATTERN_PREFIXED if prefixed else PATTERN_LITERAL,
                                                 rng.choice(principals), "*", rng.choice(ops), perm)
    acls[uuid.UUID(int=n_acls + 10)] = StandardAcl(RESOURCE_TOPIC, "*", PATTERN_LITERAL, "User:*", "*",
                                                   OPERATION_DESCRIBE, PERMISSION_ALLOW)
    return AclsImage(acls), principals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--prefixed", type=int, default=1_000)
    ap.add_argument("--checks", type=int, default=200_000)
    args = ap.parse_args()
    rng = random.Random(1)
    image, principals = build(args.acls, args.prefixed, rng)
    authorizer = StandardAuthorizer({"User:admin"})
    t0 = time.perf_counter()
    authorizer.update(image)
    index_s = time.perf_counter() - t0
    checks = []
    for _ in range(args.checks):
        kind = rng.random()
        if kind < 0.4:
            name = f"topic-{rng.randrange(args.acls)}"
        elif kind < 0.8:
            i = rng.randrange(args.prefixed)
            name = f"pre{i:05d}"[:rng.randint(2, 8)] + f"{i}-orders"
        else:
            name = f"unknown-{rng.randrange(1000)}"
        checks.append((rng.choice(principals), "10.0.0.1", rng.choice((OPERATION_READ, OPERATION_WRITE,
                                                                       OPERATION_DESCRIBE)), RESOURCE_TOPIC, name))
    authorize = authorizer.authorize
    rounds, anchor_rounds = [], []
    allowed = 0
    table = {c[4]: True for c in checks[:1000]}
    for _ in range(7):
        t0 = time.perf_counter()
        for p, h, op, rt, name in checks:
            authorize(p, h, op, rt, name)
        rounds.append((time.perf_counter() - t0) / len(checks))
        t0 = time.perf_counter()
        for p, h, op, rt, name in checks:
            table.get(name)
        anchor_rounds.append((time.perf_counter() - t0) / len(checks))
    allowed = sum(authorize(*c) for c in checks)
    per_check = statistics.median(rounds) * 1e6
    anchor = statistics.median(anchor_rounds) * 1e6
    print(f"acls={args.acls} prefixed={args.prefixed} distinct_prefix_lengths="
          f"{len(authorizer.index.by_type[RESOURCE_TOPIC].lengths)} index_build_ms={index_s * 1000:.1f}")
    print(f"first_round_us={rounds[0] * 1e6:.3f} (matching-ACL cache empty at start; "
          f"{len({c[4] for c in checks})} distinct names)")
    print(f"checks={len(checks)} allowed={allowed} per_check_us={per_check:.3f} "
          f"anchor_dict_lookup_us={anchor:.3f} ratio={per_check / anchor:.1f}")


if __name__ == "__main__":
    main()
