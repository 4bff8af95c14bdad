// Opens the watch page in player mode (?name=BROADCAST) in headless Chromium (Debian's
// /usr/bin/chromium, driven by puppeteer-core) and reports what the player's own video decoder
// output (window.watch.player, counted by web/src/player.js), one JSON object a line on
// stdout:
//
//   {"event":"frames","at_ms":T,"pages":[{decoded, firstFrameMs, lastTimestampUs, protocols,
//                             ageMedianMs, ageP95Ms, errors}...]}   every second
//   {"event":"done","pages":[...],"phone":LAYOUT,"sound":{muted,button},"console":[...]}
//                                     when each page has played --seconds
//
// Each page's entry carries its "layout" (the player's canvas as laid out beside the stream's
// size, the cards shown, the hidden ones, the graph's last value); "phone" is the first page's
// at a phone's width (390 x 844), taken after the screenshot (the whole page, at 1000 x 800);
// "sound" is the player's state after a click on the page's Unmute button.
//
// Page i opens --stagger-ms × i after the first (a viewer who joins later); each page's entry
// in "done" is what its decoder had output --seconds after its first frame (with
// "windowDecoded", the frames decoded in those seconds), or 2 × --seconds after the page
// opened if no frame came. ageMedianMs and ageP95Ms summarise the ages (wall clock minus
// timestamp, where the encoder stamps frames with the wall clock) of the last STEADY_FRAMES
// frames decoded: the live edge at the end of the window, past a late viewer's catch-up.
//
//   node test/play.mjs --url URL [--pages P] [--seconds S] [--stagger-ms MS] [--screenshot PNG]
//                      [--chromium PATH] [--no-webtransport] [--no-websocket] [--firefox PATH]
//
// --no-webtransport removes window.WebTransport before the page loads (a browser or network
// without it): the player falls back to QMux over a WebSocket. --no-websocket removes
// window.WebSocket and WebSocketStream instead, so that the player's race (WebTransport with
// a 500 ms head start, then a WebSocket) cannot go to the WebSocket on a slow machine: the
// page then checks WebTransport alone. --firefox runs that Firefox (Debian's ESR) over
// WebDriver BiDi instead of Chromium.
//
// tests/browser.rs runs it against a relay that moq-pub feeds from ffmpeg.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { launchChromium, launchFirefox } from "./chromium.mjs";

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    pages: { type: "string", default: "1" },
    seconds: { type: "string", default: "10" },
    "stagger-ms": { type: "string", default: "0" },
    screenshot: { type: "string" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
    firefox: { type: "string" },
    "no-webtransport": { type: "boolean", default: false },
    "no-websocket": { type: "boolean", default: false },
  },
});
if (!args.url) {
  console.error("play.mjs: --url is required");
  process.exit(2);
}
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const profile = await mkdtemp(join(tmpdir(), "moq-edge-play-"));
const browser = args.firefox
  ? await launchFirefox({ executablePath: args.firefox, userDataDir: profile })
  : await launchChromium({
      executablePath: args.chromium,
      userDataDir: profile,
      extra: ["--autoplay-policy=no-user-gesture-required"],
    });
const consoleLines = [];
const pages = [];
const start = Date.now();
const windowMs = Number(args.seconds) * 1000;
const stagger = Number(args["stagger-ms"]);
const count = Number(args.pages);
const final = new Array(count).fill(null);
const opened = [];
const STEADY_FRAMES = 150;
// What a person sees: the player's canvas as laid out against the stream's own size, and the
// panel (window.watch.panel: the cards shown, the graph's last value).
const layout = (p) =>
  p.evaluate(() => {
    const canvas = document.querySelector("#player canvas");
    const el = window.watch?.element;
    if (!canvas || !el) return null;
    const box = canvas.getBoundingClientRect();
    const track = el.video?.source.out.track.peek();
    const config = track ? el.video?.source.out.catalog.peek()?.renditions?.[track] : undefined;
    const display = el.video?.out.display.peek();
    const hidden = [...document.querySelectorAll(".card[hidden]")].map((c) => c.dataset.card);
    return {
      viewport: { width: window.innerWidth, height: window.innerHeight },
      rendered: { width: box.width, height: box.height },
      stream: { width: display?.width ?? config?.codedWidth ?? null, height: display?.height ?? config?.codedHeight ?? null },
      cards: window.watch.panel?.cards ?? {},
      hidden,
      graph: window.watch.panel?.graph ?? null,
      // The rendition as the player reads it from the catalog (its description left out).
      config: config ? { ...config, description: undefined } : null,
    };
  });
