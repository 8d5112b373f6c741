"""The ReAct text protocol for endpoints without native tool calling (`--tool-protocol react`).

`ReActChatModel` wraps any chat model: bound tools become a system prompt, tool calls and results become
plain text, and the `Action:` / `Final Answer:` reply is parsed back into tool calls or an answer.
The modules of this package hold the parts; every public name is importable from here.
"""

from app.models.react.model import (
    OBSERVATION_STOP,
    UNPARSED,
    ReActChatModel,
    conversation_key,
    wrap_react,
)
from app.models.react.parse import (
    FORMAT_HINT,
    InvalidAction,
    ParsedAction,
    ParsedReply,
    call_id,
    cut_observation,
    looks_like_action,
    parse_react,
)
from app.models.react.prompt import (
    assistant_text,
    observation,
    react_system_prompt,
    to_react_messages,
)
from app.models.react.schema import ReActTool, schema_errors

__all__ = [
    "FORMAT_HINT",
    "OBSERVATION_STOP",
    "UNPARSED",
    "InvalidAction",
    "ParsedAction",
    "ParsedReply",
    "ReActChatModel",
    "ReActTool",
    "assistant_text",
    "call_id",
    "conversation_key",
    "cut_observation",
    "looks_like_action",
    "observation",
    "parse_react",
    "react_system_prompt",
    "schema_errors",
    "to_react_messages",
    "wrap_react",
]
