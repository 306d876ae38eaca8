// Explorer entry point: loads the agent card, wires the panels and runs A2A calls.

import { AgentClient, AgentError, newId } from "./rpc.js";
import {
  annotationBadges, authHeaderFor, declaresSecurity, jsonRpcEndpoint, renderCard,
  renderSignature, renderSkillList, skillSchemas,
} from "./card.js";
import { checkSignature } from "./card_sig.js";
import { INTERRUPTED_STATES, TERMINAL_STATES, clear, errorBox, h, jsonBlock } from "./render.js";
import { FormError, SchemaForm } from "./schema_form.js";
import { TaskView, renderContextTasks } from "./task_view.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 700;

const state = {
  card: null, publicCard: null, cardUrl: null, endpoint: null, client: null, schemas: {}, skill: null,
  form: null, textInput: null, contextId: null, token: "", run: null, skillOfTask: new Map(),
};

let taskView;

function banner(text) {
  const el = $("banner");
  clear(el, h("span", {}, text), h("button", { type: "button", class: "small ghost", onclick: () => { el.hidden = true; } }, "dismiss"));
  el.hidden = false;
}

// Last line of defence: whatever goes wrong, the person sees a message, not a blank page.
window.addEventListener("error", (e) => banner(`Unexpected error: ${e.message}`));
window.addEventListener("unhandledrejection", (e) => banner(`Unexpected error: ${e.reason && e.reason.message ? e.reason.message : e.reason}`));

function cardUrl() {
  const fromQuery = new URLSearchParams(location.search).get("card");
  const meta = document.querySelector('meta[name="apcore-card-url"]');
  const url = new URL(fromQuery || (meta && meta.content) || "/.well-known/agent-card.json", location.href);
  // The CSP limits the page to its own origin; say so instead of failing obscurely.
  if (url.origin !== location.origin) throw new AgentError({ message: `The card URL ${url.href} is not on this page's origin`, kind: "config" });
  return url;
}

async function loadCard() {
  const url = cardUrl();
  let resp;
  try {
    resp = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-cache" });
  } catch (exc) {
    throw new AgentError({ message: `Could not fetch the agent card from ${url.href}: ${exc.message}`, kind: "network" });
  }
  if (!resp.ok) throw new AgentError({ message: `Fetching the agent card failed: HTTP ${resp.status}`, httpStatus: resp.status, kind: "http" });
  try {
    return { card: await resp.json(), url };
  } catch {
    throw new AgentError({ message: "The agent card is not valid JSON", kind: "protocol" });
  }
}

async function boot() {
  taskView = new TaskView({
    body: $("task-body"), timeline: $("timeline"), eventCount: $("event-count"),
    actions: { reply, cancel: cancelTask, resubscribe, refresh: (t) => refreshTask(t.id) },
  });
  $("token").addEventListener("input", (e) => { state.token = e.target.value; });
  $("skill-filter").addEventListener("input", renderSkills);
  $("context-new").addEventListener("click", () => { state.contextId = null; showContext(); });
  $("context-refresh").addEventListener("click", () => listContextTasks());
  try {
    const { card, url } = await loadCard();
    state.card = card;
    state.cardUrl = url;
  } catch (err) {
    clear($("card-body"), errorBox(err, "Agent card unavailable"));
    $("agent-title").textContent = "No agent card";
    clear($("skill-body"), h("div", { class: "muted" }, "Nothing to try until the card loads."));
    return;
  }
  state.publicCard = state.card;
  state.endpoint = jsonRpcEndpoint(state.card, state.cardUrl);
  if (state.endpoint) {
    state.client = new AgentClient(state.endpoint.url, () => authHeaderFor(state.publicCard, state.token));
  } else {
    banner("This agent declares no JSON-RPC interface; the Explorer can show the card but not call skills.");
  }
  $("token").addEventListener("change", loadExtendedCard);
  applyCard(state.card, false);
  showContext();
}

