"""PySpark data sources over kraft's (and Kafka's) on-disk files, for offline analysis of
many nodes' metadata and partition logs.

    import kraft.spark
    spark = kraft.spark.local_session()          # or any SparkSession, then:
    kraft.spark.register(spark)
    spark.read.format("kraft-metadata").load("/data/node*/")      # see metadata_source
    spark.read.format("kraft-log").load("/data/node1").where("topic = 'orders'")   # log_source

Reads files only (never a running node's sockets): this package may import log, records,
metadata, types and errors, never server. pyspark and pyarrow are imported lazily, so
``import kraft.spark`` works without them.
"""

from __future__ import annotations

import os
import sys

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark) -> None:
    """Register ``kraft-metadata`` and ``kraft-log`` with ``spark`` and enable Python filter
    pushdown (PySpark >= 4.1 refuses a reader with ``pushFilters`` while it is off)."""
    from kraft.spark.log_source import KraftLogDataSource
    from kraft.spark.metadata_source import KraftMetadataDataSource

    spark.dataSource.register(KraftMetadataDataSource)
    spark.dataSource.register(KraftLogDataSource)
    try:
        spark.conf.set(PUSHDOWN_CONF, "true")
    except Exception:  # noqa: BLE001 - PySpark 4.0 has no such conf: options prune instead
        pass


def local_session(master: str = "local[2]", app_name: str = "kraft", conf: dict | None = None):
    """A SparkSession whose Python workers run this interpreter and import this kraft
    (``PYTHONPATH`` gets the directory holding the ``kraft`` package), with the data sources
    registered. Must run before any other SparkSession is created in the process."""
    from pyspark.sql import SparkSession

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
               .config(PUSHDOWN_CONF, "true"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


__all__ = ["PUSHDOWN_CONF", "local_session", "register"]
