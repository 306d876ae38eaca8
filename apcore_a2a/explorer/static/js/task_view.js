// The task panel and the live event timeline: folds A2A stream events into one task
// and renders its state history, artifacts, interrupts and actions.

import {
  INTERRUPTED_STATES, LIMITS, TERMINAL_STATES, badge, clear, errorBox, formatTime, h, jsonBlock,
  omitted, renderParts, shortState, stateBadge,
} from "./render.js";

function approvalRequest(status) {
  const parts = (status && status.message && status.message.parts) || [];
  for (const part of parts) {
    const d = part.data;
    if (d && typeof d === "object" && !Array.isArray(d) && d.approvalId !== undefined) return d;
  }
  return null;
}

function eventKind(result) {
  for (const kind of ["task", "statusUpdate", "artifactUpdate", "message"]) {
    if (result && result[kind]) return kind;
  }
  return "unknown";
}

export class TaskView {
  // actions: { reply(task, parts), cancel(task), resubscribe(task), refresh(task) }
  constructor({ body, timeline, eventCount, actions }) {
    this.body = body;
    this.timelineEl = timeline;
    this.eventCountEl = eventCount;
    this.actions = actions;
    this.task = null;
    this.message = null;
    this.error = null;
    this.history = [];
    this.events = 0;
    this.started = performance.now();
    this.busy = false;
    this.pending = 0;
  }

  // A new request: the timeline restarts. A fresh send also forgets the previous task, so
  // an error is never shown next to a task it does not belong to.
  startRun(label, { fresh = false } = {}) {
    this.started = performance.now();
    this.error = null;
    if (fresh) {
      this.task = null;
      this.message = null;
      this.history = [];
    }
    this.events = 0;
    this.eventCountEl.textContent = "";
    this.timelineEl.replaceChildren();
    this.note(label);
  }

  note(text) {
    this.addEvent(h("li", { class: "event event-note" }, h("span", { class: "t" }, this.elapsed()), text));
  }

  // The list keeps the latest events; the count above it still counts them all.
  addEvent(item) {
    if (this.timelineEl.childElementCount >= LIMITS.entries) this.timelineEl.firstElementChild.remove();
    this.timelineEl.append(item);
  }

  elapsed() {
    return `+${Math.round(performance.now() - this.started)} ms`;
  }

  // Applies one StreamResponse-shaped result ({task}|{message}|{statusUpdate}|{artifactUpdate}).
  apply(result, { record = true } = {}) {
    const kind = eventKind(result);
    if (record) this.recordEvent(kind, result);
    if (kind === "task") this.setTask(result.task);
    else if (kind === "message") { this.message = result.message; this.error = null; }
    else if (kind === "statusUpdate") this.applyStatus(result.statusUpdate);
    else if (kind === "artifactUpdate") this.applyArtifact(result.artifactUpdate);
    this.scheduleRender();
    return kind;
  }

