/* perfmodel dashboard: renders the server-built plotly figures, keeps the API token, runs the upload and
   what-if forms. Data from the server is only ever put into the page with textContent, never innerHTML. */
"use strict";

const TOKEN_KEY = "perfmodel_token";
const TOKEN_COOKIE = "perfmodel_token";
const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function authHeaders() {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

function formatTime(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  const steps = [[1, "s"], [1e-3, "ms"], [1e-6, "µs"], [1e-9, "ns"]];
  for (const [scale, unit] of steps) {
    if (Math.abs(s) >= scale) return (s / scale).toPrecision(3).replace(/\.?0+$/, "") + " " + unit;
  }
  return (s / 1e-9).toPrecision(3) + " ns";
}

function short(text, n) {
  const s = String(text);
  return s.length <= n ? s : s.slice(0, n - 1) + "…";
}

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

/* ---- charts ---- */
function renderCharts() {
  for (const div of document.querySelectorAll(".chart[data-figure]")) {
    const source = document.getElementById(div.dataset.figure);
    if (!source) continue;
    if (typeof Plotly === "undefined") {
      div.textContent = "The charting library (/static/plotly.min.js) did not load.";
      continue;
    }
    const fig = JSON.parse(source.textContent);
    div.textContent = "";
    Plotly.newPlot(div, fig.data, fig.layout, PLOT_CONFIG).then(() => withoutWebGL(div, fig))
      .then(() => { div.dataset.rendered = "true"; });
  }
}

/* A browser without WebGL (or one that lost it) gets plotly's "WebGL is not supported" box instead of the
   scatter: draw the same points as an SVG scatter (slower for very many points, but drawn). */
function withoutWebGL(div, fig) {
  if (!div.querySelector(".no-webgl")) return undefined;
  const data = fig.data.map((t) => (t.type === "scattergl" ? { ...t, type: "scatter" } : t));
  Plotly.purge(div);
  div.textContent = "";
  return Plotly.newPlot(div, data, fig.layout, PLOT_CONFIG).then(() => { div.dataset.webgl = "missing"; });
}

/* ---- token ---- */
function setupToken() {
  const form = document.getElementById("token-form");
  if (!form) return;
  const input = document.getElementById("token-input");
  const state = document.getElementById("token-state");
  const show = () => { state.textContent = token() ? "saved" : ""; };
  input.value = token();
  show();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (value) {
      sessionStorage.setItem(TOKEN_KEY, value);
      document.cookie = TOKEN_COOKIE + "=" + encodeURIComponent(value) + "; path=/; SameSite=Strict";
    }
    show();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    document.cookie = TOKEN_COOKIE + "=; path=/; max-age=0; SameSite=Strict";
    input.value = "";
    show();
  });
}

/* ---- trace upload ---- */
function errorText(xhr) {
  try {
    const body = JSON.parse(xhr.responseText);
    if (body && body.detail) return typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
  } catch (_) { /* not JSON */ }
  return xhr.statusText || "no answer from the server";
}

/* "framework shapes 71.0 %, fwd/bwd link 27.0 %" from {name: share of the kernel time} (largest first) */
function sharesText(shares) {
  if (!shares || typeof shares !== "object") return "–";
  const parts = Object.entries(shares).filter(([, v]) => typeof v === "number" && v > 0)
    .sort((a, b) => b[1] - a[1]).map(([k, v]) => k + " " + (v * 100).toFixed(1) + " %");
  return parts.length ? parts.join(", ") : "–";
}

