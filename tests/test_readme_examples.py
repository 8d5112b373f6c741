"""Every command example in the code blocks of README.md and docs/commands.md runs in a home of its
own, on the offline model, and shows what the page says (SHOWS): a new example runs with no edit
here (checked for exit 0, some output and no internal error) until SHOWS names its key text."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import PINNED_NOW, REPO, TEST_USER, run_cli
from tests.openai_server import OpenAIServer, text

with contextlib.suppress(ImportError):
    # Imported before any run swaps sys.stderr: the MCP client binds its servers' stderr to the
    # sys.stderr of its first import (an in-memory stream has no file descriptor to give them).
    import mcp.client.stdio  # noqa: F401

PAGES = [REPO / "README.md", REPO / "docs" / "commands.md"]
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:echo .+ \| )?(?:waypoint|python -m app)(?: |$)")


@dataclass(frozen=True)
class Example:
    """One command line of a page: where it is, and the line as written."""

    page: str
    number: int
    line: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.number}"


def code_lines(markdown: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line inside a code block: indented by 4, or fenced."""
    fenced = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or (line.startswith("    ") and line.strip()):
            yield number, line.strip()


def examples() -> list[Example]:
    """Every command example of the pages, in page order."""
    found = []
    for page in PAGES:
        for number, line in code_lines(page.read_text(encoding="utf-8")):
            for part in line.split(" && "):  # `pip install -e . && python -m app chat …`
                if COMMAND.match(part.strip()):
                    found.append(Example(page.relative_to(REPO).as_posix(), number, part.strip()))
    return found


EXAMPLES = examples()
# A process is what these examples start: test_the_serve_examples_start_a_server_that_answers
# runs `serve` for real; `mcp serve` is the server servers.json starts for the MCP examples.
SERVE = [e for e in EXAMPLES if re.search(r"(waypoint|app) serve\b", e.line)]
MCP_SERVE = [e for e in EXAMPLES if re.search(r"(waypoint|app) mcp serve\b", e.line)]
IN_PROCESS = [e for e in EXAMPLES if e not in SERVE and e not in MCP_SERVE]


# --- a home for each example ------------------------------------------------------------------

DEMO_TURNS = [  # thread demo, as the examples expect it: turns to list, roll back, replay and diff
    "weather in Paris and Tokyo, which is warmer?",
    'write "hello" to notes.txt',
    "what is 6 times 7",
]
DOCUMENTS = {
    "notes/release.md": "# Release checklist\n\nTag, build, publish the wheel.\n",
    "handbook.md": "# Handbook\n\nThe release checklist lives in notes/.\n",
    "page.html": "<html><body><h1>Page</h1><p>BM25 ranks documents.</p></body></html>",
}


@dataclass
class Home:
    """A directory an example runs in: `checkpoints/agent.sqlite` (found from the working directory,
    as in a clone) and a copy at tmp/agent.sqlite for the pages' `--db /tmp/agent.sqlite`."""

    root: Path
    places: dict[str, str]  # the pages' checkpoint ids → real ones (checkpoint_places)


