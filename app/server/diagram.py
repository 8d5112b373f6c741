"""The compiled graph as data for the page and for GET /graph: Mermaid text, nodes and edges."""

from __future__ import annotations

import functools

from graphs.react.graph import build_graph


@functools.cache
def graph_view() -> dict:
    drawable = build_graph().get_graph()
    return {
        "mermaid": drawable.draw_mermaid(),
        "nodes": [{"id": node.id} for node in drawable.nodes.values()],
        "edges": [
            {"source": e.source, "target": e.target, "conditional": e.conditional}
            for e in drawable.edges
        ],
    }
