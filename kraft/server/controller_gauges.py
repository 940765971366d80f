"""The quorum controller's gauges on a node's metrics (a subset of Kafka's), its request queue's
and the Raft leader's backlog, and ``ImageStats``: counts and a digest of a committed image.

A /metrics scrape must not hold the loop: image stats are computed per ``TopicImage`` once
(images share untouched topics) and, when many partitions changed since the last scrape (a
fence touches every topic of a million partitions), on a worker thread over the immutable
image, at most one computation per ``WORKER_INTERVAL_S`` and never more than ``WORKER_DUTY`` of
the time, while those gauges keep their previous
values; ``kraft_controller_image_stats_offset`` says which committed offset they describe
(topic, partition and broker counts are always current).
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor

from kraft.server.metrics import MS_BUCKETS, Gauge, Histogram, HistogramFamily

#: Partitions of changed topics a scrape recomputes inline; past it, on the worker thread.
INLINE_PARTITIONS = 50_000
#: At most one worker computation starts per this many seconds: after a million partitions
#: changed, each costs seconds of CPU that the node's replication needs too (scrapes every
#: second during a fence took half of every node's CPU).
WORKER_INTERVAL_S = 10.0
#: ... and never more than this share of the time: a computation that took D seconds is not
#: followed by another for D / WORKER_DUTY. A million-partition recompute under load takes
#: seconds; at a fixed 10 s it still held the GIL ~40% of a fence of 100,000 leaders on every
#: node (py-spy, bench_controller_scale.py --py-spy), slowing the fence it was describing.
WORKER_DUTY = 0.1


def queue_gauges(metrics, queue, core) -> None:
    """The controller queue's and the Raft leader's backlog gauges, refreshed at render."""
    size = Gauge("kraft_controller_request_queue_size", "Write requests waiting in the controller's queue")
    timed_out = Gauge("kraft_controller_requests_timed_out", "Write requests answered REQUEST_TIMED_OUT "
                      "without running (their timeout passed while the queue waited for the log)")
    records = Gauge("kraft_raft_uncommitted_records", "Leader: records appended or accumulated, not committed")
    peak = Gauge("kraft_raft_uncommitted_records_max", "Leader: the most uncommitted records seen when admitting "
                 "controller work (since the start)")
    nbytes = Gauge("kraft_raft_uncommitted_bytes", "Leader: bytes of this epoch appended or accumulated, "
                   "not committed")
    metrics.controller_request_queue_size = size
    metrics.controller_requests_timed_out = timed_out
    metrics.raft_uncommitted_records = records
    metrics.raft_uncommitted_bytes = nbytes
    metrics.raft_uncommitted_records_max = peak

    def refresh():
        size.set(len(queue))
        peak.set(queue.peak_backlog)
        timed_out.set(queue.timed_out)
        r, b = core.uncommitted()
        records.set(r)
        nbytes.set(b)
    metrics.on_render(refresh)


def controller_gauges(metrics, controller: QuorumController) -> None:
    """Kafka's controller gauges (a subset) on the node's metrics, refreshed at render."""
    g = {
        "active": Gauge("kraft_controller_active_controller_count", "1 on the active controller"),
        "topics": Gauge("kraft_controller_global_topic_count", "Topics in the committed image"),
        "partitions": Gauge("kraft_controller_global_partition_count", "Partitions in the committed image"),
        "offline": Gauge("kraft_controller_offline_partitions_count", "Partitions without a leader"),
        "fenced_leaders": Gauge("kraft_controller_partitions_led_by_fenced_brokers",
                                "Partitions whose leader is fenced or unregistered (must be 0)"),
        "imbalance": Gauge("kraft_controller_preferred_replica_imbalance_count",
                           "Partitions not led by their first replica"),
        "active_brokers": Gauge("kraft_controller_active_broker_count", "Registered unfenced brokers"),
        "fenced_brokers": Gauge("kraft_controller_fenced_broker_count", "Registered fenced brokers"),
        "errors": Gauge("kraft_controller_metadata_error_count", "Committed records that are not metadata "
                        "records or did not fit the image"),
        "applied": Gauge("kraft_controller_last_applied_offset", "Next offset the image will apply"),
        "applied_record": Gauge("kraft_controller_last_applied_record_offset",
                                "Offset of the last record applied to the committed image"),
        "applied_ts": Gauge("kraft_controller_last_applied_record_timestamp",
                            "Append time (ms since the epoch) of the last batch applied"),
        "applied_lag": Gauge("kraft_controller_last_applied_record_lag_ms",
                             "Now minus the append time of the last batch applied (ms)"),
        "digest": Gauge("kraft_controller_image_digest", "48-bit digest of the committed image's brokers, "
                        "topics and partitions (equal on every controller at the same offset)"),
        "stats_offset": Gauge("kraft_controller_image_stats_offset", "The committed offset the offline, imbalance, "
                              "broker and digest gauges describe (they may trail a large change by a scrape)"),
    }
    for name, gauge in g.items():
        setattr(metrics, f"controller_{name}", gauge)
    commit_latency = Histogram("kraft_controller_metadata_commit_latency_ms",
                               "Active controller: append of its batch to commit (ms)", MS_BUCKETS)
    to_commit = HistogramFamily("kraft_controller_apply_append_to_commit_ms", "Per record type: batch append "
                                "(leader's timestamp) to this node seeing it committed (ms), weighted by records",
                                "record_type")
    to_applied = HistogramFamily("kraft_controller_apply_commit_to_applied_ms", "Per record type: this node seeing "
                                 "a batch committed to its image holding it (ms), weighted by records", "record_type")
    metrics.controller_metadata_commit_latency = commit_latency
    metrics.controller_apply_append_to_commit = to_commit
    metrics.controller_apply_commit_to_applied = to_applied

    def observe(counts, append_ms, commit_ms, applied_ms) -> None:
        # Weighted by records: each record of a batch waited as long as its batch.
        commit = max(0.0, commit_ms - append_ms)
        applied = max(0.0, applied_ms - commit_ms)
        if controller.active:
            commit_latency.observe(commit)
        for name, n in counts.items():
            to_commit.labels(name).observe(commit, n)
            to_applied.labels(name).observe(applied, n)
    controller.clock = lambda: time.time() * 1000.0
    controller.apply_observer = observe
    stats_of = ImageStats()
    worker = ThreadPoolExecutor(1, thread_name_prefix="image-stats")
    # The image and offset the gauges describe, and whether the worker is computing (only one
    # thread uses stats_of at a time: while the worker runs, scrapes show the last results).
    state = {"image": None, "offset": -1, "stats": None, "busy": False, "next_start": 0.0}

    def computed(image, offset, started, fut) -> None:
        if fut.exception() is None:
            state.update(image=image, offset=offset, stats=fut.result())
        cost = time.monotonic() - started
        state["next_start"] = started + max(WORKER_INTERVAL_S, cost / WORKER_DUTY)
        state["busy"] = False

    def refresh():
        image, offset = controller.image, controller.next_offset
        if not state["busy"] and state["image"] is not image:
            if stats_of.pending_partitions(image) <= INLINE_PARTITIONS:
                state.update(image=image, offset=offset, stats=stats_of(image))
            elif time.monotonic() >= state["next_start"]:
                started = time.monotonic()
                state["busy"] = True
                worker.submit(stats_of, image).add_done_callback(lambda f: computed(image, offset, started, f))
        g["active"].set(1 if controller.active else 0)
        # Counts of topics, partitions and brokers are cheap (sums over topics and brokers):
        # always of the current image.
        g["topics"].set(len(image.topics.by_id))
        g["partitions"].set(sum(len(t.partitions) for t in image.topics.by_id.values()))
        brokers = image.cluster.brokers.values()
        g["fenced_brokers"].set(sum(1 for b in brokers if b.fenced))
        g["active_brokers"].set(sum(1 for b in brokers if not b.fenced))
        stats = state["stats"]
        if stats is not None:
            for k in ("offline", "fenced_leaders", "imbalance", "digest"):
                g[k].set(stats[k])
            g["stats_offset"].set(state["offset"])
        g["errors"].set(controller.metadata_errors)
        g["applied"].set(controller.next_offset)
        g["applied_record"].set(controller.next_offset - 1)
        ts = controller.last_applied_timestamp
        g["applied_ts"].set(ts)
        g["applied_lag"].set(max(0, int(time.time() * 1000) - ts) if ts >= 0 else 0)
    metrics.on_render(refresh)


class ImageStats:
    """``image_stats`` for successive images of one node: each topic's share is computed once
    per ``TopicImage`` (images share untouched topics, so a new image costs only what changed;
    a million partitions walked per /metrics scrape stalled the loop for seconds)."""

    def __init__(self):
        self._topics: dict[int, tuple] = {}  # id(TopicImage) -> (TopicImage, its share)

    def pending_partitions(self, image) -> int:
        """Partitions of the topics a call for ``image`` would compute afresh."""
        cache = self._topics
        n = 0
        for t in image.topics.by_id.values():
            hit = cache.get(id(t))
            if hit is None or hit[0] is not t:
                n += len(t.partitions)
        return n

    def __call__(self, image) -> dict:
        brokers = image.cluster.brokers
        h = hashlib.blake2b(digest_size=6)
        for b in sorted(brokers.values(), key=lambda b: b.id):
            h.update(f"b{b.id}:{b.epoch}:{int(b.fenced)}:{int(b.in_controlled_shutdown)};".encode())
        partitions = offline = imbalance = 0
        leaders: dict[int, int] = {}
        cache, seen = self._topics, {}
        by_name = image.topics.by_name
        for name in sorted(by_name):
            t = by_name[name]
            hit = cache.get(id(t))
            share = hit[1] if hit is not None and hit[0] is t else _topic_share(t)
            seen[id(t)] = (t, share)
            digest, n, off, imb, led = share
            h.update(digest)
            partitions += n
            offline += off
            imbalance += imb
            for b, k in led.items():
                leaders[b] = leaders.get(b, 0) + k
        self._topics = seen  # (topics no longer in the image are forgotten)
        fenced_leaders = sum(k for b, k in leaders.items() if b not in brokers or brokers[b].fenced)
        return {"topics": len(image.topics.by_id), "partitions": partitions, "offline": offline,
                "fenced_leaders": fenced_leaders, "imbalance": imbalance,
                "active_brokers": sum(1 for b in brokers.values() if not b.fenced),
                "fenced_brokers": sum(1 for b in brokers.values() if b.fenced),
                "digest": int.from_bytes(h.digest(), "big")}


def _topic_share(t) -> tuple:
    """(digest, partitions, offline, not led by their first replica, leader id -> partitions led).
    Partitions are grouped by registration (a topic's hundred partitions share a few dozen):
    each distinct registration is formatted once, and the digest covers it with the ids of the
    partitions that have it, in a canonical order (equal images, equal digests, whether or not
    equal registrations are one object on this node)."""
    groups: dict[int, tuple] = {}
    for pid, p in t.partitions.items():
        g = groups.get(id(p))
        if g is None:
            g = groups[id(p)] = (p, [])
        g[1].append(pid)
    by_text: dict[str, tuple] = {}
    for p, pids in groups.values():
        text = f"{p.replicas}:{p.isr}:{p.leader}:{p.leader_epoch}:{p.partition_epoch}"
        hit = by_text.get(text)
        if hit is None:
            by_text[text] = (p, pids)
        else:
            hit[1].extend(pids)
    h = hashlib.blake2b(digest_size=6)
    h.update(f"t{t.name}:{t.id};".encode())
    offline = imbalance = 0
    led: dict[int, int] = {}
    for text in sorted(by_text):
        p, pids = by_text[text]
        pids.sort()
        h.update(f"{text}={pids};".encode())
        n = len(pids)
        if p.leader == -1:
            offline += n
        else:
            led[p.leader] = led.get(p.leader, 0) + n
            if p.replicas and p.replicas[0] != p.leader:
                imbalance += n
    return h.digest(), len(t.partitions), offline, imbalance, led


def image_stats(image) -> dict:
    """Counts and a digest of ``image``'s brokers, topics and partitions (equal images, equal
    digests: compared across controllers at the same offset)."""
    return ImageStats()(image)
