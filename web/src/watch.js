// The relay's watch page (ARCHITECTURE.md, "Web listener"): subscribes to one track through
// @moq/lite over WebTransport and shows what arrives.
//
// Query: ?namespace=live&track=video (the defaults), &relay=https://HOST:PORT/ to reach a relay
// other than the one that served the page. With ?name=BROADCAST the page plays a hang
// broadcast with moq-dev's <moq-watch> player instead (player.js); &reload=0 subscribes to it
// without waiting for its announcement. &jwt=, &token= or &cat= carry an authorization token
// to the relay in the WebTransport URL (README.md, "Authorization"). The relay's certificate is pinned with
// serverCertificateHashes (WebTransport, "Certificate hashes") from the page origin's
// /certificate.sha256, so the self-signed certificate the relay makes works without a CA.
//
// Objects that moq-pub sends start with a stamp: an 8-byte big-endian sequence number and an
// 8-byte big-endian send time in microseconds since the Unix epoch (README.md, "moq-pub").
// The page reads the latency (now - stamp) and sequence gaps from it; other payloads are
// counted but have no stamp.

import * as Moq from "@moq/lite";
import { median, startPlayer } from "./player.js";
import "./watch.css";

const STAMP_LEN = 16;
// The IETF MoQT drafts @moq/lite speaks, as WebTransport protocols; the relay answers moqt-16.
const PROTOCOLS = ["moqt-17", "moqt-16", "moqt-15"];
// Objects kept in window.watch.objects (the oldest are dropped past this).
const KEEP = 10_000;
// The rate graph: 30 s in 250 ms steps, each the rate over the trailing second.
const BUCKET_MS = 250;
const BUCKETS = 120;
const PER_SECOND = 1000 / BUCKET_MS;
const RETRY_MS = 2_000;
const MAX_ERRORS = 50;

const params = new URLSearchParams(location.search);
const broadcastName = params.get("name");
const namespace = params.get("namespace") || "live";
const trackName = params.get("track") || "video";
const relayUrl = new URL(params.get("relay") || `https://${location.host}/`);
// The query parameters the relay reads a token from (README.md, "Authorization").
const TOKEN_PARAMS = ["jwt", "token", "cat"];
for (const name of TOKEN_PARAMS) {
  if (params.has(name)) relayUrl.searchParams.set(name, params.get(name));
}

// What happened, for people (the page) and for the browser test (tests/browser.rs), which
// reads window.watch.
const watch = {
  namespace,
  track: trackName,
  relay: relayUrl.href,
  state: "connecting",
  protocol: null,
  version: null,
  received: 0,
  gaps: 0,
  ended: false,
  objects: [],
  errors: [],
  notes: [],
};
window.watch = watch;

const $ = (id) => document.getElementById(id);
let arrivals = []; // performance.now() of recent objects, for the graph
let lastSeq = null;
let latencyUs = null;
let maxLatencyUs = 0;
let position = null;

function note(text) {
  console.warn("watch:", text);
  watch.errors.push(String(text));
  if (watch.errors.length > MAX_ERRORS) watch.errors.shift();
  render();
}

function inform(text) {
  console.info("watch:", text);
  watch.notes.push(String(text));
  if (watch.notes.length > MAX_ERRORS) watch.notes.shift();
  render();
}

function setState(state) {
  watch.state = state;
  render();
}

