// Player mode of the watch page (?name=BROADCAST): moq-dev's <moq-watch> element (@moq/watch,
// pinned in package.json) plays a hang broadcast (catalog.json and one track per rendition)
// through this relay. The page counts what the player's own decoder outputs, by wrapping
// WebCodecs' VideoDecoder before the player creates one, so the numbers are the decoder's,
// not the relay's or ours (tests/browser.rs reads window.watch.player). Where the encoder
// stamps frames with the wall clock (ffmpeg's -output_ts_offset, as the test and README's demo
// do), each decoded frame's age is its glass-to-glass latency up to the decoder's output.

import "@moq/watch/element";
import { CounterRate, makeCards, RateGraph, STEP_MS } from "./panel.js";

// Decoded-frame ages kept (the newest), for the latency figures.
const AGES_KEPT = 4096;
// A frame's timestamp within this of the wall clock is taken to be a wall-clock stamp.
const WALL_CLOCK_WINDOW_US = 60e6;

// Microseconds since the Unix epoch, to the page's timer resolution.
const wallClockUs = () => (performance.timeOrigin + performance.now()) * 1000;

// Wraps VideoDecoder: every frame it outputs is counted (and closed by the player as usual).
function countDecodedFrames(stats) {
  const Original = globalThis.VideoDecoder;
  if (!Original || Original.__counted) return;
  class Counted extends Original {
    constructor(init) {
      const output = init.output;
      super({
        ...init,
        output: (frame) => {
          const now = performance.now();
          stats.decoded += 1;
          if (stats.firstFrameMs === null) stats.firstFrameMs = now - stats.startedMs;
          stats.lastFrameMs = now;
          stats.lastTimestampUs = frame.timestamp;
          const age = wallClockUs() - frame.timestamp;
          if (Math.abs(age) < WALL_CLOCK_WINDOW_US) {
            stats.agesMs.push(age / 1000);
            if (stats.agesMs.length > AGES_KEPT) stats.agesMs.shift();
          }
          output(frame);
        },
        error: (e) => {
          stats.errors.push(String(e?.message ?? e));
          init.error?.(e);
        },
      });
      stats.decoders += 1;
    }
  }
  Counted.__counted = true;
  globalThis.VideoDecoder = Counted;
}

// Wraps WebTransport and WebSocket: the protocol of each session the player opens (the MoQT
// draft over WebTransport; QMux's subprotocol, "qmux-01.moqt-18", over a WebSocket, the
// player's fallback without WebTransport or UDP).
function recordProtocol(stats) {
  const WT = globalThis.WebTransport;
  if (WT && !WT.__recorded) {
    class Recorded extends WT {
      constructor(url, options) {
        super(url, options);
        this.ready.then(() => stats.protocols.push(this.protocol || "(none)")).catch(() => {});
      }
    }
    Recorded.__recorded = true;
    globalThis.WebTransport = Recorded;
  }
  const WS = globalThis.WebSocket;
  if (WS && !WS.__recorded) {
    class RecordedSocket extends WS {
      constructor(url, protocols) {
        super(url, protocols);
        this.addEventListener("open", () => stats.protocols.push(this.protocol || "(none)"));
      }
    }
    RecordedSocket.__recorded = true;
    globalThis.WebSocket = RecordedSocket;
  }
  // Chromium's native WebSocketStream, which the player prefers to a plain WebSocket.
  const WSS = globalThis.WebSocketStream;
  if (WSS && !WSS.__recorded) {
    class RecordedStream extends WSS {
      constructor(url, options) {
        super(url, options);
        this.opened.then((o) => stats.protocols.push(o.protocol || "(none)")).catch(() => {});
      }
    }
    RecordedStream.__recorded = true;
    globalThis.WebSocketStream = RecordedStream;
  }
}

// The median of `values` (null if empty).
export function median(values) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// The codec family a codec string names (RFC 6381), for people.
function codecName(codec) {
  const family = String(codec ?? "").split(".")[0];
  const names = { avc1: "H.264", avc3: "H.264", hev1: "H.265", hvc1: "H.265", vp09: "VP9", vp8: "VP8", av01: "AV1" };
  return names[family] ?? (family || "unknown codec");
}

function bitrateText(bps) {
  if (bps >= 1e6) return `${(bps / 1e6).toFixed(2)} Mbit/s`;
  return `${Math.round(bps / 1e3)} kbit/s`;
}

// Starts the player for broadcast `name` on `relay` (the page's origin, where the relay
// serves /certificate.sha256 for the player to pin its self-signed certificate), with its
// cards in `cardsBox` and its graph on `graphCanvas`. `reload` false: subscribe at once rather
// than wait for the broadcast's announcement (which a relay gives from its own publishers and,
// on an edge, from its parent: ARCHITECTURE.md, "Upstream links"). `msf`: the broadcast is in
// the MOQT Streaming Format (a `catalog` track) rather than hang.
export function startPlayer(watch, name, relay, container, cardsBox, graphCanvas, reload = true, msf = false) {
  const stats = {
    name,
    decoded: 0,
    decoders: 0,
    firstFrameMs: null,
    lastFrameMs: null,
    lastTimestampUs: null,
    // Wall clock minus timestamp of each decoded frame, ms, where the timestamps are wall-clock.
    agesMs: [],
    // The same at the moment each frame was painted: glass to screen.
    screenAgesMs: [],
    // Frames the player painted.
    painted: 0,
    // The protocol of each session the player opened (the newest last): WebTransport's, or
    // the WebSocket's QMux subprotocol.
    protocols: [],
    startedMs: performance.now(),
    errors: [],
  };
  watch.player = stats;
  countDecodedFrames(stats);
  recordProtocol(stats);
  const el = document.createElement("moq-watch");
  el.setAttribute("url", relay);
  el.setAttribute("name", name);
  el.setAttribute("muted", "");
  el.setAttribute("visible", "always");
  if (!reload) el.setAttribute("reload", "false");
  // An MSF broadcast (its `catalog` track; CMAF packaging) rather than a hang one.
  if (msf) el.setAttribute("catalog-format", "msf");
  const canvas = document.createElement("canvas");
  el.appendChild(canvas);
  const bar = document.createElement("div");
  bar.className = "player-bar";
  const mute = document.createElement("button");
  mute.type = "button";
  // A click is the user gesture a browser asks for before it plays sound.
  mute.addEventListener("click", () => {
    el.muted = !el.muted;
    mute.textContent = el.muted ? "Unmute" : "Mute";
  });
  mute.textContent = "Unmute";
  bar.append(mute);
  container.replaceChildren(el, bar);
  watch.element = el;
  showPanel(watch, el, canvas, stats, cardsBox, graphCanvas);
  return stats;
}

