// The relay's watch page (ARCHITECTURE.md, "Web listener"): subscribes to one track through
// @moq/lite over WebTransport and shows what arrives.
//
// Query: ?namespace=live&track=video (the defaults), &relay=https://HOST:PORT/ to reach a relay
// other than the one that served the page. With ?name=BROADCAST the page plays a hang
// broadcast with moq-dev's <moq-watch> player instead (player.js), or an MSF one (CMAF) with
// &format=msf; &reload=0 subscribes to it without waiting for its announcement. &jwt=,
// &token= or &cat= carry an authorization token to the relay in the WebTransport URL
// (README.md, "Authorization"). The relay's certificate is pinned with
// serverCertificateHashes (WebTransport, "Certificate hashes") from the page origin's
// /certificate.sha256, so the self-signed certificate the relay makes works without a CA.
//
// Objects that moq-pub sends start with a stamp: an 8-byte big-endian sequence number and an
// 8-byte big-endian send time in microseconds since the Unix epoch (README.md, "moq-pub").
// The page reads the latency (now - stamp) and sequence gaps from it; other payloads are
// counted but have no stamp.

import * as Moq from "@moq/lite";
import { Arrivals, makeCards, RateGraph, STEP_MS } from "./panel.js";
import { startPlayer } from "./player.js";
import "./watch.css";

const STAMP_LEN = 16;
// The IETF MoQT drafts @moq/lite speaks, as WebTransport protocols; the relay answers moqt-16.
const PROTOCOLS = ["moqt-17", "moqt-16", "moqt-15"];
// Objects kept in window.watch.objects (the oldest are dropped past this).
const KEEP = 10_000;
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
  // What the panel shows (panel.js).
  panel: {},
};
window.watch = watch;

const $ = (id) => document.getElementById(id);
const arrivals = new Arrivals(); // recent objects, for the graph
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
  arrivals.add(arrived);
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
    const reload = params.get("reload") !== "0";
    const playerUrl = new URL(`${location.origin}/`);
    playerUrl.search = relayUrl.search;
    const msf = params.get("format") === "msf";
    startPlayer(watch, broadcastName, playerUrl.href, $("player"), $("cards"), $("rate"), reload, msf);
    return;
  }
  setCard = makeCards(
    $("cards"),
    [
      { id: "status", label: "status" },
      { id: "version", label: "MoQT version" },
      { id: "count", label: "objects received" },
      { id: "position", label: "group / object" },
      { id: "latency", label: "latency (now \u2212 stamp)" },
      { id: "gaps", label: "sequence gaps" },
    ],
    watch.panel,
  );
  graph = new RateGraph($("rate"), "objects per second (over the trailing second), last 30 s", "/s", watch.panel);
  setInterval(() => graph.push(arrivals.perSecond()), STEP_MS);
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

// The stamped view's cards (makeCards) and graph, once main() made them.
let setCard = null;
let graph = null;

function render() {
  if (setCard) {
    const state = watch.state === "error" ? "error" : watch.state === "live" ? "live" : "";
    setCard("status", watch.state, "", state);
    setCard("version", watch.version ? `${watch.version}` : null, watch.protocol ?? "no WT protocol");
    setCard("count", watch.received);
    setCard("position", position);
    const latency = latencyUs === null ? null : `${(latencyUs / 1000).toFixed(1)} ms`;
    setCard("latency", latency, latency && `max ${(maxLatencyUs / 1000).toFixed(1)} ms`);
    setCard("gaps", watch.gaps);
  }
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

setInterval(render, STEP_MS);
main().catch((e) => {
  setState("error");
  note(e?.message ?? e);
});
