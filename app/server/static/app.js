// Waypoint's web page: threads, a streaming chat, the branch timeline and the graph. No build step;
// answers are Markdown rendered by the vendored markdown-it (static/vendor/), raw HTML escaped.
"use strict";

const TOKEN_KEY = "waypoint-token";
const state = { thread: null, busy: false, follow: true };
const $ = (id) => document.getElementById(id);
const pane = $("messages");

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

function setStatus(text, kind = "") {
  const status = $("status");
  status.textContent = text;
  status.className = kind;
}

// --- the server ------------------------------------------------------------------------------
// Every request the page makes goes through this one object: switching the page to other routes
// changes only `serverApi`. What the rest of the page expects from it:
// Threads, runs and their events are the LangGraph Server API's (app/server/standard/); the
// timeline, rollback, fork and replay are Waypoint's own routes (app/server/api.py).
//   strategies() → [{strategy, graph_id, description}] (one assistant per strategy)
//   defaultStrategy() → the strategy a thread without one runs (after strategies())
//   listThreads() → [{thread_id, title, turns}]
//   getThread(id) → {thread_id, turns, strategy, approvals: [{id, name, args, reason}],
//                    messages: [{type: "human"|"ai"|"tool", content, tool_calls?: [{id, name, args}],
//                    tool_call_id?, name?, status?}]}
//   history(id) → {head, tree: [segment]} (segment: turn, preview, first, last, checkpoints, note, head,
//                  on_branch, branches: [[segment]]; app/server/timeline.py)
//   streamRun / resume / replay call onEvent(type, data) for each event: token {text}, tool_call {id, name, args},
//                  tool_result {id, name, status, content}, retry, notice, error, final {status, answer},
//                  and the strategies' plan, step_skipped, trial, verdict, lesson, route.

