"""A strategy's compiled graph as data for the page and for GET /graph: Mermaid text, nodes and
edges."""

from __future__ import annotations

import functools

from graphs.strategies import get_strategy


@functools.cache
def graph_view(strategy: str = "react") -> dict:
    drawable = get_strategy(strategy).build(None).get_graph()
    return {
        "strategy": strategy,
        "mermaid": drawable.draw_mermaid(),
        "nodes": [{"id": node.id} for node in drawable.nodes.values()],
        "edges": [
            {"source": e.source, "target": e.target, "conditional": e.conditional}
            for e in drawable.edges
        ],
    }
