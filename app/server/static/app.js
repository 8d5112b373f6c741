// Waypoint's web page: threads, a streaming chat, the branch timeline and the graph. No build step.
"use strict";

const TOKEN_KEY = "waypoint-token";
const state = { thread: null, busy: false };
const $ = (id) => document.getElementById(id);

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

function setStatus(text, kind = "") {
  const status = $("status");
  status.textContent = text;
  status.className = kind;
}

// --- HTTP ------------------------------------------------------------------------------------

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
  if (response.status === 401) askForToken();
  if (!response.ok) throw new Error(await errorText(response));
  return response;
}

async function api(method, path, body) {
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
async function streamEvents(path, body, onEvent) {
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
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const parsed = parseEvent(block);
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

// --- threads ---------------------------------------------------------------------------------

async function loadThreads() {
  const threads = await api("GET", "/threads");
  const list = $("threads");
  list.replaceChildren();
  for (const thread of threads) {
    const item = el(
      "li",
      { class: thread.thread_id === state.thread ? "thread current" : "thread", "data-thread": thread.thread_id },
      el("strong", {}, thread.thread_id),
      el("span", { class: "title" }, thread.title || "(no messages yet)"),
      el("span", { class: "meta" }, `${thread.turns} turns · ${thread.checkpoints} checkpoints`),
    );
    item.addEventListener("click", () => openThread(thread.thread_id));
    list.append(item);
  }
}

$("new-thread").addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = $("new-thread-id").value.trim();
  try {
    const thread = await api("POST", "/threads", id ? { thread_id: id } : {});
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
  await Promise.all([loadMessages(), loadTimeline(), loadThreads()]);
}

// --- chat ------------------------------------------------------------------------------------

async function loadMessages() {
  const thread = await api("GET", `/threads/${encodeURIComponent(state.thread)}`);
  const box = $("messages");
  box.replaceChildren();
  for (const message of thread.messages) box.append(messageView(message));
  box.scrollTop = box.scrollHeight;
}

function messageView(message) {
  if (message.type === "tool") {
    const mark = message.status === "error" ? "✗" : "✓";
    return el("div", { class: `msg tool ${message.status || ""}` }, `${mark} ${message.name}: ${clip(message.content)}`);
  }
  const calls = (message.tool_calls || []).map((c) => el("div", { class: "call" }, `→ ${c.name} ${JSON.stringify(c.args)}`));
  const role = message.type === "human" ? "you" : message.type === "ai" ? "agent" : message.type;
  return el("div", { class: `msg ${message.type}` }, el("span", { class: "role" }, role), String(message.content || ""), ...calls);
}

function clip(text, limit = 300) {
  text = typeof text === "string" ? text : JSON.stringify(text);
  return text.length > limit ? `${text.slice(0, limit)} …` : text;
}

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("message").value;
  if (!text.trim() || state.busy || !state.thread) return;
  $("message").value = "";
  $("messages").append(messageView({ type: "human", content: text }));
  const strategy = $("strategy").value;
  const body = strategy ? { message: text, strategy } : { message: text };
  await runStream(`/threads/${encodeURIComponent(state.thread)}/runs/stream`, body);
});

$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

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
    await api("POST", `/threads/${encodeURIComponent(state.thread)}/runs/cancel`);
    setStatus("stopping after the current step…");
  } catch (error) {
    setStatus(error.message, "error");
  }
});

async function runStream(path, body) {
  state.busy = true;
  $("send").disabled = true;
  $("stop").hidden = false;
  setStatus("running…");
  const answer = el("div", { class: "msg ai streaming", "data-testid": "streaming" }, el("span", { class: "role" }, "agent"));
  $("messages").append(answer);
  try {
    await streamEvents(path, body, (type, data) => showEvent(type, data, answer));
    setStatus("");
  } catch (error) {
    answer.remove();
    setStatus(error.message, "error");
  } finally {
    state.busy = false;
    $("send").disabled = false;
    $("stop").hidden = true;
    answer.classList.remove("streaming");
    await Promise.all([loadTimeline(), loadThreads()]);
  }
}

