// Plays an MSF broadcast through the relay with Shaka Player's MoQ client (npm shaka-player,
// pinned in package.json; its `experimental` build, the one with `shaka.msf`) in headless
// Chromium, and reports what its video element rendered, one JSON object a line on stdout:
//
//   {"event":"frames","at_ms":T,"pages":[{frames, dropped, currentTime, protocols, errors}...]}
//                                     every second
//   {"event":"done","pages":[...],"console":[...]}   when each page has played --seconds
//
// The page is served by this script on 127.0.0.1 (a secure context, as WebTransport needs):
// Shaka loads `--relay`'s WebTransport URL with `player.load(url, null, 'application/msf')`,
// pins the relay's self-signed certificate through `manifest.msf.fingerprintUri` (the relay's
// /certificate.sha256), and subscribes to the broadcast `--namespace` (Shaka's only other way
// to learn a namespace is an unsolicited PUBLISH_NAMESPACE). `--version` is Shaka's
// `manifest.msf.version`: `auto` (its default: it offers moqt-16, then moq-00) or `draft-14`.
// Frames are `video.getVideoPlaybackQuality().totalVideoFrames`. Page i opens --stagger-ms × i
// after the first; each page's entry in "done" is its count --seconds after the window starts,
// 2 s after its first frame ("windowFrames": the frames rendered in those seconds;
// "windowMediaS": how far the video's clock went meanwhile, less where it stalled), or
// 2 × --seconds (and 2 s) after it opened if none came.
//
//   node test/shaka.mjs --relay https://127.0.0.1:PORT/ --namespace NAME [--version auto]
//                       [--pages P] [--seconds S] [--stagger-ms MS] [--chromium PATH]
//
// Each page is a browser context of its own (so a window of its own: a page behind another
// renders no video). SHAKA_DEBUG=1 loads Shaka's debug build, whose log (at INFO) then goes
// to "console".

