"""SimulatedNetwork: message delivery with drops, delays, duplicates, reordering and
partitions, on the simulator's event queue.

Links are directed. A message is checked against the partition when it is sent and again
when it would be delivered (a cut also kills what is in flight). Without ``reorder`` each
link delivers in send order (like a TCP connection); with it, each message gets its own
random delay. All randomness comes from the ``random.Random`` handed in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass
class NetworkFaults:
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 5
    reorder: bool = False

    @staticmethod
    def random(rng: random.Random) -> "NetworkFaults":
        return NetworkFaults(
            drop_rate=rng.choice([0.0, 0.0, 0.01, 0.05, 0.1]),
            duplicate_rate=rng.choice([0.0, 0.0, 0.02, 0.05]),
            min_delay_ms=rng.randint(0, 3),
            max_delay_ms=rng.randint(4, 30),
            reorder=rng.random() < 0.5,
        )


class SimulatedNetwork:
    def __init__(self, queue, rng: random.Random, faults: NetworkFaults | None = None):
        self.queue = queue
        self.rng = rng
        self.faults = faults or NetworkFaults()
        self.blocked: set[tuple[int, int]] = set()
        self._link_last: dict[tuple[int, int], int] = {}
        self.sent = 0
        self.dropped = 0

    # --- partitions --------------------------------------------------------------------
    def heal(self) -> None:
        self.blocked.clear()

    def cut(self, a: int, b: int) -> None:
        self.blocked.add((a, b))
        self.blocked.add((b, a))

    def isolate(self, node: int, all_nodes) -> None:
        for other in all_nodes:
            if other != node:
                self.cut(node, other)

    def split(self, group_a, group_b) -> None:
        for a in group_a:
            for b in group_b:
                self.cut(a, b)

    def ring(self, nodes) -> None:
        """Each node reaches only its two neighbours in ``nodes`` order."""
        nodes = list(nodes)
        n = len(nodes)
        for i, a in enumerate(nodes):
            for j, b in enumerate(nodes):
                if i != j and (j - i) % n not in (1, n - 1):
                    self.blocked.add((a, b))

    def can_reach(self, a: int, b: int) -> bool:
        return (a, b) not in self.blocked

    # --- delivery ------------------------------------------------------------------------
    def send(self, src: int, dst: int, event: tuple) -> None:
        """Schedule ``event`` for delivery to ``dst`` (zero, one or two copies)."""
        self.sent += 1
        f = self.faults
        if (src, dst) in self.blocked or (f.drop_rate and self.rng.random() < f.drop_rate):
            self.dropped += 1
            return
        copies = 2 if f.duplicate_rate and self.rng.random() < f.duplicate_rate else 1
        for _ in range(copies):
            t = self.queue.now + self.rng.randint(f.min_delay_ms, f.max_delay_ms)
            if not f.reorder:
                link = (src, dst)
                t = max(t, self._link_last.get(link, 0))
                self._link_last[link] = t
            self.queue.at(t, ("deliver", src, dst, event))
