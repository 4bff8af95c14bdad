// moq-dev's browser publisher (<moq-publish>, npm @moq/publish, pinned in package.json) in
// headless Chromium with a fake camera, publishing through the relay, and the relay's watch
// page (<moq-watch>) playing what it publishes: one page from the start, a second one joining
// --late-ms later. Reports, one JSON object a line on stdout:
//
//   {"event":"frames","at_ms":T,"encoded":E,"protocols":[...],"viewers":[{decoded,...}...]}
//                                                  every second
//   {"event":"done","publisher":{...},"viewers":[{...,"windowDecoded","windowEncoded"}...],
//    "console":[...]}                              when each viewer has played --seconds
//
// "encoded" counts the video chunks the publisher's own VideoEncoder output (WebCodecs wrapped
// before the element creates one), so the figure is the browser's encoder's, not ours. Each
// viewer's window starts at its first decoded frame and lasts --seconds; "windowEncoded" is
// what the encoder output over the same span, "windowDecoded" what the viewer's decoder
// output (window.watch.player, web/src/player.js).
//
// The publisher's page is served by this script on 127.0.0.1 (a secure context, as
// WebTransport needs), the element bundled by esbuild from the installed package; it connects
// to --relay as an http:// URL, which makes @moq/net fetch the relay's /certificate.sha256 and
// pin it.
//
//   node test/publish.mjs --relay http://127.0.0.1:PORT/ --name NAME [--seconds S]
//                         [--late-ms MS] [--chromium PATH]
//
// tests/browser.rs runs it.

import { createServer } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { build } from "esbuild";
import { launchChromium } from "./chromium.mjs";

const { values: args } = parseArgs({
  options: {
    relay: { type: "string" },
    name: { type: "string" },
    seconds: { type: "string", default: "8" },
    "late-ms": { type: "string", default: "5000" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
  },
});
if (!args.relay || !args.name) {
  console.error("publish.mjs: --relay and --name are required");
  process.exit(2);
}
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const here = new URL(".", import.meta.url).pathname;
const bundle = await build({
  absWorkingDir: join(here, ".."),
  stdin: { contents: 'import "@moq/publish/element";', resolveDir: join(here, ".."), loader: "js" },
  bundle: true,
  format: "esm",
  target: "es2022",
  write: false,
  logLevel: "warning",
});
const elementJs = bundle.outputFiles[0].contents;
// Counts the encoder's output chunks (with their times) and records the WebTransport
// protocol each session settled on, before the element's module runs.
const page = `<!doctype html><html><head><meta charset="utf-8"><title>publish</title></head><body>
<script>
window.report = { encoded: [], keyframes: 0, errors: [], protocols: [], startedMs: performance.now() };
const VE = globalThis.VideoEncoder;
globalThis.VideoEncoder = class extends VE {
  constructor(init) {
    super({
      ...init,
      output: (chunk, meta) => {
        window.report.encoded.push(performance.now());
        if (chunk.type === "key") window.report.keyframes += 1;
        init.output(chunk, meta);
      },
      error: (e) => { window.report.errors.push(String(e?.message ?? e)); init.error?.(e); },
    });
  }
};
const WT = globalThis.WebTransport;
globalThis.WebTransport = class extends WT {
  constructor(url, options) {
    super(url, options);
    this.ready.then(() => window.report.protocols.push(this.protocol ?? "")).catch(() => {});
  }
};
</script>
<script type="module" src="/element.js"></script>
<moq-publish url="${args.relay}" name="${args.name}" source="camera"><video muted autoplay></video></moq-publish>
</body></html>`;
const server = createServer((req, res) => {
  if (req.url === "/element.js") {
    res.writeHead(200, { "content-type": "text/javascript" });
    res.end(elementJs);
  } else {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(page);
  }
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const pageUrl = `http://127.0.0.1:${server.address().port}/`;
const watchUrl = new URL(`/?name=${encodeURIComponent(args.name)}`, args.relay).href;

const profile = await mkdtemp(join(tmpdir(), "moq-edge-publish-"));
const browser = await launchChromium({
  executablePath: args.chromium,
  userDataDir: profile,
  extra: [
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
  ],
});
const consoleLines = [];
const listen = (p, tag) => {
  p.on("console", (m) => {
    consoleLines.push(`[${tag}] ${m.type()}: ${m.text()}`);
    if (consoleLines.length > 400) consoleLines.shift();
  });
  p.on("pageerror", (e) => consoleLines.push(`[${tag}] pageerror: ${e.message}`));
};
const windowMs = Number(args.seconds) * 1000;
const start = Date.now();
// Encoder output times, in the publisher page's clock, and the viewers' decoder counts with
// their page clock mapped onto this process's (each page's performance.timeOrigin).
const publisher = async (p) =>
  p.evaluate(() => ({ ...window.report, origin: performance.timeOrigin, encoded: window.report.encoded }));
const viewer = async (p) =>
  p.evaluate(() => {
    const s = window.watch?.player;
    if (!s) return null;
    const { agesMs, screenAgesMs, ...rest } = s;
    return { ...rest, origin: performance.timeOrigin, now: performance.now() };
  });
try {
  const pub = await browser.newPage();
  listen(pub, "publisher");
  await pub.goto(pageUrl, { waitUntil: "load" });
  // The publisher's session is up before any viewer opens (it encodes only once the relay
  // subscribes, for the first viewer).
  const by = Date.now() + 2 * windowMs;
  while ((await publisher(pub)).protocols.length === 0 && Date.now() < by) {
    await new Promise((r) => setTimeout(r, 250));
  }
  await new Promise((r) => setTimeout(r, 1000));
  const viewers = [];
  const opened = [];
  const final = [null, null];
  const late = Number(args["late-ms"]);
  const open = async (tag) => {
    const v = await browser.newPage();
    await v.setViewport({ width: 1000, height: 800 });
    listen(v, tag);
    opened.push(Date.now());
    await v.goto(watchUrl, { waitUntil: "load" });
    viewers.push(v);
  };
  await open("viewer 0");
  while (final.includes(null)) {
    await new Promise((r) => setTimeout(r, 250));
    if (viewers.length === 1 && Date.now() - opened[0] >= late) await open("viewer 1");
    const p = await publisher(pub);
    const all = await Promise.all(viewers.map(viewer));
    const now = Date.now();
    all.forEach((v, i) => {
      if (final[i] !== null) return;
      const first = v?.firstFrameMs ?? null;
      if (first !== null && v.now - (v.startedMs + first) >= windowMs) {
        // The window on the publisher's clock: from the viewer's first frame, --seconds long.
        const from = v.origin + v.startedMs + first - p.origin;
        const to = from + windowMs;
        const windowEncoded = p.encoded.filter((t) => t >= from && t < to).length;
        final[i] = { ...v, windowDecoded: v.decoded, windowEncoded };
      } else if (now - opened[i] >= 2 * windowMs + late) {
        final[i] = { ...v, windowDecoded: v?.decoded ?? 0, windowEncoded: null };
      }
    });
    if (now % 1000 < 250) {
      emit({ event: "frames", at_ms: now - start, encoded: p.encoded.length, protocols: p.protocols, viewers: all });
    }
    if (viewers.length < 2 && final[1] === null && now - start > 10 * windowMs) break;
  }
  const p = await publisher(pub);
  emit({
    event: "done",
    publisher: { encoded: p.encoded.length, keyframes: p.keyframes, protocols: p.protocols, errors: p.errors },
    viewers: final,
    console: consoleLines,
  });
} finally {
  await browser.close();
  server.close();
  await rm(profile, { recursive: true, force: true });
}
