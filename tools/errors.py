"""Typed tool errors. Their messages are written for the model: say what went wrong and what to do next."""


class ToolError(Exception):
    """Raised by a tool when the call cannot be carried out; becomes an error ToolMessage the model reads."""


class ToolInputError(ToolError):
    """Raised when the arguments are well-typed but unusable (bad expression, unknown city, bad path)."""


class ToolLimitError(ToolError):
    """Raised when a call would exceed a safety bound (size, depth, time, result magnitude)."""


class ToolNotFoundError(ToolError):
    """Raised when the thing a tool was asked about does not exist (missing file, unknown date)."""