// Shows a card (public, or the caller's extended one) without losing a filled-in form.
function applyCard(card, extended) {
  state.card = card;
  state.schemas = skillSchemas(card);
  document.title = `${card.name || "Agent"} · A2A Explorer`;
  $("agent-title").textContent = `${card.name || "Agent"}${card.version ? ` v${card.version}` : ""}`;
  const secured = declaresSecurity(state.publicCard);
  $("token-box").classList.toggle("needed", secured);
  $("token-label").textContent = secured ? "Token (required by this agent)" : "Token (optional)";
  renderCard($("card-body"), card, state.endpoint, extended);
  showSignature(card);
  const skills = card.skills || [];
  const current = state.skill && skills.find((s) => s.id === state.skill.id);
  if (current) {
    state.skill = current;
    renderSkills();
    return;
  }
  renderSkills();
  const first = skills.find((s) => s.id === linkedSkill()) || skills[0];
  if (first) selectSkill(first);
  else clear($("skill-body"), h("div", { class: "muted" }, "This agent declares no skills."));
}

// The signature check is asynchronous; a result for a card no longer shown is dropped.
function showSignature(card) {
  if (!(card.signatures || []).length) return;
  const jwksUrl = new URL("jwks.json", state.cardUrl).href;
  checkSignature(card, jwksUrl).then((result) => {
    if (state.card === card) renderSignature($("card-signature"), result);
  });
}

// With a token, an agent that offers an extended card may show the caller more skills.
async function loadExtendedCard() {
  const status = $("token-status");
  const caps = state.publicCard.capabilities || {};
  if (!caps.extendedAgentCard || !state.client) return;
  if (!state.token.trim()) {
    status.textContent = "";
    applyCard(state.publicCard, false);
    return;
  }
  status.textContent = "checking…";
  status.className = "token-status";
  try {
    const card = await state.client.call("GetExtendedAgentCard", {});
    status.textContent = "extended card loaded";
    status.className = "token-status ok";
    applyCard(card, true);
  } catch (err) {
    status.textContent = err.httpStatus === 401 ? "token rejected (401)" : `extended card: ${err.message}`;
    status.className = "token-status bad";
  }
}

function renderSkills() {
  const skills = (state.card && state.card.skills) || [];
  $("skill-count").textContent = String(skills.length);
  renderSkillList($("skills"), skills, state.schemas, $("skill-filter").value, state.skill && state.skill.id, selectSkill);
}

function exampleValue(example, schema) {
  if (example && typeof example === "object") return example.inputs ?? example.input ?? example.arguments ?? example;
  if (typeof example !== "string") return undefined;
  try {
    const parsed = JSON.parse(example);
    if (parsed && typeof parsed === "object") return parsed.inputs && typeof parsed.inputs === "object" ? parsed.inputs : parsed;
  } catch { /* not JSON: plain text example */ }
  const props = Object.entries((schema && schema.properties) || {}).filter(([, s]) => s.type === "string");
  return props.length === 1 ? { [props[0][0]]: example } : { __text: example };
}

// The skill a "#skill=<id>" link names; a malformed escape in a crafted link names none
// (decodeURIComponent throws) instead of stopping the page.
function linkedSkill() {
  const raw = (location.hash.match(/skill=([^&]+)/) || [])[1] || "";
  try { return decodeURIComponent(raw); } catch { return ""; }
}

