// DOM helpers and renderers for A2A values. Everything goes through textContent, never
// innerHTML: card and task contents come from the agent and must not become markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function shortState(state) {
  return String(state || "unknown").replace(/^TASK_STATE_/, "").toLowerCase().replace(/_/g, "-");
}

export const TERMINAL_STATES = new Set([
  "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
]);
export const INTERRUPTED_STATES = new Set(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]);

export function stateBadge(state) {
  return h("span", { class: `state state-${shortState(state)}`, dataset: { state: state || "" } }, shortState(state));
}

export function badge(text, kind = "", title = "") {
  return h("span", { class: `badge ${kind}`.trim(), title: title || null }, text);
}

export function formatTime(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toLocaleTimeString();
}

// Caps on what one view renders. The agent decides how much it sends (a 10 MB text, a
// stream of 10^4 chunks); rendering all of it froze the tab, so a view shows this much
// and says how much it left out. The raw task stays available through GetTask.
export const LIMITS = { parts: 100, text: 100_000, entries: 200 };

export function omitted(count, what) {
  return h("div", { class: "muted small omitted" }, `… ${count} more ${what} not shown`);
}

function clipped(text) {
  return text.length > LIMITS.text ? [text.slice(0, LIMITS.text), omitted(text.length - LIMITS.text, "characters")] : [text];
}

// Collapsible JSON tree; small objects start open so results are readable at a glance.
export function jsonTree(value, { open = 2, key = null } = {}) {
  const label = key === null ? [] : [h("span", { class: "jkey" }, key), ": "];
  if (value !== null && typeof value === "object") {
    const isArray = Array.isArray(value);
    const entries = isArray ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const summary = isArray ? `[${entries.length}]` : `{${entries.length}}`;
    if (!entries.length) return h("div", { class: "jrow" }, label, h("span", { class: "jpunct" }, isArray ? "[]" : "{}"));
    const details = h("details", { class: "jnode", open: open > 0 },
      h("summary", {}, label, h("span", { class: "jpunct" }, summary)));
    for (const [k, v] of entries.slice(0, LIMITS.entries)) details.append(jsonTree(v, { open: open - 1, key: k }));
    if (entries.length > LIMITS.entries) details.append(omitted(entries.length - LIMITS.entries, "entries"));
    return details;
  }
  const type = value === null ? "null" : typeof value;
  const text = type === "string" ? JSON.stringify(value) : String(value);
  return h("div", { class: "jrow" }, label, h("span", { class: `jval j${type}` }, clipped(text)));
}

export function jsonBlock(value) {
  return h("div", { class: "json" }, jsonTree(value));
}

function base64ToBlob(b64, mediaType) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i += 1) bytes[i] = bin.charCodeAt(i);
  return new Blob([bytes], { type: mediaType || "application/octet-stream" });
}

function humanSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

// Image types a preview shows; an image opened in a tab can run no script in these.
const PREVIEW_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"]);

export function renderPart(part) {
  const meta = part.mediaType ? h("span", { class: "muted small" }, ` ${part.mediaType}`) : null;
  if (typeof part.text === "string") {
    return h("div", { class: "part part-text" }, h("pre", {}, clipped(part.text)));
  }
  if (part.data !== undefined) {
    return h("div", { class: "part part-data" }, jsonBlock(part.data));
  }
  if (typeof part.raw === "string") {
    const name = part.filename || "download";
    let blob;
    try {
      // Never the agent's media type: a blob: URL has this page's origin, and one opened
      // in a tab (middle click, "open in new tab") renders as its type, outside this
      // page's CSP, so text/html or SVG from the agent would run script as the agent's
      // own origin. As octet-stream it can only be downloaded.
      blob = base64ToBlob(part.raw, "application/octet-stream");
    } catch {
      return h("div", { class: "part part-file error-text" }, `File ${name}: content is not valid base64`);
    }
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: name, class: "file-link" }, `⬇ ${name}`);
    // Previews only for raster images (no SVG: it is a document that can hold script).
    const type = String(part.mediaType || "").split(";")[0].trim().toLowerCase();
    const preview = PREVIEW_TYPES.has(type)
      ? h("img", { src: URL.createObjectURL(new Blob([blob], { type })), alt: name, class: "preview" }) : null;
    return h("div", { class: "part part-file" }, link, h("span", { class: "muted small" }, ` ${humanSize(blob.size)}`), meta, preview);
  }
  if (typeof part.url === "string") {
    const safe = /^https?:\/\//i.test(part.url);
    const name = part.filename || part.url;
    const link = safe
      ? h("a", { href: part.url, target: "_blank", rel: "noopener noreferrer", class: "file-link" }, `↗ ${name}`)
      : h("code", {}, part.url);
    return h("div", { class: "part part-file" }, link, meta);
  }
  return h("div", { class: "part" }, jsonBlock(part));
}

export function renderParts(parts) {
  const list = parts || [];
  const more = list.length - LIMITS.parts;
  return h("div", { class: "parts" }, list.slice(0, LIMITS.parts).map(renderPart), more > 0 ? omitted(more, "parts") : null);
}

// Pulls human-readable field errors out of the error shapes agents use: google.rpc
// BadRequest details, apcore validation errors, or plain {field: message} maps.
export function fieldErrors(data) {
  const out = [];
  const visit = (node, depth) => {
    if (!node || typeof node !== "object" || depth > 4) return;
    if (Array.isArray(node)) { node.forEach((n) => visit(n, depth + 1)); return; }
    for (const v of node.fieldViolations || []) out.push([v.field || "", v.description || v.message || ""]);
    const errs = node.errors;
    if (Array.isArray(errs)) {
      for (const e of errs) {
        if (e && typeof e === "object") {
          const where = e.field ?? e.path ?? (Array.isArray(e.loc) ? e.loc.join(".") : e.loc) ?? "";
          out.push([String(where), e.message || e.msg || e.description || JSON.stringify(e)]);
        } else out.push(["", String(e)]);
      }
    }
    for (const [k, v] of Object.entries(node)) {
      if (k !== "errors" && k !== "fieldViolations" && v && typeof v === "object") visit(v, depth + 1);
    }
  };
  visit(data, 0);
  // The same violation often arrives twice (apcore details and google.rpc.BadRequest).
  const seen = new Set();
  return out.filter(([f, m]) => {
    const key = `${f}\u0000${m}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

export function errorBox(err, title = "Error") {
  const code = err && err.code !== undefined && err.code !== null ? `${err.code}` : null;
  const head = h("div", { class: "error-head" }, h("strong", {}, title),
    code ? h("span", { class: "badge danger" }, `code ${code}`) : null,
    err && err.httpStatus ? h("span", { class: "badge danger" }, `HTTP ${err.httpStatus}`) : null);
  const message = h("div", { class: "error-message" }, (err && err.message) || String(err));
  const fields = fieldErrors(err && err.data);
  const list = fields.length
    ? h("ul", { class: "field-errors" }, fields.map(([f, m]) => h("li", {}, f ? h("code", {}, f) : null, f ? " " : null, m)))
    : null;
  const details = err && err.data
    ? h("details", { class: "error-data" }, h("summary", {}, "details"), jsonBlock(err.data)) : null;
  return h("div", { class: "error-box", role: "alert" }, head, message, list, details);
}
