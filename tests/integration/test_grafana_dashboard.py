"""The Grafana dashboard shipped in ``packaging/grafana-dashboard.json`` only uses metrics a real
node exports: a one-node cluster with a topic, a produced record and a consumer group with a
committed offset is scraped, and every metric name in every panel query must have a ``# TYPE``
line and at least one sample. A renamed or dropped metric would leave a panel silently empty in
an operator's Grafana; this is where it shows instead. The file's own shape (what Grafana needs to
import it) is checked too."""

from __future__ import annotations

import json
import os
import re
import urllib.request

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for

from tests.integration.test_broker_cluster import QUIET, SETTINGS, all_see_all

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration
DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "grafana-dashboard.json")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def dashboard() -> dict:
    with open(DASHBOARD) as f:
        return json.load(f)


def metric_names(expr: str) -> set[str]:
    """The kraft series names an expression reads (a histogram's as ``<name>_bucket``)."""
    return set(re.findall(r"\bkraft_[a-z0-9_]+", expr))


def family(series: str, histograms: set[str]) -> str:
    """The metric a series belongs to: ``x_bucket`` of histogram ``x`` is ``x``; a gauge may
    itself end in ``_count`` (``..._broker_count``)."""
    for suffix in HISTOGRAM_SUFFIXES:
        if series.endswith(suffix) and series[: -len(suffix)] in histograms:
            return series[: -len(suffix)]
    return series


def test_the_dashboard_is_importable_and_every_series_has_a_legend():
    d = dashboard()
    assert d["uid"] and d["title"] and d["panels"]
    assert "datasource" in {v["name"] for v in d["templating"]["list"]}
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"panel {p['title']!r} overlaps another"
        cells |= mine
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["legendFormat"], (p["title"], t["expr"])  # a series without a legend is unreadable
            assert metric_names(t["expr"]), (p["title"], t["expr"])
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    overrides = {**SETTINGS, "group.initial.rebalance.delay.ms": "0", "kraft.group.lag.interval.ms": "300"}
    c = LocalCluster(str(tmp_path_factory.mktemp("dashboard")), 1, combined=True, overrides=overrides,
                     metrics=True).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"the broker did not register: {c.unexpected_exits()}"
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        for f in admin.create_topics([NewTopic("dash", 1, 1)]).values():
            f.result()
        p = Producer({"bootstrap.servers": c.broker_bootstrap, "acks": "all", **QUIET})
        p.produce("dash", value=b"v")
        assert p.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": c.broker_bootstrap, "group.id": "dash-group",
                             "enable.auto.commit": False, **QUIET})
        try:
            consumer.commit(offsets=[TopicPartition("dash", 0, 0)], asynchronous=False)

            def page():
                with urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_ports[1]}/metrics", timeout=5) as r:
                    return r.read().decode()
            # the coordinator's lag gauges appear on its next sampling round
            assert wait_for(lambda: 'group="dash-group"' in page(), 15)
            yield page()
        finally:
            consumer.close()
    finally:
        c.close()


def test_every_metric_the_dashboard_uses_is_exported_with_a_sample(scraped):
    typed = dict(re.findall(r"^# TYPE (\S+) (\S+)", scraped, re.M))
    histograms = {n for n, kind in typed.items() if kind == "histogram"}
    sampled = {m[1] for m in re.finditer(r"^([a-z0-9_]+)[{ ]", scraped, re.M)}
    series = set().union(*(metric_names(t["expr"]) for p in dashboard()["panels"] for t in p["targets"]))
    used = {family(s, histograms) for s in series}
    assert len(used) >= 30  # the panels cover the quorum, the controller, fetch, groups and connections
    assert used - set(typed) == set(), "the dashboard reads metrics no node exports"
    assert series - sampled == set(), "exported with a # TYPE line but no sample"
    # a histogram is only read through its buckets (a bare name would match nothing)
    assert {s for s in series if s in histograms} == set()
