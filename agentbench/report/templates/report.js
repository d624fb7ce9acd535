// agentbench report: case filters and lazily built case details.
// Every piece of model or tool text reaches the page through textContent or createTextNode,
// never through innerHTML, so it is always shown as text and never parsed as markup.
(function () {
  "use strict";
  var table = document.getElementById("case-table");
  if (!table) { return; }
  var rows = JSON.parse(document.getElementById("case-rows").textContent);
  var pageSize = Number(table.getAttribute("data-page-size")) || 200;
  var limit = pageSize;
  var rowElements = {};  // index -> its <tr>, built the first time it is shown
  var detailElements = {};  // index -> its detail <tr>, built the first time it is expanded
  var tbody = table.tBodies[0];
  var status = document.getElementById("filter-status");
  var suite = document.getElementById("filter-suite");
  var tag = document.getElementById("filter-tag");
  var text = document.getElementById("filter-text");
  var shown = document.getElementById("shown");
  var more = document.getElementById("more");
  var STATUSES = ["passed", "failed", "error", "xfailed", "xpassed", "skipped"];

  function el(name, className, children) {
    var node = document.createElement(name);
    if (className) { node.className = className; }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) { return; }
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }
  function txt(value) { return value === null || value === undefined ? "—" : String(value); }
  function num(value, digits) {
    return typeof value === "number" ? value.toFixed(digits || 0) : "—";
  }
  function pre(value) { return el("pre", "", [txt(value)]); }
  function fold(summary, body, open) {
    var node = el("details", "", [el("summary", "", summary)].concat(body));
    if (open) { node.open = true; }
    return node;
  }

  function cell(className, children) { return el("td", className, children); }
  function rowElement(r) {
    var button = el("button", "expand", ["▸"]);
    button.type = "button";
    button.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-controls", "detail-" + r.index);
    button.setAttribute("aria-label", "details of " + r.suite + "/" + r.case_id + " trial " + r.trial);
    var known = STATUSES.indexOf(r.status) >= 0 ? " s-" + r.status : "";
    var tr = el("tr", "case", [
      cell("", [button]), cell("", [r.suite]), cell("id", [r.case_id]), cell("", [String(r.trial)]),
      cell("", [el("span", "status" + known, [r.status])]), cell("", [num(r.score, 2)]),
      cell("", [typeof r.tokens === "number" ? r.tokens.toLocaleString("en-US") : "—"]),
      cell("", [typeof r.duration_ms === "number" ? Math.round(r.duration_ms).toLocaleString("en-US") + " ms" : "—"]),
      cell("", r.tags.map(function (t) { return el("span", "tag", [t]); })), cell("src", [txt(r.source || "")])
    ]);
    tr.id = "row-" + r.index;
    tr.setAttribute("data-index", String(r.index));
    tr.setAttribute("data-status", r.status);
    tr.setAttribute("data-suite", r.suite);
    tr.setAttribute("data-case", r.case_id);
    return tr;
  }

  function matching() {
    var want = { status: status.value, suite: suite.value, tag: tag.value, text: text.value.trim().toLowerCase() };
    return rows.filter(function (r) {
      return (!want.status || r.status === want.status) && (!want.suite || r.suite === want.suite) &&
        (!want.tag || r.tags.indexOf(want.tag) >= 0) &&
        (!want.text || r.case_id.toLowerCase().indexOf(want.text) >= 0);
    });
  }

  // Rebuild the table body from the filters: the matching rows up to the current limit, each
  // followed by its detail row when it is expanded.
  function render() {
    var found = matching();
    var page = document.createDocumentFragment();
    found.slice(0, limit).forEach(function (r) {
      var tr = rowElements[r.index] || (rowElements[r.index] = rowElement(r));
      page.appendChild(tr);
      var detail = detailElements[r.index];
      if (detail) { page.appendChild(detail); }
    });
    tbody.textContent = "";
    tbody.appendChild(page);
    var listed = Math.min(found.length, limit);
    shown.textContent = found.length + " of " + rows.length + " trials" +
      (listed < found.length ? " (first " + listed + " listed)" : "");
    more.hidden = listed >= found.length;
    more.textContent = "show " + Math.min(pageSize, found.length - listed) + " more";
  }
  function refilter() { limit = pageSize; render(); }

  function scoresTable(scores) {
    var body = scores.map(function (s) {
      return el("tr", "", [
        el("td", "", [txt(s.name)]), el("td", "", [num(s.value, 2)]),
        el("td", "passed-" + Boolean(s.passed), [s.passed ? "passed" : "failed"]),
        el("td", "", [txt(s.reason)])
      ]);
    });
    var head = el("tr", "", ["scorer", "value", "result", "reason"].map(function (h) { return el("th", "", [h]); }));
    return el("table", "", [el("thead", "", [head]), el("tbody", "", body)]);
  }

  function message(m) {
    var parts = [el("span", "k", ["#" + m.index + " " + txt(m.role)])];
    if (m.content !== null && m.content !== undefined) { parts.push(pre(m.content)); }
    (m.tool_calls || []).forEach(function (c) { parts.push(pre("tool call " + c)); });
    return el("div", "", parts);
  }

  function llmItem(it) {
    var r = it.request || {};
    var calls = (it.tool_calls || []).map(function (c) { return c.name; });
    var outcome = calls.length ? "→ " + calls.join(", ") : "→ " + txt(it.text).slice(0, 80);
    var head = ["step " + txt(it.step) + " ", el("span", "k", ["model call" + (it.purpose && it.purpose !== "agent" ? " [" + it.purpose + "]" : "")]),
      txt(it.model) + " · " + txt(it.input_tokens) + "→" + txt(it.output_tokens) + " tok · " + num(it.latency_ms, 0) +
      " ms · " + txt(it.messages) + " msgs (+" + txt(it.added) + " −" + txt(it.dropped) + ") " + outcome];
    var body = [];
    var kept = (r.kept || []).map(function (k) { return k[0] + "–" + (k[1] - 1); });
    body.push(el("div", "", ["request: kept messages " + (kept.length ? kept.join(", ") : "none") +
      ", " + txt(it.added) + " added, " + txt(it.dropped) + " dropped"]));
    (r.added || []).forEach(function (m) { body.push(el("div", "", ["added ", message(m)])); });
    (r.edited || []).forEach(function (e) {
      body.push(el("div", "", ["edited #" + e.index + " (kept " + e.prefix + " chars before, " + e.suffix + " after):", pre(e.text)]));
    });
    Object.keys(r.set || {}).forEach(function (key) { body.push(el("div", "", ["set " + key + ":", pre(r.set[key])])); });
    if ((r.unset || []).length) { body.push(el("div", "", ["unset " + r.unset.join(", ")])); }
    body.push(el("div", "k", ["response (" + txt(it.finish_reason) + ")"]));
    if (it.text !== null && it.text !== undefined) { body.push(pre(it.text)); }
    (it.tool_calls || []).forEach(function (c) { body.push(pre(c.name + " " + txt(c.arguments))); });
    return fold(head, body);
  }

  function toolItem(it) {
    var head = ["step " + txt(it.step) + " ", el("span", "k", ["tool " + txt(it.tool)]),
      "→ ", el("span", "r-" + it.result_kind, [txt(it.result_kind)]), " · " + num(it.duration_ms, 0) + " ms · " + txt(it.effect)];
    var body = [el("div", "", ["arguments"]), pre(it.arguments), el("div", "", ["result"]), pre(it.result)];
    if (it.error) { body.push(el("div", "", ["error"]), pre(it.error)); }
    return fold(head, body);
  }

  function eventItem(it) {
    var p = it.payload || {};
    var step = "step " + txt(it.step) + " ";
    if (it.kind === "context") {
      return fold([step, el("span", "k", ["context"]), it.scope + "." + it.key + " " + it.op],
        [pre(txt(it.old) + " → " + txt(it.new))]);
    }
    if (it.kind === "memory_decision") {
      return fold([step, el("span", "k", ["memory " + txt(p.action)]), txt(p.messages) + " messages, " +
        txt(p.tokens_before) + "→" + txt(p.tokens_after) + " tokens"], [pre(p.reason), p.summary ? pre(p.summary) : null]);
    }
    if (it.kind === "handoff") {
      return fold([step, el("span", "k", ["handoff"]), txt(p.from_agent) + " → " + txt(p.to_agent) + " (" + txt(p.mode) + ")"],
        [pre(p.reason), p.child_run_id ? el("div", "", ["child run " + p.child_run_id]) : null]);
    }
    if (it.kind === "guard_triggered") {
      return fold([step, el("span", "k", ["guard " + txt(p.guard)]), txt(p.action)], [pre(p.message)]);
    }
    if (it.kind === "text_delta") {
      return fold([step, el("span", "k", ["text"]), txt(p.deltas) + " deltas"], [pre(p.text)]);
    }
    return fold([step, el("span", "k", [txt(it.kind)])], [pre(JSON.stringify(p, null, 1))]);
  }

  function runSection(run, open) {
    var items = run.items.map(function (it) {
      if (it.kind === "llm") { return llmItem(it); }
      if (it.kind === "tool") { return toolItem(it); }
      return eventItem(it);
    });
    items.push(el("div", "", [el("span", "k", ["stop"]), txt(run.stop_reason) + " (" + txt(run.status) + ")"]));
    if (run.error) { items.push(pre(run.error)); }
    var head = [el("span", "k", ["run " + run.run_id]), "agent " + txt(run.agent) +
      (run.parent ? " (handed off from " + run.parent + ")" : "") + " · " + txt(run.stop_reason) +
      " · " + num(run.duration_ms, 0) + " ms · " + txt(run.tokens) + " tokens · model " + txt(run.model)];
    return fold(head, items, open);
  }

  var details = null;  // every case's detail, parsed on the first expansion
  function buildDetail(index) {
    if (details === null) { details = JSON.parse(document.getElementById("case-data").textContent); }
    var data = details[Number(index)];
    var parts = [el("h4", "", ["Input"]), pre(data.input), el("h4", "", ["Expectations"])];
    parts.push(data.scores.length ? scoresTable(data.scores) : el("div", "muted", ["no scorers"]));
    parts.push(el("h4", "", ["Output"]), pre(data.output));
    if (data.error) { parts.push(el("h4", "", ["Error"]), pre(data.error)); }
    if (data.replay) {
      parts.push(el("h4", "", ["Against the recording" + (data.replay.counted ? "" : " (request drift reported, not counted)")]));
      parts.push(pre(data.replay.text));
    }
    parts.push(el("h4", "", ["Trace (" + data.runs.length + " run" + (data.runs.length === 1 ? "" : "s") + ")"]));
    data.runs.forEach(function (run) { parts.push(runSection(run, data.runs.length <= 3)); });
    var cell = el("td", "detail", [el("div", "detail", parts)]);
    cell.colSpan = table.tHead.rows[0].cells.length;
    var tr = el("tr", "detail", [cell]);
    tr.id = "detail-" + index;
    return tr;
  }

  function toggle(button) {
    var row = button.closest("tr");
    var index = row.getAttribute("data-index");
    var detail = detailElements[index];
    if (!detail) {
      detail = detailElements[index] = buildDetail(index);
      row.parentNode.insertBefore(detail, row.nextSibling);
    }
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "▾" : "▸";
    detail.hidden = !open;
  }

  table.addEventListener("click", function (event) {
    var button = event.target.closest("button.expand");
    if (button) { toggle(button); }
  });
  more.addEventListener("click", function () { limit += pageSize; render(); });
  [status, suite, tag].forEach(function (s) { s.addEventListener("change", refilter); });
  text.addEventListener("input", refilter);
  document.getElementById("filters").addEventListener("submit", function (e) { e.preventDefault(); });
  render();
}());
