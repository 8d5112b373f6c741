"""The react strategy: the tool loop (agent ⇄ tools), and that loop run as a subgraph by others."""
