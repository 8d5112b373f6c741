"""Words for the person reading: counts with their noun in the right number."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 turn', '3 turns'; `many` for a noun whose plural is not noun + 's' ('1 entry', '2 entries')."""
    return f"{count} {noun}" if count == 1 else f"{count} {many or noun + 's'}"
