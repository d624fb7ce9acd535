// agentbench report: the case table (sorted, filtered, deep-linked), lazily built case details
// (transcript, tool schemas, trace timeline), downloads, and sortable static tables.
// Every piece of model or tool text reaches the page through textContent or createTextNode,
// never through innerHTML, so it is always shown as text and never parsed as markup; the
// Markdown renderer below makes only a fixed set of elements (p, h4-h6, ul, ol, li, pre,
// code, strong, em, blockquote, table parts, hr) and puts all text in text nodes.
(function () {
  "use strict";

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
  function int(value) {
    return typeof value === "number" ? Math.round(value).toLocaleString("en-US") : "—";
  }
  function ms(value) { return typeof value === "number" ? int(value) + " ms" : "—"; }
  function usd(value) { return typeof value === "number" ? "$" + value.toFixed(4) : "—"; }
  function pre(value) { return el("pre", "", [txt(value)]); }
  function fold(summary, body, open) {
    var node = el("details", "", [el("summary", "", summary)].concat(body));
    if (open) { node.open = true; }
    return node;
  }
  function pretty(value) {  // JSON text indented when it is JSON, else as it is
    if (typeof value !== "string") { return txt(value); }
    var trimmed = value.trim();
    if (trimmed.charAt(0) !== "{" && trimmed.charAt(0) !== "[") { return value; }
    try { return JSON.stringify(JSON.parse(trimmed), null, 2); } catch (e) { return value; }
  }

  // ---- Markdown: a small, safe subset, built with DOM calls only ----
  var INLINE = /`([^`\n]+)`|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\s][^*\n]*)\*|(^|[^\w])_([^_\n]+)_(?!\w)|\[([^\]\n]+)\]\(([^)\s]+)\)/g;
  function inline(text, parent) {
    var last = 0;
    var match;
    INLINE.lastIndex = 0;
    var found = [];
    while ((match = INLINE.exec(text)) !== null) { found.push(match); }
    found.forEach(function (m) {
      var start = m.index + (m[5] ? m[5].length : 0);
      if (start > last) { parent.appendChild(document.createTextNode(text.slice(last, start))); }
      if (m[1] !== undefined) {
        parent.appendChild(el("code", "", [m[1]]));
      } else if (m[2] !== undefined || m[3] !== undefined) {
        var strong = el("strong");
        inline(m[2] !== undefined ? m[2] : m[3], strong);
        parent.appendChild(strong);
      } else if (m[4] !== undefined || m[6] !== undefined) {
        var em = el("em");
        inline(m[4] !== undefined ? m[4] : m[6], em);
        parent.appendChild(em);
      } else {
        // A link is shown, never followed: its text, then its address as text.
        var label = el("span", "link");
        inline(m[7], label);
        parent.appendChild(label);
        parent.appendChild(el("span", "url", [" <" + m[8] + ">"]));
      }
      last = m.index + m[0].length;
    });
    if (last < text.length) { parent.appendChild(document.createTextNode(text.slice(last))); }
    return parent;
  }
  var LIST_ITEM = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
  var TABLE_RULE = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;
  function cells(line) {
    var inner = line.trim().replace(/^\|/, "").replace(/\|$/, "");
    return inner.split("|").map(function (c) { return c.trim(); });
  }
  function markdown(source) {
    var root = el("div", "md");
    var lines = String(source).replace(/\r\n?/g, "\n").split("\n");
    var paragraph = [];
    function flush() {
      if (paragraph.length) { root.appendChild(inline(paragraph.join("\n"), el("p"))); }
      paragraph = [];
    }
    var i = 0;
    while (i < lines.length) {
      var line = lines[i];
      var m;
      if (/^\s*```/.test(line)) {
        flush();
        var code = [];
        i += 1;
        while (i < lines.length && !/^\s*```/.test(lines[i])) { code.push(lines[i]); i += 1; }
        root.appendChild(el("pre", "code", [code.join("\n")]));
        i += 1;
      } else if ((m = /^(#{1,6})\s+(.*)$/.exec(line)) !== null) {
        flush();
        root.appendChild(inline(m[2], el("h" + Math.min(6, m[1].length + 3), "")));
        i += 1;
      } else if (/^\s*(-{3,}|\*{3,}|_{3,})\s*$/.test(line)) {
        flush();
        root.appendChild(el("hr"));
        i += 1;
      } else if (LIST_ITEM.test(line)) {
        flush();
        var list = el(/^\s*\d/.test(line) ? "ol" : "ul");
        while (i < lines.length && (m = LIST_ITEM.exec(lines[i])) !== null) {
          list.appendChild(inline(m[2], el("li")));
          i += 1;
        }
        root.appendChild(list);
      } else if (/^\s*>/.test(line)) {
        flush();
        var quoted = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) { quoted.push(lines[i].replace(/^\s*>\s?/, "")); i += 1; }
        root.appendChild(inline(quoted.join("\n"), el("blockquote")));
      } else if (line.indexOf("|") >= 0 && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
        flush();
        var head = el("tr", "", cells(line).map(function (c) { return inline(c, el("th")); }));
        var body = el("tbody");
        i += 2;
        while (i < lines.length && lines[i].indexOf("|") >= 0 && lines[i].trim()) {
          body.appendChild(el("tr", "", cells(lines[i]).map(function (c) { return inline(c, el("td")); })));
          i += 1;
        }
        root.appendChild(el("table", "", [el("thead", "", [head]), body]));
      } else if (!line.trim()) {
        flush();
        i += 1;
      } else {
        paragraph.push(line);
        i += 1;
      }
    }
    flush();
    return root;
  }

  // ---- tables on any page with class "sortable": sorted by a cell's data-value or text ----
  function sortStatic(table, column, th) {
    var down = th.getAttribute("aria-sort") === "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", down ? "descending" : "ascending");
    var body = table.tBodies[0];
    var items = Array.prototype.slice.call(body.rows).map(function (row, index) {
      var cell = row.cells[column];
      var raw = cell ? cell.getAttribute("data-value") : null;
      var value = raw === null ? (cell ? cell.textContent.trim().toLowerCase() : "") : raw;
      var number = raw !== null && raw !== "" && !isNaN(Number(raw)) ? Number(raw) : null;
      return { row: row, value: number === null ? value : number, index: index };
    });
    items.sort(function (a, b) {
      if (a.value === b.value) { return a.index - b.index; }
      if (a.value === "") { return 1; }
      if (b.value === "") { return -1; }
      return (a.value < b.value ? -1 : 1) * (down ? -1 : 1);
    });
    items.forEach(function (item) { body.appendChild(item.row); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      var button = th.querySelector("button.sort");
      if (button) { button.addEventListener("click", function () { sortStatic(table, column, th); }); }
    });
  });

  // ---- links to a comparison entry (#change-3) open it ----
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id || id.indexOf("=") >= 0) { return; }
    var target = document.getElementById(id);
    if (target && target.tagName === "DETAILS") { target.open = true; target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();

  var table = document.getElementById("case-table");
  if (!table) { return; }
  var rows = JSON.parse(document.getElementById("case-rows").textContent);
  var meta = JSON.parse(document.getElementById("eval-meta").textContent);
  var byKey = {};
  rows.forEach(function (r) { byKey[r.key] = r; });
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
  // What needs a look comes first: the default order, and the order of the status column.
  var RANK = { error: 0, failed: 1, xpassed: 2, xfailed: 3, skipped: 4, passed: 5 };
  var DEFAULT_SORT = { key: "status", dir: "asc" };
  var sort = { key: DEFAULT_SORT.key, dir: DEFAULT_SORT.dir };
  var sorted = null;  // rows in the current order, made again when the order changes
  var openKey = null;  // the expanded case named in the URL

  function cell(className, children) { return el("td", className, children); }
  function rowElement(r) {
    var button = el("button", "expand", ["▸"]);
    button.type = "button";
    button.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-controls", "detail-" + r.index);
    button.setAttribute("aria-label", "details of " + r.suite + "/" + r.case_id + " trial " + r.trial);
    var known = STATUSES.indexOf(r.status) >= 0 ? " s-" + r.status : "";
    var badge = el("span", "status" + known, [r.status]);
    if (r.why) { badge.title = r.why; }
    var tr = el("tr", "case", [
      cell("", [button]), cell("", [r.suite]), cell("id", [r.case_id]), cell("num", [String(r.trial)]),
      cell("", [badge]), cell("num", [num(r.score, 2)]), cell("num", [int(r.tokens)]),
      cell("num", [ms(r.duration_ms)]), cell("num", [usd(r.cost_usd)]),
      cell("", r.tags.map(function (t) { return el("span", "tag", [t]); })), cell("src", [txt(r.source || "")])
    ]);
    tr.id = "row-" + r.index;
    tr.setAttribute("data-index", String(r.index));
    tr.setAttribute("data-key", r.key);
    tr.setAttribute("data-status", r.status);
    tr.setAttribute("data-suite", r.suite);
    tr.setAttribute("data-case", r.case_id);
    return tr;
  }

  function sortValue(r, key) {
    if (key === "status") { return r.status in RANK ? RANK[r.status] : 9; }
    if (key === "tags") { return r.tags.join(" ").toLowerCase() || null; }
    var value = r[key];
    if (value === null || value === undefined || value === "") { return null; }
    return typeof value === "string" ? value.toLowerCase() : value;
  }
  function ordered() {
    if (sorted) { return sorted; }
    var key = sort.key;
    var sign = sort.dir === "desc" ? -1 : 1;
    sorted = rows.slice().sort(function (a, b) {
      var x = sortValue(a, key);
      var y = sortValue(b, key);
      if (x !== y) {
        if (x === null) { return 1; }  // rows without a value go last either way
        if (y === null) { return -1; }
        return (x < y ? -1 : 1) * sign;
      }
      if (key !== "status" && a.status !== b.status) { return sortValue(a, "status") - sortValue(b, "status"); }
      return a.index - b.index;  // rows come in suite, case, trial order
    });
    return sorted;
  }
  function showSort() {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      var key = th.getAttribute("data-sort");
      if (!key) { return; }
      var active = key === sort.key;
      th.setAttribute("aria-sort", active ? (sort.dir === "asc" ? "ascending" : "descending") : "none");
      th.querySelector(".arrow").textContent = active ? (sort.dir === "asc" ? " ▲" : " ▼") : "";
    });
  }

  function matching() {
    var want = { status: status.value, suite: suite.value, tag: tag.value, text: text.value.trim().toLowerCase() };
    return ordered().filter(function (r) {
      var statusOk = !want.status || r.status === want.status ||
        (want.status === "!passing" && ["failed", "error", "xpassed"].indexOf(r.status) >= 0);
      return statusOk && (!want.suite || r.suite === want.suite) &&
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
    return found;
  }

  // ---- the URL's hash holds the filters, the order and the expanded case ----
  function writeHash() {
    var params = new URLSearchParams();
    if (status.value) { params.set("status", status.value); }
    if (suite.value) { params.set("suite", suite.value); }
    if (tag.value) { params.set("tag", tag.value); }
    if (text.value.trim()) { params.set("q", text.value.trim()); }
    if (sort.key !== DEFAULT_SORT.key || sort.dir !== DEFAULT_SORT.dir) { params.set("sort", sort.key + ":" + sort.dir); }
    if (openKey) { params.set("case", openKey); }
    var hash = params.toString();
    var url = location.pathname + location.search + (hash ? "#" + hash : "");
    try {
      history.replaceState(null, "", url);
    } catch (e) {  // some browsers refuse it for file: pages; the hash still works
      location.hash = hash;
    }
  }
  function choose(select, value) {
    select.value = value || "";
    if (select.value !== (value || "")) { select.value = ""; }  // not an option: all
  }
  function readHash() {
    var hash = location.hash.slice(1);
    if (hash.indexOf("=") < 0) { return false; }
    var params = new URLSearchParams(hash);
    choose(status, params.get("status"));
    choose(suite, params.get("suite"));
    choose(tag, params.get("tag"));
    text.value = params.get("q") || "";
    var parts = (params.get("sort") || "").split(":");
    var keys = Array.prototype.map.call(table.tHead.rows[0].cells, function (th) { return th.getAttribute("data-sort"); });
    sort = keys.indexOf(parts[0]) >= 0 ? { key: parts[0], dir: parts[1] === "desc" ? "desc" : "asc" } :
      { key: DEFAULT_SORT.key, dir: DEFAULT_SORT.dir };
    sorted = null;
    openKey = params.get("case");
    return true;
  }
  function applyHash() {
    if (!readHash()) { return; }
    showSort();
    limit = pageSize;
    var found = render();
    if (!openKey) { return; }
    var r = byKey[openKey];
    if (!r) { return; }
    if (found.indexOf(r) < 0) {  // filtered out: a link to a case shows it
      [status, suite, tag].forEach(function (s) { s.value = ""; });
      text.value = "";
      found = render();
    }
    var at = found.indexOf(r);
    if (at >= limit) { limit = Math.ceil((at + 1) / pageSize) * pageSize; render(); }
    expand(r, true);
    var tr = rowElements[r.index];
    tr.classList.add("linked");
    tr.scrollIntoView();
  }

  function scoresTable(scores) {
    var body = scores.map(function (s) {
      return el("tr", "", [
        el("td", "", [txt(s.name)]), el("td", "num", [num(s.value, 2)]),
        el("td", "passed-" + Boolean(s.passed), [s.passed ? "passed" : "failed"]),
        el("td", "", [txt(s.reason)])
      ]);
    });
    var head = el("tr", "", ["scorer", "value", "result", "reason"].map(function (h) { return el("th", "", [h]); }));
    return el("table", "", [el("thead", "", [head]), el("tbody", "", body)]);
  }

  function toolTable(tools) {
    var body = [];
    tools.forEach(function (t) {
      var params = t.params.length ? t.params : [null];
      params.forEach(function (p, i) {
        var cells = [];
        if (i === 0) {
          var name = el("td", "tool", [el("code", "", [t.name]), t.description ? el("div", "muted", [t.description]) : null]);
          name.rowSpan = params.length;
          cells.push(name);
        }
        if (p === null) {
          cells.push(el("td", "muted", ["no parameters"]), el("td"), el("td"), el("td"));
        } else {
          cells.push(el("td", "", [el("code", "", [p.name])]), el("td", "", [el("code", "", [p.type])]),
            el("td", "", [p.required ? "required" : "optional" + (p.default !== null && p.default !== undefined ? " (default " + p.default + ")" : "")]),
            el("td", "", [txt(p.description)]));
        }
        body.push(el("tr", "", cells));
      });
    });
    var head = el("tr", "", ["tool", "parameter", "type", "", "description"].map(function (h) { return el("th", "", [h]); }));
    return el("table", "tools", [el("thead", "", [head]), el("tbody", "", body)]);
  }

  function message(m) {
    var parts = [el("span", "k", ["#" + m.index + " " + txt(m.role)])];
    if (m.content !== null && m.content !== undefined) { parts.push(pre(m.content)); }
    (m.tool_calls || []).forEach(function (c) { parts.push(pre("tool call " + c.name + " " + txt(c.arguments))); });
    return el("div", "", parts);
  }

  // A boundary target's framework may hand off inside one run: its items name their agent.
  function stepOf(it) { return "step " + txt(it.step) + (it.agent ? " (" + txt(it.agent) + ")" : "") + " "; }

  function llmItem(it) {
    var r = it.request || {};
    var calls = (it.tool_calls || []).map(function (c) { return c.name; });
    var outcome = calls.length ? "→ " + calls.join(", ") : "→ " + txt(it.text).slice(0, 80);
    var head = [stepOf(it), el("span", "k", ["model call" + (it.purpose && it.purpose !== "agent" ? " [" + it.purpose + "]" : "")]),
      txt(it.model) + " · " + int(it.input_tokens) + " → " + int(it.output_tokens) + " tokens · " + ms(it.latency_ms) +
      " · " + txt(it.messages) + " msgs (+" + txt(it.added) + " −" + txt(it.dropped) + ") " + outcome];
    var body = [];
    var kept = (r.kept || []).map(function (k) { return k[0] + "–" + (k[1] - 1); });
    body.push(el("div", "", ["request: kept messages " + (kept.length ? kept.join(", ") : "none") +
      ", " + txt(it.added) + " added, " + txt(it.dropped) + " dropped"]));
    (r.added || []).forEach(function (m) { body.push(el("div", "", ["added ", message(m)])); });
    (r.edited || []).forEach(function (e) {
      body.push(el("div", "", ["edited #" + e.index + " (kept " + e.prefix + " chars before, " + e.suffix + " after):", pre(e.text)]));
    });
    if (r.tools) { body.push(el("div", "", ["set tools (" + r.tools.length + "):"]), toolTable(r.tools)); }
    Object.keys(r.set || {}).forEach(function (key) { body.push(el("div", "", ["set " + key + ":", pre(pretty(r.set[key]))])); });
    if ((r.unset || []).length) { body.push(el("div", "", ["unset " + r.unset.join(", ")])); }
    body.push(el("div", "k", ["response (" + txt(it.finish_reason) + ")"]));
    if (it.text !== null && it.text !== undefined) { body.push(pre(it.text)); }
    (it.tool_calls || []).forEach(function (c) { body.push(pre(c.name + " " + pretty(c.arguments))); });
    return fold(head, body);
  }

  function toolItem(it) {
    var head = [stepOf(it), el("span", "k", ["tool " + txt(it.tool)]),
      "→ ", el("span", "r-" + it.result_kind, [txt(it.result_kind)]), " · " + ms(it.duration_ms) + " · effect " + txt(it.effect)];
    var body = [el("div", "", ["arguments"]), pre(pretty(it.arguments)), el("div", "", ["result"]), pre(pretty(it.result))];
    if (it.error) { body.push(el("div", "", ["error"]), pre(it.error)); }
    return fold(head, body);
  }

  function eventItem(it) {
    var p = it.payload || {};
    var step = stepOf(it);
    if (it.kind === "context") {
      return fold([step, el("span", "k", ["context"]), it.scope + "." + it.key + " " + it.op],
        [pre(txt(it.old) + " → " + txt(it.new))]);
    }
    if (it.kind === "memory_decision") {
      return fold([step, el("span", "k", ["memory " + txt(p.action)]), txt(p.messages) + " messages, " +
        int(Number(p.tokens_before)) + " → " + int(Number(p.tokens_after)) + " tokens"], [pre(p.reason), p.summary ? pre(p.summary) : null]);
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

  // ---- the conversation as a transcript: every message the run sent, then its last answer ----
  var ROLES = ["system", "developer", "user", "assistant", "tool"];
  function transcript(run) {
    var calls = run.items.filter(function (it) { return it.kind === "llm"; });
    var said = [];
    calls.forEach(function (it) { ((it.request || {}).added || []).forEach(function (m) { said.push(m); }); });
    var last = calls[calls.length - 1];
    if (last && (last.text !== null || (last.tool_calls || []).length)) {
      said.push({ role: "assistant", content: last.text, tool_calls: last.tool_calls || [], final: true });
    }
    return said;
  }
  function bubble(m, names) {
    var role = ROLES.indexOf(m.role) >= 0 ? m.role : "other";
    var label = txt(m.role);
    if (role === "tool") { label = "tool " + (names[m.tool_call_id] || m.name || "result"); }
    var body = [];
    if (m.content !== null && m.content !== undefined && m.content !== "") {
      body.push(role === "tool" ? pre(pretty(m.content)) : markdown(m.content));
    }
    (m.tool_calls || []).forEach(function (c) {
      if (c.id) { names[c.id] = c.name; }
      body.push(el("div", "call", ["calls ", el("code", "", [txt(c.name)]), pre(pretty(c.arguments))]));
    });
    var last = m.final ? ((m.tool_calls || []).length ? " (last response)" : " (final answer)") : "";
    var head = el("div", "who", [label + last]);
    if (role === "system" || role === "developer") {  // long and the same in every case: folded
      var node = fold([head], body);
      node.className = "msg role-" + role;
      return node;
    }
    return el("div", "msg role-" + role, [head].concat(body));
  }
  function transcriptSection(run) {
    var names = {};
    var said = transcript(run);
    if (!said.length) { return null; }
    var head = "agent " + txt(run.agent) + (run.parent ? " (handed off)" : "") + " · " + said.length + " messages";
    return el("div", "transcript", [el("div", "muted", [head])].concat(said.map(function (m) { return bubble(m, names); })));
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
      " · " + ms(run.duration_ms) + " · " + int(run.tokens) + " tokens · model " + txt(run.model)];
    return fold(head, items, open);
  }

  var details = null;  // every case's detail, parsed on the first expansion (or download)
  function allDetails() {
    if (details === null) {
      // Deflated and in base64 (see inflate.js): a tenth of the JSON in the page.
      var packed = atob(document.getElementById("case-data").textContent.trim());
      var bytes = new Uint8Array(packed.length);
      for (var i = 0; i < packed.length; i++) { bytes[i] = packed.charCodeAt(i); }
      details = JSON.parse(new TextDecoder().decode(agentbenchInflate(bytes)));
    }
    return details;
  }
  function buildDetail(index) {
    var data = allDetails()[Number(index)];
    var parts = [el("h4", "", ["Input"]), pre(data.input), el("h4", "", ["Expectations"])];
    parts.push(data.scores.length ? scoresTable(data.scores) : el("div", "muted", ["no scorers"]));
    parts.push(el("h4", "", ["Output"]), data.output === null ? pre(null) : el("div", "output", [markdown(data.output)]));
    if (data.error) { parts.push(el("h4", "", ["Error"]), pre(data.error)); }
    if (data.replay) {
      parts.push(el("h4", "", ["Against the recording" + (data.replay.counted ? "" : " (request drift reported, not counted)")]));
      parts.push(pre(data.replay.text));
    }
    var conversations = data.runs.map(transcriptSection).filter(Boolean);
    if (conversations.length) { parts.push(el("h4", "", ["Conversation"])); parts = parts.concat(conversations); }
    parts.push(el("h4", "", ["Trace (" + data.runs.length + " run" + (data.runs.length === 1 ? "" : "s") + ")"]));
    data.runs.forEach(function (run) { parts.push(runSection(run, false)); });
    var td = el("td", "detail", [el("div", "detail", parts)]);
    td.colSpan = table.tHead.rows[0].cells.length;
    var tr = el("tr", "detail", [td]);
    tr.id = "detail-" + index;
    return tr;
  }

  function expand(r, open) {
    var row = rowElements[r.index];
    var button = row.querySelector("button.expand");
    var detail = detailElements[r.index];
    if (!detail && open) {
      detail = detailElements[r.index] = buildDetail(r.index);
      row.parentNode.insertBefore(detail, row.nextSibling);
    }
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "▾" : "▸";
    if (detail) { detail.hidden = !open; }
  }
  function toggle(button) {
    var r = rows[Number(button.closest("tr").getAttribute("data-index"))];
    var open = button.getAttribute("aria-expanded") !== "true";
    expand(r, open);
    if (open) { openKey = r.key; } else if (openKey === r.key) { openKey = null; }
    writeHash();
  }

  // ---- downloads: made in the page as a Blob, so nothing is fetched ----
  function download(name, type, content) {
    var url = URL.createObjectURL(new Blob([content], { type: type }));
    var link = el("a", "", []);
    link.href = url;
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
  }
  function csvCell(value) {
    if (value === null || value === undefined) { return ""; }
    var s = String(value);
    // A spreadsheet would run a cell starting with = + - @ as a formula: quote it as text.
    if (typeof value === "string" && /^[=+\-@\t\r]/.test(s)) { s = "'" + s; }
    return /[",\r\n]/.test(s) ? "\"" + s.replace(/"/g, "\"\"") + "\"" : s;
  }
  function csv() {
    var columns = ["suite", "case_id", "trial", "status", "score", "tokens", "duration_ms", "cost_usd", "tags", "source", "why"];
    var lines = [columns.join(",")];
    matching().forEach(function (r) {
      lines.push(columns.map(function (c) { return csvCell(c === "tags" ? r.tags.join(" ") : r[c]); }).join(","));
    });
    return lines.join("\r\n") + "\r\n";
  }
  document.getElementById("download-csv").addEventListener("click", function () {
    download(meta.eval_id + "-cases.csv", "text/csv;charset=utf-8", csv());
  });
  document.getElementById("download-json").addEventListener("click", function () {
    var all = allDetails();
    var cases = rows.map(function (r) {
      var copy = {};
      Object.keys(r).forEach(function (k) { if (k !== "index") { copy[k] = r[k]; } });
      copy.detail = all[r.index];
      return copy;
    });
    var doc = { eval: meta, cases: cases };
    download(meta.eval_id + ".json", "application/json", JSON.stringify(doc, null, 1));
  });

  table.addEventListener("click", function (event) {
    var button = event.target.closest("button.expand");
    if (button) { toggle(button); return; }
    var header = event.target.closest("button.sort");
    if (header) {
      var key = header.closest("th").getAttribute("data-sort");
      sort = { key: key, dir: sort.key === key && sort.dir === "asc" ? "desc" : "asc" };
      sorted = null;
      showSort();
      render();
      writeHash();
    }
  });
  function refilter() { limit = pageSize; render(); writeHash(); }
  more.addEventListener("click", function () { limit += pageSize; render(); });
  [status, suite, tag].forEach(function (s) { s.addEventListener("change", refilter); });
  text.addEventListener("input", refilter);
  document.getElementById("filters").addEventListener("submit", function (e) { e.preventDefault(); });
  window.addEventListener("hashchange", applyHash);
  showSort();
  render();
  applyHash();
}());