const read = async (p) => {
  const stats = await p.evaluate((steady) => {
    const player = window.watch?.player;
    if (!player) return null;
    const ages = player.agesMs.slice(-steady).sort((a, b) => a - b);
    const at = (q) => (ages.length ? ages[Math.min(ages.length - 1, Math.floor(q * ages.length))] : null);
    const { agesMs, screenAgesMs, ...rest } = player;
    return { ...rest, ageCount: agesMs.length, ageMedianMs: at(0.5), ageP95Ms: at(0.95), now: performance.now() };
  }, STEADY_FRAMES);
  return stats && { ...stats, layout: await layout(p) };
};
try {
  for (let i = 0; i < count; i++) {
    const at = start + i * stagger;
    while (Date.now() < at) {
      await new Promise((r) => setTimeout(r, Math.min(1000, at - Date.now())));
      emit({ event: "frames", at_ms: Date.now() - start, pages: await Promise.all(pages.map(read)) });
    }
    const page = await browser.newPage();
    await page.setViewport({ width: 1000, height: 800 });
    if (args["no-webtransport"]) {
      await page.evaluateOnNewDocument(() => {
        delete window.WebTransport;
      });
    }
    if (args["no-websocket"]) {
      await page.evaluateOnNewDocument(() => {
        delete window.WebSocket;
        delete window.WebSocketStream;
      });
    }
    page.on("console", (m) => {
      consoleLines.push(`[${i}] ${m.type()}: ${m.text()}`);
      if (consoleLines.length > 400) consoleLines.shift();
    });
    page.on("pageerror", (e) => consoleLines.push(`[${i}] pageerror: ${e.message}`));
    opened.push(Date.now());
    await page.goto(args.url, { waitUntil: "load" });
    pages.push(page);
  }
  while (final.includes(null)) {
    await new Promise((r) => setTimeout(r, 250));
    const now = Date.now();
    const all = await Promise.all(pages.map(read));
    all.forEach((p, i) => {
      if (final[i] !== null) return;
      const first = p?.firstFrameMs ?? null;
      if (first !== null && p.now - (p.startedMs + first) >= windowMs) {
        // Frames decoded since the first, over the window (the count is sampled every 250 ms).
        final[i] = { ...p, windowDecoded: p.decoded };
      } else if (now - opened[i] >= 2 * windowMs) {
        final[i] = { ...p, windowDecoded: p?.decoded ?? 0 };
      }
    });
    if (now % 1000 < 250) emit({ event: "frames", at_ms: now - start, pages: all });
  }
  // The first page in front again (the later ones opened in front of it, and a hidden page
  // paints nothing and takes no input).
  await pages[0].bringToFront();
  await new Promise((r) => setTimeout(r, 1000));
  if (args.screenshot) await pages[0].screenshot({ path: args.screenshot, fullPage: true });
  // The first page again at a phone's width, while it still plays; then its sound turned on
  // with the page's button, as a person would.
  await pages[0].setViewport({ width: 390, height: 844 });
  await new Promise((r) => setTimeout(r, 500));
  const phone = await layout(pages[0]);
  await pages[0].click(".player-bar button");
  const sound = await pages[0].evaluate(() => ({
    muted: window.watch.element.muted,
    button: document.querySelector(".player-bar button").textContent,
  }));
  emit({ event: "done", pages: final, phone, sound, console: consoleLines });
} finally {
  await browser.close();
  await rm(profile, { recursive: true, force: true });
}
