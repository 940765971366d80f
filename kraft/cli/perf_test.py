"""``kraft producer-perf-test`` and ``kraft consumer-perf-test``: Kafka's ProducerPerformance
and ConsumerPerformance over confluent-kafka, with their flags and output lines (a window
line every 5 s and the final line with percentiles; the consumer's CSV header and row). Load
generators for trying a cluster; ``bench/`` holds the measured benchmarks."""

from __future__ import annotations

import sys
import time
from datetime import datetime

from kraft.cli.kafka_tool_args import (_SILENT, ToolError, add_connection_args, client_config, parse_key_values,
                                       read_properties)

WINDOW_S = 5.0
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def window_line(count, seconds, nbytes, latencies) -> str:
    rate = count / seconds if seconds > 0 else 0.0
    mb = nbytes / 1024 / 1024 / seconds if seconds > 0 else 0.0
    avg = sum(latencies) / len(latencies) if latencies else 0.0
    return (f"{count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), {avg:.1f} ms avg latency, "
            f"{max(latencies, default=0):.1f} ms max latency.")


def final_line(count, seconds, nbytes, latencies) -> str:
    lat = sorted(latencies)
    pct = [int(lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else 0 for q in (0.5, 0.95, 0.99, 0.999)]
    rate = count / seconds if seconds > 0 else 0.0
    mb = nbytes / 1024 / 1024 / seconds if seconds > 0 else 0.0
    avg = sum(lat) / len(lat) if lat else 0.0
    return (f"{count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{max(lat, default=0):.2f} ms max latency, {pct[0]} ms 50th, {pct[1]} ms 95th, {pct[2]} ms 99th, "
            f"{pct[3]} ms 99.9th.")


def _producer_run(args) -> int:
    from confluent_kafka import KafkaException, Producer
    if args.record_size is None and not args.payload_file:
        raise ToolError("Missing required argument: --record-size or --payload-file")
    props = {**read_properties(args.producer_config), **parse_key_values(args.producer_props, "--producer-props")}
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    if "bootstrap.servers" not in props:
        raise ToolError("give bootstrap.servers in --producer-props, --producer.config or --bootstrap-server")
    payloads = [bytes(120 - (i % 26) for i in range(args.record_size))] if args.record_size else None
    if args.payload_file:
        with open(args.payload_file, "rb") as f:
            delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
            payloads = [line for line in f.read().split(delimiter) if line]
        if not payloads:
            raise ToolError(f"{args.payload_file}: no payloads")
    try:
        producer = Producer({"logger": _SILENT, **props})
    except KafkaException as exc:
        raise ToolError(f"producer configuration: {exc.args[0].str() if exc.args else exc}") from None
    total = {"n": 0, "bytes": 0, "lat": [], "failed": None}
    window = {"n": 0, "bytes": 0, "lat": [], "start": time.monotonic()}

    def delivered(err, msg, sent=None):
        if err is not None:
            total["failed"] = err
            return
        ms = (time.monotonic() - sent) * 1000
        for d in (total, window):
            d["n"] += 1
            d["bytes"] += len(msg.value())
            d["lat"].append(ms)

    start = time.monotonic()
    for i in range(args.num_records):
        value = payloads[i % len(payloads)]
        sent = time.monotonic()
        while True:
            try:
                producer.produce(args.topic, value, on_delivery=lambda e, m, s=sent: delivered(e, m, s))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        if args.throughput > 0:  # Kafka's ThroughputThrottler: sleep when ahead of the target
            ahead = (i + 1) / args.throughput - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        if time.monotonic() - window["start"] >= WINDOW_S:
            print(window_line(window["n"], time.monotonic() - window["start"], window["bytes"], window["lat"]))
            window.update(n=0, bytes=0, lat=[], start=time.monotonic())
        if total["failed"] is not None:
            break
    producer.flush(60)
    if total["failed"] is not None:
        raise ToolError(f"{total['failed'].name()}: {total['failed'].str()}")
    print(final_line(total["n"], time.monotonic() - start, total["bytes"], total["lat"]))
    return 0


def consumer_row(start_ms, end_ms, nbytes, count, fetch_ms, fmt="%Y-%m-%d %H:%M:%S:%f") -> str:
    def ts(ms):
        return datetime.fromtimestamp(ms / 1000).strftime(fmt)[:-3]  # milliseconds, as Kafka's SSS
    secs = max(end_ms - start_ms, 1) / 1000
    fetch_secs = max(fetch_ms, 1) / 1000
    mb = nbytes / 1024 / 1024
    return (f"{ts(start_ms)}, {ts(end_ms)}, {mb:.4f}, {mb / secs:.4f}, {count}, {count / secs:.4f}, 0, "
            f"{int(fetch_ms)}, {mb / fetch_secs:.4f}, {count / fetch_secs:.4f}")


def _consumer_run(args) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
    extra = {"group.id": args.group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
             **read_properties(args.consumer_config)}
    try:
        consumer = Consumer(client_config(args, extra))
    except KafkaException as exc:
        raise ToolError(f"consumer configuration: {exc.args[0].str() if exc.args else exc}") from None
    count = nbytes = 0
    start_ms = time.time() * 1000
    try:
        md = consumer.list_topics(args.topic, timeout=30)
        topic = md.topics.get(args.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise ToolError(f"Unknown topic: {args.topic}")
        consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in sorted(topic.partitions)])
        fetch_start = time.monotonic()
        last = time.monotonic()
        while count < args.messages:
            msgs = consumer.consume(min(10000, args.messages - count), timeout=0.2)
            for m in msgs:
                if m.error():
                    continue
                count += 1
                nbytes += len(m.value() or b"")
            if msgs:
                last = time.monotonic()
            elif (time.monotonic() - last) * 1000 > args.timeout:
                print(f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms)"
                      " exceeded. You can use the --timeout option to increase the timeout.", file=sys.stderr)
                break
        fetch_ms = (time.monotonic() - fetch_start) * 1000
    finally:
        consumer.close()
    end_ms = time.time() * 1000
    if not args.hide_header:
        print(CONSUMER_HEADER)
    print(consumer_row(start_ms, end_ms, nbytes, count, fetch_ms))
    return 0


def register(sub) -> None:
    p = sub.add_parser("producer-perf-test", help="a load of records and their latency (kafka-producer-perf-test.sh)")
    p.add_argument("--topic", required=True, help="the topic to write to")
    p.add_argument("--num-records", type=int, required=True, help="how many records to send")
    p.add_argument("--record-size", type=int, help="bytes per record (or --payload-file)")
    p.add_argument("--payload-file", help="file of payloads, one per delimiter, sent in turn")
    p.add_argument("--payload-delimiter", default=r"\n",
                   help="what separates payloads in --payload-file (backslash escapes read as in Kafka)")
    p.add_argument("--throughput", type=float, required=True, help="records per second at most; -1: no limit")
    p.add_argument("--producer-props", nargs="+", metavar="KEY=VALUE", help="producer properties")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="producer properties file")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the brokers (or bootstrap.servers in the props)")
    p.set_defaults(func=_producer_run)

    p = sub.add_parser("consumer-perf-test", help="read a load of records (kafka-consumer-perf-test.sh)")
    add_connection_args(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--messages", type=int, required=True, help="how many records to read")
    p.add_argument("--group", default="perf-consumer-1", help="the consumer's group.id (partitions are assigned)")
    p.add_argument("--timeout", type=int, default=10000, help="ms without a record before giving up")
    p.add_argument("--hide-header", action="store_true", help="print only the values line")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="consumer properties file")
    p.set_defaults(func=_consumer_run)
