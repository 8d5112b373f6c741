"""HTTP status codes for the app's errors: the one place an AppError becomes a response."""

from __future__ import annotations

from app.errors import (
    AppError,
    ConfigError,
    ConflictError,
    NotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
    UsageError,
)

__all__ = ["ConflictError", "ForbiddenError", "NotFoundError", "error_body", "status_for"]


class ForbiddenError(UsageError):
    """Raised when a request asks for more than the server allows (e.g. auto-approving risky tools)."""


ERROR_KINDS = {
    400: "bad_request",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
}


def status_for(error: AppError) -> int:
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, ThreadBusyError | ConflictError):
        return 409
    if isinstance(error, ForbiddenError):
        return 403
    if isinstance(error, UsageError):
        return 400
    if isinstance(error, ConfigError):
        return 500
    return 500


def error_body(error: AppError) -> dict:
    if isinstance(error, ThreadNotFoundError):
        detail = f"thread {error.thread_id} does not exist; create it with POST /threads"
        return {"detail": detail, "error": "not_found"}
    return {"detail": str(error), "error": ERROR_KINDS.get(status_for(error), "error")}
