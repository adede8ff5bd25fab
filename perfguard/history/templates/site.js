// Filters the series table in place (the pages are complete without this script).
(() => {
  const box = document.getElementById("filter-box");
  if (!box) return;
  box.hidden = false;
  const text = box.querySelector("[data-text-filter]");
  const selects = Array.from(box.querySelectorAll("select[data-dim]"));
  const openOnly = box.querySelector("[data-open-only]");
  const rows = Array.from(document.querySelectorAll("table.series tbody tr"));
  const shown = document.getElementById("shown");
  function apply() {
    const needle = text.value.trim().toLowerCase();
    let count = 0;
    for (const row of rows) {
      let keep = !needle || row.dataset.text.includes(needle);
      for (const select of selects) {
        if (select.value && row.dataset[select.dataset.dim] !== select.value) keep = false;
      }
      if (openOnly.checked && row.classList.contains("state-same")) keep = false;
      row.hidden = !keep;
      if (keep) count++;
    }
    shown.textContent = count + " of " + rows.length + " series";
  }
  box.addEventListener("input", apply);
  box.addEventListener("change", apply);
})();
