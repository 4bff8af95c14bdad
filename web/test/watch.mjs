// Opens the watch page in headless Chromium (Debian's /usr/bin/chromium, driven by
// puppeteer-core) and reports, one JSON object a line on stdout, as the pages progress:
//
//   {"event":"subscribed"}  every page's SUBSCRIBE was answered (SUBSCRIBE_OK)
//   {"event":"received"}    every page has the object with sequence number N-1 (--objects N)
//   {"event":"done","pages":[window.watch of each page],"console":[...],"timedOut":false}
//                           every page's track ended (PUBLISH_DONE), or a page failed (then
//                           at once, without the events above that had not come yet)
//
//   node test/watch.mjs --url URL [--pages P] [--objects N] [--screenshot PNG]
//                       [--timeout-s S] [--chromium PATH]
//
// tests/browser.rs runs it and starts the publisher's objects after "subscribed" (so that
// every page sees them all), and ends the track after "received". After --timeout-s (a guard
// against a hang) "done" comes with timedOut true and what the pages have, and the exit
// status is 3. Progress for people goes to stderr. WATCH_CHROMIUM_LOG=1 passes Chromium's own
// log (--enable-logging=stderr --v=1) to stderr.
//
// @moq/lite 0.2.2 says that a SUBSCRIBE was answered only in its debug log ("subscribe ok:"),
// which is read here from the page's console.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { launchChromium } from "./chromium.mjs";

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    pages: { type: "string", default: "1" },
    objects: { type: "string", default: "0" },
    screenshot: { type: "string" },
    "timeout-s": { type: "string", default: "60" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
  },
});
if (!args.url) {
  console.error("watch.mjs: --url is required");
  process.exit(2);
}
const pageCount = Number(args.pages);
const expected = Number(args.objects);
const deadline = Date.now() + Number(args["timeout-s"]) * 1000;
const log = (...a) => console.error("watch.mjs:", ...a);
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

const profile = await mkdtemp(join(tmpdir(), "moq-edge-watch-"));
const chromiumLog = process.env.WATCH_CHROMIUM_LOG === "1";
const browser = await launchChromium({
  executablePath: args.chromium,
  userDataDir: profile,
  dumpio: chromiumLog,
  extra: chromiumLog ? ["--enable-logging=stderr", "--v=1"] : [],
});

const consoleLines = [];
const pages = [];
async function open(name) {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 680 });
  const entry = { name, page, subscribed: false };
  page.on("console", (m) => {
    const text = m.text();
    consoleLines.push(`${name} ${m.type()}: ${text}`);
    if (text.startsWith("subscribe ok:")) entry.subscribed = true;
  });
  page.on("pageerror", (e) => consoleLines.push(`${name} pageerror: ${e.message}`));
  await page.goto(args.url, { waitUntil: "load" });
  log(`${name} opened ${args.url}`);
  pages.push(entry);
}

const snapshot = (page) => page.evaluate(() => JSON.parse(JSON.stringify(window.watch ?? null)));
const failed = (w) => w?.state === "error";
const hasAll = (w) => w?.objects.at(-1)?.seq === expected - 1 && w.objects.every((o) => o.sha !== null);
const finished = (w) => w?.ended === true;

// Polls every page until `test` holds for each ("ok"), a page fails ("failed"), or the
// deadline ("timeout").
async function until(test) {
  for (;;) {
    const seen = await Promise.all(pages.map((p) => snapshot(p.page)));
    if (seen.some(failed)) return "failed";
    if (seen.every((w, i) => test(w, pages[i]))) return "ok";
    if (Date.now() > deadline) return "timeout";
    await new Promise((r) => setTimeout(r, 50));
  }
}

let status = 0;
try {
  for (let i = 1; i <= pageCount; i++) await open(`page${i}`);
  // Each phase runs only while the ones before it went well; a failed page ends the run.
  let outcome = await until((w, p) => p.subscribed);
  if (outcome === "ok") emit({ event: "subscribed" });
  if (outcome === "ok" && expected > 0) {
    outcome = await until(hasAll);
    if (outcome === "ok") emit({ event: "received" });
  }
  if (outcome === "ok") outcome = await until(finished);
  if (outcome === "timeout") {
    log("gave up waiting (--timeout-s); reporting what the pages have");
    status = 3;
  }
  for (const { name, page } of pages) {
    const w = await snapshot(page);
    log(`${name}: ${w?.state}, ${w?.received} objects, ${w?.version} (${w?.protocol}), errors ${JSON.stringify(w?.errors)}`);
  }
  if (args.screenshot) {
    await pages[0].page.screenshot({ path: args.screenshot });
    log(`screenshot ${args.screenshot}`);
  }
  const seen = await Promise.all(pages.map((p) => snapshot(p.page)));
  emit({ event: "done", pages: seen, console: consoleLines, timedOut: outcome === "timeout" });
} catch (e) {
  log(`failed: ${e?.stack ?? e}`);
  for (const l of consoleLines) log(l);
  status = 1;
} finally {
  await browser.close();
  await rm(profile, { recursive: true, force: true });
}
process.exit(status);
