"""The OpenAPI document as clients need it: every status a route can answer besides its success
(the guard's and the error handler's, with their JSON body), and the thread-id pattern."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.server.errors import ERROR_KINDS
from app.store import THREAD_ID

ERROR_BODY = {
    "type": "object",
    "required": ["detail"],
    "properties": {
        "detail": {"type": "string", "description": "what went wrong and what to do"},
        "error": {"type": "string", "enum": sorted(set(ERROR_KINDS.values()))},
    },
}
# Every route: the Host check (400), the bearer token (401), the Origin check (403), a body or a
# parameter that does not validate (422), and an unexpected failure (500).
EVERY_ROUTE = {
    "400": "bad input: a bad thread id, Host name or message",
    "401": "missing or wrong API token (Authorization: Bearer …)",
    "403": "a state change from another origin, or more than this server allows",
    "422": "the request does not match its schema",
    "500": "an internal error (the details are in the server log)",
}
WITH_THREAD = {"404": "the thread (or checkpoint, run) does not exist"}
WITH_BODY = {
    "409": "the thread is busy, or what would be created exists",
    "413": "the body is over the size cap (APP_MAX_BODY_BYTES)",
    "415": "the body is not Content-Type: application/json",
}


def document(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI schema with the error statuses and the thread-id pattern added."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_BODY
        for operations in schema["paths"].values():
            for method, operation in operations.items():
                _document(method, operation)
        app.openapi_schema = schema
    return app.openapi_schema


def _document(method: str, operation: dict[str, Any]) -> None:
    statuses = dict(EVERY_ROUTE)
    for parameter in operation.get("parameters", []):
        if parameter["name"] == "thread_id":
            parameter["schema"] = {"type": "string", "pattern": THREAD_ID.pattern}
            statuses |= WITH_THREAD
    if method in ("post", "put", "patch", "delete"):
        statuses |= WITH_BODY
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    responses = operation.setdefault("responses", {})
    for status, description in statuses.items():
        responses.setdefault(status, {"description": description, "content": error})
