// Headless Chromium (Debian's, driven by puppeteer-core) as the page tests launch it: no
// sandbox (root in CI), no GPU, and none of the background connections that this machine's
// closed network refuses. `extra` adds flags.

import puppeteer from "puppeteer-core";

export function launchChromium({ executablePath, userDataDir, dumpio = false, extra = [] }) {
  return puppeteer.launch({
    executablePath,
    headless: true,
    userDataDir,
    dumpio,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...extra,
    ],
  });
}

// Debian's Firefox ESR as the page tests launch it: headless, over WebDriver BiDi (puppeteer's
// Firefox protocol), its own profile, autoplay allowed, no background connections.
export function launchFirefox({ executablePath, userDataDir, dumpio = false }) {
  return puppeteer.launch({
    browser: "firefox",
    executablePath,
    headless: true,
    userDataDir,
    dumpio,
    extraPrefsFirefox: {
      "media.autoplay.default": 0,
      "media.autoplay.blocking_policy": 0,
      "app.update.enabled": false,
      "browser.shell.checkDefaultBrowser": false,
      "network.captive-portal-service.enabled": false,
    },
  });
}