  // A stream can bring thousands of events in one read; they are drawn once per frame,
  // not once each.
  scheduleRender() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => this.render());
  }

  recordEvent(kind, result) {
    this.events += 1;
    this.eventCountEl.textContent = String(this.events);
    const payload = result[kind];
    let summary = null;
    if (kind === "task") summary = stateBadge(payload.status && payload.status.state);
    else if (kind === "statusUpdate") summary = stateBadge(payload.status && payload.status.state);
    else if (kind === "artifactUpdate") {
      const a = payload.artifact || {};
      summary = h("span", {}, a.name || a.artifactId || "artifact", payload.append ? " (append)" : "", payload.lastChunk ? " (last chunk)" : "");
    } else if (kind === "message") summary = h("span", {}, "agent message");
    this.addEvent(h("li", { class: `event event-${kind}`, dataset: { kind } },
      h("div", { class: "event-head" }, h("span", { class: "t" }, this.elapsed()), h("span", { class: "kind" }, kind), summary),
      h("details", { class: "event-raw" }, h("summary", {}, "raw"), jsonBlock(payload))));
    this.timelineEl.scrollTop = this.timelineEl.scrollHeight;
  }

  track(status) {
    if (!status || !status.state) return;
    const last = this.history[this.history.length - 1];
    if (!last || last.state !== status.state) this.history.push({ state: status.state, timestamp: status.timestamp });
  }

  setTask(task) {
    if (!this.task || this.task.id !== task.id) this.history = [];
    this.task = JSON.parse(JSON.stringify(task));
    this.message = null;
    this.error = null;
    this.track(task.status);
  }

  ensureTask(ev) {
    if (!this.task || this.task.id !== ev.taskId) {
      this.task = { id: ev.taskId, contextId: ev.contextId, status: {}, artifacts: [], history: [] };
      this.history = [];
    }
    return this.task;
  }

  applyStatus(ev) {
    const task = this.ensureTask(ev);
    task.status = ev.status || {};
    this.track(task.status);
  }

  applyArtifact(ev) {
    const task = this.ensureTask(ev);
    const incoming = ev.artifact || {};
    task.artifacts = task.artifacts || [];
    const existing = task.artifacts.find((a) => a.artifactId === incoming.artifactId);
    if (existing && ev.append) {
      // In place: copying the parts on every chunk made a long stream quadratic.
      existing.parts = existing.parts || [];
      for (const part of incoming.parts || []) existing.parts.push(part);
    } else if (existing) Object.assign(existing, incoming);
    else task.artifacts.push(JSON.parse(JSON.stringify(incoming)));
  }

  showError(err, title = "Request failed") {
    this.error = { err, title };
    this.note(`error: ${err.message || err}`);
    this.render();
  }

  setBusy(busy) {
    this.busy = busy;
    this.render();
  }

  render() {
    if (this.pending) cancelAnimationFrame(this.pending);
    this.pending = 0;
    if (!this.task && !this.message && !this.error) {
      clear(this.body, h("div", { class: "muted" }, "Send a message to see its task here."));
      return;
    }
    const out = [];
    if (this.error) out.push(errorBox(this.error.err, this.error.title));
    if (this.message && !this.task) out.push(this.renderMessage(this.message, "Agent replied with a message"));
    if (this.task) out.push(this.renderTask(this.task));
    clear(this.body, out);
  }

  renderMessage(message, title) {
    return h("div", { class: "message-reply" }, h("h3", {}, title), renderParts(message.parts));
  }

  renderTask(task) {
    const state = task.status && task.status.state;
    const terminal = TERMINAL_STATES.has(state);
    const cancel = h("button", { type: "button", class: "danger", id: "task-cancel", disabled: terminal || !task.id }, "Cancel");
    cancel.addEventListener("click", () => this.actions.cancel(task));
    const resub = h("button", { type: "button", id: "task-resubscribe", disabled: terminal || !task.id }, "Resubscribe");
    resub.addEventListener("click", () => this.actions.resubscribe(task));
    const refresh = h("button", { type: "button", id: "task-refresh" }, "Refresh");
    refresh.addEventListener("click", () => this.actions.refresh(task));
    const parts = [
      h("div", { class: "task-head" }, h("span", { id: "task-state" }, stateBadge(state)),
        this.busy ? h("span", { class: "spinner", title: "waiting for the agent" }) : null,
        h("code", { class: "ellipsis", title: task.id, id: "task-id" }, task.id)),
      h("div", { class: "row" }, cancel, resub, refresh),
      h("div", { class: "kv" }, h("span", { class: "muted" }, "context"), h("code", { class: "ellipsis", title: task.contextId }, task.contextId || "")),
      h("ol", { class: "state-history", "aria-label": "state history" },
        this.history.map((e) => h("li", {}, stateBadge(e.state), h("span", { class: "muted small" }, ` ${formatTime(e.timestamp)}`)))),
    ];
    if (INTERRUPTED_STATES.has(state)) parts.push(this.renderInterrupt(task));
    else if (task.status && task.status.message) {
      parts.push(h("div", { class: `status-message status-${shortState(state)}` },
        h("h3", {}, state === "TASK_STATE_FAILED" ? "Failure" : "Status message"), renderParts(task.status.message.parts)));
    }
    const artifacts = task.artifacts || [];
    parts.push(h("h3", {}, "Artifacts ", badge(String(artifacts.length))));
    parts.push(artifacts.length
      ? h("div", { class: "artifacts" }, artifacts.slice(0, LIMITS.parts).map((a) => h("div", { class: "artifact", dataset: { artifactId: a.artifactId || "" } },
        h("div", { class: "artifact-head" }, h("strong", {}, a.name || "artifact"), h("code", { class: "muted small" }, ` ${a.artifactId || ""}`)),
        a.description ? h("div", { class: "help" }, a.description) : null,
        renderParts(a.parts))), artifacts.length > LIMITS.parts ? omitted(artifacts.length - LIMITS.parts, "artifacts") : null)
      : h("div", { class: "muted small" }, terminal ? "No artifacts." : "No artifacts yet."));
    const history = task.history || [];
    if (history.length) {
      parts.push(h("details", { class: "history" }, h("summary", {}, `Messages (${history.length})`),
        history.slice(-LIMITS.parts).map((m) => h("div", { class: `msg msg-${m.role === "ROLE_AGENT" ? "agent" : "user"}` },
          h("div", { class: "muted small" }, m.role === "ROLE_AGENT" ? "agent" : "user"), renderParts(m.parts)))));
    }
    return h("div", { class: "task", dataset: { taskId: task.id || "", state: state || "" } }, parts);
  }

  renderInterrupt(task) {
    const status = task.status || {};
    const approval = approvalRequest(status);
    if (approval) {
      const approve = h("button", { type: "button", class: "primary", id: "approve" }, "Approve");
      const reject = h("button", { type: "button", class: "danger", id: "reject" }, "Reject");
      const reason = h("input", { type: "text", id: "reject-reason", placeholder: "reason (optional, sent with Reject)", "aria-label": "rejection reason" });
      approve.addEventListener("click", () => this.actions.reply(task, [{ data: { approved: true } }]));
      reject.addEventListener("click", () => {
        const data = { approved: false };
        if (reason.value.trim()) data.reason = reason.value.trim();
        this.actions.reply(task, [{ data }]);
      });
      return h("div", { class: "interrupt approval", role: "group", "aria-label": "approval request" },
        h("h3", {}, "Approval required"),
        approval.reason ? h("p", { class: "reason" }, String(approval.reason)) : null,
        h("div", { class: "kv" }, h("span", { class: "muted" }, "module"), h("code", {}, String(approval.moduleId ?? ""))),
        h("div", { class: "kv" }, h("span", { class: "muted" }, "approval id"), h("code", {}, String(approval.approvalId))),
        h("div", { class: "row" }, approve, reject), reason);
    }
    const answer = h("textarea", { rows: 3, id: "answer", placeholder: "Your answer: text, or a JSON object" });
    const send = h("button", { type: "button", class: "primary", id: "answer-send" }, "Send answer");
    send.addEventListener("click", () => {
      const text = answer.value;
      let parts = [{ text }];
      if (text.trim().startsWith("{")) {
        try { parts = [{ data: JSON.parse(text) }]; } catch { parts = [{ text }]; }
      }
      this.actions.reply(task, parts);
    });
    const authHint = status.state === "TASK_STATE_AUTH_REQUIRED"
      ? h("p", { class: "muted" }, "The agent needs credentials: set the token above, then answer.") : null;
    return h("div", { class: "interrupt", role: "group", "aria-label": "input request" },
      h("h3", {}, status.state === "TASK_STATE_AUTH_REQUIRED" ? "Authentication required" : "Input required"),
      status.message ? renderParts(status.message.parts) : null, authHint, answer, h("div", { class: "row" }, send));
  }
}

// The list of tasks that share the current context id (ListTasks).
export function renderContextTasks(list, tasks, currentId, onPick) {
  clear(list, tasks.length ? tasks.map((t) => {
    const state = t.status && t.status.state;
    const item = h("li", { class: t.id === currentId ? "current" : "", dataset: { taskId: t.id } },
      h("button", { type: "button", class: "link" }, stateBadge(state), " ",
        h("code", { class: "ellipsis" }, t.id), h("span", { class: "muted small" }, ` ${formatTime(t.status && t.status.timestamp)}`)));
    item.querySelector("button").addEventListener("click", () => onPick(t));
    return item;
  }) : h("li", { class: "muted" }, "No tasks yet."));
}