function showUploadResult(body, hardware) {
  const section = document.getElementById("upload-result");
  document.getElementById("result-id").textContent = String(body.id) + (body.duplicate ? " (already uploaded: same file)" : "");
  const summary = document.getElementById("result-summary");
  summary.replaceChildren();
  const share = body.unmodelled_time_share;
  const count = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : n);
  const rows = [["Format", body.format], ["Kernel launches", count(body.kernels)],
    ["Distinct kernels", count(body.distinct_kernels)], ["Matched ops", body.matched_ops],
    ["Runs created", body.runs_created],
    ["Tags", Object.entries(body.tags || {}).map(([k, v]) => k + "=" + v).join(" ") || "–"],
    ["Unmodelled time", typeof share === "number" ? (share <= 1 ? share * 100 : share).toFixed(1) + " %" : "–"],
    ["Matched by source", sharesText(body.matched_share_by_source)],
    ["Unmodelled by reason", sharesText(body.unmodelled_share_by_category)]];
  for (const [k, v] of rows) { summary.append(el("dt", k), el("dd", v === undefined || v === null ? "–" : v)); }
  const warnings = document.getElementById("result-warnings");
  warnings.replaceChildren(...(body.warnings || []).map((w) => el("li", typeof w === "string" ? w : JSON.stringify(w))));
  const links = document.getElementById("result-links");
  const q = "hardware=" + encodeURIComponent(hardware) + "&trace=" + encodeURIComponent(body.id);
  links.replaceChildren(el("a", "See its kernels on the roofline", { href: "/roofline?workload=trace&" + q, id: "link-roofline" }),
    document.createTextNode(" · "), el("a", "Predicted vs measured", { href: "/runs?" + q, id: "link-runs" }));
  showCalibrate(body, hardware);
  section.hidden = false;
  refreshRecentUploads();
}

/* the server-rendered "Recent uploads" list, fetched again so the new upload shows in it */
async function refreshRecentUploads() {
  const here = document.getElementById("recent-uploads");
  if (!here) return;
  try {
    const page = new DOMParser().parseFromString(await (await fetch("/upload")).text(), "text/html");
    const fresh = page.getElementById("recent-uploads");
    if (fresh) here.replaceChildren(...fresh.childNodes);
  } catch (err) { /* the list stays as it was */ }
}

/* ---- a calibration fitted on the uploaded trace's runs (POST /api/v1/calibrations) ---- */
function pctText(part) {
  return part && typeof part.median_abs_pct === "number" ? part.median_abs_pct.toFixed(1) + " %" : "–";
}

function calibrationTable(report) {
  const table = el("table", null, { class: "data", id: "calibration-result-table" });
  const head = el("tr");
  for (const h of ["Op class", "Runs", "Source", "Uncalibrated", "In sample", "k-fold CV"]) head.append(el("th", h, { scope: "col" }));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const [key, c] of Object.entries(report.classes || {})) {
    const row = el("tr");
    row.append(el("th", short(key, 60), { scope: "row" }), el("td", c.runs, { class: "num" }), el("td", c.source),
      el("td", pctText(c.uncalibrated), { class: "num" }), el("td", pctText(c.in_sample), { class: "num" }),
      el("td", pctText(c.cv), { class: "num" }));
    table.tBodies[0].append(row);
  }
  const trees = report.residual_trees;
  if (trees) {
    const cv = trees.cv || {};
    const verdict = trees.kept ? "kept" : "not kept (" + (trees.reason || "") + ")";
    const heldOut = trees.cv ? "; held-out median: calibration " + pctText(cv.without_trees) + ", with the trees " + pctText(cv.with_trees) : "";
    table.append(el("caption", "Residual trees over the fitted classes: " + verdict + heldOut, { id: "calibration-trees" }));
  }
  return table;
}

const JOB_POLL_MS = 500;
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function fitErrorText(response, answer) {
  if (response.status === 401) return "Fitting needs a valid API token: enter it at the top of the page.";
  return "Not fitted (" + response.status + "): " + (typeof answer.detail === "string" ? answer.detail : JSON.stringify(answer.detail || ""));
}

/* POST /api/v1/calibrations answers 202 with a job; poll it (GET /api/v1/jobs/{id}), showing its stage and
   progress, until it ends: the page stays responsive, and the fit can be cancelled (DELETE). */