@contextlib.contextmanager
def inside(root: Path, **env: str) -> Iterator[None]:
    """The environment an example sees: no APP_DB/APP_WORKSPACE (the home's own checkpoints/ is
    found), the home as HOME and working directory, the pinned clock."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("APP_DB", "APP_WORKSPACE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "APP_MODEL"):
            patch.delenv(name, raising=False)
        patch.setenv("HOME", str(root))
        patch.setenv("XDG_DATA_HOME", str(root / ".local" / "share"))
        patch.setenv("APP_NOW", PINNED_NOW)
        for name in ("USER", "LOGNAME"):  # as tests/conftest.py pins them (built before it runs)
            patch.setenv(name, TEST_USER)
        patch.setenv("APP_BACKOFF_BASE", "0")
        for name, value in env.items():
            patch.setenv(name, value)
        patch.chdir(root)
        yield


def must(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, (args, done.stderr.decode())
    return done.stdout.decode()


def build_home(root: Path) -> Home:
    """What the examples name: thread demo, notes.txt, memories, documents, servers.json."""
    (root / "checkpoints").mkdir(parents=True)
    for name, content in DOCUMENTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content, encoding="utf-8")
    (root / "ws").mkdir()
    servers = {"wp": mcp_server(root / "workspace")}
    (root / "servers.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    with inside(root):
        for message in DEMO_TURNS:
            must("chat", "-t", "demo", "-m", message)
        colour = "remember that my favourite colour is green"
        must("chat", "-t", "me", "-m", colour)  # the OS user's memory
        must("chat", "-t", "alice-1", "--user", "alice", "-m", colour)  # and alice's experience
        must("corpus", "add", *DOCUMENTS)
        must("export", "--thread", "demo", "--output", "demo.json")
        rows = json.loads(must("history", "--thread", "demo", "--all", "--json"))
    (root / "tmp").mkdir()
    shutil.copy(root / "checkpoints" / "agent.sqlite", root / "tmp" / "agent.sqlite")
    return Home(root, checkpoint_places(rows))


def mcp_server(workspace: Path) -> dict:
    return {
        "command": sys.executable,
        "args": ["-m", "app", "mcp", "serve", "--workspace", str(workspace)],
        "env": {"PYTHONPATH": str(REPO)},
    }


def checkpoint_places(rows: list[dict]) -> dict[str, str]:
    """The pages' checkpoint ids, made real: 9f3a6c2b1d7e is where the last turn's input was
    stored (show, rollback, replay and fork start there), 3b1f0c9e2a41 the end of the first turn;
    1f1ebff6-2323 and 1f1ebff6-3b10 are unique parts (a prefix) of the same two."""
    ids = [row["checkpoint_id"] for row in rows]
    last_turn = max(row["turn"] for row in rows)
    loop = [r for r in rows if r["turn"] == last_turn and r["source"] == "loop"]
    after_input = min(loop, key=lambda r: r["step"])
    first_end = max((r for r in rows if r["turn"] == 1), key=lambda r: r["step"])
    start, end = first_end["checkpoint_id"], after_input["checkpoint_id"]
    return {
        "9f3a6c2b1d7e": end[-12:],
        "3b1f0c9e2a41": start[-12:],
        "1f1ebff6-2323": unique_prefix(start, ids),
        "1f1ebff6-3b10": unique_prefix(end, ids),
    }


def unique_prefix(full: str, ids: list[str]) -> str:
    for length in range(13, len(full) + 1):
        if [i for i in ids if i.startswith(full[:length])] == [full]:
            return full[:length]
    return full


# --- running an example -----------------------------------------------------------------------

# The pages' paths outside the home, in it: a test writes nowhere else on a shared machine.
PATHS = {
    "/tmp/agent.sqlite": "tmp/agent.sqlite",
    "/srv/waypoint/agent.sqlite": "srv/agent.sqlite",
    "/srv/ws": "srv/ws",
}


@dataclass
class Command:
    """An example line as a shell would run it."""

    args: list[str]
    env: dict[str, str]
    stdin: str | None = None
    stdout_file: str | None = None


def parsed(line: str, home: Home) -> Command:
    """The line as a shell would run it: leading `VAR=value`s, `echo … |` as stdin, `> file`."""
    words = shlex.split(line, comments=True)
    env: dict[str, str] = {}
    while re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    stdin = None
    if words[0] == "echo":
        bar = words.index("|")
        stdin, words = " ".join(words[1:bar]) + "\n", words[bar + 1 :]
    stdout_file = None
    if ">" in words:
        at = words.index(">")
        stdout_file, words = words[at + 1], words[:at]
    words = words[1:] if words[0] == "waypoint" else words[3:]  # python -m app
    return Command([filled(word, home) for word in words], env, stdin, stdout_file)


def filled(word: str, home: Home) -> str:
    """A placeholder checkpoint id made real; a path outside the home moved into it."""
    if word in PATHS:
        return str(home.root / PATHS[word])
    return home.places.get(word, word)


REPL_MESSAGE = "what is 6 times 7\n"  # what a REPL example is sent on stdin (one turn, then EOF)
NATIVE_REPLIES = ["6 times 7 is 42."]
REACT_REPLIES = [
    'Thought: use the calculator\nAction: calculator\nAction Input: {"expression": "6*7"}',
    "Final Answer: 6 times 7 is 42.",
]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str


def words_of(command: Command) -> list[str]:
    """The command's words after the root's options (`--debug chat …` → `chat …`)."""
    return [a for a in command.args if a != "--debug"]


def is_repl(command: Command) -> bool:
    one_shot = {"-m", "--message"} & set(command.args)
    return words_of(command)[:1] == ["chat"] and not one_shot and command.stdin is None


def endpoint_replies(command: Command) -> list[str]:
    """What the test's OpenAI-compatible server answers an example that names a real model."""
    react = "react" in command.args
    if command.args[:1] == ["doctor"]:
        return ["pong", *(REACT_REPLIES if react else [NATIVE_REPLIES[0]] * 2)]
    return REACT_REPLIES if react else NATIVE_REPLIES


