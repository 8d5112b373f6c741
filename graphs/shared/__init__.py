"""What every strategy shares: the model boundary, recovery (retry, summarize, failure), the
closing nodes, per-turn limits, tool calls, approvals and message helpers."""