function calibrateButton(box, hardware, filter, label, notes, compareHref) {
  const button = el("button", label, { type: "button", id: "calibrate-button" });
  const cancel = el("button", "Cancel", { type: "button", id: "calibrate-cancel", hidden: "" });
  const bar = el("progress", null, { id: "calibrate-progress", max: "1", value: "0", hidden: "" });
  const status = el("span", "", { id: "calibrate-status", role: "status", "aria-live": "polite" });
  box.append(button, document.createTextNode(" "), cancel, document.createTextNode(" "), bar,
    document.createTextNode(" "), status);
  let jobUrl = null;
  cancel.addEventListener("click", async () => {
    if (!jobUrl) return;
    cancel.disabled = true;
    await fetch(jobUrl, { method: "DELETE", headers: authHeaders() }).catch(() => null);
  });
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = "Queued…";
    box.querySelector("#calibration-result-table")?.remove();
    try {
      const response = await fetch("/api/v1/calibrations", {
        method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() },
        body: JSON.stringify({ hardware: hardware, filter: filter, notes: notes }),
      });
      const answer = await response.json().catch(() => ({}));
      if (response.status !== 202) {
        status.textContent = fitErrorText(response, answer);
      } else {
        jobUrl = response.headers.get("Location") || answer.url;
        bar.hidden = false; cancel.hidden = false; cancel.disabled = false;
        await followJob(jobUrl, bar, status, hardware, compareHref, box);
      }
    } catch (err) {
      status.textContent = "Not fitted: network error.";
    }
    jobUrl = null;
    bar.hidden = true; cancel.hidden = true;
    button.disabled = false;
  });
}

async function followJob(url, bar, status, hardware, compareHref, box) {
  for (;;) {
    const response = await fetch(url, { headers: authHeaders() });
    const job = await response.json().catch(() => ({}));
    if (!response.ok) { status.textContent = fitErrorText(response, job); return; }
    bar.value = job.progress || 0;
    const pct = Math.round(100 * (job.progress || 0));
    if (job.status === "queued") status.textContent = "Queued (job " + job.id + ")…";
    else if (job.status === "running") status.textContent = "Fitting: " + (job.stage || "starting") + ", " + pct + " %";
    else if (job.status === "succeeded") {
      const calibration = await (await fetch(job.result.url, { headers: authHeaders() })).json();
      status.textContent = "Calibration " + calibration.id + " stored: the latest of " + hardware + ". ";
      status.append(el("a", "Compare it with the model", { href: compareHref, id: "link-calibrated" }));
      box.append(calibrationTable(calibration.report || {}));
      return;
    } else {
      status.textContent = "Not fitted: job " + job.id + " " + job.status + (job.error ? ": " + job.error : "") + ".";
      return;
    }
    await sleep(JOB_POLL_MS);
  }
}

function showCalibrate(body, hardware) {
  const box = document.getElementById("result-calibrate");
  if (!box) return;
  box.replaceChildren();
  if (!(body.runs_created > 0)) return;
  const compare = "/runs?hardware=" + encodeURIComponent(hardware) + "&trace=" + encodeURIComponent(body.id);
  calibrateButton(box, hardware, { trace_upload_id: body.id }, "Fit a calibration on its " + body.runs_created + " runs",
    "trace upload " + body.id, compare);
}

/* the runs page: a calibration on the runs its filters show */
function setupRunsCalibrate() {
  const box = document.getElementById("fit-calibration");
  if (!box) return;
  const d = box.dataset;
  const filter = {};
  if (d.opKind) filter.op_kind = d.opKind;
  if (d.source) filter.source = d.source;
  if (d.trace) filter.trace_upload_id = Number(d.trace);
  calibrateButton(box, d.hardware, filter, "Fit a calibration on these " + d.runs + " runs", "dashboard runs page",
    window.location.pathname + window.location.search);
}

