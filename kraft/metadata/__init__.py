"""KIP-631 cluster metadata: Kafka's metadata records and the image they build.

Layout:

* ``records``    the record schemas (``TopicRecord``, ``PartitionRecord``...), registered by api key
* ``serde``      Kafka's record framing: ``encode_record`` / ``decode_record``
* ``json_form``  the JSON kafka-dump-log prints: ``record_json`` / ``record_from_json``
* ``image``      the immutable ``MetadataImage`` and its parts
* ``delta``      ``MetadataDelta``: ``replay(record)`` then ``apply()`` -> next image
* ``image_records``      the inverse of replay: an image as the records of a snapshot
* ``snapshot_image``     an image as snapshot batches, and snapshot (+ log) batches back into an image
* ``batch_codec``        the hot records a batch at a time (native ``_native/_metadata.pyx`` or pure)
* ``snapshot_schedule``  when to snapshot: Kafka's triggers, voters staggered by turns

This package must not import asyncio or sockets, nor any kraft layer above protocol.
"""

from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import EMPTY_IMAGE, MetadataImage
from kraft.metadata.json_form import record_from_json, record_json, record_to_json
from kraft.metadata.partition import PartitionRegistration
from kraft.metadata.records import *  # noqa: F401,F403
from kraft.metadata.records import __all__ as _record_names
from kraft.metadata.serde import RecordAndVersion, decode_record, encode_record, encode_record_into

__all__ = ["EMPTY_IMAGE", "MetadataDelta", "MetadataImage", "PartitionRegistration", "RecordAndVersion",
           "decode_record", "encode_record", "encode_record_into", "record_from_json", "record_json",
           "record_to_json"] + list(_record_names)