def run(command: Command, home: Home) -> Ran:
    """The example in its home: in this process, with a real 127.0.0.1 endpoint when it names a
    model other than offline, and a message on stdin when it opens the REPL."""
    stdin = REPL_MESSAGE if is_repl(command) else command.stdin
    env = dict(command.env)
    with contextlib.ExitStack() as stack:
        if any(a.startswith("openai:") for a in command.args) or "OPENAI_API_KEY" in env:
            server = stack.enter_context(OpenAIServer([text(r) for r in endpoint_replies(command)]))
            env |= {
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": env.get("OPENAI_API_KEY", "unused"),
            }
        stack.enter_context(inside(home.root, **env))
        done = run_cli(*command.args, input=stdin.encode() if stdin is not None else None)
    stdout = done.stdout.decode(errors="replace")
    if command.stdout_file:
        (home.root / command.stdout_file).write_text(stdout, encoding="utf-8")
    return Ran(done.returncode, stdout, done.stderr.decode(errors="replace"))


@pytest.fixture(scope="module")
def built_home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """Built once; `home` puts it back after each example. It stays at one path: the corpus
    keeps the absolute paths of its documents, as it would in a real directory."""
    home = build_home(tmp_path_factory.mktemp("readme") / "home")
    shutil.copytree(home.root, home.root.with_name("pristine"), symlinks=True)
    return home


@pytest.fixture
def home(built_home: Home) -> Iterator[Home]:
    """The built home, restored afterwards, so each example starts from the same data."""
    yield built_home
    shutil.rmtree(built_home.root)
    shutil.copytree(built_home.root.with_name("pristine"), built_home.root, symlinks=True)


# --- what each example shows ------------------------------------------------------------------


@dataclass(frozen=True)
class Shows:
    """What the page says an example shows: key texts on stdout and stderr (ids as the page
    writes them: PLACES makes them real), stdout as JSON or JSON lines, files written (a path in
    the home → a text it holds), and the exit status."""

    out: tuple[str, ...] = ()
    err: tuple[str, ...] = ()
    json: bool = False
    jsonl: bool = False
    files: tuple[tuple[str, str], ...] = ()
    code: int = 0


# A REPL example (`chat` with no message) is sent REPL_MESSAGE on stdin: its options are tried on
# one turn. The REPL's own loop (prompt, slash commands, /exit) is driven in a pseudo-terminal by
# REPL_LOOP_TEST.
REPL = Shows(out=("42",))
REPL_LOOP_TEST = "tests/test_repl.py::test_repl_turns_slash_commands_and_resume"
WINNER = "Rome is 2°C warmer than Paris"  # on the pinned day (tests/conftest.py)

