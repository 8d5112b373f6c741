"""Checkpoint blobs compressed with zlib above a size threshold, the way LangGraph's
EncryptedSerializer wraps a serializer: the type tag says how a blob was stored, so rows written
before, in another way, still load.

- "msgpack+zlib-d1": blobs up to DICTIONARY_UP_TO bytes (a checkpoint, a message write), compressed
  against the preset dictionary d1 (app/db/dictionary.py), which already holds the names every such
  blob repeats: a fifth of their size, where plain zlib saves a third of a checkpoint and nothing
  of a message.
- "msgpack+zlib": larger blobs (a state snapshot, a long tool result), which repeat themselves
  enough; and every compressed blob written before the dictionary.
- "msgpack": what does not shrink, and every blob written before compression.

Reading inflates at most MAX_INFLATED_BYTES (a decompression bomb is refused, never allocated),
then hands the bytes to the wrapped (strict) serializer, which checks them as it checks any blob.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from app.db.dictionary import dictionary_v1
from app.db.unreadable import UnreadableCheckpointError

if TYPE_CHECKING:
    from langgraph.checkpoint.serde.base import SerializerProtocol

SUFFIX = "+zlib"
DICTIONARY_SUFFIX = "+zlib-d1"
# Smaller blobs (a counter, a flag) do not shrink even against the dictionary.
COMPRESS_FROM_BYTES = 64
# Up to this size the dictionary saves much; beyond it a blob holds its own repetitions.
DICTIONARY_UP_TO = 16 * 1024
# Nothing larger is ever compressed, so no blob Waypoint wrote inflates beyond it.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
# zlib's default level: a checkpoint 13% smaller than at the fastest level, in the same ~30 µs
# (a small blob costs the set-up, not the search); a 50 KB snapshot takes 0.4 ms.
LEVEL = 6
# A 16 KB window and a smaller hash table: a dictionary compression starts in ~15 µs instead of
# ~60 (zlib's default sets up 256 KB for every blob), and a small blob needs no more.
WINDOW_BITS = 14
MEMORY_LEVEL = 6


class CompressedSerializer:
    """`serde` for writing and reading, with blobs of COMPRESS_FROM_BYTES to MAX_INFLATED_BYTES
    stored compressed when that makes them smaller. (A SerializerProtocol by its methods: the
    listings import this module without LangGraph.)"""

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.serde.dumps_typed(obj)
        if not COMPRESS_FROM_BYTES <= len(data) <= MAX_INFLATED_BYTES:
            return type_, data
        if len(data) <= DICTIONARY_UP_TO:
            suffix, packed = DICTIONARY_SUFFIX, deflate_with_dictionary(data)
        else:
            suffix, packed = SUFFIX, zlib.compress(data, LEVEL)
        if len(packed) + len(suffix) < len(data):
            return type_ + suffix, packed
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.serde.loads_typed(inflated(*data))


def deflate_with_dictionary(data: bytes) -> bytes:
    deflater = zlib.compressobj(
        LEVEL, zlib.DEFLATED, WINDOW_BITS, MEMORY_LEVEL, zlib.Z_DEFAULT_STRATEGY, dictionary_v1()
    )
    return deflater.compress(data) + deflater.flush()


def inflated(type_: Any, blob: Any) -> tuple[Any, Any]:
    """(the serialisation type, its bytes) of a stored blob, inflated if it was compressed."""
    if not isinstance(type_, str):
        return type_, blob
    if type_.endswith(DICTIONARY_SUFFIX):
        return type_.removesuffix(DICTIONARY_SUFFIX), inflate(blob, dictionary_v1())
    if type_.endswith(SUFFIX):
        return type_.removesuffix(SUFFIX), inflate(blob)
    return type_, blob


def inflate(blob: bytes, dictionary: bytes | None = None) -> bytes:
    """The bytes a compressed blob holds; UnreadableCheckpointError for anything but one complete
    zlib stream of at most MAX_INFLATED_BYTES."""
    inflater = zlib.decompressobj(zdict=dictionary) if dictionary else zlib.decompressobj()
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