import { createServer } from "node:http";
import { readFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { launchChromium } from "./chromium.mjs";

const { values: args } = parseArgs({
  options: {
    relay: { type: "string" },
    namespace: { type: "string" },
    version: { type: "string", default: "auto" },
    pages: { type: "string", default: "1" },
    seconds: { type: "string", default: "10" },
    "stagger-ms": { type: "string", default: "0" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
  },
});
if (!args.relay || !args.namespace) {
  console.error("shaka.mjs: --relay and --namespace are required");
  process.exit(2);
}
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const here = new URL(".", import.meta.url).pathname;
const build = process.env.SHAKA_DEBUG ? "experimental.debug" : "experimental";
const shakaJs = await readFile(join(here, `../node_modules/shaka-player/dist/shaka-player.${build}.js`));
const relay = new URL(args.relay);
const config = {
  manifest: {
    msf: {
      fingerprintUri: new URL("/certificate.sha256", `http://${relay.host}/`).href,
      namespaces: [args.namespace],
      version: args.version,
    },
  },
};
const page = `<!doctype html><html><head><meta charset="utf-8"><title>shaka</title></head><body>
<video id="v" muted autoplay playsinline style="width:640px;height:360px"></video>
<script src="/shaka.js"></script>
<script>
window.report = { errors: [], loaded: false, firstFrameMs: null, startedMs: performance.now(), protocols: [] };
// The WebTransport protocol each session settled on ("" when Shaka offered none: draft-14).
const WT = window.WebTransport;
window.WebTransport = class extends WT {
  constructor(url, options) {
    super(url, options);
    this.ready.then(() => window.report.protocols.push(this.protocol ?? "")).catch(() => {});
  }
};
shaka.polyfill.installAll();
if (shaka.log && shaka.log.setLevel) shaka.log.setLevel(shaka.log.Level.INFO);
const video = document.getElementById("v");
const player = new shaka.Player();
// Each error's code and what it carries (a MediaSource error's message, say).
const detail = (d) => JSON.stringify(d?.data ?? null, (k, v) => (v instanceof Error ? v.message : v));
player.addEventListener("error", (e) => window.report.errors.push(String(e.detail?.code ?? e.detail) + " " + detail(e.detail)));
player.configure(${JSON.stringify(config)});
player.attach(video).then(() => player.load(${JSON.stringify(relay.href)}, null, "application/msf"))
  .then(() => { window.report.loaded = true; video.play().catch(() => {}); })
  .catch((e) => window.report.errors.push("load: " + (e?.code ?? e)));
const tick = () => {
  const q = video.getVideoPlaybackQuality();
  if (q.totalVideoFrames > 0 && window.report.firstFrameMs === null) {
    window.report.firstFrameMs = performance.now() - window.report.startedMs;
  }
  requestAnimationFrame(tick);
};
requestAnimationFrame(tick);
</script></body></html>`;

const server = createServer((req, res) => {
  if (req.url === "/shaka.js") {
    res.writeHead(200, { "content-type": "text/javascript" });
    res.end(shakaJs);
  } else {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(page);
  }
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}/`;

const profile = await mkdtemp(join(tmpdir(), "moq-edge-shaka-"));
const browser = await launchChromium({
  executablePath: args.chromium,
  userDataDir: profile,
  extra: ["--autoplay-policy=no-user-gesture-required"],
});
const consoleLines = [];
const pages = [];
const opened = [];
const start = Date.now();
const windowMs = Number(args.seconds) * 1000;
const count = Number(args.pages);
const final = new Array(count).fill(null);
const read = (p) =>
  p.evaluate(() => {
    const v = document.getElementById("v");
    const q = v.getVideoPlaybackQuality();
    return {
      ...window.report,
      frames: q.totalVideoFrames,
      dropped: q.droppedVideoFrames,
      currentTime: v.currentTime,
      now: performance.now(),
    };
  });
try {
  for (let i = 0; i < count; i++) {
    const at = start + i * Number(args["stagger-ms"]);
    while (Date.now() < at) {
      await new Promise((r) => setTimeout(r, Math.min(1000, at - Date.now())));
      emit({ event: "frames", at_ms: Date.now() - start, pages: await Promise.all(pages.map(read)) });
    }
    // Its own browser context (so its own window): a page behind another renders no video.
    const context = await browser.createBrowserContext();
    const p = await context.newPage();
    p.on("console", (m) => {
      consoleLines.push(`[${i}] ${m.type()}: ${m.text()}`);
      if (consoleLines.length > 400) consoleLines.shift();
    });
    p.on("pageerror", (e) => consoleLines.push(`[${i}] pageerror: ${e.message}`));
    opened.push(Date.now());
    await p.goto(url, { waitUntil: "load" });
    pages.push(p);
  }
  // Frames counted from SETTLE_MS after each page's first frame (a late viewer's catch-up to
  // the live edge, where the player jumps the gaps it finds, is not its steady state): the
  // count when its window starts, and at its end.
  const SETTLE_MS = 2000;
  const base = new Array(count).fill(null);
  while (final.includes(null)) {
    await new Promise((r) => setTimeout(r, 250));
    const now = Date.now();
    const all = await Promise.all(pages.map(read));
    all.forEach((p, i) => {
      if (final[i] !== null) return;
      const settled = p.firstFrameMs !== null && p.now - (p.startedMs + p.firstFrameMs) >= SETTLE_MS;
      if (settled && base[i] === null) base[i] = { frames: p.frames, at: now, media: p.currentTime };
      if (base[i] !== null && now - base[i].at >= windowMs) {
        final[i] = { ...p, windowFrames: p.frames - base[i].frames, windowMediaS: p.currentTime - base[i].media };
      } else if (now - opened[i] >= 2 * windowMs + SETTLE_MS) {
        const windowFrames = base[i] === null ? 0 : p.frames - base[i].frames;
        const windowMediaS = base[i] === null ? 0 : p.currentTime - base[i].media;
        final[i] = { ...p, windowFrames, windowMediaS };
      }
    });
    if (now % 1000 < 250) emit({ event: "frames", at_ms: now - start, pages: all });
  }
  emit({ event: "done", pages: final, console: consoleLines });
} finally {
  await browser.close();
  server.close();
  await rm(profile, { recursive: true, force: true });
}
