"""``kraft pipeline audit|traffic``: the Spark jobs of ``kraft.spark.jobs`` from the
command line, on ``local[*]`` by default or any Spark master (``--master spark://HOST:7077``).

Parsing, the SparkSession and the exit code only; the work is in ``kraft.spark.jobs``.
pyspark is imported when a job runs, so ``kraft --help`` works without it.
"""

from __future__ import annotations

import sys
import time


def _session(args):
    import kraft.spark

    conf = {"spark.ui.showConsoleProgress": "true"}
    for item in args.conf or ():
        key, _, value = item.partition("=")
        conf[key] = value
    spark = kraft.spark.local_session(args.master, f"kraft-pipeline-{args.job}", conf)
    spark.sparkContext.setLogLevel("WARN" if getattr(args, "verbose", False) else "ERROR")
    return spark


def _say(line: str) -> None:
    print(line, flush=True)


#: What a newcomer without the Spark extra is told instead of an ImportError traceback.
MISSING_SPARK = ("error: kraft pipeline needs pyspark (and Java 17+): pip install 'kraft[spark]' "
                 "(from a checkout: pip install -e '.[spark]')")


def _run(args) -> int:
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        print(MISSING_SPARK, file=sys.stderr)
        return 2
    from kraft.spark import jobs

    paths = ",".join(args.path)
    t0 = time.monotonic()
    spark = _session(args)
    try:
        _say(f"kraft pipeline {args.job} on {spark.sparkContext.master} (Spark {spark.version}) -> {args.out}")
        if args.job == "audit":
            result = jobs.run_audit(spark, paths, args.out, _say, args.node)
            status = 1 if result.divergent_at_or_below_hw else 0
        else:
            jobs.run_traffic(spark, paths, args.out, _say, args.bucket_seconds)
            status = 0
    finally:
        spark.stop()
    _say(f"done in {time.monotonic() - t0:.1f} s")
    if status:
        print("error: committed metadata records differ between nodes (see above)", file=sys.stderr)
    return status


def register(sub) -> None:
    p = sub.add_parser("pipeline", help="Spark jobs over metadata and partition logs (needs pyspark)")
    jobs = p.add_subparsers(dest="job", metavar="JOB", required=True)
    audit = jobs.add_parser("audit", help="cluster history and a cross-node consistency check from metadata logs")
    audit.add_argument("path", nargs="+", help="node log.dirs or __cluster_metadata-0 directories (globs allowed)")
    audit.add_argument("--node", help="labels for the nodes, comma-separated (default: directory names)")
    traffic = jobs.add_parser("traffic", help="records and bytes per topic/partition/time from partition logs")
    traffic.add_argument("path", nargs="+", help="log.dirs directories holding topic-N partition directories")
    traffic.add_argument("--bucket-seconds", type=int, default=60, help="width of the time buckets")
    for q in (audit, traffic):
        q.add_argument("--out", required=True, help="directory for the Parquet tables and report.html")
        q.add_argument("--master", default="local[*]", help="Spark master URL")
        q.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark configuration")
        q.set_defaults(func=_run)
