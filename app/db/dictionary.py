"""The preset zlib dictionary small blobs are compressed against (app/db/compressed.py).

A checkpoint blob of a couple of kilobytes is mostly the same names every time (channels, versions'
zero padding, message classes and their fields); alone it barely compresses, but against a
dictionary that already holds those names it shrinks to a fifth (a message write from ~230 bytes to
~65, a checkpoint from ~1.8 KB to ~0.35 KB).

The dictionary is frozen: a blob written against it inflates only with exactly these bytes, so the
file is checked against its SHA-256 before use and is never rebuilt in place. A better dictionary
would be a new file with a new tag (`+zlib-d2`), and d1 would stay readable.

How d1 was made is app/db/make_dictionary.py (for the record: rebuilding it gives other bytes,
which is why it is never rebuilt).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from app.db.unreadable import UnreadableCheckpointError

PATH = Path(__file__).with_name("zlib-d1.bin")
SHA256 = "bfd31012a403a99a0d3f45d96aad22ecad80ce6e9f7974bf2801262d9099c710"


@functools.cache
def dictionary_v1() -> bytes:
    """Dictionary d1, or UnreadableCheckpointError when the installed file is not d1."""
    try:
        data = PATH.read_bytes()
    except OSError as exc:
        raise UnreadableCheckpointError(
            f"the compression dictionary {PATH} cannot be read ({exc}); reinstall Waypoint"
        ) from None
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise UnreadableCheckpointError(
            f"the compression dictionary {PATH} is not the one Waypoint's blobs were written "
            "with; reinstall Waypoint"
        )
    return data
