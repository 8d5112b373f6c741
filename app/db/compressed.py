"""Checkpoint blobs compressed with zlib above a size threshold, the way LangGraph's
EncryptedSerializer wraps a serializer: the type tag says how a blob was stored ("msgpack+zlib"),
so rows written before, uncompressed, still load.

Reading inflates at most MAX_INFLATED_BYTES (a decompression bomb is refused, never allocated),
then hands the bytes to the wrapped (strict) serializer, which checks them as it checks any blob.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from app.db.unreadable import UnreadableCheckpointError

if TYPE_CHECKING:
    from langgraph.checkpoint.serde.base import SerializerProtocol

SUFFIX = "+zlib"
# Smaller blobs (most single-channel writes: a counter, a short message) barely shrink.
COMPRESS_FROM_BYTES = 256
# Nothing larger is ever compressed, so no blob Waypoint wrote inflates beyond it.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
# zlib's fastest setting: a state snapshot is compressed inside the step that writes it, and the
# better levels shrink checkpoints only a few per cent more.
LEVEL = 1


class CompressedSerializer:
    """`serde` for writing and reading, with blobs of COMPRESS_FROM_BYTES to MAX_INFLATED_BYTES
    stored zlib-compressed when that makes them smaller. (A SerializerProtocol by its methods: the
    listings import this module without LangGraph.)"""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.serde.dumps_typed(obj)
        if COMPRESS_FROM_BYTES <= len(data) <= MAX_INFLATED_BYTES:
            packed = zlib.compress(data, LEVEL)
            if len(packed) + len(SUFFIX) < len(data):
                return type_ + SUFFIX, packed
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if isinstance(type_, str) and type_.endswith(SUFFIX):
            return self.serde.loads_typed((type_.removesuffix(SUFFIX), inflate(blob)))
        return self.serde.loads_typed(data)


def inflate(blob: bytes) -> bytes:
    """The bytes a compressed blob holds; UnreadableCheckpointError for anything but one complete
    zlib stream of at most MAX_INFLATED_BYTES."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(blob, MAX_INFLATED_BYTES + 1)
    except (zlib.error, TypeError) as exc:
        raise UnreadableCheckpointError(f"a compressed blob does not inflate ({exc})") from None
    if len(data) > MAX_INFLATED_BYTES or inflater.unconsumed_tail:
        raise UnreadableCheckpointError(
            f"a compressed blob inflates beyond {MAX_INFLATED_BYTES // (1024 * 1024)} MiB"
        )
    if not inflater.eof or inflater.unused_data:
        raise UnreadableCheckpointError("a compressed blob is cut short or has bytes after its end")
    return data


def uncompressed(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer under any compression: what an export writes with, so that its blobs load
    wherever Waypoint's thread format does."""
    return serde.serde if isinstance(serde, CompressedSerializer) else serde
