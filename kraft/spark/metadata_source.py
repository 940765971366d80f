"""``spark.read.format("kraft-metadata").load(PATH)``: every record of one or more nodes'
metadata logs (``__cluster_metadata-0``), one row each, named and decoded as Kafka does.

PATH is a node's ``log.dirs`` directory or its ``__cluster_metadata-0`` directory, a glob,
or a comma list of them. By default a node's rows are its latest snapshot plus the log
after it (the state a restarting node would load); option ``history=true`` reads every
segment and no snapshot. Option ``node`` labels the rows (one label, or one per
directory); without it the node's directory name is used. Column ``source`` says where a
row came from (``log`` or ``snapshot``); a snapshot's rows carry its own offsets, from 0. One input partition per file;
option ``mode`` as for ``kraft-log``.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader

from kraft.spark import layout
from kraft.spark.log_source import SlicePartition, read_mode
from kraft.spark.metadata_rows import METADATA_DDL, MetadataRows
from kraft.spark.segment_reader import CorruptSliceError, iter_decoded

#: Rows per Arrow batch handed to Spark.
ROWS_PER_BATCH = 8192


class KraftMetadataReader(DataSourceReader):
    def __init__(self, options):
        self.directories = layout.expand_paths(options.get("path", ""))
        self.nodes = layout.node_labels(self.directories, options.get("node"))
        self.history = str(options.get("history", "false")).lower() == "true"
        self.mode = read_mode(options)

    def partitions(self):
        slices = []
        for directory, node in zip(self.directories, self.nodes):
            slices += layout.plan_metadata(directory, node, self.history)
        return [SlicePartition([s]) for s in slices]

    def read(self, partition):
        for fs in partition.value:
            yield from read_metadata_slice(fs, self.mode == "FAILFAST")


def read_metadata_slice(fs, failfast: bool):
    rows = MetadataRows(fs.node, fs.kind, failfast)
    try:
        for batch, decoded in iter_decoded(fs):
            rows.add_batch(batch, decoded, fs.first_offset, fs.end_offset)
            if len(rows) >= ROWS_PER_BATCH:
                yield rows.take()
    except CorruptSliceError as exc:
        if failfast:
            raise
        rows.add_error(exc.last_good_offset + 1, str(exc))
    if len(rows):
        yield rows.take()


class KraftMetadataDataSource(DataSource):
    @classmethod
    def name(cls):
        return "kraft-metadata"

    def schema(self):
        return METADATA_DDL

    def reader(self, schema):
        return KraftMetadataReader(self.options)

    def streamReader(self, schema):
        from kraft.spark.stream_source import MetadataStreamReader

        return MetadataStreamReader(self.options)