function setupUpload() {
  const form = document.getElementById("upload-form");
  if (!form) return;
  const input = document.getElementById("trace-file");
  const zone = document.getElementById("drop-zone");
  const name = document.getElementById("file-name");
  const progress = document.getElementById("upload-progress");
  const status = document.getElementById("upload-status");
  let file = null;
  const pick = (f) => { file = f; name.textContent = f ? f.name + " (" + (f.size / 1024).toFixed(1) + " KiB)" : ""; };
  input.addEventListener("change", () => pick(input.files[0] || null));
  for (const type of ["dragenter", "dragover"]) {
    zone.addEventListener(type, (e) => { e.preventDefault(); zone.classList.add("over"); });
  }
  for (const type of ["dragleave", "drop"]) {
    zone.addEventListener(type, (e) => { e.preventDefault(); zone.classList.remove("over"); });
  }
  zone.addEventListener("drop", (e) => { if (e.dataTransfer.files.length) pick(e.dataTransfer.files[0]); });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!file) { status.textContent = "Choose or drop a trace file first."; return; }
    const hardware = document.getElementById("upload-hardware").value;
    const data = new FormData();
    data.append("file", file);
    data.append("hardware", hardware);
    const tags = document.getElementById("upload-tags");
    if (tags && tags.value.trim()) data.append("tags", tags.value.trim());
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.dataset.endpoint);
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
    progress.value = 0;
    status.textContent = "Uploading…";
    xhr.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) progress.value = Math.round((e.loaded / e.total) * 100);
      status.textContent = "Uploading… " + progress.value + " %";
    });
    xhr.upload.addEventListener("load", () => {
      progress.removeAttribute("value");  // indeterminate while the server parses
      status.textContent = "Parsing on the server…";
    });
    xhr.addEventListener("load", () => {
      progress.value = 100;
      if (xhr.status === 200 || xhr.status === 201) {
        status.textContent = "Done.";
        showUploadResult(JSON.parse(xhr.responseText), hardware);
      } else if (xhr.status === 401) {
        status.textContent = "Uploading needs a valid API token: enter it at the top of the page.";
      } else {
        status.textContent = "Upload failed (" + xhr.status + "): " + errorText(xhr);
      }
    });
    xhr.addEventListener("error", () => { progress.value = 0; status.textContent = "Upload failed: network error."; });
    xhr.send(data);
  });
}

/* ---- models page: estimate a model file through the REST uploads (POST /api/v1/graphs/estimate/...) ---- */
function fileKind(name) {
  const ext = name.toLowerCase().split(".").pop();
  if (ext === "onnx" || ext === "tflite") return ext;
  if (ext === "json") return "config";
  return "stablehlo";  // .mlir, .stablehlo, .txt: the text of jax.jit(f).lower(...).as_text()
}

function formatCount(v, unit) {  /* 4.19 MB, 134 MFLOP: SI prefixes, as the server's tables print them */
  if (typeof v !== "number" || !isFinite(v)) return "–";
  for (const [scale, prefix] of [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (Math.abs(v) >= scale) return (v / scale).toPrecision(3) + " " + prefix + unit;
  }
  return String(v) + " " + unit;
}

function pct(share) { return typeof share === "number" && isFinite(share) ? (100 * share).toFixed(1) + " %" : "–"; }

function fillRows(table, rows, empty) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const cells of rows) {
    const tr = el("tr");
    cells.forEach((c, i) => tr.append(el(i === 0 ? "th" : "td", c, i === 0 ? { scope: "row", class: "name" }
      : (/^[\d–]/.test(String(c)) ? { class: "num" } : {}))));
    body.append(tr);
  }
  if (!rows.length) {
    const tr = el("tr");
    tr.append(el("td", empty, { colspan: String(table.tHead.rows[0].cells.length), class: "muted" }));
    body.append(tr);
  }
}

