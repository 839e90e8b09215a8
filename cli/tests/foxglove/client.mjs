// The independent client of `iox foxglove`'s tests: the Foxglove WebSocket protocol's
// reference client (@foxglove/ws-protocol) and Foxglove's own ROS 2 message readers
// (@foxglove/rosmsg, @foxglove/rosmsg2-serialization), as Foxglove and Lichtblick use
// them. One JSON line per event on stdout.
//
//   node client.mjs PORT decode TOPIC=N...  decode N messages of each topic, then exit 0
//   node client.mjs PORT watch              print channel advertisements and status
//   node client.mjs PORT stall TOPIC        subscribe, take one message, then read nothing
//   node client.mjs PORT garbage ROUNDS     misbehave ROUNDS times (see below), exit 0
//   node client.mjs PORT probe              say whether the handshake was accepted, exit 0
//   node client.mjs PORT race N             open N connections at once; say how many opened
//   node client.mjs PORT flood TOPIC N      subscribe, stop reading, 2 s later send N bad messages
//
// Options (after the mode's arguments): --host HOST (default 127.0.0.1),
// --subprotocol NAME (default: the one the reference client speaks,
// foxglove.websocket.v1), --timeout SECONDS (default 30).
import net from "node:net";
import wsProtocol from "@foxglove/ws-protocol";
import { parse as parseMessageDefinition } from "@foxglove/rosmsg";
import { MessageReader } from "@foxglove/rosmsg2-serialization";
import WebSocket from "ws";

const { FoxgloveClient } = wsProtocol;
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const value = args[i + 1];
  args.splice(i, 2);
  return value;
};
const subprotocol = option("--subprotocol", FoxgloveClient.SUPPORTED_SUBPROTOCOL);
const timeoutSeconds = Number(option("--timeout", "30"));
const host = option("--host", "127.0.0.1");
const [port, mode, ...rest] = args;
const url = `ws://${host.includes(":") ? `[${host}]` : host}:${port}`;

const say = (event) =>
  process.stdout.write(
    JSON.stringify(event, (_, v) => {
      if (typeof v === "bigint") return v.toString();
      if (ArrayBuffer.isView(v)) {
        if (v.length <= 16) return Array.from(v, (x) => (typeof x === "bigint" ? x.toString() : x));
        let sum = 0;
        for (const x of v) sum = (sum + Number(x)) % 4294967296;
        return { length: v.length, sum, head: Array.from(v.slice(0, 8), Number) };
      }
      return v;
    }) + "\n",
  );

setTimeout(() => {
  say({ event: "timeout" });
  process.exit(1);
}, timeoutSeconds * 1000).unref();

// A decoder per channel, from its advertised schema.
function decoderOf(channel) {
  if (channel.encoding === "json") {
    const text = new TextDecoder();
    return (data) => JSON.parse(text.decode(data));
  }
  if (channel.encoding === "cdr" && channel.schemaEncoding === "ros2msg") {
    const reader = new MessageReader(parseMessageDefinition(channel.schema, { ros2: true }));
    return (data) => reader.readMessage(data);
  }
  throw new Error(`no decoder for ${channel.encoding} / ${channel.schemaEncoding}`);
}

function connect() {
  const ws = new WebSocket(url, [subprotocol]);
  const client = new FoxgloveClient({ ws });
  client.on("error", (e) => say({ event: "error", message: String(e?.message ?? e) }));
  client.on("status", (s) => say({ event: "status", level: s.level, message: s.message }));
  return { ws, client };
}

