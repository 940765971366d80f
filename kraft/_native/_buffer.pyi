"""Type stubs for ``kraft._native._buffer``: the hooks kraft.records injects at import."""

from typing import Any, Callable

class Buffer:
    """A held buffer export; created only from C (``acquire``), opaque to Python."""

class Hooks:
    corrupt_error: type[Exception]
    codec_error: type[Exception]
    compress: Callable[[int, Any], bytes]
    decompress: Callable[[int, Any], bytes]
    decoded_batch: Callable[..., Any]
    batch_scan: Callable[..., Any]

def configure(*, corrupt_error: type[Exception], codec_error: type[Exception],
              compress: Callable[[int, Any], bytes], decompress: Callable[[int, Any], bytes],
              decoded_batch: Callable[..., Any], batch_scan: Callable[..., Any]) -> None: ...