// Keeps the player's cards and graph up to date from the player's own figures: its
// connection (draft and transport), its video decoder's counts, the rendition its catalog
// describes, and the frames it paints. A card whose figure is not known is hidden.
function showPanel(watch, el, canvas, stats, cardsBox, graphCanvas) {
  const setCard = makeCards(
    cardsBox,
    [
      { id: "status", label: "status" },
      { id: "protocol", label: "protocol" },
      { id: "frames", label: "frames decoded" },
      { id: "rendition", label: "rendition" },
      { id: "latency", label: "latency (glass to screen)" },
      { id: "bitrate", label: "bitrate received" },
    ],
    watch.panel,
  );
  const graph = new RateGraph(graphCanvas, "frames per second decoded (over the trailing second), last 30 s", "/s", watch.panel);
  const frames = new CounterRate();
  const bytes = new CounterRate();
  // Each painted frame's age at the time it was painted, where timestamps are wall-clock.
  const painted = (at) => {
    if (at === undefined) return;
    stats.painted += 1;
    const age = wallClockUs() / 1000 - at;
    if (Math.abs(age) < WALL_CLOCK_WINDOW_US / 1000) {
      stats.screenAgesMs.push(age);
      if (stats.screenAgesMs.length > AGES_KEPT) stats.screenAgesMs.shift();
    }
  };
  let subscribed = false;
  setInterval(() => {
    if (!subscribed && el.renderer) {
      el.renderer.out.timestamp.subscribe(painted);
      subscribed = true;
    }
    const established = el.connection?.established.peek();
    const status = el.connection?.status.peek() ?? "connecting";
    const decoded = el.video?.out.stats.peek()?.frameCount ?? 0;
    const playing = stats.lastFrameMs !== null && performance.now() - stats.lastFrameMs < 1000;
    const first = stats.firstFrameMs === null ? "" : `first frame after ${Math.round(stats.firstFrameMs)} ms`;
    setCard("status", playing ? "playing" : status, first, playing ? "live" : "");
    if (established) {
      const over = established.transport === "websocket" ? "WebSocket (QMux)" : "WebTransport";
      // "moq-transport-18" is MoQT draft-18; moq-lite versions are shown as they are.
      const draft = /^moq-transport-(\d+)$/.exec(established.version);
      setCard("protocol", draft ? `MoQT draft-${draft[1]}` : established.version, `${established.version} over ${over}`);
    } else {
      setCard("protocol", null);
    }
    if (decoded > 0) {
      const notShown = Math.max(0, decoded - stats.painted);
      setCard("frames", decoded, `${stats.painted} painted, ${notShown} not (replaced before the screen took them)`);
    } else {
      setCard("frames", null);
    }
    // The decoder's configuration, and the catalog's entry for the rendition it plays (the
    // frame rate and bitrate the publisher declared or measured).
    const decodeRate = frames.sample(decoded);
    const config = el.video?.source.out.config.peek();
    const track = el.video?.source.out.track.peek();
    const entry = track ? el.video?.source.out.catalog.peek()?.renditions?.[track] : undefined;
    const display = el.video?.out.display.peek();
    if (config) {
      const width = display?.width ?? config.codedWidth;
      const height = display?.height ?? config.codedHeight;
      const size = width && height ? ` ${width}\u00d7${height}` : "";
      // The frame rate the catalog declares, or else the one decoded over the last second.
      const declared = entry?.framerate ?? config.framerate;
      const framerate = declared ?? (decodeRate > 0 ? decodeRate : null);
      const bitrate = entry?.bitrate ?? config.bitrate;
      const rate = framerate ? ` \u00b7 ${Math.round(framerate)} fps` : "";
      const detail = [
        config.codec,
        track,
        framerate && !declared ? "frame rate as decoded" : "",
        bitrate ? `${bitrateText(bitrate)} in the catalog` : "",
      ];
      setCard("rendition", `${codecName(config.codec)}${size}${rate}`, detail.filter(Boolean).join(" \u00b7 "));
      if (width && height) canvas.style.setProperty("--video-ratio", String(width / height));
    } else {
      setCard("rendition", null);
    }
    const ages = stats.screenAgesMs.slice(-90);
    const age = median(ages);
    setCard("latency", age === null ? null : `${Math.round(age)} ms`, "median of the last 90 frames painted");
    const received = (el.video?.out.stats.peek()?.bytesReceived ?? 0) + (el.audio?.out.stats.peek()?.bytesReceived ?? 0);
    const bps = bytes.sample(received) * 8;
    setCard("bitrate", received > 0 ? bitrateText(bps) : null, "video and audio, over the trailing second");
    graph.push(decodeRate);
  }, STEP_MS);
}
