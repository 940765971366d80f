"""kraft/server/metrics.py: histogram bucket and quantile math, the Prometheus text format
0.0.4 (HELP/TYPE, cumulative buckets, +Inf, _sum/_count, label syntax) and MetricsServer."""

from __future__ import annotations

import asyncio
import math
import re

import pytest

from kraft.server.metrics import LATENCY_BUCKETS, Counter, Gauge, Histogram, MetricsServer, NodeMetrics

from server_helpers import run

# --- histogram math ------------------------------------------------------------------------------


def test_observations_land_in_the_first_bucket_whose_bound_is_not_below_them():
    h = Histogram("h", "help", buckets=(1.0, 2.0, 5.0))
    for v in (0.0, 1.0, 1.0001, 2.0, 4.9, 5.0, 5.0001, 1e9):
        h.observe(v)
    assert h.counts == [2, 2, 2, 2]  # le=1: 0,1  le=2: 1.0001,2  le=5: 4.9,5  +Inf: 5.0001,1e9
    assert h.count == 8
    assert h.sum == pytest.approx(0 + 1 + 1.0001 + 2 + 4.9 + 5 + 5.0001 + 1e9)


def test_quantile_is_the_upper_bound_of_the_bucket_holding_the_rank():
    h = Histogram("h", "help", buckets=(1.0, 2.0, 5.0))
    assert math.isnan(h.quantile(0.5))  # empty
    for v in [0.5] * 50 + [1.5] * 40 + [3.0] * 9 + [10.0]:
        h.observe(v)
    assert h.quantile(0.5) == 1.0
    assert h.quantile(0.51) == 2.0
    assert h.quantile(0.9) == 2.0
    assert h.quantile(0.95) == 5.0
    assert h.quantile(0.99) == 5.0
    assert h.quantile(1.0) == math.inf  # the largest observation is above every bound


def test_latency_buckets_are_strictly_increasing():
    assert list(LATENCY_BUCKETS) == sorted(set(LATENCY_BUCKETS))


def test_quantile_is_exact_at_rank_boundaries():
    h = Histogram("h", "help", buckets=(1.0, 2.0))
    for v in [0.5] * 7 + [1.5] * 93:
        h.observe(v)
    assert h.quantile(0.07) == 1.0


def test_quantile_zero_is_the_bucket_of_the_smallest_observation():
    h = Histogram("h", "help", buckets=(1.0, 2.0, 3.0))
    h.observe(2.5)
    assert h.quantile(0.0) == 3.0


# --- text format ----------------------------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
_SAMPLE = re.compile(rf"^({_NAME})(\{{(?:{_LABEL})(?:,{_LABEL})*\}})? (\S+)$")
_LABELS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')


def _float(text: str) -> float:
    """Go's ParseFloat as Prometheus uses it (also +Inf, -Inf, NaN)."""
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    assert re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text), f"not a sample value: {text!r}"
    return float(text)


