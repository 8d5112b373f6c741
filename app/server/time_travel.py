"""Waypoint's own routes, over the same services as the standard ones: the graph as Mermaid, a
thread's timeline (turns, checkpoints, branch tree), rollback, fork and replay."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from app.errors import NotFoundError
from app.server import schemas, timeline
from app.server.diagram import graph_view
from app.server.standard.run_streams import SSE_RESPONSE, streamed_run
from app.server.standard.runs import RunRequest
from app.server.users import CurrentUser, Db, OwnedThreadId, ServerSettings, owned_metadata
from app.service import api
from app.service.session import new_thread_id
from graphs.strategies import UnknownStrategyError

router = APIRouter(tags=["time travel"])


@router.get("/graph", response_model=schemas.GraphView, tags=["meta"])
def graph(strategy: Annotated[str, Query(max_length=40)] = "react") -> dict:
    """A strategy's state machine (default: the tool loop): Mermaid text, nodes and edges."""
    try:
        return graph_view(strategy)
    except UnknownStrategyError as exc:
        raise NotFoundError(str(exc)) from None


@router.get("/threads/{thread_id}/timeline", response_model=schemas.History)
def history(
    thread_id: OwnedThreadId,
    database: Db,
    limit: Annotated[int, Query(ge=1, le=1000)] = timeline.TURNS_SHOWN,
) -> dict:
    """Turns (newest first), every checkpoint with its parent, and the branch tree."""
    return timeline.history(database, thread_id, limit)


@router.post("/threads/{thread_id}/rollback", response_model=schemas.RollbackResult)
def rollback(
    thread_id: OwnedThreadId, database: Db, settings: ServerSettings, body: schemas.RollbackRequest
) -> dict:
    """Make an earlier checkpoint the head again (nothing is deleted; undo with previous_head)."""
    return timeline.do_rollback(database, settings, thread_id, body)


@router.post("/threads/{thread_id}/fork", response_model=schemas.ForkResult, status_code=201)
def fork(
    thread_id: OwnedThreadId,
    caller: CurrentUser,
    database: Db,
    settings: ServerSettings,
    body: schemas.ForkRequest,
) -> dict:
    """Copy the thread at a checkpoint (default: the head) into a new thread (the caller's)."""
    forked = timeline.do_fork(database, settings, thread_id, body.to or new_thread_id(), body)
    if caller.scoped:
        api.update_thread_metadata(database, forked["thread_id"], owned_metadata(caller, {}))
    return forked


@router.post("/threads/{thread_id}/replay", responses=SSE_RESPONSE)
async def replay(
    request: Request, thread_id: OwnedThreadId, body: schemas.ReplayRequest
) -> StreamingResponse:
    """Re-run the graph from a checkpoint on a new branch, streamed like a run (custom and
    updates modes); tools with side effects run again only with `confirm`."""
    run_request = RunRequest(
        assistant_id="waypoint",
        checkpoint_id=body.checkpoint_id,
        stream_mode=["custom", "updates"],
        keep_files=body.keep_files,
        force=body.force,
        confirm=body.confirm,
        final_event=True,
        multitask_strategy="reject",
    )
    return await streamed_run(request, thread_id, run_request)
