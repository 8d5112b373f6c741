"""The HTTP server (`python -m app serve`): API routes, SSE runs, the web page. Needs the [serve] extra."""
