"""Typed tool errors. Their messages are written for the model: say what went wrong and what to do next."""


class ToolError(Exception):
    """Raised by a tool when the call cannot be carried out; becomes an error ToolMessage the model reads.

    `user_message`, when given, is what the person sees instead: the model's message tells the
    model what to do next ("use list_files…", "tell the user…"), which is no answer to show."""

    def __init__(self, message: str, *, user_message: str | None = None) -> None:
        super().__init__(message)
        self.user_message = user_message


class ToolInputError(ToolError):
    """Raised when the arguments are well-typed but unusable (bad expression, unknown city, bad path)."""


class ToolLimitError(ToolError):
    """Raised when a call would exceed a safety bound (size, depth, time, result magnitude)."""


class ToolNotFoundError(ToolError):
    """Raised when the thing a tool was asked about does not exist (missing file, unknown date)."""
