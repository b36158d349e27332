// Requests an assessment of a green agent with the A2A JS SDK, speaking one protocol version:
//   node request_assessment.mjs <agent url> <1.0|0.3> <request text>
// Streams the task's events and prints {"methods": the JSON-RPC methods sent, "state": the
// task's last state, "texts": its status and artifact texts, "data": its artifacts' data parts}.
import { Role, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const [url, version, request] = process.argv.slice(2);
const methods = [];
const fetchImpl = async (input, init) => {
  if (init?.body) methods.push(JSON.parse(init.body).method);
  return fetch(input, init);
};

async function client() {
  if (version === "1.0") {
    // The SDK as it comes: no legacy compatibility.
    const transports = [new JsonRpcTransportFactory({ fetchImpl })];
    const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports });
    return new ClientFactory(options).createFromUrl(url);
  }
  // A 0.3 client reads the card's 0.3 fields only (url, preferredTransport, protocolVersion).
  const card = await (await fetch(new URL(".well-known/agent-card.json", url))).json();
  delete card.supportedInterfaces;
  const legacyCompat = { enabled: true };
  const cardResolver = new DefaultAgentCardResolver({ legacyCompat });
  const transports = [new JsonRpcTransportFactory({ fetchImpl, legacyCompat })];
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports,
    cardResolver,
  });
  return new ClientFactory(options).createFromAgentCard(cardResolver.normalizeAgentCard(card));
}

const part = { content: { $case: "text", value: request }, filename: "", mediaType: "" };
const message = {
  messageId: crypto.randomUUID(),
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts: [part],
  extensions: [],
  referenceTaskIds: [],
};
// The task as its streamed events build it.
let task;
for await (const { payload } of (await client()).sendMessageStream({ tenant: "", message })) {
  if (payload.$case === "task") task = payload.value;
  else if (payload.$case === "statusUpdate") task.status = payload.value.status;
  else if (payload.$case === "artifactUpdate") task.artifacts.push(payload.value.artifact);
}
const parts = [...(task.status?.message?.parts ?? []), ...task.artifacts.flatMap((a) => a.parts)];
const of = (kind) => parts.filter((p) => p.content?.$case === kind).map((p) => p.content.value);
const state = TaskState[task.status?.state];
console.log(JSON.stringify({ methods, state, texts: of("text"), data: of("data") }));