function serverApi({ onUnauthorized }) {
  function headers() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const result = { "Content-Type": "application/json" };
    if (token) result.Authorization = `Bearer ${token}`;
    return result;
  }

  async function request(method, path, body) {
    const response = await fetch(path, {
      method,
      headers: headers(),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401) onUnauthorized();
    if (!response.ok) throw new Error(await errorText(response));
    return response;
  }

  async function json(method, path, body) {
    return (await request(method, path, body)).json();
  }

  async function errorText(response) {
    try {
      const body = await response.json();
      return `${response.status}: ${body.detail}`;
    } catch {
      return `${response.status} ${response.statusText}`;
    }
  }

  // Server-Sent Events from a POST (EventSource can only GET): parse `event:` / `data:` blocks.
  async function stream(path, body, onEvent) {
    const response = await request("POST", path, body);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const parsed = parseEvent(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (parsed) onEvent(parsed.type, parsed.data);
      }
    }
  }

  function parseEvent(block) {
    let type = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) type = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).trim());
    }
    return data.length ? { type, data: JSON.parse(data.join("\n")) } : null;
  }

  const thread = (id) => `/threads/${encodeURIComponent(id)}`;
  // The assistants of the LangGraph Server API, one per strategy: strategy → graph id. The server
  // lists the default strategy's first (graphs/catalog.py): a thread that has none runs that one.
  const graphs = new Map();
  const defaultStrategy = () => graphs.keys().next().value;
  // Nodes whose streamed text is the answer (as in the terminal: app/cli/render.py ANSWER_NODES).
  const ANSWER_NODES = new Set(["agent", "finalize", "failure_handler", "synthesizer", "calculator", "small_talk"]);
  const runs = new Map(); // thread id → the id of its run in progress (for Stop)

  // A standard run's stream parts as the events the page shows: Waypoint's own (custom mode)
  // as they are, the answer's text from the message chunks (messages-tuple mode).
  function runEvents(id, onEvent) {
    return (type, data) => {
      if (type === "metadata") runs.set(id, data.run_id);
      else if (type === "custom") onEvent(data.type, data);
      else if (type === "messages") {
        const [chunk, meta] = data;
        const text = typeof chunk.content === "string" ? chunk.content : "";
        if (chunk.type === "AIMessageChunk" && text && ANSWER_NODES.has(meta.langgraph_node)) {
          onEvent("token", { text, node: meta.langgraph_node });
        }
      } else if (type === "error") onEvent("error", { detail: data.message });
    };
  }

  function summary(found) {
    const messages = (found.values && found.values.messages) || [];
    const first = messages.find((m) => m.type === "human");
    return {
      thread_id: found.thread_id,
      title: first ? String(first.content).slice(0, 80) : "",
      turns: (found.values && found.values.turn) || 0,
      strategy: found.values && found.values.strategy,
      approvals: approvalsOf(found.interrupts || {}),
      messages,
    };
  }

  // The risky calls a paused turn waits on (graphs/shared/approvals.py's interrupt value).
  function approvalsOf(interrupts) {
    return Object.values(interrupts)
      .flat()
      .filter((pending) => pending.value && pending.value.type === "approval")
      .flatMap((pending) => pending.value.calls);
  }

  async function strategies() {
    const found = (await json("POST", "/assistants/search", { limit: 100 })).filter((a) => a.metadata.strategy);
    for (const assistant of found) graphs.set(assistant.metadata.strategy, assistant.graph_id);
    return found.map((a) => ({ strategy: a.metadata.strategy, graph_id: a.graph_id, description: a.description }));
  }

  async function runOn(id, body, onEvent) {
    try {
      // final_event: Waypoint's own last event (the turn's status and answer), which LangGraph's
      // server does not send, so a client asks for it.
      const defaults = { stream_mode: ["custom", "messages-tuple"], final_event: true };
      await stream(`${thread(id)}/runs/stream`, { ...defaults, ...body }, runEvents(id, onEvent));
    } finally {
      runs.delete(id);
    }
  }

  async function streamRun(id, { message, strategy }, onEvent) {
    const own = strategy || summary(await json("GET", thread(id))).strategy || defaultStrategy();
    const body = { assistant_id: graphs.get(own), input: { messages: [{ role: "user", content: message }] }, if_not_exists: "create" };
    await runOn(id, body, onEvent);
  }

  // decisions: {call id: {action: "approve" | "edit" | "reject", args?, note?}}
  async function resume(id, decisions, onEvent) {
    const own = summary(await json("GET", thread(id))).strategy || defaultStrategy();
    await runOn(id, { assistant_id: graphs.get(own), command: { resume: decisions } }, onEvent);
  }

  return {
    strategies,
    defaultStrategy,
    graph: (strategy) => json("GET", `/graph?strategy=${encodeURIComponent(strategy)}`),
    listThreads: async () => (await json("POST", "/threads/search", { limit: 200 })).map(summary),
    createThread: (id) => json("POST", "/threads", id ? { thread_id: id } : {}),
    getThread: async (id) => summary(await json("GET", thread(id))),
    history: (id) => json("GET", `${thread(id)}/timeline`),
    streamRun,
    resume,
    cancel: (id) => {
      const run = runs.get(id);
      if (!run) throw new Error("no run of this page is in progress on this thread");
      return json("POST", `${thread(id)}/runs/${encodeURIComponent(run)}/cancel`);
    },
    // target: {turns: n} or {checkpoint_id}
    rollback: (id, target) => json("POST", `${thread(id)}/rollback`, target),
    fork: (id, { checkpointId, to }) =>
      json("POST", `${thread(id)}/fork`, { checkpoint_id: checkpointId, ...(to ? { to } : {}) }),
    replay: (id, { checkpointId, confirm }, onEvent) =>
      stream(`${thread(id)}/replay`, { checkpoint_id: checkpointId, confirm }, runEvents(id, onEvent)),
  };
}

const api = serverApi({ onUnauthorized: () => askForToken() });

// --- token -----------------------------------------------------------------------------------

function askForToken() {
  $("token-form").hidden = false;
  $("token-input").focus();
  setStatus("this server needs an API token", "error");
}

$("token-button").addEventListener("click", askForToken);
$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
  $("token-form").hidden = true;
  refresh();
});

// --- panels: threads and timeline fold behind toggles in a narrow window ---------------------

const PANELS = { threads: "sidebar", timeline: "side" };

// A folded panel is a drawer (style.css's media queries decide when); at most one is open.
function showPanel(name) {
  for (const panel of Object.keys(PANELS)) {
    document.body.classList.toggle(`show-${panel}`, panel === name);
    $(`toggle-${panel}`).setAttribute("aria-expanded", String(panel === name));
  }
  $("scrim").hidden = name === null;
}

for (const [panel, id] of Object.entries(PANELS)) {
  $(`toggle-${panel}`).addEventListener("click", () =>
    showPanel(document.body.classList.contains(`show-${panel}`) ? null : panel),
  );
  $(id).querySelector(".close").addEventListener("click", () => showPanel(null));
}
$("scrim").addEventListener("click", () => showPanel(null));
matchMedia("(max-width: 1100px)").addEventListener("change", () => showPanel(null));
matchMedia("(max-width: 720px)").addEventListener("change", () => showPanel(null));

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  if (closeMenus()) return;
  showPanel(null);
});

