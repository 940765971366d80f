"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the SCRAM credentials
kept in the metadata log (KIP-554). Schema facts from Kafka's
{Describe,Alter}UserScramCredentials{Request,Response}.json: one version, v0, flexible.
Mechanism is Kafka's ScramMechanism type (1 SCRAM-SHA-256, 2 SCRAM-SHA-512). Schemas only; the
meaning is in ``kraft.controller.scram``."""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BYTES, INT8, INT16, INT32, STRING, Array, Field, Struct


class DescribeUserScramCredentialsRequest(Request):
    API_KEY = 50
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker", "controller")

    class UserName(Struct):
        FIELDS = (Field("name", STRING),)

    FIELDS = (Field("users", Array(UserName), nullable="0+", default=None),)  # null: every user


class DescribeUserScramCredentialsResponse(Response):
    API_KEY = 50
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class Result(Struct):
        class CredentialInfo(Struct):
            FIELDS = (
                Field("mechanism", INT8),
                Field("iterations", INT32),
            )

        FIELDS = (
            Field("user", STRING),
            Field("error_code", INT16, default=0),
            Field("error_message", STRING, nullable="0+", default=None),
            Field("credential_infos", Array(CredentialInfo)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, default=0),
        Field("error_code", INT16, default=0),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("results", Array(Result)),
    )


class AlterUserScramCredentialsRequest(Request):
    API_KEY = 51
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker", "controller")
    # librdkafka (confluent-kafka 2.x) ends this request with one byte more than the schema
    # (a second empty tagged-field section); Kafka's parser ignores what follows the body.
    TRAILING_BYTES_FROM_VERSION = 0

    class Deletion(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("mechanism", INT8),
        )

    class Upsertion(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("mechanism", INT8),
            Field("iterations", INT32),
            Field("salt", BYTES),
            Field("salted_password", BYTES),
        )

    FIELDS = (
        Field("deletions", Array(Deletion)),
        Field("upsertions", Array(Upsertion)),
    )


class AlterUserScramCredentialsResponse(Response):
    API_KEY = 51
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class Result(Struct):
        FIELDS = (
            Field("user", STRING),
            Field("error_code", INT16, default=0),
            Field("error_message", STRING, nullable="0+", default=None),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, default=0),
        Field("results", Array(Result)),
    )