# (a pattern of the example as the page writes it, what it shows); every rule must still match
# an example, so a rule outlives no example.
SHOWS: list[tuple[str, Shows]] = [
    (r'(-m|--message) "what is 6 times 7"', Shows(out=("6 * 7 = 42",))),
    (r'^echo "weather in Tokyo" \|', Shows(out=("Tokyo on ", "high 27°C"))),
    (r"--jsonl -m", Shows(jsonl=True, out=('"event": "final"', WINNER))),
    (r"--stream updates", Shows(out=("2 + 3 = 5",), err=('"messages": [',))),
    (r'-m "list files"', Shows(out=("Files in the workspace",))),
    (
        r"--strategy plan -m .*save it to trip\.txt",
        Shows(out=(WINNER,), err=("plan:",), files=(("workspace/trip.txt", WINNER),)),
    ),
    (
        r'--strategy reflexion --max-trials 2 -m "read notes.txt"',
        Shows(out=("hello",), err=("attempt 1/2",)),
    ),
    (r"--strategy routed", Shows(out=("42",), err=("route: calculator",))),
    (r"graph --strategy plan", Shows(out=("graph TD", "planner", "executor", "synthesizer"))),
    (r"tools --json --mcp-config", Shows(json=True, out=('"source": "MCP wp (calculator)"',))),
    (r"tools$", Shows(out=("calculator", "run_python", "built-in"))),
    (r"doctor( --db \S+)?$", Shows(out=("ok  database", "ok  workspace"))),
    (r"doctor --ping$", Shows(out=("ok  ping: answered",))),
    (r"doctor --forget-window", Shows(out=("no window was kept for smollm2", "ok  database"))),
    (
        r"doctor --ping --model openai:\S+ --tool-protocol react",
        Shows(out=("react tool calls work",)),
    ),
    (r"threads list --json", Shows(json=True, out=('"thread_id": "demo"',))),
    (r"threads list$", Shows(out=("demo", "weather in Paris and Tokyo"))),
    (r"threads delete demo --yes", Shows(err=("deleted thread demo",))),
    (r"threads prune .*--dry-run --json", Shows(json=True, out=('"dry_run": true',))),
    (r"threads prune --keep-last-turns 20 --dry-run$", Shows(err=("would delete",))),
    (r"threads prune .*--older-than 90 --json$", Shows(json=True, out=('"threads_examined": 3',))),
    (r"threads vacuum", Shows(err=("bytes", "freed"))),
    (
        r"history --thread demo( --limit 5)? --json",
        Shows(json=True, out=('"preview": "what is 6 times 7"',)),
    ),
    (r"history --thread demo$", Shows(out=("what is 6 times 7", "answered", "calculator"))),
    (r"history --thread demo --all", Shows(out=("9f3a6c2b1d7e", "3b1f0c9e2a41"))),
    (r"history --thread demo --tree", Shows(out=("turn 1", "turn 3"))),
    (
        r"show --thread demo --checkpoint 9f3a6c2b1d7e --json",
        Shows(json=True, out=("9f3a6c2b1d7e",)),
    ),
    (r"show --thread demo$", Shows(out=("weather in Paris and Tokyo",), err=("head",))),
    (r"diff --thread demo \S+ \S+ --json", Shows(json=True, out=('"added"',))),
    (r"diff --thread demo 3b1f0c9e2a41 9f3a6c2b1d7e$", Shows(out=("3b1f0c9e2a41 → 9f3a6c2b1d7e",))),
    (
        r"rollback --thread demo --turns 1",
        Shows(err=("back at turn 2", "undo this with: waypoint rollback")),
    ),
    (r"rollback .*--workspace ./ws --force", Shows(err=("workspace: restored notes.txt",))),
    (r"rollback --thread demo --checkpoint 9f3a6c2b1d7e", Shows(err=("a copy of 9f3a6c2b1d7e",))),
    (r"rollback --thread demo --turns 2 --keep-files", Shows(err=("back at turn 1",))),
    (r"replay .*--jsonl", Shows(jsonl=True, out=('"event": "final"', '"status": "answered"'))),
    (r"replay .*9f3a6c2b1d7e( --model \S+ --yes)?$", Shows(out=("42",))),
    (r"replay .*--keep-files --force$", Shows(out=("6 * 7 = 42",))),
    (r"fork --thread demo --checkpoint 9f3a6c2b1d7e", Shows(err=("forked demo at 9f3a6c2b1d7e",))),
    (r"fork .*--to demo-alt", Shows(err=("into demo-alt", "waypoint chat --thread demo-alt"))),
    (
        r"export --thread demo (--output|-o) demo\.json",
        Shows(err=("exported thread demo to demo.json",), files=(("demo.json", '"thread_id"'),)),
    ),
    (
        r"export --thread demo --format md > demo\.md",
        Shows(files=(("demo.md", "what is 6 times 7"),)),
    ),
    (
        r"import demo\.json --as demo-copy --db other\.sqlite",
        Shows(err=("imported thread demo-copy",)),
    ),
    (r"memory list --experiences --user alice --json", Shows(json=True, out=("favourite colour",))),
    (r"memory list --experiences --user alice$", Shows(out=("favourite colour",))),
    (r"memory list$", Shows(out=("favourite colour is green",))),
    (r"memory search .*--json", Shows(json=True, out=("favourite colour",))),
    (r'memory search "favourite colour"$', Shows(out=("favourite colour is green",))),
    (r"memory forget .*--yes --user alice", Shows(err=("forgot 1 entry of alice",))),
    (r'memory forget "favourite colour" --yes$', Shows(err=("forgot 1 entry",))),
    (
        r"corpus add notes/ handbook\.md page\.html",
        Shows(out=("release.md", "handbook.md", "page.html")),
    ),
    (r"corpus list --json", Shows(json=True, out=("handbook.md",))),
    (r'corpus search "release checklist"', Shows(out=("Release checklist",))),
    (r"corpus remove handbook\.md", Shows(out=("removed 1 document",))),
    (r"mcp list --mcp-config servers\.json --json", Shows(json=True, out=('"server": "wp"',))),
    (r"mcp list --mcp-config servers\.json$", Shows(out=("wp", "calculator"))),
    (r"users add alice$", Shows(out=("wp_",), err=("token for alice",))),
    (r"users add alice --replace$", Shows(out=("wp_",), err=("token for alice",))),
    (r"users list$", Shows(out=("alice  (token made",))),
    (r"users revoke alice$", Shows(err=("revoked alice's token",))),
]