function showFileResult(name, kind, body, notes) {
  const result = body.step_time_s !== undefined ? body : (body.prefill || body.decode || body);
  document.getElementById("file-result-name").textContent = name + " on " + (result.hardware || body.hardware || "");
  const opTime = (result.op_types || []).reduce((t, g) => t + (g.time_s || 0), 0);
  const stats = document.getElementById("file-stats");
  stats.replaceChildren();
  const totals = result.totals || {};
  for (const [label, value, id] of [["Step time", formatTime(result.step_time_s), "file-step-time"],
                                    ["Ops", totals.nodes === undefined ? "–" : Number(totals.nodes).toLocaleString("en"), ""],
                                    ["FLOPs", formatCount(totals.flops, "FLOP"), ""],
                                    ["DRAM traffic", formatCount(totals.dram_bytes, "B"), ""]]) {
    const box = el("div");
    box.append(el("dt", label), el("dd", value, id ? { id } : {}));
    stats.append(box);
  }
  const list = document.getElementById("file-notes");
  list.replaceChildren();
  document.getElementById("file-bottleneck").textContent = result.bottleneck ? result.bottleneck.summary || "" : "";
  for (const n of notes) list.append(el("li", n));
  const meta = result.meta || {};
  for (const k of meta.trip_counts_unmatched || []) list.append(el("li", "trip count " + k + ": no loop of this name (the loops are listed)"));
  for (const n of meta.config_notes || []) list.append(el("li", "config: " + n));
  const key = meta.kind === "llm" ? "op" : "source_op";
  fillRows(document.getElementById("file-ops-table"), (result.op_types || []).slice(0, 10).map((g) =>
    [short(g[key] !== undefined ? g[key] : g.op, 48), g.kind, g.count, formatTime(g.time_s), pct(g.share), g.bound]), "no ops");
  fillRows(document.getElementById("file-loops-table"), (result.loops || []).map((l) =>
    [l.loop, l.op, l.taken === false ? "–" : l.iterations,
     l.taken === false ? "in an If branch not taken" : l.trip_count + (l.trip_count === "default" ? " (one iteration: give a trip count)" : "")
       + (l.unrolled === false ? "; not unrolled (past the node cap): its time is its bytes once, not its iterations' work" : ""),
     formatTime(l.time_s), pct(l.share)]), "no loops in this model");
  fillRows(document.getElementById("file-fallback-table"), (result.diagnostics || []).map((d) =>
    [short(d.node, 40), d.source_op, short(d.reason || "", 80), d.fallback ? d.fallback.kind : "–",
     formatTime(d.fallback_time_s), opTime > 0 ? pct(d.fallback_time_s / opTime) : "–"]), "every op is modelled");
  document.getElementById("file-result").hidden = false;
}

function setupFileEstimate() {
  const form = document.getElementById("file-form");
  if (!form) return;
  const input = document.getElementById("model-file");
  const progress = document.getElementById("file-progress");
  const status = document.getElementById("file-status");
  const button = document.getElementById("file-button");
  const fail = (text) => { progress.value = 0; status.textContent = text; status.classList.add("error"); };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.classList.remove("error");
    document.getElementById("file-result").hidden = true;  // never the last file's answer under this one's status
    const file = input.files[0];
    if (!file) { fail("Choose a model file first."); return; }
    const kind = fileKind(file.name);
    const hardware = document.getElementById("file-hardware").value;
    const trips = document.getElementById("trip-counts").value.trim();
    const limit = Number(kind === "config" ? form.dataset.maxBodyBytes : form.dataset.maxUploadBytes);
    if (file.size > limit) { fail(file.name + " is " + file.size + " bytes, over the " + limit + " byte limit."); return; }
    const notes = [];
    let request;
    if (kind === "config") {
      let parsed;
      try { parsed = JSON.parse(await file.text()); } catch (err) { fail(file.name + " is not JSON: " + err.message); return; }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) { fail(file.name + " is not a JSON object."); return; }
      const source = Array.isArray(parsed.nodes) ? { graph: parsed } : { config: parsed };
      if (trips) notes.push("Trip counts apply to ONNX and StableHLO loops: not sent with a JSON file.");
      request = { method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() },
                  body: JSON.stringify({ hardware, ...source, phase: document.getElementById("file-phase").value, detail: false }) };
    } else {
      const data = new FormData();
      data.append("file", file);
      data.append("hardware", hardware);
      data.append("detail", "false");
      if (trips && kind !== "tflite") data.append("trip_counts", trips);
      if (trips && kind === "tflite") notes.push("TensorFlow Lite files have no loops: the trip counts were not sent.");
      request = { method: "POST", headers: authHeaders(), body: data };
    }
    progress.removeAttribute("value");  // indeterminate while the server imports and estimates
    button.disabled = true;
    const started = Date.now();
    const tick = () => { status.textContent = "Estimating " + file.name + " on " + hardware + "… " + Math.round((Date.now() - started) / 1000) + " s"; };
    tick();
    const timer = setInterval(tick, 1000);
    try {
      const response = await fetch(form.dataset["endpoint" + kind[0].toUpperCase() + kind.slice(1)], request);
      const answer = await response.json().catch(() => ({}));
      if (response.ok) {
        progress.value = 100;
        status.textContent = "Done in " + ((Date.now() - started) / 1000).toFixed(1) + " s.";
        showFileResult(file.name, kind, answer, notes);
      } else if (response.status === 401) {
        fail("Estimating a file needs a valid API token: enter it at the top of the page.");
      } else {
        const detail = typeof answer.detail === "string" ? answer.detail : JSON.stringify(answer.detail || response.statusText);
        fail("Not estimated (" + response.status + "): " + detail);
      }
    } catch (err) {
      fail("Not estimated: " + (err && err.message ? err.message : "network error"));
    } finally {
      clearInterval(timer);
      button.disabled = false;
    }
  });
}

