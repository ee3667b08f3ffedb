// rmq-gateway driven by @aws-sdk/client-sqs v3 (which checks MD5OfMessageBody and
// MD5OfMessageAttributes on send and receive) and sqs-consumer. Each test run starts its own
// redis-server with the module (clients/node's test support) and its own gateway on free
// ports, and stops them by pid.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {
  SQSClient, CreateQueueCommand, SendMessageCommand, SendMessageBatchCommand, ReceiveMessageCommand,
  DeleteMessageCommand, GetQueueAttributesCommand, ChangeMessageVisibilityCommand, QueueDoesNotExist,
  GetQueueUrlCommand,
} from "@aws-sdk/client-sqs";
import { Consumer } from "sqs-consumer";
import { startServer, freePort, waitFor, REPO } from "./sdk_servers.mjs";

let server, gateway, sqs, endpoint;
const zcard = (key) => Number(server.cli("ZCARD", key));

async function startGateway(redisAddr) {
  const port = await freePort();
  const bin = process.env.RMQ_GATEWAY || path.join(REPO, "target", "release", "rmq-gateway");
  const proc = spawn(bin, ["--listen", `127.0.0.1:${port}`, "--redis", `redis://${redisAddr}`], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout.on("data", (d) => { out += d; });
  proc.stderr.on("data", (d) => { out += d; });
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error(`rmq-gateway exited: ${out}`);
    return out.includes("listening on");
  }, 30000, "rmq-gateway", 50);
  return { proc, port };
}

async function stopGateway(g) {
  if (g && g.proc.exitCode === null) {
    const exited = new Promise((res) => g.proc.once("exit", res));
    process.kill(g.proc.pid, "SIGTERM");
    const t = setTimeout(() => { if (g.proc.exitCode === null) process.kill(g.proc.pid, "SIGKILL"); }, 15000);
    await exited;
    clearTimeout(t);
  }
}

before(async () => {
  server = await startServer();
  gateway = await startGateway(server.addr);
  endpoint = `http://127.0.0.1:${gateway.port}`;
  sqs = new SQSClient({ endpoint, region: "us-east-1", credentials: { accessKeyId: "js", secretAccessKey: "js" }, maxAttempts: 1 });
});

after(async () => {
  sqs?.destroy();
  await stopGateway(gateway);
  await server?.stop();
});

test("send and receive with attributes: the SDK's MD5 checks pass", async () => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "js1" }));
  const attrs = { color: { DataType: "String", StringValue: "blue ✓" }, raw: { DataType: "Binary", BinaryValue: Uint8Array.from([0, 1, 255]) } };
  const sent = await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "hello from js 😀", MessageAttributes: attrs }));
  assert.ok(sent.MessageId && sent.MD5OfMessageBody && sent.MD5OfMessageAttributes);
  const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"] }));
  assert.equal(got.Messages.length, 1);
  const m = got.Messages[0];
  assert.equal(m.Body, "hello from js 😀");
  assert.equal(m.MessageId, sent.MessageId);
  assert.equal(m.MessageAttributes.color.StringValue, "blue ✓");
  assert.deepEqual([...m.MessageAttributes.raw.BinaryValue], [0, 1, 255]);
  assert.equal(m.Attributes.ApproximateReceiveCount, "1");
  await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 120 }));
  await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: m.ReceiptHandle }));
  assert.equal(zcard("prepare{js1}"), 0);
  assert.equal(zcard("js1"), 0);
});

test("typed errors: QueueDoesNotExist", async () => {
  await assert.rejects(sqs.send(new GetQueueUrlCommand({ QueueName: "nope" })), (e) => e instanceof QueueDoesNotExist);
});

test("batch send with a per-entry failure, long poll woken by a send", async () => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "js2" }));
  const res = await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries: [
    { Id: "a", MessageBody: "one" }, { Id: "b", MessageBody: "bad\u0000" }] }));
  assert.deepEqual(res.Successful.map((e) => e.Id), ["a"]);
  assert.deepEqual(res.Failed.map((e) => [e.Id, e.Code]), [["b", "InvalidMessageContents"]]);
  await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
  const t0 = Date.now();
  const polling = sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 20 }));
  await new Promise((res) => setTimeout(res, 1000));
  await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "wake" }));
  const got = await polling;
  assert.deepEqual(got.Messages.map((m) => m.Body), ["wake"]);
  assert.ok(Date.now() - t0 < 15000);
});

test("sqs-consumer consumes every message once and deletes it", async () => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "js3" }));
  const bodies = Array.from({ length: 25 }, (_, i) => `job-${i}`);
  for (let i = 0; i < bodies.length; i += 10) {
    await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries: bodies.slice(i, i + 10).map((b, j) => ({ Id: `e${j}`, MessageBody: b })) }));
  }
  const seen = [];
  const errors = [];
  const consumer = Consumer.create({
    queueUrl: QueueUrl, sqs, batchSize: 10, waitTimeSeconds: 1,
    handleMessage: async (m) => { seen.push(m.Body); return m; },
  });
  consumer.on("error", (e) => errors.push(e));
  consumer.on("processing_error", (e) => errors.push(e));
  consumer.start();
  try {
    await waitFor(async () => seen.length >= bodies.length && zcard("prepare{js3}") === 0, 60000, "consumer");
  } finally {
    consumer.stop();
  }
  assert.deepEqual(errors, []);
  assert.deepEqual([...seen].sort(), [...bodies].sort());
  const a = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["All"] }));
  assert.equal(a.Attributes.ApproximateNumberOfMessages, "0");
  assert.equal(a.Attributes.ApproximateNumberOfMessagesNotVisible, "0");
});

test("FIFO: group order and deduplication", async () => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "js4.fifo", Attributes: { FifoQueue: "true" } }));
  for (let i = 0; i < 3; i++) {
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: `m${i}`, MessageGroupId: "g", MessageDeduplicationId: `d${i}` }));
  }
  await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "again", MessageGroupId: "g", MessageDeduplicationId: "d0" }));
  const order = [];
  for (let i = 0; i < 3; i++) {
    const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
    assert.equal(got.Messages.length, 1);
    order.push(got.Messages[0].Body);
    await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: got.Messages[0].ReceiptHandle }));
  }
  assert.deepEqual(order, ["m0", "m1", "m2"]);
  const rest = await sqs.send(new ReceiveMessageCommand({ QueueUrl }));
  assert.equal(rest.Messages, undefined);
});