// --- threads ---------------------------------------------------------------------------------

async function loadThreads() {
  const threads = await api.listThreads();
  const list = $("threads");
  list.replaceChildren();
  for (const thread of threads) {
    const item = el(
      "li",
      { class: thread.thread_id === state.thread ? "thread current" : "thread", "data-thread": thread.thread_id },
      el("strong", {}, thread.thread_id),
      el("span", { class: "title" }, thread.title || "(no messages yet)"),
      el("span", { class: "meta" }, count(thread.turns, "turn")),
    );
    item.tabIndex = 0;
    item.addEventListener("click", () => openThread(thread.thread_id));
    item.addEventListener("keydown", (event) => event.key === "Enter" && openThread(thread.thread_id));
    list.append(item);
  }
}

$("new-thread").addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = $("new-thread-id").value.trim();
  try {
    const thread = await api.createThread(id);
    $("new-thread-id").value = "";
    await openThread(thread.thread_id);
  } catch (error) {
    setStatus(error.message, "error");
  }
});

async function openThread(threadId) {
  state.thread = threadId;
  history.replaceState(null, "", `#${encodeURIComponent(threadId)}`);
  $("thread-title").textContent = `Thread ${threadId}`;
  for (const id of ["message", "send", "fork-head"]) $(id).disabled = false;
  $("timeline").replaceChildren(); // never the previous thread's, even for a moment
  showPanel(null);
  await Promise.all([loadMessages(), loadTimeline(), loadThreads()]);
}

// --- messages: Markdown answers, tool cards, the pane pinned to the newest -------------------

// html: false escapes raw HTML in answers; markdown-it's link check drops javascript:, vbscript:,
// file: and most data: links. Images are off: a model's answer (or a tool result it repeats) must not
// make the browser fetch an address it chose.
const markdown = window.markdownit({ html: false, linkify: true, breaks: true }).disable("image");
const renderLinkOpen = markdown.renderer.rules.link_open || ((tokens, i, options, env, self) => self.renderToken(tokens, i, options));
markdown.renderer.rules.link_open = (tokens, i, options, env, self) => {
  tokens[i].attrSet("target", "_blank");
  tokens[i].attrSet("rel", "noopener noreferrer");
  return renderLinkOpen(tokens, i, options, env, self);
};

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part === "string" ? part : part.text || "")).join("");
  return content == null ? "" : JSON.stringify(content);
}

function bubble(type, text = "") {
  const role = { human: "you", ai: "agent" }[type] || type;
  const node = el("div", { class: `msg ${type}` }, el("span", { class: "role" }, role), el("div", { class: "body" }));
  setBubbleText(node, text);
  return node;
}

function setBubbleText(node, text) {
  node.dataset.text = text;
  const body = node.querySelector(".body");
  if (node.classList.contains("ai")) body.innerHTML = markdown.render(text);
  else body.textContent = text;
}

async function loadMessages() {
  const thread = await api.getThread(state.thread);
  if (thread.thread_id !== state.thread) return;
  pane.replaceChildren();
  const cards = new Map();
  for (const message of thread.messages) {
    if (message.type === "tool") {
      finishCard(cards.get(message.tool_call_id) || pane.appendChild(toolCard({ name: message.name })), message);
      continue;
    }
    const text = textOf(message.content);
    if (message.type !== "ai" || text.trim()) pane.append(bubble(message.type, text));
    for (const call of message.tool_calls || []) cards.set(call.id, pane.appendChild(toolCard(call)));
  }
  settle(thread);
  followNewest();
}

// What the stored thread says once a run is over (or a thread is opened): a card whose call got no
// result says why (waiting for an approval, or not run: a stop, a refusal) instead of "running…"
// forever; a paused turn shows its approvals; Send and Undo are enabled only when they can work.
function settle(thread) {
  const results = new Map(thread.messages.filter((m) => m.type === "tool").map((m) => [m.tool_call_id, m]));
  const waiting = new Set(thread.approvals.map((call) => call.id));
  for (const card of pane.querySelectorAll('.tool-card[data-status="running"]')) {
    const id = card.dataset.call;
    if (results.has(id)) {
      finishCard(card, results.get(id));
      continue;
    }
    card.dataset.status = waiting.has(id) ? "waiting" : "not-run";
    card.querySelector(".tool-outcome").textContent = waiting.has(id) ? "waiting for your approval" : "not run";
  }
  for (const box of pane.querySelectorAll(".approvals")) box.remove();
  if (thread.approvals.length) pane.append(approvalBox(thread.approvals));
  state.waiting = thread.approvals.length > 0;
  $("send").disabled = state.busy || state.waiting;
  $("message").placeholder = state.waiting ? "Answer the approval above first" : "Ask something — e.g. weather in Paris and Rome, which is warmer?";
  // Undo rolls back one turn: the first turn has nothing before it to go back to.
  $("undo").disabled = thread.turns < 2;
  $("undo").title = thread.turns < 2 ? "nothing to undo: the thread has no earlier turn" : "roll back the last turn";
  const shown = thread.strategy || api.defaultStrategy();
  if (state.strategy !== shown) loadGraph(shown);
}

