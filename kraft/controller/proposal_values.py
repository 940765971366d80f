"""Framed metadata record values on their way into the log: cut into proposals (Raft batches)
of bounded size, and counted by record type for the apply-latency observer. Pure: values only."""

from __future__ import annotations

import collections

from kraft.metadata.records import METADATA_RECORDS

#: Bytes per proposal, well under the 8 MiB Raft batch limit.
MAX_BYTES_PER_PROPOSAL = 4 * 1024 * 1024

_RECORD_NAMES = {key: cls.__name__ for key, cls in METADATA_RECORDS.items()}


def count_types(values) -> dict:
    """Record type name -> count, from the api keys of framed values (Counter over ``map`` runs in
    C: no per-record Python work)."""
    names = _RECORD_NAMES
    return {names.get(k, "?"): n for k, n in collections.Counter(map(_api_key, values)).items()}


def _api_key(value) -> int:
    return value[1] if len(value) > 1 else -1


def chunks(values: list, max_records: int) -> list[list]:
    """``values`` cut into proposals of at most ``max_records`` records and about
    ``MAX_BYTES_PER_PROPOSAL`` bytes (slices by count first: metadata records are small, so
    the byte limit rarely cuts, and summing a slice's sizes runs in C)."""
    out = []
    for i in range(0, len(values), max_records):
        part = values[i:i + max_records]
        if sum(map(len, part)) <= MAX_BYTES_PER_PROPOSAL:
            out.append(part)
            continue
        cur, size = [], 0
        for v in part:
            if cur and size + len(v) > MAX_BYTES_PER_PROPOSAL:
                out.append(cur)
                cur, size = [], 0
            cur.append(v)
            size += len(v)
        if cur:
            out.append(cur)
    return out
