// Peer: the official A2A JS SDK (@a2a-js/sdk), pinned to one binding and protocol version.
//
// Run by the interop suite with Node (`node js.mjs --url ... --binding GRPC --version 0.3 ...`)
// from the folder where the suite installed the SDK; prints one JSON report on stdout with the
// same shape as the Python peers' (see _harness.py). It judges nothing: the test does.

import { createHash, randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

import { TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    grpc: { type: "string" },
    binding: { type: "string" },
    version: { type: "string" },
    webhook: { type: "string" },
    run: { type: "string" },
  },
});

// A binary file (every byte value, so not UTF-8) and a text file that is itself valid base64:
// a server that decodes twice corrupts both. Same payloads as the Python peers.
const FILES = {
  binary: Buffer.concat([Buffer.from([...Array(256).keys()]), Buffer.from("interop\n")]),
  base64text: Buffer.from("aGVsbG8gaW50ZXJvcAo="),
};
const TERMINAL = new Set(["TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"]);

const report = { peer: "@a2a-js/sdk", binding: args.binding, version: args.version, ops: {} };

function errorText(err) {
  const text = `${err?.constructor?.name ?? "Error"}: ${err?.message ?? String(err)}`;
  return text.length <= 2000 ? text : `${text.slice(0, 2000)}...`;
}

async function op(name, body) {
  try {
    const result = await body();
    report.ops[name] = result && typeof result === "object" ? result : { value: result };
    return result;
  } catch (err) {
    const notOffered = /not (supported|implemented)|method not found/i.test(String(err?.message));
    report.ops[name] = notOffered && args.version === "0.3"
      ? { offered: false, reason: `the client does not offer it: ${errorText(err)}` }
      : { error: errorText(err), where: String(err?.stack ?? "").slice(0, 1500) };
    return undefined;
  }
}

function skip(name, reason) {
  report.ops[name] = { offered: false, reason };
}

const stateName = (state) => TaskState[state] ?? String(state);

// JSON shape of parts, as the Python peers report them (1.0 proto JSON: text | data | raw).
function partsJson(parts) {
  return (parts ?? []).map((part) => {
    const content = part.content;
    if (!content) return {};
    if (content.$case === "raw") return { raw: Buffer.from(content.value).toString("base64") };
    return { [content.$case]: content.value };
  });
}