async function settleRun(turn) {
  const thread = await api.getThread(state.thread);
  if (thread.thread_id !== state.thread) return;
  turn.showStoredAnswer(thread.messages);
  settle(thread);
}

// --- approvals: each risky call of a paused turn, with Approve / Edit / Reject ----------------

// One card per call: its arguments as fields (code as code), read-only until Edit. The turn goes
// on once every call has an answer.
function approvalBox(calls) {
  const decisions = {};
  const box = el("section", { class: "approvals", "aria-label": "Approvals" });
  box.append(el("p", { class: "approvals-head" }, `The agent is waiting for your approval of ${count(calls.length, "call")}.`));
  for (const call of calls) box.append(approvalCard(call, (decision) => decide(call.id, decision)));
  function decide(id, decision) {
    decisions[id] = decision;
    if (Object.keys(decisions).length === calls.length) answerApprovals(decisions);
  }
  return box;
}

function approvalCard(call, decide) {
  const fields = Object.entries(call.args || {}).map(([key, value]) => argumentField(key, value));
  const card = el(
    "div",
    { class: "approval-card", "data-call": call.id },
    el("h4", {}, el("span", { class: "tool-name" }, call.name), el("span", { class: "reason" }, ` ${call.reason || ""}`)),
    el("div", { class: "fields" }, ...fields.map((f) => f.node)),
  );
  const buttons = el("div", { class: "approval-buttons" });
  const button = (label, onclick, kind = "") => el("button", { type: "button", class: kind, onclick }, label);
  const answered = (text) => {
    buttons.replaceChildren(el("span", { class: "answered" }, text));
    for (const field of fields) field.input.readOnly = true;
  };
  const approve = button("Approve", () => {
    const edited = card.classList.contains("editing");
    const args = Object.fromEntries(fields.map((f) => [f.key, f.value()]));
    answered(edited ? "approved with your edits" : "approved");
    decide(edited ? { action: "edit", args } : { action: "approve" });
  }, "primary");
  const edit = button("Edit", () => {
    card.classList.add("editing");
    for (const field of fields) field.input.readOnly = false;
    fields[0]?.input.focus();
    edit.remove();
  });
  const reject = button("Reject", () => {
    answered("rejected");
    decide({ action: "reject", note: "the user rejected it on the page" });
  });
  buttons.append(approve, edit, reject);
  card.append(buttons);
  return card;
}

// An argument as a field of its own type: text with several lines (code, file content) in a
// monospace box with line numbers; other text, numbers and flags as inputs; lists and objects as JSON.
function argumentField(key, value) {
  const multiline = typeof value === "string" && (value.includes("\n") || ["code", "content"].includes(key));
  let input;
  if (multiline) {
    input = el("textarea", { class: "code", rows: String(Math.min(16, value.split("\n").length + 1)), spellcheck: "false" });
    input.value = value;
  } else if (typeof value === "boolean") {
    input = el("input", { type: "checkbox" });
    input.checked = value;
  } else {
    input = el("input", { type: typeof value === "number" ? "number" : "text" });
    input.value = typeof value === "string" || typeof value === "number" ? String(value) : JSON.stringify(value);
  }
  input.readOnly = true;
  input.setAttribute("aria-label", key);
  const numbers = multiline ? el("pre", { class: "line-numbers", "aria-hidden": "true" }, value.split("\n").map((_, i) => i + 1).join("\n")) : "";
  const node = el("label", { class: multiline ? "field code-field" : "field" }, el("span", { class: "key" }, key), el("div", { class: "field-input" }, numbers, input));
  const read = () => {
    if (typeof value === "boolean") return input.checked;
    if (typeof value === "number") return Number(input.value);
    if (typeof value === "string") return input.value;
    try {
      return JSON.parse(input.value);
    } catch {
      return input.value;
    }
  };
  return { key, node, input, value: read };
}

