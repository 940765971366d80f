"""Session-wide checks shared by every test package.

The compiled extensions must really be loaded unless ``KRAFT_NO_EXTENSIONS`` is set: a
silent fall back to pure Python would otherwise let CI pass without testing the native
code at all (aiokafka's conftest does the same).
"""

import os

import kraft.metadata.batch_codec
import kraft.records

NO_EXTENSIONS = bool(os.environ.get("KRAFT_NO_EXTENSIONS"))


def pytest_report_header(config):
    return (f"kraft codec: {kraft.records.IMPLEMENTATION}, "
            f"metadata codec: {kraft.metadata.batch_codec.IMPLEMENTATION}, "
            f"crc32c: {kraft.records.crc32c_implementation()}")


def pytest_sessionstart(session):
    if not NO_EXTENSIONS and kraft.records.IMPLEMENTATION != "native":
        raise RuntimeError(
            "kraft's native extensions did not load (build them with `pip install -e .`): "
            f"{kraft.records.NATIVE_IMPORT_ERROR!r}")
    if not NO_EXTENSIONS and kraft.metadata.batch_codec.IMPLEMENTATION != "native":
        raise RuntimeError(
            "kraft's native metadata codec (kraft/_native/_metadata*.pyx) did not load: "
            f"{kraft.metadata.batch_codec.NATIVE_IMPORT_ERROR!r}")
