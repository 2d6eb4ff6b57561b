// Opens a report.html in headless Chromium (the system's, not a downloaded one) and checks what a
// reader would: no console errors, no network requests, every chart drawn with data, and the
// trajectory viewer opens a trajectory, filters, and shows a group side by side. Saves a
// full-page screenshot.
//
//   node check_report.mjs REPORT.html SCREENSHOT.png [CHROMIUM]
//
// Prints one JSON line of findings; exits 1 with the failures listed.

import { chromium } from "playwright-core";

const [reportPath, shotPath, executablePath = "/usr/bin/chromium"] = process.argv.slice(2);
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on("console", m => { if (m.type() === "error") errors.push("console: " + m.text()); });
  page.on("pageerror", e => errors.push("page error: " + e.message));
  page.on("request", r => { if (!/^(file|data|about):/.test(r.url())) errors.push("network request: " + r.url()); });
  await page.goto("file://" + reportPath, { waitUntil: "load" });

  // Charts: each Chart.js instance has data, and its canvas has ink on it.
  const charts = await page.evaluate(() => window.__report.charts.map(c => {
    const ctx = c.canvas.getContext("2d");
    const { data } = ctx.getImageData(0, 0, c.canvas.width, c.canvas.height);
    let ink = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] > 0) ink++;
    return { id: c.canvas.closest(".chart").id, type: c.config.type,
             points: c.data.datasets.reduce((n, d) => n + d.data.filter(v => v !== null).length, 0), ink };
  }));
  const expected = await page.evaluate(() => window.__report.data.charts.filter(c => c.series.length > 0).length);
  check(charts.length > 0 && charts.length === expected, `expected ${expected} charts, found ${charts.length}`);
  check(await page.locator("#charts canvas").count() === charts.length, "one canvas per chart");
  for (const c of charts) {
    check(c.points > 0, `chart ${c.id} has no data`);
    check(c.ink > 500, `chart ${c.id} looks blank (${c.ink} painted pixels)`);
  }
  if (await page.evaluate(() => window.__report.data.kind === "train")) {
    check(charts.some(c => c.type === "bar"), "the stacked step-time chart is there");
  }

  // Tables.
  check(await page.locator("#eval-table tr").count() > 5, "base vs trained table");

  // Viewer: click the first trajectory.
  const rows = await page.locator("#traj-list tr.item").count();
  const total = await page.evaluate(() => window.__report.data.trajectories.length);
  check(rows === total && total > 0, `the list shows every trajectory (${rows} of ${total})`);
  await page.locator("#traj-list tr.item").first().click();
  const messages = await page.locator("#traj-detail .traj .msg").count();
  check(messages >= 2, `a clicked trajectory shows its messages (${messages})`);
  check(await page.locator("#traj-list tr.item.selected").count() === 1, "the clicked row is selected");

  // Filter by the first trajectory's outcome, then open a group side by side.
  const outcome = await page.evaluate(() => window.__report.data.trajectories[0].outcome);
  await page.selectOption("#f-outcome", outcome);
  const filtered = await page.locator("#traj-list tr.item").count();
  const want = await page.evaluate(o => window.__report.data.trajectories.filter(t => t.outcome === o).length, outcome);
  check(filtered === want && want > 0, `outcome filter: ${filtered} rows, ${want} expected`);
  await page.selectOption("#f-outcome", "");
  const grouped = await page.evaluate(() => {
    const ts = window.__report.data.trajectories;
    return ts.findIndex(t => ts.filter(u => u.group === t.group).length >= 2);
  });
  let sideBySide = 0;
  if (grouped >= 0) {
    await page.locator(`#traj-list tr.item[data-index="${grouped}"]`).click();
    await page.locator("#group-toggle").click();
    sideBySide = await page.locator("#group-view .traj").count();
    check(sideBySide >= 2, `a group shows side by side (${sideBySide} cards)`);
    check(await page.locator("#group-view .msg").count() > 0, "group cards show messages");
  }
  await page.selectOption("#f-source", "");
  await page.locator("#traj-list tr.item").first().click();
  await page.screenshot({ path: shotPath, fullPage: true });
  for (const e of errors) failures.push(e);
  console.log(JSON.stringify({ charts, rows, messages, filtered, sideBySide, screenshot: shotPath, failures }));
} finally {
  await browser.close();
}
process.exit(failures.length ? 1 : 0);
