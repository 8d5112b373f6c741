"""The baseline CLI: what a plain LangGraph app looks like from the shell, for cold-start figures.

`python -m bench.baseline_cli --help | chat -m TEXT | threads | history -t ID`, each with `--db`.
It imports its stack at the top, as such scripts do; `chat` streams the same offline model and
calculator through `create_react_agent` and prints one JSON line per token.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from langchain_core.messages import AIMessageChunk, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent  # noqa: F401  (the stack a plain app loads)

from app.models.offline import OfflineChatModel
from bench.listing import baseline_history, baseline_threads
from bench.runners import create_baseline_agent


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="baseline", description="A plain LangGraph agent CLI.")
    commands = root.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="Send one message and print the streamed answer.")
    chat.add_argument("--db", type=Path, required=True)
    chat.add_argument("--thread", "-t", required=True)
    chat.add_argument("--message", "-m", required=True)
    threads = commands.add_parser("threads", help="List threads.")
    threads.add_argument("--db", type=Path, required=True)
    history = commands.add_parser("history", help="A thread's newest turns.")
    history.add_argument("--db", type=Path, required=True)
    history.add_argument("--thread", "-t", required=True)
    return root


def chat(db: Path, thread_id: str, text: str) -> None:
    with SqliteSaver.from_conn_string(str(db)) as saver:
        agent = create_baseline_agent(saver, OfflineChatModel())
        config = {"configurable": {"thread_id": thread_id}}
        for chunk, _ in agent.stream(
            {"messages": [HumanMessage(content=text)]}, config, stream_mode="messages"
        ):
            if isinstance(chunk, AIMessageChunk) and chunk.content:
                print(json.dumps({"event": "token", "text": chunk.content}), flush=True)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.command == "chat":
        chat(args.db, args.thread, args.message)
    elif args.command == "threads":
        print(json.dumps(baseline_threads(args.db), default=str))
    else:
        print(json.dumps(baseline_history(args.db, args.thread), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
