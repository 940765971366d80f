"""The compiled codec is what `import kraft.records` gives, unless explicitly disabled."""

import os

import kraft.records


def test_native_extension_loaded_unless_disabled():
    if os.environ.get("KRAFT_NO_EXTENSIONS"):
        assert kraft.records.IMPLEMENTATION == "python"
    else:
        assert kraft.records.IMPLEMENTATION == "native", kraft.records.NATIVE_IMPORT_ERROR
        from kraft._native import _reader

        assert kraft.records.RecordBatch is _reader.RecordBatch


def test_native_crc_uses_hardware_on_x86_64_and_aarch64():
    import platform

    if os.environ.get("KRAFT_NO_EXTENSIONS"):
        assert kraft.records.crc32c_implementation() == "python"
        return
    impl = kraft.records.crc32c_implementation()
    machine = platform.machine()
    if machine in ("x86_64", "AMD64"):
        flags = open("/proc/cpuinfo").read()
        assert impl == ("sse4.2" if "sse4_2" in flags else "portable")
    elif machine in ("aarch64", "arm64"):
        assert impl in ("armv8-crc", "portable")
    else:
        assert impl == "portable"
