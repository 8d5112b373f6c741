"""Path parameters every route validates the same way."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.store import validate_thread_id


async def _thread(thread_id: str) -> str:
    # async: FastAPI runs a plain function dependency in a worker thread, a hop per request
    return validate_thread_id(thread_id)


ThreadId = Annotated[str, Depends(_thread)]
