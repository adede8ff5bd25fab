"use strict";
(function () {
  // Sorting and filtering of tables marked data-sortable. Without JavaScript the tables are
  // complete and ordered by severity; these controls only appear when this script runs.
  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-v");
    if (v !== null && v !== "") { var n = parseFloat(v); if (!isNaN(n)) { return n; } }
    return (cell.textContent || "").trim().toLowerCase();
  }
  function sortBy(table, th) {
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.children, function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      if (typeof x === "number" && typeof y !== "number") { return -1; }
      if (typeof y === "number" && typeof x !== "number") { return 1; }
      var r = x < y ? -1 : (x > y ? 1 : 0);
      return ascending ? r : -r;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  function applyFilter(table, controls) {
    var only = controls.querySelector("[data-filter=regressions]");
    var hideSame = controls.querySelector("[data-filter=hide-same]");
    var text = controls.querySelector("[data-filter=text]");
    var needle = text ? text.value.trim().toLowerCase() : "";
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var state = row.getAttribute("data-state") || "";
      var visible = true;
      if (only && only.checked && state !== "regression" && state !== "failed") { visible = false; }
      if (hideSame && hideSame.checked && state === "same") { visible = false; }
      if (needle && (row.textContent || "").toLowerCase().indexOf(needle) < 0) { visible = false; }
      row.hidden = !visible;
      total += 1; if (visible) { shown += 1; }
    });
    var count = controls.querySelector("[data-count]");
    if (count) { count.textContent = "showing " + shown + " of " + total + " rows"; }
  }
  Array.prototype.forEach.call(document.querySelectorAll("table[data-sortable]"), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll("th[data-sort]"), function (th) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortBy(table, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sortBy(table, th); } });
    });
    var controls = document.getElementById(table.getAttribute("data-controls"));
    if (controls) {
      controls.hidden = false;
      Array.prototype.forEach.call(controls.querySelectorAll("[data-filter]"), function (input) {
        input.addEventListener("input", function () { applyFilter(table, controls); });
        input.addEventListener("change", function () { applyFilter(table, controls); });
      });
      applyFilter(table, controls);
    }
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-details]"), function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-details") === "open";
      Array.prototype.forEach.call(document.querySelectorAll("details.case"), function (d) { d.open = open; });
    });
  });
  function openTarget() {
    var target = document.getElementById(window.location.hash.slice(1));
    if (target && target.tagName === "DETAILS") { target.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