# What an example needs that the home leaves out (the home has no users file: `serve`'s examples
# run with APP_API_TOKEN, which a users file would refuse): (a pattern, the commands run first).
GIVEN: list[tuple[str, list[tuple[str, ...]]]] = [
    (r"users (add alice --replace|list|revoke alice)$", [("users", "add", "alice")]),
]


def expected(example: Example, command: Command) -> list[Shows]:
    rules = [shows for pattern, shows in SHOWS if re.search(pattern, without_comment(example))]
    return [REPL, *rules] if is_repl(command) else rules


def without_comment(example: Example) -> str:
    """The example as written, its trailing `# comment` left out."""
    return " ".join(re.sub(r"\s+#\s.*$", "", example.line).split())


def real(text: str, home: Home) -> str:
    for placeholder, value in home.places.items():
        text = text.replace(placeholder, value)
    return text


def check(shows: Shows, ran: Ran, home: Home) -> None:
    assert ran.code == shows.code, ran.stderr + ran.stdout
    for key in shows.out:
        assert real(key, home) in ran.stdout, ran.stdout
    for key in shows.err:
        assert real(key, home) in ran.stderr, ran.stderr
    if shows.json:
        json.loads(ran.stdout)
    if shows.jsonl:
        assert [json.loads(line)["event"] for line in ran.stdout.splitlines()]
    for path, key in shows.files:
        assert real(key, home) in (home.root / path).read_text(encoding="utf-8")