/* ---- what-if ---- */
function setupWhatIf() {
  const root = document.getElementById("whatif");
  if (!root) return;
  const sliders = Array.from(root.querySelectorAll("input[type=range][data-knob]"));
  const status = document.getElementById("whatif-status");
  const chart = document.getElementById("whatif-chart");
  let last = JSON.parse(document.getElementById("whatif-initial").textContent);
  let sequence = 0;
  let timer = null;

  const factor = (s) => Math.pow(10, Number(s.value));
  const factors = () => Object.fromEntries(sliders.map((s) => [s.dataset.knob, Number(factor(s).toFixed(3))]));

  function draw(result) {
    document.getElementById("base-total").textContent = formatTime(result.base_total_s);
    document.getElementById("variant-total").textContent = formatTime(result.variant_total_s);
    document.getElementById("speedup").textContent = result.speedup ? "×" + result.speedup.toFixed(2) : "–";
    const body = document.querySelector("#whatif-table tbody");
    body.replaceChildren(...result.rows.slice(0, 200).map((r) => {
      const tr = el("tr");
      const name = el("th", short(r.name, 160), { scope: "row", class: "name", title: r.name });
      tr.append(name, el("td", r.kind), el("td", r.count, { class: "num" }), el("td", formatTime(r.base_s), { class: "num" }),
        el("td", formatTime(r.variant_s), { class: "num" }), el("td", r.speedup ? "×" + r.speedup.toFixed(2) : "–", { class: "num" }),
        el("td", r.base_bound === r.variant_bound ? r.base_bound : r.base_bound + " → " + r.variant_bound));
      return tr;
    }));
    if (typeof Plotly === "undefined") return;
    const top = result.rows.slice(0, 20).reverse();
    const names = top.map((r) => short(r.name, 60).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"));
    const data = [
      { type: "bar", orientation: "h", name: "base " + result.base, y: names, x: top.map((r) => r.base_s * 1e6), marker: { color: "#9aa7b5" },
        hovertemplate: "%{y}: %{x:.4g} µs<extra>base</extra>" },
      { type: "bar", orientation: "h", name: "variant", y: names, x: top.map((r) => r.variant_s * 1e6), marker: { color: "#1f5fa8" },
        hovertemplate: "%{y}: %{x:.4g} µs<extra>variant</extra>" }];
    const layout = { barmode: "group", height: Math.max(320, 40 + top.length * 34), margin: { l: 170, r: 20, t: 72, b: 50 },
      title: { text: "Per-op time (all repeats), largest 20", x: 0.01, font: { size: 15 } },
      xaxis: { title: { text: "Time [µs]" }, gridcolor: "#e4e7eb" }, yaxis: { automargin: true },
      font: { family: "system-ui, sans-serif", size: 12 }, legend: { orientation: "h", x: 1, xanchor: "right", y: 1, yanchor: "bottom" } /* above the bars, never over one */, paper_bgcolor: "white", plot_bgcolor: "white" };
    Plotly.react(chart, data, layout, PLOT_CONFIG).then(() => { chart.dataset.rendered = "true"; });
  }

  async function update() {
    const mine = ++sequence;
    status.textContent = "Predicting…";
    const response = await fetch("/ui/api/whatif", {
      method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify({ hardware: root.dataset.hardware, workload: root.dataset.workload, trace: root.dataset.trace,
        ops: document.getElementById("whatif-ops").value, factors: factors(),
        variant_id: document.getElementById("variant-id").value }) });
    if (mine !== sequence) return;
    const body = await response.json();
    if (!response.ok) { status.textContent = "Cannot predict this variant: " + (body.detail || response.status); return; }
    last = body;
    status.textContent = body.workload + (Object.keys(body.overrides).length ? " · overrides " + JSON.stringify(body.overrides) : "");
    draw(body);
  }

  for (const s of sliders) {
    s.addEventListener("input", () => {
      document.getElementById(s.id + "-value").textContent = "×" + factor(s).toFixed(2);
      s.setAttribute("aria-valuetext", "×" + factor(s).toFixed(2));
      clearTimeout(timer);
      timer = setTimeout(update, 120);
    });
  }
  document.getElementById("knob-reset").addEventListener("click", () => {
    for (const s of sliders) { s.value = "0"; document.getElementById(s.id + "-value").textContent = "×1.00"; }
    update();
  });
  document.getElementById("save-variant").addEventListener("submit", async (event) => {
    event.preventDefault();
    const out = document.getElementById("save-status");
    const id = document.getElementById("variant-id").value.trim();
    const response = await fetch("/api/v1/hardware", {
      method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify({ base: root.dataset.hardware, id: id, overrides: last.overrides || {} }) });
    const body = await response.json().catch(() => ({}));
    if (response.status === 201) {
      out.replaceChildren(document.createTextNode("Saved as "), el("a", id, { href: "/hardware/" + encodeURIComponent(id) }));
    } else if (response.status === 401) {
      out.textContent = "Saving needs a valid API token: enter it at the top of the page.";
    } else {
      out.textContent = "Not saved (" + response.status + "): " + (body.detail || "");
    }
  });
  draw(last);
}

/* ---- sortable tables (table[data-sortable]): a button per heading, numbers from data-sort ---- */
function sortKey(row, col) {
  const cell = row.cells[col];
  const raw = cell ? (cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim()) : "";
  const number = Number(raw);
  return raw !== "" && Number.isFinite(number) ? number : raw;
}

function sortTable(table, th, col) {
  const ascending = th.getAttribute("aria-sort") !== "ascending";
  for (const other of table.tHead.rows[0].cells) other.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = sortKey(a, col), y = sortKey(b, col);
    const c = typeof x === "number" && typeof y === "number" ? x - y
      : String(x).localeCompare(String(y), undefined, { numeric: true });
    return ascending ? c : -c;
  });
  body.append(...rows);
}

function setupSortable() {
  for (const table of document.querySelectorAll("table[data-sortable]")) {
    if (!table.tHead || !table.tBodies.length) continue;
    Array.from(table.tHead.rows[0].cells).forEach((th, col) => {
      const button = el("button", th.textContent.trim(), { type: "button", class: "sort" });
      th.replaceChildren(button);
      button.addEventListener("click", () => sortTable(table, th, col));
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  setupToken();
  renderCharts();
  setupSortable();
  setupUpload();
  setupRunsCalibrate();
  setupWhatIf();
  setupFileEstimate();
});