async function answerApprovals(decisions) {
  const verbs = Object.values(decisions).map((d) => d.action);
  await runStream((onEvent) => api.resume(state.thread, decisions, onEvent));
  setStatus(`answered: ${verbs.map((v) => ({ approve: "approved", edit: "approved as edited", reject: "rejected" })[v]).join(", ")}`);
}

function atBottom() {
  return pane.scrollHeight - pane.scrollTop - pane.clientHeight < 24;
}

function followNewest() {
  state.follow = true;
  pinToNewest();
  $("jump").hidden = true;
}

function pinToNewest() {
  pane.scrollTop = pane.scrollHeight;
  state.pinnedAt = pane.scrollTop;
}

// Whatever is added to the pane (a streamed token, a card, a reload) keeps the newest message in
// view, unless the reader has scrolled up to read something older: then "↓ Newest" brings it back.
// A scroll event comes after the scroll itself, so a change in between must not undo the reader's
// scroll: the pane is further up than where it was last pinned means the reader moved it.
new MutationObserver(() => {
  if (state.follow && pane.scrollTop + 24 < (state.pinnedAt || 0)) {
    state.follow = false;
    $("jump").hidden = false;
  }
  if (state.follow) pinToNewest();
}).observe(pane, { childList: true, subtree: true, characterData: true });

pane.addEventListener("scroll", () => {
  state.follow = atBottom();
  $("jump").hidden = state.follow;
});
$("jump").addEventListener("click", followNewest);

// --- tool calls as cards: the call's arguments and its result, folded --------------------------

function toolCard({ id = "", name, args = null }) {
  const card = el(
    "details",
    { class: "tool-card", "data-call": id, "data-status": "running" },
    el(
      "summary",
      {},
      el("span", { class: "tool-name" }, name),
      el("span", { class: "tool-brief" }, args ? brief(args, {}, titleText) : ""),
      el("span", { class: "tool-outcome" }, "running…"),
    ),
    el("div", { class: "tool-args" }, el("h4", {}, "Arguments"), valueView(args)),
  );
  card.args = args || {};
  return card;
}

// The result in the card; its one-line outcome leaves out what merely repeats an argument.
function finishCard(card, { status, content }) {
  const failed = status === "error";
  const text = textOf(content);
  const value = parsedJson(text);
  card.dataset.status = failed ? "error" : "success";
  const outcome = isRecord(value) ? brief(value, card.args) : firstLine(text);
  card.querySelector(".tool-outcome").textContent = `${failed ? "✗" : "✓"} ${clip(outcome, 80)}`;
  card.append(el("div", { class: "tool-result" }, el("h4", {}, failed ? "Error" : "Result"), valueView(value)));
}

const isRecord = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

function parsedJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// `key: value, …` of a record's plain values (but those equal to `known`'s), for a one-line summary;
// `line` makes each value one line.
function brief(record, known = {}, line = firstLine) {
  const plain = Object.entries(record).filter(([k, v]) => (v === null || typeof v !== "object") && known[k] !== v);
  return clip(plain.map(([k, v]) => `${k}: ${line(String(v))}`).join(", "), 80);
}

// A model's argument as a card's title (app/text.py title_shown): HTML entities decoded (llama-cpp-
// python's chat formats HTML-escape the prompt, and a small model copies `&#39;` into its arguments),
// a line break "⏎" whether real or written out as "\n", runs of spaces one. The card's Arguments
// section still shows the value as the tool received it.
function titleText(text) {
  let decoded = text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, decodedEntity);
  if (!decoded.includes("\n")) decoded = decoded.replace(/\\r\\n|\\[nr]/g, "\n").replace(/\\t/g, " ");
  return decoded.trim().replace(/\s*\n\s*/g, " ⏎ ").replace(/\s+/g, " ");
}

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

function decodedEntity(whole, name) {
  if (name[0] !== "#") return ENTITIES[name.toLowerCase()] ?? whole;
  const code = name[1].toLowerCase() === "x" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
  return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
}

function valueView(value) {
  if (value === null || value === undefined || value === "") return el("p", { class: "empty" }, "(none)");
  if (isRecord(value)) {
    const list = el("dl", { class: "kv" });
    for (const [key, item] of Object.entries(value)) list.append(el("dt", {}, key), el("dd", {}, plainView(item)));
    return list;
  }
  return plainView(value);
}

function plainView(value) {
  if (typeof value === "string") return value.includes("\n") ? el("pre", {}, value) : el("span", {}, value);
  if (value !== null && typeof value === "object") return el("pre", {}, JSON.stringify(value, null, 2));
  return el("span", {}, String(value));
}