@pytest.mark.parametrize("example", IN_PROCESS, ids=lambda e: e.id)
def test_the_example_runs_and_shows_what_the_page_says(example: Example, home: Home) -> None:
    command = parsed(example.line, home)
    for pattern, commands in GIVEN:
        if re.search(pattern, without_comment(example)):
            with inside(home.root):
                for args in commands:
                    must(*args)

    ran = run(command, home)

    assert "internal error" not in ran.stderr and (ran.stdout or ran.stderr)
    assert ran.code == 0 or any(shows.code == ran.code for shows in expected(example, command))
    for shows in expected(example, command):
        check(shows, ran, home)


def test_every_rule_of_what_an_example_shows_matches_an_example() -> None:
    pages = [without_comment(e) for e in EXAMPLES]
    assert [p for p, _ in SHOWS if not any(re.search(p, line) for line in pages)] == []


# --- examples whose process is what they show --------------------------------------------------

# A test listens on 127.0.0.1 only, on a free port: nothing else on a shared machine can reach it.
LOCAL = {"0.0.0.0": "127.0.0.1", "8080": "0", "8000": "0"}
OPEN_URL = re.compile(r"^open\s+(http://127\.0\.0\.1:\d+/)", re.MULTILINE)


@contextlib.contextmanager
def serving(command: Command, log: Path) -> Iterator[str]:
    """The serve example as a real process; yields the URL it says to open."""
    args = [LOCAL.get(a, a) for a in command.args]
    args += [] if "--port" in args else ["--port", "0"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "200", **command.env}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := OPEN_URL.search(log.read_text())) and process.poll() is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)  # polling a log for a line, not ordering two processes
        assert found, log.read_text()
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=15)


@pytest.mark.parametrize("example", SERVE, ids=lambda e: e.id)
def test_the_serve_examples_start_a_server_that_answers(example: Example, home: Home) -> None:
    command = parsed(example.line, home)
    token = command.env.get("APP_API_TOKEN")
    with inside(home.root), serving(command, home.root / "serve.log") as url:
        page = httpx.get(url, timeout=30)
        health = httpx.get(f"{url}health", timeout=30)
        search = httpx.post(f"{url}threads/search", json={}, timeout=30)
        allowed = httpx.post(
            f"{url}threads/search",
            json={},
            timeout=30,
            headers={"Authorization": f"Bearer {token}"} if token else {},
        )

    assert page.status_code == 200 and "<html" in page.text.lower()  # "the web page is at /"
    assert health.status_code == 200
    assert search.status_code == (401 if token else 200)
    assert allowed.status_code == 200
    log = (home.root / "serve.log").read_text()
    database = "srv/agent.sqlite" if "/srv/" in example.line else "checkpoints/agent.sqlite"
    assert f"database  {home.root / database}" in log


def test_mcp_serve_is_the_server_the_mcp_examples_start(built_home: Home) -> None:
    servers = json.loads((built_home.root / "servers.json").read_text())["mcpServers"]
    started = [" ".join(s["args"]) for s in servers.values()]
    assert MCP_SERVE and all(
        re.search(r"(waypoint|app) mcp serve --workspace", e.line) for e in MCP_SERVE
    )
    assert started == [f"-m app mcp serve --workspace {built_home.root / 'workspace'}"]


def test_the_repl_loop_is_driven_in_a_terminal_by_a_named_test() -> None:
    path, _, name = REPL_LOOP_TEST.partition("::")
    assert re.search(rf"^def {name}\(", (REPO / path).read_text(encoding="utf-8"), re.MULTILINE)


# Code lines that are not Waypoint commands: installs (with an extra pyproject.toml has) and the
# suite itself, which CI runs (.ci/run) and which includes this file.
INSTALL = re.compile(r"^pip install -e (?:\.|'\.\[(?P<extra>[\w-]+)\]')$")
SUITE = "python -m pytest"


