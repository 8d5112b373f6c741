// The compiled graph (GET /graph: nodes and edges) drawn as SVG, top to bottom, without a library:
// each node one row below the longest path that reaches it, an edge that skips rows routed through
// a waypoint in each, rows ordered to cut crossings, and an edge that loops back (tools → agent)
// drawn as a curve up the side.
"use strict";

const GRAPH = { nodeHeight: 26, gap: 14, row: 62, margin: 8, loopRoom: 28, charWidth: 7.3, padding: 16, waypoint: 4 };

const edgeKey = (edge) => `${edge.source}>${edge.target}`;

function graphLayout(graph) {
  const { reached, back } = walkFrom("__start__", graph.edges);
  const forward = graph.edges.filter((e) => reached.has(e.source) && !back.has(edgeKey(e)));
  const depth = longestPaths("__start__", forward);
  const rows = [];
  const addToRow = (id, row) => (rows[row] ||= []).push(id);
  for (const node of graph.nodes) if (node.id in depth) addToRow(node.id, depth[node.id]);
  const routes = forward.map((edge) => {
    const route = [edge.source];
    for (let row = depth[edge.source] + 1; row < depth[edge.target]; row++) {
      route.push(`${edgeKey(edge)}#${row}`);
      addToRow(route.at(-1), row);
    }
    return { edge, route: [...route, edge.target] };
  });
  orderRows(rows, routes);
  const loops = graph.edges.filter((e) => back.has(edgeKey(e)) && e.source in depth && e.target in depth);
  return { ...placeRows(rows), routes, loops };
}

// A depth-first walk: the nodes it reaches and the edges that lead back onto its own path.
function walkFrom(start, edges) {
  const next = {};
  for (const edge of edges) (next[edge.source] ||= []).push(edge.target);
  const reached = new Set();
  const onPath = new Set();
  const back = new Set();
  const visit = (id) => {
    reached.add(id);
    onPath.add(id);
    for (const target of next[id] || []) {
      if (onPath.has(target)) back.add(`${id}>${target}`);
      else if (!reached.has(target)) visit(target);
    }
    onPath.delete(id);
  };
  visit(start);
  return { reached, back };
}

function longestPaths(start, edges) {
  const depth = { [start]: 0 };
  for (let changed = true; changed; ) {
    changed = false;
    for (const { source, target } of edges) {
      if (source in depth && !(depth[target] > depth[source])) {
        depth[target] = depth[source] + 1;
        changed = true;
      }
    }
  }
  return depth;
}

// Each row sorted by where its nodes' neighbours sit in the row above (then below, then above
// again): the barycenter heuristic.
function orderRows(rows, routes) {
  const above = {};
  const below = {};
  for (const { route } of routes) {
    for (let i = 1; i < route.length; i++) {
      (above[route[i]] ||= []).push(route[i - 1]);
      (below[route[i - 1]] ||= []).push(route[i]);
    }
  }
  const sortBy = (row, neighbours, reference) => {
    const at = new Map(reference.map((id, i) => [id, i]));
    const centre = (id, i) => {
      const known = (neighbours[id] || []).filter((n) => at.has(n));
      return known.length ? known.reduce((sum, n) => sum + at.get(n), 0) / known.length : i;
    };
    const keyed = row.map((id, i) => [centre(id, i), i, id]);
    keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    row.splice(0, row.length, ...keyed.map(([, , id]) => id));
  };
  for (let r = 1; r < rows.length; r++) sortBy(rows[r], above, rows[r - 1]);
  for (let r = rows.length - 2; r >= 0; r--) sortBy(rows[r], below, rows[r + 1]);
  for (let r = 1; r < rows.length; r++) sortBy(rows[r], above, rows[r - 1]);
}

function placeRows(rows) {
  const isWaypoint = (id) => id.includes(">");
  const label = (id) => id.replace(/^__|__$/g, "");
  const widthOf = (id) => (isWaypoint(id) ? GRAPH.waypoint : label(id).length * GRAPH.charWidth + GRAPH.padding);
  const rowWidth = (row) => row.reduce((sum, id) => sum + widthOf(id), 0) + GRAPH.gap * (row.length - 1);
  const width = Math.max(...rows.map(rowWidth)) + 2 * (GRAPH.margin + GRAPH.loopRoom);
  const place = {};
  rows.forEach((row, depth) => {
    let x = (width - rowWidth(row)) / 2;
    for (const id of row) {
      place[id] = { x, y: GRAPH.margin + depth * GRAPH.row, width: widthOf(id), label: label(id), waypoint: isWaypoint(id) };
      x += widthOf(id) + GRAPH.gap;
    }
  });
  const height = 2 * GRAPH.margin + (rows.length - 1) * GRAPH.row + GRAPH.nodeHeight;
  return { place, width, height };
}

function drawGraph({ place, routes, loops, width, height }, scale) {
  const svg = svgElement("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width: width * scale,
    height: height * scale,
    style: `max-width: ${width * scale}px`, // drawn smaller only where the room is narrower
    class: "graph",
    role: "img",
    "aria-label": "the agent's state machine",
  });
  const arrow = `arrow-${scale}`;
  const marker = svgElement("marker", { id: arrow, viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.append(svgElement("path", { d: "M0,0 L8,4 L0,8 z", class: "arrow" }));
  svg.append(marker);
  const edge = (d, conditional) =>
    svgElement("path", { d, class: conditional ? "edge conditional" : "edge", "marker-end": `url(#${arrow})` });
  for (const { edge: e, route } of routes) svg.append(edge(routePath(route.map((id) => place[id])), e.conditional));
  for (const e of loops) svg.append(edge(loopPath(place[e.source], place[e.target], width), e.conditional));
  for (const p of Object.values(place)) {
    if (p.waypoint) continue;
    svg.append(
      svgElement("rect", { x: p.x, y: p.y, width: p.width, height: GRAPH.nodeHeight, rx: 7, class: "node" }),
      svgElement("text", { x: p.x + p.width / 2, y: p.y + GRAPH.nodeHeight / 2, "text-anchor": "middle", "dominant-baseline": "central" }, p.label),
    );
  }
  return svg;
}

// Down from the source's bottom through each waypoint to the target's top, in S-curves.
function routePath(points) {
  const centre = (p) => p.x + p.width / 2;
  let [x, y] = [centre(points[0]), points[0].y + GRAPH.nodeHeight];
  let d = `M${x},${y}`;
  for (const p of points.slice(1)) {
    const [nx, ny] = [centre(p), p.y];
    const mid = (y + ny) / 2;
    d += ` C${x},${mid} ${nx},${mid} ${nx},${ny}`;
    [x, y] = [nx, ny];
    if (p.waypoint) d += ` L${x},${(y += GRAPH.nodeHeight)}`;
  }
  return d;
}

// From the source's side out towards the drawing's edge and back in to the target's side.
function loopPath(source, target, width) {
  const right = source.x + source.width / 2 > width / 2;
  const side = (p) => (right ? p.x + p.width : p.x);
  const edge = right ? width - GRAPH.margin : GRAPH.margin;
  const sy = source.y + GRAPH.nodeHeight / 2;
  const ty = target.y + GRAPH.nodeHeight / 2;
  return `M${side(source)},${sy} C${edge},${sy} ${edge},${ty} ${side(target)},${ty}`;
}

function svgElement(tag, attrs, text = "") {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  node.textContent = text;
  return node;
}
