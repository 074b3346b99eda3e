"""The report's inline stylesheet and script (the HTML file loads nothing from elsewhere).

The script only filters and navigates what the HTML already holds; without it every
trajectory is listed, open to read.
"""

CSS = """
:root { --fg: #1d2330; --muted: #667085; --line: #d0d5dd; --bg: #f7f8fa;
        --ok: #067647; --part: #b54708; --bad: #b42318; --none: #475467; --accent: #1d4ed8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: #fff; }
header { padding: 16px 24px; border-bottom: 1px solid var(--line); background: var(--bg); }
header h1 { margin: 0 0 4px; font-size: 20px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
main { padding: 8px 24px 48px; max-width: 1400px; }
h2 { margin-top: 32px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.muted { color: var(--muted); }
.notes { background: #fffaeb; border: 1px solid #fedf89; padding: 8px 12px; border-radius: 6px; }
.notes li { margin: 2px 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--line); padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: var(--bg); }
tr.group td { background: var(--bg); font-weight: 600; text-align: left; }
.ci { color: var(--muted); font-size: 12px; margin-left: 4px; }
td.missing { color: var(--muted); font-style: italic; }
.delta-pos { color: var(--ok); } .delta-neg { color: var(--bad); }
figure { margin: 8px 0 20px; } figure svg { max-width: 100%; height: auto; }
pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0 8px; padding: 6px 8px;
      background: var(--bg); border: 1px solid var(--line); border-radius: 4px;
      font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.viewer { display: grid; grid-template-columns: minmax(220px, 320px) 1fr; gap: 16px; }
.controls { display: flex; flex-wrap: wrap; gap: 12px; align-items: center; margin: 8px 0; }
.controls select { font: inherit; padding: 2px 4px; }
.sidebar { position: sticky; top: 0; max-height: 100vh; overflow-y: auto;
           border-right: 1px solid var(--line); padding-right: 8px; }
.sidebar ol { padding-left: 28px; margin: 0; }
.sidebar li { margin: 3px 0; }
.sidebar a { color: var(--fg); text-decoration: none; }
.sidebar a:hover, .sidebar li.current a { color: var(--accent); text-decoration: underline; }
.traj { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 10px; }
.traj > summary { cursor: pointer; padding: 8px 10px; background: var(--bg); border-radius: 6px; }
.traj[open] > summary { border-bottom: 1px solid var(--line); border-radius: 6px 6px 0 0; }
.traj .body { padding: 8px 12px; }
.traj.current { outline: 2px solid var(--accent); }
.badge { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 12px;
         color: #fff; background: var(--none); margin-right: 4px; }
.badge.correct { background: var(--ok); } .badge.partial { background: var(--part); }
.badge.wrong { background: var(--bad); } .badge.no_answer { background: var(--none); }
.badge.error { background: #fff; color: var(--bad); border: 1px solid var(--bad); }
.badge.tool { background: #fff; color: var(--accent); border: 1px solid var(--accent); }
.turn { border-left: 3px solid var(--line); padding-left: 10px; margin: 10px 0; }
.turn.failed { border-left-color: var(--bad); }
.turn h4 { margin: 0 0 4px; font-size: 13px; }
.label { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.gold { color: var(--ok); font-weight: 600; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 4px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
"""

JS = """
(function () {
  "use strict";
  var viewer = document.getElementById("viewer");
  if (!viewer) { return; }
  var items = Array.prototype.slice.call(viewer.querySelectorAll(".traj"));
  var source = document.getElementById("source-filter");
  var outcome = document.getElementById("outcome-filter");
  var count = document.getElementById("visible-count");
  var entries = {};
  viewer.querySelectorAll(".qlink").forEach(function (link) {
    entries[link.getAttribute("data-target")] = link.parentElement;
  });

  function matches(item) {
    if (item.getAttribute("data-source") !== source.value) { return false; }
    var wanted = outcome.value;
    if (wanted === "all") { return true; }
    if (wanted === "parse_errors") { return item.getAttribute("data-parse-errors") !== "0"; }
    return item.getAttribute("data-outcome") === wanted;
  }

  function apply() {
    var shown = 0, total = 0;
    items.forEach(function (item) {
      var visible = matches(item);
      item.hidden = !visible;
      entries[item.id].hidden = !visible;
      if (item.getAttribute("data-source") === source.value) { total += 1; }
      if (visible) { shown += 1; }
    });
    count.textContent = shown + " of " + total + " shown";
  }

  function select(id) {
    var item = document.getElementById(id);
    if (!item) { return; }
    if (item.getAttribute("data-source") !== source.value) {
      source.value = item.getAttribute("data-source");
      outcome.value = "all";
      apply();
    }
    items.forEach(function (other) {
      other.classList.toggle("current", other === item);
      entries[other.id].classList.toggle("current", other === item);
    });
    item.open = true;
    item.scrollIntoView({ block: "start" });
  }

  source.addEventListener("change", apply);
  outcome.addEventListener("change", apply);
  viewer.addEventListener("click", function (event) {
    var link = event.target.closest(".qlink");
    if (!link) { return; }
    event.preventDefault();
    select(link.getAttribute("data-target"));
    history.replaceState(null, "", "#" + link.getAttribute("data-target"));
  });
  apply();
  if (location.hash.length > 1) { select(location.hash.slice(1)); }
})();
"""
