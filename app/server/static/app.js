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
//   listThreads() → [{thread_id, title, turns}]
//   getThread(id) → {thread_id, messages: [{type: "human"|"ai"|"tool", content, tool_calls?: [{id, name,
//                    args}], tool_call_id?, name?, status?}]}
//   history(id) → {head, tree: [segment]} (segment: turn, preview, first, last, checkpoints, note, head,
//                  on_branch, branches: [[segment]]; app/server/timeline.py)
//   streamRun / replay call onEvent(type, data) for each event: token {text}, tool_call {id, name, args},
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
  // The assistants of the LangGraph Server API: one per strategy.
  const GRAPHS = { react: "waypoint", plan: "waypoint-plan", reflexion: "waypoint-reflexion", routed: "waypoint-routed" };
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
      messages,
    };
  }

  async function streamRun(id, { message, strategy }, onEvent) {
    const own = strategy || summary(await json("GET", thread(id))).strategy || "react";
    const body = {
      assistant_id: GRAPHS[own],
      input: { messages: [{ role: "user", content: message }] },
      stream_mode: ["custom", "messages-tuple"],
      final_event: true,
      if_not_exists: "create",
    };
    try {
      await stream(`${thread(id)}/runs/stream`, body, runEvents(id, onEvent));
    } finally {
      runs.delete(id);
    }
  }

  return {
    graph: () => json("GET", "/graph"),
    listThreads: async () => (await json("POST", "/threads/search", { limit: 200 })).map(summary),
    createThread: (id) => json("POST", "/threads", id ? { thread_id: id } : {}),
    getThread: async (id) => summary(await json("GET", thread(id))),
    history: (id) => json("GET", `${thread(id)}/timeline`),
    streamRun,
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
  for (const id of ["message", "send", "undo", "fork-head"]) $(id).disabled = false;
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
  followNewest();
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
      el("span", { class: "tool-brief" }, args ? brief(args) : ""),
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

// `key: value, …` of a record's plain values (but those equal to `known`'s), for a one-line summary.
function brief(record, known = {}) {
  const plain = Object.entries(record).filter(([k, v]) => (v === null || typeof v !== "object") && known[k] !== v);
  return clip(plain.map(([k, v]) => `${k}: ${firstLine(String(v))}`).join(", "), 80);
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
  plan: (d) => `${d.replan ? "re-plan" : "plan"}: ${d.steps.join(" · ") || "no tool needed"}`,
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
}

function line(text, kind = "notice") {
  return el("div", { class: `msg ${kind}` }, text);
}

async function runStream(start) {
  state.busy = true;
  $("send").disabled = true;
  $("stop").hidden = false;
  setStatus("running…");
  const turn = new LiveTurn(pane);
  try {
    await start((type, data) => turn.show(type, data));
    setStatus("");
  } catch (error) {
    setStatus(error.message, "error");
  } finally {
    turn.end();
    state.busy = false;
    $("send").disabled = false;
    $("stop").hidden = true;
    await Promise.all([loadTimeline(), loadThreads()]);
  }
}

// --- timeline: the branch tree, one action menu per entry ------------------------------------

async function loadTimeline() {
  const found = await api.history(state.thread);
  const box = $("timeline");
  box.replaceChildren(branchView(found.tree));
  box.dataset.head = found.head;
}

function branchView(segments) {
  const list = el("ol", { class: "branch" });
  for (const segment of segments) {
    const item = el(
      "li",
      { class: segmentClass(segment), "data-last": segment.last },
      el("div", { class: "entry" }, segmentLabel(segment), entryMenu(segment)),
    );
    for (const branch of segment.branches) item.append(el("div", { class: "fork-label" }, "branch"), branchView(branch));
    list.append(item);
  }
  return list;
}

function segmentClass(segment) {
  return ["segment", segment.head ? "head" : "", segment.on_branch ? "" : "off", segment.note ? "noted" : ""].join(" ").trim();
}

function segmentLabel(segment) {
  const turn = segment.turn === null ? "start" : `turn ${segment.turn}`;
  const parts = [el("span", { class: "turn" }, turn), ` ${segment.preview.slice(0, 40)} `, el("code", {}, `…${segment.last.slice(-8)}`)];
  if (segment.note) parts.push(el("span", { class: "note" }, segment.note));
  if (segment.head) parts.push(el("span", { class: "head-mark" }, "← head"));
  return el("div", { class: "label", title: `${segment.checkpoints} checkpoint(s) ${segment.first} … ${segment.last}` }, ...parts);
}

function entryMenu(segment) {
  const items = [];
  if (!segment.head) items.push(["Roll back here", () => rollback({ checkpoint_id: segment.last })]);
  items.push(["Fork…", () => fork(segment.last)]);
  if (segment.turn !== null) items.push(["Replay turn", () => replay(segment.first)]);
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

async function replay(checkpointId) {
  const confirmSideEffects = confirm("Replay this turn? OK also re-runs tools with side effects (file writes).");
  followNewest();
  await runStream((onEvent) => api.replay(state.thread, { checkpointId, confirm: confirmSideEffects }, onEvent));
  await loadMessages();
}

$("undo").addEventListener("click", () => rollback({ turns: 1 }));
$("fork-head").addEventListener("click", () => fork(null));

// --- graph: drawn in the side panel (graph.js), enlarged in a dialog on click ----------------

async function loadGraph() {
  const graph = await api.graph();
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

async function refresh() {
  try {
    await Promise.all([loadThreads(), loadGraph()]);
    const wanted = decodeURIComponent(location.hash.slice(1));
    if (wanted) await openThread(wanted);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

refresh();
