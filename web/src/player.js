// Player mode of the watch page (?name=BROADCAST): moq-dev's <moq-watch> element (@moq/watch,
// pinned in package.json) plays a hang broadcast (catalog.json and one track per rendition)
// through this relay. The page counts what the player's own decoder outputs, by wrapping
// WebCodecs' VideoDecoder before the player creates one, so the numbers are the decoder's,
// not the relay's or ours (tests/browser.rs reads window.watch.player).

import "@moq/watch/element";

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

// Starts the player for broadcast `name` on `relay` (the page's origin, where the relay
// serves /certificate.sha256 for the player to pin its self-signed certificate). `reload`
// false: subscribe at once rather than wait for the broadcast's announcement, which an edge
// relay does not pass down from its parent (ARCHITECTURE.md, "Upstream links").
export function startPlayer(watch, name, relay, container, reload = true) {
  const stats = {
    name,
    decoded: 0,
    decoders: 0,
    firstFrameMs: null,
    lastFrameMs: null,
    lastTimestampUs: null,
    startedMs: performance.now(),
    errors: [],
  };
  watch.player = stats;
  countDecodedFrames(stats);
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