const firstLine = (text) => text.split("\n", 1)[0];
const clip = (text, limit) => (text.length > limit ? `${text.slice(0, limit - 1)}…` : text);

// --- a run, streamed -------------------------------------------------------------------------

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("message").value;
  if (!text.trim() || state.busy || !state.thread) return;
  $("message").value = "";
  fitComposer();
  followNewest();
  pane.append(bubble("human", text));
  const strategy = $("strategy").value;
  await runStream((onEvent) => api.streamRun(state.thread, { message: text, strategy }, onEvent));
});

$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

// The message box grows with what is typed, up to a third of the window; then it scrolls.
function fitComposer() {
  const box = $("message");
  box.style.height = "auto";
  box.style.height = `${Math.min(box.scrollHeight + 2, innerHeight / 3)}px`;
}
$("message").addEventListener("input", fitComposer);

// What a strategy reports while it works (graphs/plan/, reflexion/, routed/), one line each.
const STRATEGY_EVENTS = {
  plan: (d) =>
    `${d.replan ? "re-plan" : d.continued ? "rest of the plan" : "plan"}: ${d.steps.join(" · ") || "no tool needed"}`,
  step_skipped: (d) => `step ${d.step} skipped: ${d.reason}`,
  trial: (d) => `attempt ${d.trial}/${d.max_trials}`,
  verdict: (d) => `verdict: ${d.success ? "success" : "failure"} — ${d.reason}`,
  lesson: (d) => `lesson: ${d.lesson}`,
  route: (d) => `route: ${d.path}`,
};

$("stop").addEventListener("click", async () => {
  try {
    await api.cancel(state.thread);
    setStatus("stopping after the current step…");
  } catch (error) {
    setStatus(error.message, "error");
  }
});

// The turn being streamed: tokens go to the answer being written (rendered as Markdown once per
// frame); a tool card, notice or strategy step goes above it while it is empty, else below it, and
// a new answer starts under that.
class LiveTurn {
  constructor(box) {
    this.box = box;
    this.thread = state.thread;
    this.cards = new Map();
    this.answers = [];
    this.frame = 0;
    this.answer = this.newAnswer();
  }

  newAnswer() {
    const answer = bubble("ai");
    answer.classList.add("streaming");
    answer.setAttribute("aria-busy", "true");
    this.box.append(answer);
    this.answers.push(answer);
    return answer;
  }

  place(node) {
    if (!this.answer.dataset.text) {
      this.answer.before(node);
    } else {
      this.settle();
      this.box.append(node);
      this.answer = this.newAnswer();
    }
    return node;
  }

  write(text) {
    this.answer.dataset.text += text;
    this.frame ||= requestAnimationFrame(() => this.render());
  }

  render() {
    this.frame = 0;
    setBubbleText(this.answer, this.answer.dataset.text);
  }

  settle() {
    cancelAnimationFrame(this.frame);
    this.render();
    this.answer.classList.remove("streaming");
    this.answer.removeAttribute("aria-busy");
  }

  show(type, data) {
    if (state.thread !== this.thread) return; // the reader opened another thread meanwhile
    this.seen = true;
    if (type === "token") this.write(data.text);
    else if (type === "tool_call") this.cards.set(data.id, this.place(toolCard(data)));
    else if (type === "tool_result") finishCard(this.cards.get(data.id) || this.place(toolCard(data)), data);
    else if (type === "retry") this.place(line(`↻ retry ${data.attempt}/${data.max_attempts}: ${data.reason}`));
    else if (type === "notice") this.place(line(data.text));
    else if (type === "error") this.place(line(data.detail || data.text, "error"));
    else if (STRATEGY_EVENTS[type]) this.place(line(STRATEGY_EVENTS[type](data), "notice strategy"));
    else if (type === "final") this.finish(data);
  }

  // The final answer is shown once: an answer that was not streamed (or only in part, before a
  // stop) fills the empty bubble, never a second copy.
  finish({ answer, status }) {
    const streamed = this.answers.some((node) => node.dataset.text.trim() === (answer || "").trim());
    if (answer && !streamed && !this.answer.dataset.text) this.answer.dataset.text = answer;
    this.answer.dataset.status = status;
    this.end();
  }

  end() {
    this.settle();
    if (!this.answer.dataset.text) this.answer.remove();
  }

  // The turn's stored answer, when the stream did not carry it (a node that does not stream
  // tokens, a run joined late): shown once, never a second copy.
  showStoredAnswer(messages) {
    const last = messages[messages.length - 1];
    const text = last && last.type === "ai" ? textOf(last.content).trim() : "";
    if (!text || !this.seen || state.thread !== this.thread) return;
    if (this.answers.some((node) => node.isConnected && node.dataset.text.trim() === text)) return;
    this.box.append(bubble("ai", text));
  }
}