function showEvent(type, data, answer) {
  const box = $("messages");
  if (type === "token") answer.append(data.text);
  else if (type === "tool_call") box.insertBefore(el("div", { class: "msg call" }, `→ ${data.name} ${JSON.stringify(data.args)}`), answer);
  else if (type === "tool_result") box.insertBefore(messageView({ type: "tool", ...data }), answer);
  else if (type === "retry") box.insertBefore(el("div", { class: "msg notice" }, `↻ retry ${data.attempt}/${data.max_attempts}: ${data.reason}`), answer);
  else if (type === "notice" || type === "error") box.insertBefore(el("div", { class: `msg ${type}` }, data.text || data.detail), answer);
  else if (STRATEGY_EVENTS[type]) box.insertBefore(el("div", { class: "msg notice strategy" }, STRATEGY_EVENTS[type](data)), answer);
  else if (type === "final") {
    if (answer.childNodes.length === 1 && data.answer) answer.append(data.answer);
    answer.dataset.status = data.status;
  }
  box.scrollTop = box.scrollHeight;
}

// --- timeline --------------------------------------------------------------------------------

async function loadTimeline() {
  const history = await api("GET", `/threads/${encodeURIComponent(state.thread)}/history`);
  const box = $("timeline");
  box.replaceChildren(branchView(history.tree));
  box.dataset.head = history.head;
}

function branchView(segments) {
  const list = el("ol", { class: "branch" });
  for (const segment of segments) {
    const item = el("li", { class: segmentClass(segment), "data-last": segment.last }, segmentLabel(segment), segmentButtons(segment));
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

function segmentButtons(segment) {
  const box = el("div", { class: "segment-actions" });
  if (!segment.head) box.append(el("button", { type: "button", class: "rollback", onclick: () => rollback({ checkpoint_id: segment.last }) }, "roll back here"));
  box.append(el("button", { type: "button", class: "fork", onclick: () => fork(segment.last) }, "fork"));
  if (segment.turn !== null) box.append(el("button", { type: "button", class: "replay", onclick: () => replay(segment.first) }, "replay turn"));
  return box;
}

async function rollback(body) {
  try {
    const result = await api("POST", `/threads/${encodeURIComponent(state.thread)}/rollback`, body);
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
    const body = { checkpoint_id: checkpointId, ...(to.trim() ? { to: to.trim() } : {}) };
    const result = await api("POST", `/threads/${encodeURIComponent(state.thread)}/fork`, body);
    await openThread(result.thread_id);
    setStatus(`forked into ${result.thread_id}`);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

async function replay(checkpointId) {
  const confirmSideEffects = confirm("Replay this turn? OK also re-runs tools with side effects (file writes).");
  await runStream(`/threads/${encodeURIComponent(state.thread)}/replay`, { checkpoint_id: checkpointId, confirm: confirmSideEffects });
  await loadMessages();
}

$("undo").addEventListener("click", () => rollback({ turns: 1 }));
$("fork-head").addEventListener("click", () => fork(null));

// --- graph -----------------------------------------------------------------------------------

async function loadGraph() {
  const graph = await api("GET", "/graph");
  $("mermaid").textContent = graph.mermaid;
  $("graph-svg").replaceChildren(drawGraph(graph));
}

function layers(graph) {
  const depth = { __start__: 0 };
  for (let pass = 0; pass < graph.nodes.length; pass++) {
    for (const edge of graph.edges) {
      if (edge.source in depth && edge.target !== "__start__" && !(edge.target in depth)) depth[edge.target] = depth[edge.source] + 1;
    }
  }
  return depth;
}

function drawGraph(graph) {
  const svgNs = "http://www.w3.org/2000/svg";
  const depth = layers(graph);
  const rows = {};
  const place = {};
  for (const node of graph.nodes) {
    if (!(node.id in depth)) continue;
    const row = depth[node.id];
    rows[row] = (rows[row] || 0) + 1;
    place[node.id] = { x: 20 + (rows[row] - 1) * 110, y: 20 + row * 60 };
  }
  const svg = document.createElementNS(svgNs, "svg");
  const height = 60 * (Math.max(...Object.values(depth)) + 1) + 20;
  const width = Math.max(...Object.values(place).map((p) => p.x)) + 110;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "graph");
  const shape = (tag, attrs, text) => {
    const node = document.createElementNS(svgNs, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (text) node.textContent = text;
    svg.append(node);
  };
  for (const edge of graph.edges) {
    const a = place[edge.source], b = place[edge.target];
    if (a && b) shape("line", { x1: a.x + 45, y1: a.y + 12, x2: b.x + 45, y2: b.y + 12, class: edge.conditional ? "edge conditional" : "edge" });
  }
  for (const [id, p] of Object.entries(place)) {
    shape("rect", { x: p.x, y: p.y, width: 90, height: 24, rx: 6, class: "node" });
    shape("text", { x: p.x + 45, y: p.y + 16, "text-anchor": "middle" }, id.replace(/__/g, ""));
  }
  return svg;
}

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
