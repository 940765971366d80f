"""The KIP-631 quorum controller: request handlers that turn requests into metadata records,
the active controller's uncommitted view ahead of the committed image, broker leases and
fencing, partition leadership and ISR. Sans-I/O: time comes in as ``now_ms``; the server
layer proposes the records and sends the responses once they commit."""
