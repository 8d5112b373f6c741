"""The LangGraph Server API, as the official SDKs (Python `langgraph-sdk`, JS
`@langchain/langgraph-sdk`) call it: assistants (one per strategy), threads, runs (streamed, waited,
in the background) and the store, with LangGraph's request and response shapes. Every route is an
adapter over app/service (the same services as the CLI); wire.py is where shapes are converted."""