function selectSkill(skill) {
  state.skill = skill;
  history.replaceState(null, "", `#skill=${encodeURIComponent(skill.id)}`);
  renderSkills();
  const info = state.schemas[skill.id] || {};
  const schema = info.inputSchema;
  state.form = schema ? new SchemaForm(schema) : null;
  state.textInput = schema ? null : h("textarea", { id: "message-text", rows: 5, placeholder: "Message text" });
  // The schema extension's examples carry titles; the card's are bare JSON strings.
  const examples = Array.isArray(info.examples) && info.examples.length ? info.examples : (skill.examples || []);
  const exampleButtons = examples.map((ex, i) => {
    const label = typeof ex === "string" ? ex : ex.title || `example ${i + 1}`;
    return h("button", { type: "button", class: "small example", title: typeof ex === "string" ? ex : JSON.stringify(ex), onclick: () => fillExample(ex, schema) },
      label.length > 60 ? `${label.slice(0, 57)}…` : label);
  });
  const streaming = Boolean(state.card.capabilities && state.card.capabilities.streaming);
  const sendBtn = h("button", { type: "button", class: "primary", id: "send", onclick: () => run("send") }, "Send");
  const streamBtn = h("button", { type: "button", id: "stream", disabled: !streaming || !state.client, title: streaming ? "SendStreamingMessage" : "this agent does not stream", onclick: () => run("stream") }, "Stream");
  if (!state.client) sendBtn.disabled = true;
  const immediate = h("input", { type: "checkbox", id: "return-immediately" });
  clear($("skill-body"),
    h("div", { class: "skill-title" }, h("h3", {}, skill.name || skill.id), h("code", {}, skill.id)),
    skill.description ? h("p", { class: "description" }, skill.description) : null,
    h("div", { class: "chips" }, annotationBadges(info.annotations), (skill.tags || []).map((t) => h("span", { class: "chip" }, t))),
    h("div", { class: "small muted" }, "input: ", (skill.inputModes || state.card.defaultInputModes || []).join(", ") || "–",
      " · output: ", (skill.outputModes || state.card.defaultOutputModes || []).join(", ") || "–"),
    exampleButtons.length ? h("div", { class: "examples" }, h("span", { class: "muted small" }, "Examples: "), exampleButtons) : null,
    h("div", { class: "form-wrap" }, state.form ? state.form.element : h("label", { class: "field" }, h("span", { class: "field-label" }, "Message"), state.textInput)),
    h("div", { class: "row actions" }, sendBtn, streamBtn,
      h("label", { class: "toggle small", title: "return the task at once instead of waiting; the page then polls it" }, immediate, " return immediately")),
    h("div", { id: "send-error" }),
    schema ? h("details", { class: "small" }, h("summary", {}, "input schema"), jsonBlock(schema)) : null,
    info.outputSchema ? h("details", { class: "small" }, h("summary", {}, "output schema"), jsonBlock(info.outputSchema)) : null);
}

function fillExample(example, schema) {
  const value = exampleValue(example, schema);
  if (state.form) {
    if (value && value.__text !== undefined) {
      clear($("send-error"), errorBox(new Error("This example is free text; the skill expects structured input."), "Example not applicable"));
      return;
    }
    state.form.fill(value);
  } else if (state.textInput) {
    state.textInput.value = value && value.__text !== undefined ? value.__text : JSON.stringify(value);
  }
}

function buildParts() {
  if (state.form) {
    const value = state.form.value();
    const data = value && typeof value === "object" && !Array.isArray(value) ? { ...value } : value;
    const files = [];
    for (const name of state.form.binaryFields) {
      if (data && typeof data[name] === "string" && data[name]) {
        const meta = state.form.files.get(name) || {};
        files.push({ raw: data[name], filename: meta.name || name, mediaType: meta.type || "application/octet-stream", metadata: { field: name } });
        delete data[name];
      }
    }
    return [{ data: data === undefined ? {} : data }, ...files];
  }
  return [{ text: state.textInput ? state.textInput.value : "" }];
}

function setBusy(busy) {
  for (const id of ["send", "stream"]) {
    const b = $(id);
    if (b) b.classList.toggle("busy", busy);
  }
  taskView.setBusy(busy);
}

function remember(result) {
  const obj = result.task || result.message || result.statusUpdate || result.artifactUpdate;
  if (obj && obj.contextId && obj.contextId !== state.contextId) { state.contextId = obj.contextId; showContext(); }
  const id = (result.task && result.task.id) || (result.statusUpdate && result.statusUpdate.taskId);
  if (id && state.skill && !state.skillOfTask.has(id)) state.skillOfTask.set(id, state.skill.id);
}

