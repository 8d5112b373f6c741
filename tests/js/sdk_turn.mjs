// One streamed turn and the thread's history through the official LangGraph JS SDK, unchanged,
// against a LangGraph-API server: `node sdk_turn.mjs URL` prints one JSON object of what it saw
// (for tests/test_js_sdk.py). Needs `@langchain/langgraph-sdk` in a node_modules beside this file
// (`npm ci` here, or the test's copy next to WAYPOINT_JS_SDK_DIR/node_modules).
import { Client } from "@langchain/langgraph-sdk";

const QUESTION = "what is 6 times 7";
const METADATA = { suite: "js-sdk", kind: "math" };

function text(content) {
  if (typeof content === "string") return content;
  return content.map((part) => (typeof part === "string" ? part : (part.text ?? ""))).join("");
}

function lastAnswer(values) {
  return text(values.messages.at(-1).content);
}

// Newest first: each state's parent is the state after it in the list, and the oldest has none.
function chainedNewestFirst(history) {
  return history.every((state, i) => {
    const parent = state.parent_checkpoint?.checkpoint_id ?? null;
    const older = history[i + 1]?.checkpoint.checkpoint_id ?? null;
    return parent === older;
  });
}

// Runs one SDK call; a failure names the call, so the test's message says which one the server refused.
async function call(name, run) {
  try {
    return await run();
  } catch (error) {
    throw new Error(`${name} failed: ${error.message}`, { cause: error });
  }
}

async function streamTurn(client, threadId, assistantId) {
  const parts = [];
  for await (const part of client.runs.stream(threadId, assistantId, {
    input: { messages: [{ role: "user", content: QUESTION }] },
    streamMode: ["values", "updates", "messages-tuple"],
  })) {
    parts.push(part);
  }
  const of = (event) => parts.filter((p) => p.event === event).map((p) => p.data);
  const aiChunks = of("messages").filter(([message]) => message.type === "AIMessageChunk");
  const values = of("values");
  return {
    events: [...new Set(parts.map((p) => p.event))].sort(),
    errors: of("error"),
    answer: values.length ? lastAnswer(values.at(-1)) : null,
    streamed: aiChunks.map(([message]) => text(message.content)).join(""),
    nodes: of("updates").flatMap((update) => Object.keys(update)),
  };
}

async function main(url) {
  const client = new Client({ apiUrl: url });
  const assistants = await call("assistants.search", () => client.assistants.search({ limit: 20 }));
  const assistant = assistants.find((a) => a.graph_id === "waypoint");
  if (!assistant) throw new Error(`no "waypoint" assistant among ${JSON.stringify(assistants)}`);

  const thread = await call("threads.create", () => client.threads.create({ metadata: METADATA }));
  const threadId = thread.thread_id;
  const turn = await call("runs.stream", () => streamTurn(client, threadId, assistant.assistant_id));
  const history = await call("threads.getHistory", () =>
    client.threads.getHistory(threadId, { limit: 100 }),
  );
  const after = await call("threads.get", () => client.threads.get(threadId));

  return {
    graphs: assistants.map((a) => a.graph_id).sort(),
    ...turn,
    history_states: history.length,
    history_newest_first: chainedNewestFirst(history),
    history_head_answer: history.length ? lastAnswer(history[0].values) : null,
    history_head_next: history[0]?.next ?? null,
    created_metadata: thread.metadata,
    metadata: after.metadata,
    status: after.status,
  };
}

const url = process.argv[2];
if (!url) {
  console.error("usage: node sdk_turn.mjs URL   (the server, e.g. http://127.0.0.1:8000)");
  process.exit(2);
}
console.log(JSON.stringify(await main(url)));