def parse_exposition(text: str) -> dict:
    """A strict reader of text format 0.0.4: {family: {"help", "type", "samples": [(name, labels, value)]}}."""
    assert text.endswith("\n"), "the exposition must end with a line feed"
    families: dict = {}
    current = None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"second HELP for {name}"
            families[name] = {"help": help_text, "type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name == current and families[name]["type"] is None and not families[name]["samples"], line
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            families[name]["type"] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"malformed sample line: {line!r}"
            name, labels, value = m.group(1), dict(_LABELS.findall(m.group(2) or "")), _float(m.group(3))
            fam = families[current]
            allowed = {current} | ({f"{current}_bucket", f"{current}_sum", f"{current}_count"}
                                   if fam["type"] == "histogram" else set())
            assert name in allowed, f"{name} inside family {current}"
            fam["samples"].append((name, labels, value))
    return families


def _check_histogram(fam: dict, name: str) -> None:
    buckets = [(s[1]["le"], s[2]) for s in fam["samples"] if s[0] == f"{name}_bucket"]
    bounds = [_float(le) for le, _ in buckets]
    assert bounds == sorted(bounds) and bounds[-1] == math.inf, "le bounds must increase and end with +Inf"
    counts = [c for _, c in buckets]
    assert counts == sorted(counts), "bucket counts must be cumulative"
    (count,) = [s[2] for s in fam["samples"] if s[0] == f"{name}_count"]
    assert counts[-1] == count
    assert len([s for s in fam["samples"] if s[0] == f"{name}_sum"]) == 1


def test_histogram_renders_cumulative_buckets_inf_sum_and_count():
    h = Histogram("lat_seconds", "Latency", buckets=(0.001, 0.01, 0.1))
    for v in (0.0005, 0.005, 0.005, 0.05, 5.0):
        h.observe(v)
    lines = h.render('{node_id="3"}')
    assert lines == [
        'lat_seconds_bucket{node_id="3",le="0.001"} 1',
        'lat_seconds_bucket{node_id="3",le="0.01"} 3',
        'lat_seconds_bucket{node_id="3",le="0.1"} 4',
        'lat_seconds_bucket{node_id="3",le="+Inf"} 5',
        f'lat_seconds_sum{{node_id="3"}} {h.sum}',
        'lat_seconds_count{node_id="3"} 5',
    ]
    assert h.render("")[0] == 'lat_seconds_bucket{le="0.001"} 1'  # no stray comma without labels


def test_counter_and_gauge_samples():
    c = Counter("things_total", "Things")
    c.inc()
    c.inc(4)
    g = Gauge("level", "Level")
    g.set(-1)
    assert c.render("") == ["things_total 5"]
    assert g.render('{a="b"}') == ['level{a="b"} -1']


def test_node_metrics_exposition_is_valid_text_format():
    m = NodeMetrics(node_id=2)
    m.commit_latency.observe(0.0003)
    m.commit_latency.observe(7.0)
    m.committed_records.inc(10)
    m.high_watermark.set(42)
    m.current_leader.set(-1)
    families = parse_exposition(m.render())
    assert len(families) == len(m.all())
    for name, fam in families.items():
        assert fam["type"] is not None and fam["help"], name
        assert all(s[1].get("node_id") == "2" for s in fam["samples"]), name
        if fam["type"] == "histogram":
            _check_histogram(fam, name)
        else:
            assert len(fam["samples"]) == 1
    assert families["kraft_committed_records_total"]["type"] == "counter"
    assert families["kraft_high_watermark"]["samples"][0][2] == 42
    assert families["kraft_current_leader"]["samples"][0][2] == -1
    lat = families["kraft_commit_latency_seconds"]["samples"]
    assert [s[2] for s in lat if s[0].endswith("_count")] == [2]
    assert [s[2] for s in lat if s[1].get("le") == "+Inf"] == [2]


def test_counter_names_end_in_total():
    for metric in NodeMetrics(1).all():
        assert (metric.kind == "counter") == metric.name.endswith("_total"), metric.name


# --- MetricsServer ------------------------------------------------------------------------------


async def _http(port: int, request: bytes) -> tuple[bytes, dict, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    writer.write_eof()
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *header_lines = head.split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(b":") for h in header_lines)}
    return status, headers, body


def _metrics_server_exchange(*requests: bytes):
    async def main():
        m = NodeMetrics(node_id=5)
        m.elections.inc(3)
        srv = MetricsServer(m, "127.0.0.1", 0)
        await srv.start()
        try:
            return [await _http(srv.port, r) for r in requests], m
        finally:
            await srv.close()
    return run(main())


def test_get_metrics_answers_200_with_the_exposition():
    [(status, headers, body)], m = _metrics_server_exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n")
    assert status.split(b" ", 1)[1] == b"200 OK"
    assert headers[b"content-type"].startswith(b"text/plain; version=0.0.4")
    assert int(headers[b"content-length"]) == len(body)
    assert body.decode() == m.render()
    assert parse_exposition(body.decode())["kraft_elections_total"]["samples"][0][2] == 3


@pytest.mark.parametrize("request_line", [
    b"GET / HTTP/1.0", b"GET /metricsx HTTP/1.0", b"GET /other/metrics HTTP/1.0", b"POST /metrics HTTP/1.0",
    b"garbage",
], ids=repr)
def test_anything_but_get_metrics_is_404(request_line):
    [(status, headers, body)], _ = _metrics_server_exchange(request_line + b"\r\n\r\n")
    assert status.split(b" ", 1)[1] == b"404 Not Found"
    assert int(headers[b"content-length"]) == len(body)


def test_query_string_is_ignored_and_the_server_keeps_serving_after_bad_clients():
    results, _ = _metrics_server_exchange(b"", b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n",
                                          b"GET /metrics HTTP/1.0\r\n\r\n")
    assert [r[0].split(b" ", 1)[1] for r in results] == [b"404 Not Found", b"200 OK", b"200 OK"]