// Runs one request against the agent and feeds every result into the task view.
async function execute(label, mode, method, params, { fresh = false } = {}) {
  if (state.run) state.run.abort();
  const controller = new AbortController();
  state.run = controller;
  taskView.startRun(label, { fresh });
  setBusy(true);
  try {
    if (mode === "stream") {
      for await (const result of state.client.stream(method, params, { signal: controller.signal })) {
        remember(result);
        taskView.apply(result);
      }
      taskView.note("stream closed");
    } else {
      const result = await state.client.call(method, params, { signal: controller.signal });
      remember(result);
      taskView.apply(result);
    }
    const task = taskView.task;
    if (task && task.id && !controller.signal.aborted && !isSettled(task)) await poll(task.id, controller.signal);
  } catch (err) {
    if (err && err.name === "AbortError") return;
    taskView.showError(err);
  } finally {
    if (state.run === controller) { state.run = null; setBusy(false); }
    listContextTasks();
  }
}

function isSettled(task) {
  const s = task.status && task.status.state;
  return TERMINAL_STATES.has(s) || INTERRUPTED_STATES.has(s);
}

async function poll(taskId, signal) {
  taskView.note("waiting for the task to settle (GetTask)");
  while (!signal.aborted) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (signal.aborted) return;
    const task = await state.client.call("GetTask", { id: taskId }, { signal });
    const before = taskView.task && taskView.task.status && taskView.task.status.state;
    taskView.apply({ task }, { record: before !== (task.status && task.status.state) });
    if (isSettled(task)) return;
  }
}

function run(mode) {
  clear($("send-error"));
  let parts;
  try {
    parts = buildParts();
  } catch (err) {
    clear($("send-error"), errorBox(err, err instanceof FormError ? "Check the form" : "Cannot build the message"));
    return;
  }
  const message = { messageId: newId(), role: "ROLE_USER", parts, metadata: { skillId: state.skill.id } };
  if (state.contextId) message.contextId = state.contextId;
  const params = { message };
  if (mode === "send" && $("return-immediately") && $("return-immediately").checked) params.configuration = { returnImmediately: true };
  const method = mode === "stream" ? "SendStreamingMessage" : "SendMessage";
  execute(`${method} → ${state.skill.id}`, mode, method, params, { fresh: true });
}

function reply(task, parts) {
  const skillId = state.skillOfTask.get(task.id) || (state.skill && state.skill.id);
  const message = { messageId: newId(), role: "ROLE_USER", taskId: task.id, contextId: task.contextId, parts };
  if (skillId) message.metadata = { skillId };
  const streaming = Boolean(state.card.capabilities && state.card.capabilities.streaming);
  const method = streaming ? "SendStreamingMessage" : "SendMessage";
  execute(`${method} (reply to ${task.id.slice(0, 8)})`, streaming ? "stream" : "send", method, { message });
}

async function cancelTask(task) {
  taskView.note(`CancelTask ${task.id.slice(0, 8)}`);
  try {
    const result = await state.client.call("CancelTask", { id: task.id });
    if (state.run) state.run.abort();
    taskView.apply({ task: result });
  } catch (err) {
    taskView.showError(err, "Cancel failed");
  } finally {
    if (!state.run) setBusy(false);
    listContextTasks();
  }
}

function resubscribe(task) {
  execute(`SubscribeToTask ${task.id.slice(0, 8)}`, "stream", "SubscribeToTask", { id: task.id });
}

async function refreshTask(taskId) {
  try {
    const task = await state.client.call("GetTask", { id: taskId });
    taskView.apply({ task });
  } catch (err) {
    taskView.showError(err, "GetTask failed");
  }
}

function showContext() {
  $("context-id").textContent = state.contextId || "no context yet (the next send starts one)";
  if (!state.contextId) renderContextTasks($("context-tasks"), [], null, () => {});
}

async function listContextTasks() {
  if (!state.contextId || !state.client) return;
  try {
    const result = await state.client.call("ListTasks", { contextId: state.contextId, pageSize: 50 });
    renderContextTasks($("context-tasks"), result.tasks || [], taskView.task && taskView.task.id, (t) => refreshTask(t.id));
  } catch (err) {
    clear($("context-tasks"), h("li", {}, errorBox(err, "ListTasks failed")));
  }
}

boot().catch((err) => banner(`The Explorer failed to start: ${err && err.message ? err.message : err}`));