function line(text, kind = "notice") {
  return el("div", { class: `msg ${kind}` }, text);
}

// Returns whether the run ended without an error (its last status line stays otherwise).
async function runStream(start) {
  state.busy = true;
  $("send").disabled = true;
  $("stop").hidden = false;
  setStatus("running…");
  const turn = new LiveTurn(pane);
  let ok = true;
  try {
    await start((type, data) => turn.show(type, data));
    setStatus("");
  } catch (error) {
    ok = false;
    setStatus(error.message, "error");
  } finally {
    turn.end();
    state.busy = false;
    $("stop").hidden = true;
    await Promise.all([settleRun(turn), loadTimeline(), loadThreads()]);
  }
  return ok;
}

// --- timeline: the branch tree, one action menu per entry ------------------------------------

async function loadTimeline() {
  const thread = state.thread;
  let found;
  try {
    found = await api.history(thread);
  } catch {
    found = { tree: [], head: "" }; // a new thread: no turn yet
  }
  if (thread !== state.thread) return; // another thread was opened meanwhile
  const box = $("timeline");
  box.replaceChildren(found.tree.length ? branchView(found.tree) : el("p", { class: "empty" }, "no turns yet"));
  box.dataset.head = found.head;
  const head = box.querySelector(".segment.head > .entry");
  if (head) head.scrollIntoView({ block: "nearest" }); // a long thread opens at its head
}

function branchView(segments) {
  const list = el("ol", { class: "branch" });
  for (const segment of replaysMerged(segments)) {
    const item = el(
      "li",
      { class: segmentClass(segment), "data-last": segment.last },
      el("div", { class: "entry" }, segmentLabel(segment), entryMenu(segment)),
    );
    for (const [branch, times] of foldedBranches(segment.branches)) {
      const label = times > 1 ? `branch ×${times} (the same input; the newest shown)` : "branch";
      item.append(el("div", { class: "fork-label" }, label), branchView(branch));
    }
    list.append(item);
  }
  return list;
}

// A turn replayed again and again is one line: the newest replay, with how many there were; the
// attempts it replaced hang under it as branches (folded below).
function replaysMerged(segments) {
  const merged = [];
  for (const segment of segments) {
    const before = merged[merged.length - 1];
    if (before && segment.note === "replay" && before.turn === segment.turn && before.preview === segment.preview) {
      merged[merged.length - 1] = {
        ...segment,
        runs: (before.runs || 1) + 1,
        head: segment.head || before.head,
        branches: [...before.branches, ...segment.branches],
      };
    } else merged.push(segment);
  }
  return merged;
}

// Branches left by replaying or rolling back the same turn again and again start with the same
// input: one line for them, with how many there are, showing the one with the head, else the newest
// (checkpoint ids grow with time).
function foldedBranches(branches) {
  const groups = new Map();
  for (const branch of branches) {
    const first = branch[0] || {};
    const key = JSON.stringify([first.turn, first.preview]);
    const group = groups.get(key) || { times: 0, shown: branch };
    group.times += 1;
    if (!holdsHead(group.shown) && (holdsHead(branch) || first.first > group.shown[0].first)) group.shown = branch;
    groups.set(key, group);
  }
  return [...groups.values()].map((g) => [g.shown, g.times]);
}

const holdsHead = (branch) => branch.some((segment) => segment.head || segment.branches.some((b) => holdsHead(b)));

function segmentClass(segment) {
  return ["segment", segment.head ? "head" : "", segment.on_branch ? "" : "off", segment.note ? "noted" : ""].join(" ").trim();
}

function segmentLabel(segment) {
  const turn = segment.turn === null ? "start" : `turn ${segment.turn}`;
  const parts = [el("span", { class: "turn" }, turn), ` ${segment.preview.slice(0, 40)} `, el("code", {}, `…${segment.last.slice(-8)}`)];
  if (segment.note) parts.push(el("span", { class: "note" }, segment.runs > 1 ? `${segment.note} ×${segment.runs - 1}` : segment.note));
  if (segment.head) parts.push(el("span", { class: "head-mark" }, "← head"));
  return el("div", { class: "label", title: `${segment.checkpoints} checkpoint(s) ${segment.first} … ${segment.last}` }, ...parts);
}