function hexBytes(hex) {
  if (!/^([0-9a-f]{2})+$/i.test(hex)) throw new Error(`not a hex digest: ${JSON.stringify(hex.slice(0, 80))}`);
  return new Uint8Array(hex.match(/../g).map((b) => parseInt(b, 16)));
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

function nowMicros() {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

// The SHA-256 of the relay's certificate, from the origin that served this page.
async function certificateHash() {
  const res = await fetch(new URL("/certificate.sha256", location.href), { cache: "no-store" });
  if (!res.ok) throw new Error(`/certificate.sha256: HTTP ${res.status}`);
  return hexBytes((await res.text()).trim());
}

// A WebTransport session to the relay: pinned to the certificate hash when the page could
// fetch it; otherwise (or when that fails) checked against the browser's CAs, as a relay
// with a CA-issued certificate (--cert/--key) needs.
async function openTransport() {
  const options = { allowPooling: false, congestionControl: "low-latency", protocols: PROTOCOLS };
  let hash = null;
  try {
    hash = await certificateHash();
  } catch (e) {
    note(`certificate hash: ${e}`);
  }
  if (hash) {
    const wt = new WebTransport(relayUrl, {
      ...options,
      serverCertificateHashes: [{ algorithm: "sha-256", value: hash }],
    });
    wt.closed.catch(() => {});
    try {
      await wt.ready;
      return wt;
    } catch (e) {
      note(`WebTransport with the certificate hash: ${e}`);
    }
  }
  const wt = new WebTransport(relayUrl, options);
  wt.closed.catch(() => {});
  await wt.ready;
  return wt;
}

function record(group, object, payload) {
  const arrived = performance.now();
  watch.received += 1;
  arrivals.push(arrived);
  position = `${group} / ${object}`;
  const entry = { group, object, len: payload.byteLength, seq: null, micros: null, latency_us: null, sha: null };
  if (payload.byteLength >= STAMP_LEN) {
    const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    entry.seq = Number(view.getBigUint64(0));
    entry.micros = Number(view.getBigUint64(8));
    entry.latency_us = nowMicros() - entry.micros;
    latencyUs = entry.latency_us;
    maxLatencyUs = Math.max(maxLatencyUs, latencyUs);
    if (lastSeq !== null && entry.seq !== lastSeq + 1) watch.gaps += 1;
    lastSeq = entry.seq;
  }
  watch.objects.push(entry);
  if (watch.objects.length > KEEP) watch.objects.shift();
  scheduleRender();
  // crypto.subtle exists in secure contexts (https, or http://localhost), as WebTransport does.
  if (globalThis.crypto?.subtle) {
    crypto.subtle.digest("SHA-256", payload).then(
      (d) => (entry.sha = hex(d)),
      (e) => note(`sha-256: ${e}`),
    );
  }
}

async function readGroup(group) {
  let read = 0;
  try {
    for (;;) {
      const frame = await group.readFrameSequence();
      if (!frame) break;
      record(group.sequence, frame.sequence, frame.data);
      read += 1;
    }
  } catch (e) {
    const message = e?.message ?? String(e);
    if (read === 0 && message.includes("object ID delta is not supported")) {
      // A page that joins in the middle of a group gets a subgroup stream that starts at a
      // later Object ID; @moq/lite 0.2.2 reads only streams that start at Object 0.
      inform(`joined in the middle of group ${group.sequence}: shown from the next group on`);
    } else {
      note(`group ${group.sequence}: ${message}`);
    }
  }
}

// Subscribes and reads groups until the track ends (PUBLISH_DONE) or fails; a failed
// subscription (the track is not published yet, say) is tried again.
async function watchTrack(connection) {
  const broadcast = connection.consume(Moq.Path.from(namespace));
  for (;;) {
    const track = broadcast.subscribe(trackName, 0);
    setState("subscribed");
    try {
      for (;;) {
        const group = await track.recvGroup();
        if (!group) break;
        setState("live");
        readGroup(group);
      }
      watch.ended = true;
      setState("ended");
      return;
    } catch (e) {
      note(`subscription: ${e?.message ?? e}`);
      setState("waiting for the track");
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }
}

async function main() {
  if (broadcastName) {
    $("track").textContent = `broadcast ${broadcastName}`;
    $("relay").textContent = location.origin;
    setState("playing");
    const reload = params.get("reload") !== "0";
    const playerUrl = new URL(`${location.origin}/`);
    playerUrl.search = relayUrl.search;
    const stats = startPlayer(watch, broadcastName, playerUrl.href, $("player"), reload);
    setInterval(() => {
      $("count").textContent = `${stats.decoded} frames decoded`;
      const parts = [];
      if (stats.firstFrameMs !== null) parts.push(`first frame after ${Math.round(stats.firstFrameMs)} ms`);
      const age = median(stats.agesMs.slice(-90));
      if (age !== null) parts.push(`glass to decoder ${Math.round(age)} ms`);
      const protocol = stats.protocols.at(-1);
      if (protocol) parts.push(protocol.startsWith("qmux-") ? `WebSocket ${protocol}` : `WebTransport ${protocol}`);
      $("latency").textContent = parts.join(" \u00b7 ");
    }, 250);
    return;
  }
  $("track").textContent = `namespace ${namespace} \u00b7 track ${trackName}`;
  $("relay").textContent = relayUrl.href;
  if (!globalThis.WebTransport) {
    setState("error");
    note("this browser has no WebTransport (it needs a secure context: https, or http://localhost)");
    return;
  }
  let wt;
  try {
    wt = await openTransport();
  } catch (e) {
    setState("error");
    note(`WebTransport: ${e?.message ?? e}`);
    return;
  }
  watch.protocol = wt.protocol || null;
  let connection;
  try {
    connection = await Moq.Connection.connect(relayUrl, { transport: wt });
  } catch (e) {
    setState("error");
    note(`MoQT setup: ${e?.message ?? e}`);
    return;
  }
  watch.version = connection.version;
  connection.closed.then(
    () => !watch.ended && setState("closed"),
    (e) => {
      setState("error");
      note(`connection: ${e?.message ?? e}`);
    },
  );
  await watchTrack(connection);
}

function render() {
  const status = $("status");
  if (!status) return;
  status.textContent = watch.state;
  status.className = `value ${watch.state === "error" ? "status-error" : watch.state === "live" ? "status-live" : ""}`;
  $("version").textContent = watch.version ? `${watch.version} (${watch.protocol ?? "no WT protocol"})` : "\u2013";
  $("count").textContent = String(watch.received);
  $("position").textContent = position ?? "\u2013";
  $("latency").textContent =
    latencyUs === null ? "\u2013" : `${(latencyUs / 1000).toFixed(1)} ms (max ${(maxLatencyUs / 1000).toFixed(1)})`;
  $("gaps").textContent = String(watch.gaps);
  for (const [id, items] of [
    ["errors", watch.errors],
    ["notes", watch.notes],
  ]) {
    const list = $(id);
    if (list.childElementCount !== items.length) {
      list.replaceChildren(
        ...items.map((e) => {
          const li = document.createElement("li");
          li.textContent = e;
          return li;
        }),
      );
    }
  }
  drawRate();
}

// Objects per second over the trailing second, every 250 ms for the last 30 s.
function drawRate() {
  const canvas = $("rate");
  const scale = window.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth * scale));
  const height = Math.max(1, Math.round(canvas.clientHeight * scale));
  if (canvas.width !== width || canvas.height !== height) {
    canvas.width = width;
    canvas.height = height;
  }
  const ctx = canvas.getContext("2d");
  const now = performance.now();
  const span = (BUCKETS + PER_SECOND) * BUCKET_MS;
  arrivals = arrivals.filter((t) => now - t < span);
  const counts = new Array(BUCKETS + PER_SECOND).fill(0);
  for (const t of arrivals) {
    const i = counts.length - 1 - Math.floor((now - t) / BUCKET_MS);
    if (i >= 0) counts[i] += 1;
  }
  const rates = [];
  for (let i = PER_SECOND; i < counts.length; i++) {
    let n = 0;
    for (let j = i - PER_SECOND + 1; j <= i; j++) n += counts[j];
    rates.push((n * 1000) / (PER_SECOND * BUCKET_MS));
  }
  const top = Math.max(10, ...rates) * 1.2;
  const plot = height - 18 * scale;
  const x = (i) => (i / (BUCKETS - 1)) * width;
  const y = (v) => height - (v / top) * plot;
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = "#2c323b";
  ctx.lineWidth = scale;
  ctx.beginPath();
  ctx.moveTo(0, height - scale / 2);
  ctx.lineTo(width, height - scale / 2);
  ctx.stroke();
  ctx.beginPath();
  ctx.moveTo(0, height);
  rates.forEach((v, i) => ctx.lineTo(x(i), y(v)));
  ctx.lineTo(width, height);
  ctx.closePath();
  ctx.fillStyle = "rgba(79, 179, 255, 0.25)";
  ctx.fill();
  ctx.beginPath();
  rates.forEach((v, i) => (i ? ctx.lineTo(x(i), y(v)) : ctx.moveTo(x(i), y(v))));
  ctx.strokeStyle = "#4fb3ff";
  ctx.lineWidth = 2 * scale;
  ctx.stroke();
  ctx.fillStyle = "#8b93a1";
  ctx.font = `${12 * scale}px system-ui, sans-serif`;
  ctx.fillText(`${Math.round(top)}/s`, 4 * scale, 12 * scale);
  ctx.fillText(`now ${Math.round(rates[rates.length - 1])}/s`, width - 70 * scale, 12 * scale);
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    render();
  });
}

setInterval(render, BUCKET_MS);
main().catch((e) => {
  setState("error");
  note(e?.message ?? e);
});
