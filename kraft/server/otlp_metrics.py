"""The part of OpenTelemetry's OTLP ``MetricsData`` protobuf that KIP-714 clients push, decoded
without a protobuf library: every gauge and sum data point as (metric name, attributes, value),
the resource's attributes apart. Histograms and summaries are skipped (librdkafka sends none).

Field numbers from opentelemetry/proto/metrics/v1/metrics.proto and common/v1/common.proto:
MetricsData.resource_metrics=1; ResourceMetrics.resource=1, .scope_metrics=2;
Resource.attributes=1; ScopeMetrics.metrics=2; Metric.name=1, .gauge=5, .sum=7;
Gauge/Sum.data_points=1; NumberDataPoint.as_double=4 (fixed64), .as_int=6 (sfixed64),
.attributes=7; KeyValue.key=1, .value=2; AnyValue.string_value=1, bool_value=2,
int_value=3, double_value=4. Malformed input raises ValueError.
"""

from __future__ import annotations

import struct

_D = struct.Struct("<d")
_Q = struct.Struct("<q")


def _varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf):
    """(field number, wire type, value) of one message: ints for varint/fixed, memoryviews for
    length-delimited fields."""
    buf = memoryview(buf)
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise ValueError("truncated fixed64")
            value, pos = bytes(buf[pos:pos + 8]), pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise ValueError("truncated field")
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            if pos + 4 > end:
                raise ValueError("truncated fixed32")
            value, pos = bytes(buf[pos:pos + 4]), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _any_value(buf):
    for n, w, v in fields(buf):
        if n == 1 and w == 2:
            return bytes(v).decode("utf-8", "replace")
        if n == 2 and w == 0:
            return bool(v)
        if n == 3 and w == 0:
            return v - (1 << 64) if v >= 1 << 63 else v
        if n == 4 and w == 1:
            return _D.unpack(v)[0]
    return None


def _attributes(items) -> dict:
    out = {}
    for buf in items:
        key, value = None, None
        for n, w, v in fields(buf):
            if n == 1 and w == 2:
                key = bytes(v).decode("utf-8", "replace")
            elif n == 2 and w == 2:
                value = _any_value(v)
        if key is not None:
            out[key] = value
    return out


def _points(buf):
    for n, w, v in fields(buf):
        if n != 1 or w != 2:
            continue
        attrs, value = [], None
        for pn, pw, pv in fields(v):
            if pn == 7 and pw == 2:
                attrs.append(pv)
            elif pn == 4 and pw == 1:
                value = _D.unpack(pv)[0]
            elif pn == 6 and pw == 1:
                value = _Q.unpack(pv)[0]
        if value is not None:
            yield _attributes(attrs), value


def decode_metrics(buf) -> tuple[dict, list]:
    """(resource attributes, [(metric name, attributes, value)]) of a MetricsData message."""
    resource, points = {}, []
    for n, w, rm in fields(buf):
        if n != 1 or w != 2:
            continue
        for rn, rw, rv in fields(rm):
            if rn == 1 and rw == 2:
                resource.update(_attributes(v for an, aw, v in fields(rv) if an == 1 and aw == 2))
            elif rn == 2 and rw == 2:
                for sn, sw, sv in fields(rv):
                    if sn != 2 or sw != 2:
                        continue
                    name, data = None, []
                    for mn, mw, mv in fields(sv):
                        if mn == 1 and mw == 2:
                            name = bytes(mv).decode("utf-8", "replace")
                        elif mn in (5, 7) and mw == 2:
                            data.append(mv)
                    if name is not None:
                        for d in data:
                            points += [(name, attrs, value) for attrs, value in _points(d)]
    return resource, points