function message(skill, parts, { taskId = "", contextId = "" } = {}) {
  return {
    messageId: randomUUID(),
    role: 1, // ROLE_USER
    parts,
    taskId,
    contextId,
    metadata: skill ? { skillId: skill } : undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const part = (content, extra = {}) => ({ content, metadata: undefined, filename: "", mediaType: "", ...extra });
const data = (value) => part({ $case: "data", value });
const text = (value) => part({ $case: "text", value });

function request(msg, returnImmediately = false) {
  return {
    tenant: "",
    message: msg,
    configuration: {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      returnImmediately,
    },
    metadata: undefined,
  };
}

function fileFacts(buffer) {
  return { size: buffer.length, sha256: createHash("sha256").update(buffer).digest("hex") };
}

async function received(run) {
  const response = await fetch(`${args.webhook}/received/${run}`);
  return response.json();
}

async function waitForDelivery(run, done, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await received(run);
    if (done(got) || Date.now() > deadline) return got;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function main() {
  const legacyCompat = { enabled: true };
  const resolver = new DefaultAgentCardResolver({ legacyCompat });
  let card;
  await op("card", async () => {
    card = await resolver.resolve(args.url);
    return {
      name: card.name,
      interfaces: card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`).sort(),
      skills: card.skills.map((s) => s.id).sort(),
    };
  });
  if (!card) return;
  const keep = card.supportedInterfaces.filter(
    (i) => i.protocolBinding === args.binding && i.protocolVersion === args.version,
  );
  const pinned = { ...card, supportedInterfaces: keep };
  const factory = new ClientFactory({
    transports: [
      new JsonRpcTransportFactory({ legacyCompat }),
      new RestTransportFactory({ legacyCompat }),
      new GrpcTransportFactory({ legacyCompat }),
    ],
    preferredTransports: [args.binding],
  });
  const client = await factory.createFromAgentCard(pinned);
  await runOps(client);
}

async function runOps(client) {
  const run = args.run;
  const send = async (msg) => client.sendMessage(request(msg));
  const start = async (skill, value) => client.sendMessage(request(message(skill, [data(value)]), true));
  const release = async (key) => send(message("interop.hold", [data({ key, release: true })]));
  const waitTerminal = async (id) => {
    const deadline = Date.now() + 30000;
    for (;;) {
      const task = await client.getTask({ tenant: "", id, historyLength: undefined });
      if (TERMINAL.has(stateName(task.status.state)) || Date.now() > deadline) return task;
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  let sent;

  await op("send", async () => {
    sent = await send(message("interop.echo", [text("hello interop")]));
    return {
      state: stateName(sent.status?.state),
      artifacts: (sent.artifacts ?? []).map((a) => partsJson(a.parts)),
    };
  });

  for (const [name, payload] of Object.entries(FILES)) {
    await op(`file_${name}`, async () => {
      const filePart = part({ $case: "raw", value: payload }, { filename: name, mediaType: "application/octet-stream" });
      const task = await send(message("interop.files", [filePart]));
      const got = task.artifacts?.length ? partsJson(task.artifacts[0].parts)[0]?.data ?? {} : {};
      return { state: stateName(task.status?.state), module: got, sent: fileFacts(payload) };
    });
  }

  await op("stream", async () => {
    const events = [];
    for await (const response of client.sendMessageStream(request(message("interop.count", [data({ start: 3 })])))) {
      const { $case, value } = response.payload ?? {};
      if ($case === "artifactUpdate") events.push(["artifact_update", partsJson(value.artifact?.parts)]);
      else if ($case === "statusUpdate") events.push(["status_update", stateName(value.status?.state)]);
      else if ($case === "task") events.push(["task", stateName(value.status?.state)]);
      else events.push([$case ?? "unknown", null]);
    }
    return { events };
  });

  if (sent?.id) {
    await op("get", async () => {
      const task = await client.getTask({ tenant: "", id: sent.id, historyLength: 10 });
      return { same_id: task.id === sent.id, state: stateName(task.status?.state), history: (task.history ?? []).length };
    });
    if (args.version === "0.3") skip("list", "A2A 0.3 has no ListTasks");
    else {
      await op("list", async () => {
        const page = await client.listTasks({
          tenant: "", contextId: "", status: 0, pageSize: 100, pageToken: "", statusTimestampAfter: undefined,
        });
        return { contains_task: page.tasks.some((t) => t.id === sent.id) };
      });
    }
  }

  await op("cancel", async () => {
    const started = await start("interop.hold", { key: `${run}-cancel` });
    const canceled = await client.cancelTask({ tenant: "", id: started.id, metadata: undefined });
    return { state: stateName(canceled.status?.state) };
  });

  await op("resubscribe", async () => {
    const key = `${run}-resubscribe`;
    const started = await start("interop.hold", { key });
    const stream = client.resubscribeTask({ tenant: "", id: started.id });
    const first = await stream.next();
    const kinds = [first.value?.payload?.$case ?? "none"];
    await release(key);
    let lastState = null;
    for await (const response of stream) {
      const { $case, value } = response.payload ?? {};
      kinds.push($case);
      if ($case === "statusUpdate") lastState = stateName(value.status?.state);
    }
    return { first: kinds[0], last_state: lastState, events: kinds.length };
  });

  await pushOps(client, { start, release, waitTerminal });

  await op("approval", async () => {
    const parked = await send(message("interop.approve", [data({ amount: 5 })]));
    const asked = stateName(parked.status?.state);
    const done = await send(message(null, [data({ approved: true })], { taskId: parked.id, contextId: parked.contextId }));
    const parts = (done.artifacts ?? []).flatMap((a) => partsJson(a.parts));
    return { asked, state: stateName(done.status?.state), parts };
  });
}

async function pushOps(client, { start, release, waitTerminal }) {
  const run = args.run;
  const key = `${run}-push`;
  const url = `${args.webhook}/hook/${run}`;
  const holder = {};

  await op("push_set", async () => {
    const started = await start("interop.hold", { key });
    holder.task = started.id;
    const created = await client.createTaskPushNotificationConfig({
      tenant: "", id: "", taskId: started.id, url, token: `token-${run}`, authentication: undefined,
    });
    holder.id = created.id;
    return { has_id: Boolean(created.id), url: created.url, token: created.token };
  });
  if (!holder.id) return;

  await op("push_get", async () => {
    const got = await client.getTaskPushNotificationConfig({ tenant: "", taskId: holder.task, id: holder.id });
    return { same_id: got.id === holder.id, url: got.url };
  });

  await op("push_list", async () => {
    const page = await client.listTaskPushNotificationConfig({ tenant: "", taskId: holder.task, pageSize: 0, pageToken: "" });
    return { ids: page.configs.map((c) => c.id === holder.id) };
  });

  await op("push_delivery", async () => {
    await release(key);
    const task = await waitTerminal(holder.task);
    const got = await waitForDelivery(run, (d) => JSON.stringify(d).toLowerCase().includes("completed"));
    return { task: holder.task, state: stateName(task.status?.state), deliveries: got.length };
  });

  await op("push_delete", async () => {
    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: holder.task, id: holder.id });
    const page = await client.listTaskPushNotificationConfig({ tenant: "", taskId: holder.task, pageSize: 0, pageToken: "" });
    return { left: page.configs.length };
  });
}

try {
  await main();
} finally {
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
}
