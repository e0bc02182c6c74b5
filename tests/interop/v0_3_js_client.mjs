// @a2a-js/sdk 0.3 against a live a2a-trio server: every operation, on one binding.
//
// Started by tests/test_v0_3_clients.py with node, next to its node_modules.
// Reads its instructions as JSON on stdin: url (the server's base URL: the
// card is resolved the SDK's default way), transport
// ("JSONRPC" or "HTTP+JSON"), webhook (a receiver's URL) and v1_task (the id
// of a "loop" task a 1.0 client started). Prints what it saw as one JSON object
// on stdout; the test file asserts on it. Nothing here judges: the scenarios
// only record.
import { randomUUID } from "node:crypto";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";

function message(text, taskId, contextId) {
  const wire = { kind: "message", messageId: randomUUID(), role: "user", parts: [{ kind: "text", text }] };
  if (taskId) wire.taskId = taskId;
  if (contextId) wire.contextId = contextId;
  return wire;
}

function eventName(event) {
  if (event.kind === "status-update") return `status-update:${event.status.state}`;
  return event.kind;
}

async function collect(stream, count) {
  const names = [];
  const events = [];
  for await (const event of stream) {
    names.push(eventName(event));
    events.push(event);
    if (count !== undefined && names.length === count) break;
  }
  return { names, events };
}

// How a stream that should fail failed: the class of the error, or of its cause
// (@a2a-js/sdk 0.3's JSON-RPC transport wraps the typed error of an error
// that came inside the stream in a plain Error, as its cause).
async function streamError(stream) {
  try {
    for await (const _ of stream) {
      // drain
    }
  } catch (error) {
    const typed = error.constructor.name === "Error" && error.cause ? error.cause : error;
    return { error: typed.constructor.name, typed: typed !== error ? "cause" : "thrown", message: String(error.message).slice(0, 200) };
  }
  return { error: "none" };
}

async function main(instructions, seen) {
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    preferredTransports: [instructions.transport],
  });
  const client = await new ClientFactory(options).createFromUrl(instructions.url);
  seen.transport = client.transport.constructor.name;

  const task = await client.sendMessage({ message: message("echo hello") });
  seen.send = task;
  seen.get = await client.getTask({ id: task.id });
  seen.get_history_1 = await client.getTask({ id: task.id, historyLength: 1 });
  try {
    await client.getTask({ id: "no-such-task" });
  } catch (error) {
    seen.get_unknown = { error: error.constructor.name };
  }

  const streamed = await collect(client.sendMessageStream({ message: message("chunks") }));
  seen.stream = streamed.names;
  seen.stream_last = streamed.events.at(-1);

  const looping = (await collect(client.sendMessageStream({ message: message("loop") }), 1)).events[0];
  seen.resubscribe = (await collect(client.resubscribeTask({ id: looping.id }), 2)).names;
  seen.cancel = await client.cancelTask({ id: looping.id });
  seen.resubscribe_unknown = await streamError(client.resubscribeTask({ id: "no-such-task" }));
  seen.stream_to_finished = await streamError(
    client.sendMessageStream({ message: message("echo again", task.id, task.contextId) }),
  );

  const asked = await client.sendMessage({ message: message("ask") });
  seen.ask = asked;
  seen.push_set = await client.setTaskPushNotificationConfig({
    taskId: asked.id,
    pushNotificationConfig: { id: "hook", url: instructions.webhook, token: "js-0.3-token" },
  });
  seen.push_get = await client.getTaskPushNotificationConfig({ id: asked.id, pushNotificationConfigId: "hook" });
  await client.setTaskPushNotificationConfig({
    taskId: asked.id,
    pushNotificationConfig: { id: "spare", url: instructions.webhook },
  });
  seen.push_list = await client.listTaskPushNotificationConfig({ id: asked.id });
  seen.push_delete = (await client.deleteTaskPushNotificationConfig({ id: asked.id, pushNotificationConfigId: "spare" })) ?? null;
  seen.push_list_after_delete = await client.listTaskPushNotificationConfig({ id: asked.id });
  seen.follow_up = await client.sendMessage({ message: message("Ada", asked.id, asked.contextId) });

  seen.extended_card = await client.getAgentCard();

  const v1Task = instructions.v1_task;
  seen.v1_task_resubscribe = (await collect(client.resubscribeTask({ id: v1Task }), 2)).names;
  seen.v1_task_get = await client.getTask({ id: v1Task });
  seen.v1_task_cancel = await client.cancelTask({ id: v1Task });

  seen.v0_3_task = (await client.sendMessage({ message: message("echo from 0.3") })).id;
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const seen = {};
try {
  await main(JSON.parse(Buffer.concat(chunks).toString("utf8")), seen);
} catch (error) {
  seen.error = String(error?.stack ?? error);
}
process.stdout.write(JSON.stringify(seen));
// Streams left early may still hold a connection; the report is out, so end.
process.exit(0);
