"""The broker role: partition logs in Kafka's directory layout, client request handlers
(Produce, Fetch, ListOffsets, Metadata, ...) over a ``MetadataImage``, the broker lifecycle
(registration, heartbeats, fencing) and, later, replication. No sockets: the server layer does I/O."""