if (mode === "decode") {
  const wanted = new Map(rest.map((t) => { const [topic, n] = t.split("="); return [topic, Number(n)]; }));
  const { client } = connect();
  const subs = new Map();
  client.on("advertise", (channels) => {
    for (const ch of channels) {
      if (!wanted.has(ch.topic)) continue;
      say({ event: "advertise", topic: ch.topic, schemaName: ch.schemaName, encoding: ch.encoding, schemaEncoding: ch.schemaEncoding });
      subs.set(client.subscribe(ch.id), { channel: ch, decode: decoderOf(ch), got: 0 });
    }
  });
  client.on("message", ({ subscriptionId, data }) => {
    const sub = subs.get(subscriptionId);
    if (!sub || sub.got >= wanted.get(sub.channel.topic)) return;
    sub.got++;
    say({ event: "message", topic: sub.channel.topic, schemaName: sub.channel.schemaName, value: sub.decode(data) });
    if ([...wanted].every(([t, n]) => [...subs.values()].some((s) => s.channel.topic === t && s.got >= n))) {
      client.close();
      process.exit(0);
    }
  });
} else if (mode === "watch") {
  const { client } = connect();
  const topics = new Map();
  client.on("serverInfo", (i) => say({ event: "serverInfo", name: i.name }));
  client.on("advertise", (channels) => {
    for (const ch of channels) {
      topics.set(ch.id, ch.topic);
      say({ event: "advertise", topic: ch.topic, schemaName: ch.schemaName, encoding: ch.encoding });
    }
  });
  client.on("unadvertise", (ids) => {
    for (const id of ids) say({ event: "unadvertise", topic: topics.get(id) });
  });
} else if (mode === "stall") {
  const [topic] = rest;
  const { ws, client } = connect();
  client.on("advertise", (channels) => {
    for (const ch of channels) if (ch.topic === topic) client.subscribe(ch.id);
  });
  let stalled = false;
  client.on("message", () => {
    if (stalled) return;
    stalled = true;
    // Reads nothing more: the server's writes fill this connection's TCP window.
    ws._socket.pause();
    say({ event: "stalled", topic });
    // Stays alive (a paused socket keeps nothing running) until killed.
    setInterval(() => {}, 1000);
  });
} else if (mode === "probe") {
  const ws = new WebSocket(url, [subprotocol]);
  ws.on("open", () => { say({ event: "open" }); process.exit(0); });
  ws.on("unexpected-response", (_, res) => {
    let body = "";
    res.on("data", (d) => (body += d));
    res.on("end", () => { say({ event: "refused", status: res.statusCode, body }); process.exit(0); });
  });
  ws.on("error", (e) => { say({ event: "error", message: String(e.message) }); process.exit(1); });
} else if (mode === "race") {
  const n = Number(rest[0]);
  const outcomes = await Promise.all(
    Array.from({ length: n }, () =>
      new Promise((resolve) => {
        const ws = new WebSocket(url, [subprotocol]);
        ws.on("open", () => resolve("open"));
        ws.on("unexpected-response", (_, res) => resolve(res.statusCode));
        ws.on("error", () => resolve("error"));
      }),
    ),
  );
  say({ event: "race", open: outcomes.filter((o) => o === "open").length, refused: outcomes.filter((o) => o === 503).length });
  process.exit(0);
} else if (mode === "flood") {
  const [topic, n] = rest;
  const { ws, client } = connect();
  client.on("advertise", (channels) => {
    for (const ch of channels) if (ch.topic === topic) client.subscribe(ch.id);
  });
  let flooded = false;
  client.on("message", () => {
    if (flooded) return;
    flooded = true;
    // Reads nothing more; once the server's writes to it have had time to fill the
    // connection, asks for an answer to each of N bad messages.
    ws._socket.pause();
    setTimeout(() => {
      for (let i = 0; i < Number(n); i++) ws.send("not json");
      say({ event: "flooded", count: Number(n) });
    }, 2000);
    setInterval(() => {}, 1000);
  });
} else if (mode === "garbage") {
  const rounds = Number(rest[0] ?? 1);
  // Opens a connection; `first` is its first message (listened for from the start:
  // the server's first message may come in the handshake's own packet).
  const open = (protocols) =>
    new Promise((resolve) => {
      const ws = new WebSocket(url, protocols);
      const first = new Promise((got) => ws.once("message", got));
      ws.on("open", () => resolve({ ws, first, refused: null }));
      ws.on("unexpected-response", (_, res) => resolve({ ws: null, refused: res.statusCode }));
      ws.on("error", (e) => resolve({ ws: null, refused: String(e.message) }));
    });
  for (let round = 0; round < rounds; round++) {
    // No Foxglove subprotocol offered: refused with HTTP 400.
    const wrong = await open(["chat"]);
    if (wrong.refused !== 400) throw new Error(`a client offering no Foxglove subprotocol got ${wrong.refused}`);
    // Not HTTP at all, then a connection that says nothing and goes.
    await new Promise((resolve) => {
      const s = net.connect(Number(port), host, () => s.end("\x00\xff garbage \r\n\r\n", resolve));
      s.on("error", resolve);
    });
    await new Promise((resolve) => {
      const s = net.connect(Number(port), host, () => { s.destroy(); resolve(); });
      s.on("error", resolve);
    });
    // A Foxglove client that sends garbage of every kind, then vanishes mid-stream.
    const { ws, first } = await open([subprotocol]);
    if (!ws) throw new Error("a well-behaved handshake was refused");
    await first; // serverInfo
    // Each bad message but the unsubscribe of unknown ids is answered with a status.
    let statuses = 0;
    const answered = new Promise((resolve) =>
      ws.on("message", (m) => {
        if (JSON.parse(String(m)).op === "status" && ++statuses === 6) resolve();
      }),
    );
    ws.send("not json");
    ws.send(JSON.stringify({ op: "subscribe" }));
    ws.send(JSON.stringify({ op: "subscribe", subscriptions: [{ id: 1, channelId: 4294967295 }] }));
    ws.send(JSON.stringify({ op: "unsubscribe", subscriptionIds: [7, 8, 9] }));
    ws.send(JSON.stringify({ op: "subscribeParameterUpdates", parameterNames: ["x"] }));
    ws.send(Buffer.from([0xff, 1, 2, 3]));
    ws.send(Buffer.from([]));
    await answered;
    ws._socket.destroy();
    // One that sends more than a client message may be: the server closes it.
    const big = await open([subprotocol]);
    await big.first;
    const closed = new Promise((resolve) => big.ws.on("close", resolve));
    big.ws.send("x".repeat(2 << 20));
    await closed;
  }
  say({ event: "garbage done", rounds });
  process.exit(0);
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
