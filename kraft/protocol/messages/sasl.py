"""SaslHandshake (API key 17) and SaslAuthenticate (API key 36): a client names a SASL mechanism,
then sends its tokens framed as requests. Schema facts from Kafka's SaslHandshakeRequest.json,
SaslAuthenticateRequest.json and their responses (SaslHandshake v1 means the tokens follow as
SaslAuthenticate requests; SaslAuthenticate v1 adds session_lifetime_ms, v2 is flexible).
Schemas only: kraft.server.sasl runs the exchange."""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BYTES, INT16, INT64, STRING, Array, Field


class SaslHandshakeRequest(Request):
    API_KEY = 17
    VERSIONS = "0-1"
    FLEXIBLE = "none"

    FIELDS = (Field("mechanism", STRING),)


class SaslHandshakeResponse(Response):
    API_KEY = 17
    VERSIONS = "0-1"
    FLEXIBLE = "none"

    FIELDS = (
        Field("error_code", INT16),
        Field("mechanisms", Array(STRING)),
    )


class SaslAuthenticateRequest(Request):
    API_KEY = 36
    VERSIONS = "0-2"
    FLEXIBLE = "2+"

    FIELDS = (Field("auth_bytes", BYTES),)


class SaslAuthenticateResponse(Response):
    API_KEY = 36
    VERSIONS = "0-2"
    FLEXIBLE = "2+"

    FIELDS = (
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("auth_bytes", BYTES),
        Field("session_lifetime_ms", INT64, "1+", default=0),
    )
