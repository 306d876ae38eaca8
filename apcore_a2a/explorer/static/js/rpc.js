// JSON-RPC 1.0 client for one A2A agent: unary calls and SSE streams over fetch.

export const A2A_VERSION = "1.0";

// An error from the agent or the network, kept structured so the UI can show code,
// message and field errors instead of a bare string.
export class AgentError extends Error {
  constructor({ message, code = null, data = null, httpStatus = null, kind = "rpc" }) {
    super(message || "Unknown error");
    this.name = "AgentError";
    this.code = code;
    this.data = data;
    this.httpStatus = httpStatus;
    this.kind = kind;
  }
}

export function newId() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") {
    return crypto.randomUUID();
  }
  // randomUUID only exists in secure contexts; plain-http hosts other than localhost need this.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const STATUS_TEXT = {
  400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
  405: "Method Not Allowed", 413: "Payload Too Large", 415: "Unsupported Media Type",
  422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
  502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
};

function messageFromBody(body) {
  if (!body || typeof body !== "object") return null;
  const err = body.error;
  if (err && typeof err === "object") return err.message || null;
  if (typeof err === "string") return err;
  return body.message || body.detail || null;
}

async function httpError(resp) {
  const status = resp.status;
  let text = "";
  try { text = await resp.text(); } catch { /* body unreadable: status alone must do */ }
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  const serverMessage = messageFromBody(body) || text.trim().slice(0, 300);
  const label = `HTTP ${status} ${STATUS_TEXT[status] || resp.statusText || ""}`.trim();
  let hint = "";
  if (status === 401) hint = "The agent did not accept the credentials. Check the token field.";
  else if (status === 403) hint = "The token is valid but not allowed to do this.";
  const message = [label, serverMessage, hint].filter(Boolean).join(" — ");
  const rpc = body && typeof body.error === "object" ? body.error : null;
  return new AgentError({
    message, httpStatus: status, kind: "http",
    code: rpc ? rpc.code ?? null : null, data: rpc ? rpc.data ?? null : body,
  });
}

function rpcError(err) {
  return new AgentError({
    message: err.message || "Agent returned an error", code: err.code ?? null,
    data: err.data ?? null, kind: "rpc",
  });
}

export class AgentClient {
  // endpoint: JSON-RPC URL; headers(): extra headers (credentials) for each call.
  constructor(endpoint, headers = () => ({})) {
    this.endpoint = endpoint;
    this.headers = headers;
  }

  async _post(method, params, accept, signal) {
    const body = JSON.stringify({ jsonrpc: "2.0", id: newId(), method, params });
    let resp;
    try {
      resp = await fetch(this.endpoint, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Accept: accept,
          "A2A-Version": A2A_VERSION,
          ...this.headers(),
        },
        body,
        signal,
        cache: "no-store",
      });
    } catch (exc) {
      if (exc && exc.name === "AbortError") throw exc;
      throw new AgentError({
        message: `Could not reach the agent at ${this.endpoint}: ${exc && exc.message ? exc.message : exc}`,
        kind: "network",
      });
    }
    if (!resp.ok) throw await httpError(resp);
    return resp;
  }

  // One request, one JSON-RPC response; resolves to `result` or throws AgentError.
  async call(method, params = {}, { signal } = {}) {
    const resp = await this._post(method, params, "application/json", signal);
    let payload;
    try {
      payload = await resp.json();
    } catch {
      throw new AgentError({ message: `The agent sent a response that is not JSON (${method})`, kind: "protocol" });
    }
    if (payload.error) throw rpcError(payload.error);
    return payload.result;
  }

  // Server-sent events: yields each `result`; an `error` event throws AgentError.
  async *stream(method, params = {}, { signal } = {}) {
    const resp = await this._post(method, params, "text/event-stream", signal);
    const type = resp.headers.get("content-type") || "";
    if (!type.includes("text/event-stream")) {
      // Errors raised before the stream starts come back as one plain JSON-RPC response.
      const payload = await resp.json().catch(() => null);
      if (payload && payload.error) throw rpcError(payload.error);
      if (payload && payload.result) { yield payload.result; return; }
      throw new AgentError({ message: `Expected an event stream, got '${type || "no content type"}'`, kind: "protocol" });
    }
    for await (const event of parseSse(resp.body, signal)) {
      let payload;
      try {
        payload = JSON.parse(event.data);
      } catch {
        throw new AgentError({ message: `Malformed event from the agent: ${event.data.slice(0, 200)}`, kind: "protocol" });
      }
      if (payload.error) throw rpcError(payload.error);
      if (payload.result !== undefined) yield payload.result;
    }
  }
}

// Minimal text/event-stream parser (WHATWG rules for data/event lines and comments).
export async function* parseSse(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const onAbort = () => reader.cancel().catch(() => {});
  if (signal) signal.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = parseBlock(block);
        if (event) yield event;
      }
    }
    const tail = parseBlock(buffer);
    if (tail) yield tail;
  } finally {
    if (signal) signal.removeEventListener("abort", onAbort);
    reader.releaseLock();
  }
}

function parseBlock(block) {
  const data = [];
  let event = "message";
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
  }
  return data.length ? { event, data: data.join("\n") } : null;
}
