"""Kafka's wire protocol for kraft: declarative message schemas, one codec, headers, framing.

Layout:

* ``schema``      the DSL: ``Field``, types (``INT32``, ``STRING``, ``Array(...)``...), ``Struct``
* ``codec``       compiles a schema into an encoder/decoder per version (cached)
* ``message``     ``Request``/``Response`` bases with ``encode``/``decode``; the registry
* ``messages/``   the schemas themselves, one module per API
* ``headers``     request/response headers and which version each API uses
* ``framing``     ``FrameDecoder``, ``decode_request``/``encode_response`` (server side),
                  ``encode_request``/``decode_response`` (client side)
* ``api_table``   the ApiVersions answer built from the registry
* ``primitives``  varints, uuids (and their base64 text form), length-prefixed values

Usage::

    from kraft.protocol import VoteRequest, decode_request, encode_response
    data = VoteRequest(cluster_id="x", topics=[...]).encode(2)
    header, request = decode_request(frame)

This package must not import asyncio or sockets, nor any kraft module except ``kraft.errors`` and
``kraft.records`` (whose varints are the one implementation).
"""

from kraft.protocol.api_keys import ApiKey
from kraft.protocol.api_table import api_versions_response, api_versions_table, unsupported_api_versions_response
from kraft.protocol.framing import (DEFAULT_MAX_FRAME_BYTES, FrameDecoder, decode_request, decode_response,
                                    encode_request, encode_response, encode_response_parts, peek_correlation_id,
                                    response_version)
from kraft.protocol.headers import RequestHeader, ResponseHeader, request_header_version, response_header_version
from kraft.protocol.message import (INT64_SENTINEL, REQUESTS, RESPONSES, EncodedBody, EncodedParts, Message, Request,
                                    Response, request_class, response_class, split_at_int64)
from kraft.protocol.messages import *  # noqa: F401,F403
from kraft.protocol.messages import __all__ as _message_names
from kraft.protocol.primitives import (METADATA_TOPIC_ID, ZERO_UUID, uuid_from_base64, uuid_from_longs,
                                       uuid_to_base64)
from kraft.protocol.schema import Field, Struct

__all__ = [
    "ApiKey", "DEFAULT_MAX_FRAME_BYTES", "INT64_SENTINEL", "EncodedBody", "EncodedParts", "Field", "FrameDecoder", "METADATA_TOPIC_ID", "Message",
    "REQUESTS", "RESPONSES", "Request", "RequestHeader", "Response", "ResponseHeader", "Struct", "ZERO_UUID",
    "api_versions_response", "api_versions_table", "decode_request", "decode_response", "encode_request",
    "encode_response", "encode_response_parts", "peek_correlation_id", "request_class", "request_header_version", "response_class",
    "response_header_version", "response_version", "split_at_int64", "unsupported_api_versions_response", "uuid_from_base64",
    "uuid_from_longs", "uuid_to_base64",
] + list(_message_names)