function entryMenu(segment) {
  const items = [];
  if (!segment.head) items.push(["Roll back here", () => rollback({ checkpoint_id: segment.last })]);
  items.push(["Fork…", () => fork(segment.last)]);
  if (segment.turn !== null) items.push(["Replay turn", () => replay(segment.first, segment.turn)]);
  const menu = el("div", { class: "entry-menu", role: "menu", hidden: "" });
  for (const [label, action] of items) {
    menu.append(el("button", { type: "button", role: "menuitem", onclick: () => (closeMenus(), action()) }, label));
  }
  menu.addEventListener("keydown", moveInMenu);
  const label = segment.turn === null ? "the start" : `turn ${segment.turn}`;
  const button = el("button", {
    type: "button",
    class: "entry-menu-button",
    "aria-haspopup": "menu",
    "aria-expanded": "false",
    "aria-label": `Actions for ${label}`,
    title: "Roll back, fork or replay",
  }, "⋯");
  button.addEventListener("click", (event) => {
    event.stopPropagation();
    const opening = menu.hidden;
    closeMenus();
    if (!opening) return;
    menu.hidden = false;
    button.setAttribute("aria-expanded", "true");
    menu.querySelector("button").focus();
  });
  return el("div", { class: "entry-actions" }, button, menu);
}

function moveInMenu(event) {
  const items = [...event.currentTarget.querySelectorAll("[role=menuitem]")];
  const step = { ArrowDown: 1, ArrowUp: -1 }[event.key];
  if (!step) return;
  event.preventDefault();
  items[(items.indexOf(document.activeElement) + step + items.length) % items.length].focus();
}

// Closes the open entry menu, if any; says whether one was open.
function closeMenus() {
  let closed = false;
  for (const menu of document.querySelectorAll(".entry-menu:not([hidden])")) {
    menu.hidden = true;
    menu.previousElementSibling.setAttribute("aria-expanded", "false");
    closed = true;
  }
  return closed;
}
document.addEventListener("click", closeMenus);

async function rollback(target) {
  try {
    const result = await api.rollback(state.thread, target);
    setStatus(`rolled back to turn ${result.target.turn}; undo: roll back to …${result.previous_head.slice(-8)}`);
    await Promise.all([loadMessages(), loadTimeline(), loadThreads()]);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

async function fork(checkpointId) {
  const to = prompt("New thread id (empty: a new id is made)", "");
  if (to === null) return;
  try {
    const result = await api.fork(state.thread, { checkpointId, to: to.trim() });
    await openThread(result.thread_id);
    setStatus(`forked into ${result.thread_id}`);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

async function replay(checkpointId, turn) {
  const confirmSideEffects = confirm("Replay this turn? OK also re-runs tools with side effects (file writes).");
  followNewest();
  const ok = await runStream((onEvent) => api.replay(state.thread, { checkpointId, confirm: confirmSideEffects }, onEvent));
  await loadMessages(); // the new branch's record
  if (ok) setStatus(`replayed turn ${turn} on a new branch; roll back to return to the previous head`);
}

$("undo").addEventListener("click", () => rollback({ turns: 1 }));
$("fork-head").addEventListener("click", () => fork(null));

// --- graph: drawn in the side panel (graph.js), enlarged in a dialog on click ----------------

async function loadGraph(strategy) {
  state.strategy = strategy;
  const graph = await api.graph(strategy);
  if (state.strategy !== strategy) return;
  $("graph-title").textContent = `Graph: ${strategy}`;
  $("mermaid").textContent = graph.mermaid;
  const layout = graphLayout(graph);
  $("graph-svg").replaceChildren(drawGraph(layout, 1));
  $("graph-large").replaceChildren(drawGraph(layout, 1.8));
}

$("graph-svg").addEventListener("click", () => $("graph-dialog").showModal());
$("graph-dialog").querySelector(".close").addEventListener("click", () => $("graph-dialog").close());
$("graph-dialog").addEventListener("click", (event) => {
  if (event.target === event.currentTarget) event.currentTarget.close(); // a click on the backdrop
});

// --- start -----------------------------------------------------------------------------------

// The strategy menu lists the server's assistants (one per strategy): no list of names here.
async function loadStrategies() {
  const menu = $("strategy");
  for (const { strategy, description } of await api.strategies()) {
    menu.append(el("option", { value: strategy, title: description }, strategy));
  }
}

async function refresh() {
  try {
    await loadStrategies(); // first: the graph shown before a thread is open is the default's
    await Promise.all([loadThreads(), loadGraph(api.defaultStrategy())]);
    const wanted = decodeURIComponent(location.hash.slice(1));
    if (wanted) await openThread(wanted);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

refresh();