def test_every_other_code_line_is_an_install_of_a_real_extra_or_the_suite() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    others = [
        part.strip()
        for page in PAGES
        for _, line in code_lines(page.read_text(encoding="utf-8"))
        for part in line.split(" && ")
        if not COMMAND.match(part.strip())
    ]
    installs = [INSTALL.match(part) for part in others if part != SUITE]
    assert others and all(installs), others
    assert {m["extra"] for m in installs if m["extra"]} - set(extras) == set()
    assert SUITE in (REPO / ".ci" / "run").read_text()


def test_the_examples_are_read_from_indented_and_fenced_blocks() -> None:
    page = "text `waypoint no`\n\n    waypoint tools   # a comment\n    pip install -e .\n\n"
    page += "```console\necho hi | waypoint chat -t x\n```\nwaypoint prose\n"

    lines = [line for _, line in code_lines(page) if COMMAND.match(line)]

    assert lines == ["waypoint tools   # a comment", "echo hi | waypoint chat -t x"]
    assert len(EXAMPLES) > 60  # both pages were read


# --- the requests "The offline model" lists ----------------------------------------------------

SPAN = re.compile(r"`([^`]+)`")
NOT_A_REQUEST = re.compile(r"^(?:offline|-.*|[\w]+_[\w]+|, )$")  # the model, flags, tool names
REFUSED = {"5 km + 3 km", "2 plus"}  # "math it cannot read whole … is refused"
# A follow-up is asked after what it follows, in the same thread (by the same user).
FOLLOWS = {
    "which is warmer?": "weather in Paris and Rome",
    "温差多少？": "北京和上海的天气",
    "what do you remember about colour?": "remember that my favourite colour is green",
    "do you remember what my name is?": "remember that my name is Ada",
}
# A request whose tool starts a sandbox: run where sandboxes are counted, by the named test.
SANDBOXED = {
    "run this python: print(6*7)": "tests/test_render.py::"
    "test_run_python_output_is_printed_once_in_the_answer_not_in_the_card",
}


def offline_requests() -> list[str]:
    """Every request the README's "The offline model" section quotes (a span may break a line)."""
    page = (REPO / "README.md").read_text(encoding="utf-8")
    section = page.split("## The offline model", 1)[1].split("\n## ", 1)[0]
    spans = [" ".join(s.split()) for s in SPAN.findall(section)]
    return list(dict.fromkeys(s for s in spans if not NOT_A_REQUEST.match(s)))


def test_the_offline_section_is_read_whole() -> None:
    requests = offline_requests()

    assert "weather in Paris and London tomorrow in fahrenheit" in requests  # across a line break
    assert set(REFUSED) | set(FOLLOWS) | set(SANDBOXED) <= set(requests)
    for named in SANDBOXED.values():
        path, _, name = named.partition("::")
        assert re.search(rf"^def {name}\(", (REPO / path).read_text(), re.MULTILINE)


@pytest.mark.parametrize("request_text", [r for r in offline_requests() if r not in SANDBOXED])
def test_the_offline_model_understands_each_request_the_readme_lists(
    isolated: Path, request_text: str
) -> None:
    from app.models.offline.answers import fallback

    if request_text in FOLLOWS:
        assert run_cli("chat", "-t", "t", "-m", FOLLOWS[request_text]).returncode == 0
    if re.match(r"search|look up|搜索", request_text):  # a search finds what the corpus holds
        documents = {**DOCUMENTS, "beijing.md": "# 北京\n\n北京是中国的首都。\n"}
        for name, content in documents.items():
            (isolated / name).parent.mkdir(exist_ok=True)
            (isolated / name).write_text(content, encoding="utf-8")
        assert run_cli("corpus", "add", *documents).returncode == 0
    if request_text == "read notes.txt":
        (isolated / "workspace").mkdir(exist_ok=True)
        (isolated / "workspace" / "notes.txt").write_text("hello", encoding="utf-8")

    done = run_cli("chat", "-t", "t", "-m", request_text)

    answer = done.stdout.decode()
    assert answer.strip() not in {fallback(False), fallback(True)}, answer
    if request_text in REFUSED:
        assert "can't read" in answer and "as one whole calculation" in answer
    else:
        assert done.returncode == 0, done.stderr.decode() + answer
