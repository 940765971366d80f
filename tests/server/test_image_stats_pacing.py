"""The image statistics worker never takes more than ``WORKER_DUTY`` of the time: after a
computation that took D seconds the next waits D / WORKER_DUTY (at least WORKER_INTERVAL_S).
A million-partition recompute takes seconds of GIL; paced only by a fixed 10 s it held ~40% of
every node during a 100,000-leader fence. Scrapes meanwhile keep the last figures."""

from __future__ import annotations

import threading
import types

from kraft.server import controller_gauges as cg
from kraft.server.metrics import NodeMetrics


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def time(self):
        return self.now


def test_a_slow_recompute_spaces_the_next_one_by_its_cost(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(cg, "time", clock)
    computed = []
    done = threading.Event()

    class SlowStats:
        def pending_partitions(self, image):
            return cg.INLINE_PARTITIONS + 1  # always the worker path

        def __call__(self, image):
            computed.append(image)
            clock.now += 4.0  # this computation took 4 s
            done.set()
            return {"offline": 0, "fenced_leaders": 0, "imbalance": 0, "digest": len(computed)}
    monkeypatch.setattr(cg, "ImageStats", SlowStats)
    image = types.SimpleNamespace(topics=types.SimpleNamespace(by_id={}), cluster=types.SimpleNamespace(brokers={}))
    controller = types.SimpleNamespace(image=image, next_offset=10, active=True, metadata_errors=0,
                                       last_applied_timestamp=-1)
    metrics = NodeMetrics(1)
    cg.controller_gauges(metrics, controller)

    def scrape_with_new_image():
        controller.image = types.SimpleNamespace(topics=image.topics, cluster=image.cluster)
        done.clear()
        metrics.render()
        return done.wait(2)

    assert scrape_with_new_image() and len(computed) == 1
    # 4 s of work at a 10% duty: nothing new for 40 s from its start, although 10 s passed
    for later in (10.0, 20.0, 39.0):
        clock.now = 1000.0 + later
        assert not scrape_with_new_image(), later
    assert len(computed) == 1
    clock.now = 1000.0 + 40.0
    assert scrape_with_new_image() and len(computed) == 2


def test_a_quick_recompute_still_waits_the_interval(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(cg, "time", clock)
    computed = []
    done = threading.Event()

    class QuickStats:
        def pending_partitions(self, image):
            return cg.INLINE_PARTITIONS + 1

        def __call__(self, image):
            computed.append(image)
            done.set()
            return {"offline": 0, "fenced_leaders": 0, "imbalance": 0, "digest": 0}
    monkeypatch.setattr(cg, "ImageStats", QuickStats)
    image = types.SimpleNamespace(topics=types.SimpleNamespace(by_id={}), cluster=types.SimpleNamespace(brokers={}))
    controller = types.SimpleNamespace(image=image, next_offset=1, active=True, metadata_errors=0,
                                       last_applied_timestamp=-1)
    metrics = NodeMetrics(1)
    cg.controller_gauges(metrics, controller)
    for at, expect in ((0.0, 1), (cg.WORKER_INTERVAL_S - 0.5, 1), (cg.WORKER_INTERVAL_S, 2)):
        clock.now = 1000.0 + at
        controller.image = types.SimpleNamespace(topics=image.topics, cluster=image.cluster)
        done.clear()
        metrics.render()
        done.wait(0.5 if len(computed) < expect else 0.05)
        assert len(computed) == expect, at
