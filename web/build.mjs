// Builds the watch page into the folder named by the first argument (`npm run build` writes
// dist/, which the relay embeds; see ARCHITECTURE.md, "Web listener"): watch.js and watch.css
// bundled and minified by esbuild from src/, src/index.html copied, and LICENSES.txt naming
// each package bundled with its licence (and its licence text when the package ships one).
// The output depends only on src/ and the packages package-lock.json pins, so a rebuild is
// byte-identical.
import { copyFile, mkdir, readFile, readdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { build } from "esbuild";

const out = process.argv[2];
if (!out) {
  console.error("usage: node build.mjs OUTDIR");
  process.exit(2);
}
const here = new URL(".", import.meta.url).pathname;
const outdir = resolve(out);
await mkdir(outdir, { recursive: true });
const result = await build({
  absWorkingDir: here,
  entryPoints: ["src/watch.js"],
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "none",
  charset: "utf8",
  metafile: true,
  outdir,
  logLevel: "warning",
});
await copyFile(join(here, "src/index.html"), join(outdir, "index.html"));

const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) packages.add(m[1]);
}
let notice = "Packages bundled in watch.js, with their licences.\n";
for (const name of [...packages].sort()) {
  const dir = join(here, "node_modules", name);
  const meta = JSON.parse(await readFile(join(dir, "package.json"), "utf8"));
  notice += `\n== ${name} ${meta.version}: ${meta.license ?? "no licence field"}\n`;
  const files = (await readdir(dir)).filter((f) => /^licen[cs]e/i.test(f)).sort();
  for (const f of files) notice += `\n${(await readFile(join(dir, f), "utf8")).trim()}\n`;
}
await writeFile(join(outdir, "LICENSES.txt"), notice);
