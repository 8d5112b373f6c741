"""The embedded `offline` model: a deterministic intent planner behind LangChain's chat-model
interface. model.py is the chat model; intents.py and facts.py read requests, answers.py writes
the replies, structured.py answers structured-output requests (plans, verdicts, lessons, routes)."""

from app.models.notice import OFFLINE_NOTICE
from app.models.offline.model import OfflineChatModel

__all__ = ["OFFLINE_NOTICE", "OfflineChatModel"]
