"""KIP-631 cluster metadata: Kafka's metadata records and the image they build.

Layout:

* ``records``    the record schemas (``TopicRecord``, ``PartitionRecord``...), registered by api key
* ``serde``      Kafka's record framing: ``encode_record`` / ``decode_record``
* ``json_form``  the JSON kafka-dump-log prints: ``record_json`` / ``record_from_json``
* ``image``      the immutable ``MetadataImage`` and its parts
* ``delta``      ``MetadataDelta``: ``replay(record)`` then ``apply()`` -> next image

This package must not import asyncio or sockets, nor any kraft layer above protocol.
"""
