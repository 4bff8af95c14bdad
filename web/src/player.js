// Player mode of the watch page (?name=BROADCAST): moq-dev's <moq-watch> element (@moq/watch,
// pinned in package.json) plays a hang broadcast (catalog.json and one track per rendition)
// through this relay. The page counts what the player's own decoder outputs, by wrapping
// WebCodecs' VideoDecoder before the player creates one, so the numbers are the decoder's,
// not the relay's or ours (tests/browser.rs reads window.watch.player). Where the encoder
// stamps frames with the wall clock (ffmpeg's -output_ts_offset, as the test and README's demo
// do), each decoded frame's age is its glass-to-glass latency up to the decoder's output.

import "@moq/watch/element";

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

// Starts the player for broadcast `name` on `relay` (the page's origin, where the relay
// serves /certificate.sha256 for the player to pin its self-signed certificate). `reload`
// false: subscribe at once rather than wait for the broadcast's announcement (which a relay
// gives from its own publishers and, on an edge, from its parent: ARCHITECTURE.md, "Upstream
// links").
export function startPlayer(watch, name, relay, container, reload = true) {
  const stats = {
    name,
    decoded: 0,
    decoders: 0,
    firstFrameMs: null,
    lastFrameMs: null,
    lastTimestampUs: null,
    // Wall clock minus timestamp of each decoded frame, ms, where the timestamps are wall-clock.
    agesMs: [],
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
  el.appendChild(document.createElement("canvas"));
  container.replaceChildren(el);
  return stats;
}
