"""What the terminal says of the embedded model, importable without loading any model (the REPL's
banner is drawn before LangChain is)."""

OFFLINE_NOTICE = (
    "offline: Waypoint's embedded intent planner (deterministic, no network) — not a language model"
)
