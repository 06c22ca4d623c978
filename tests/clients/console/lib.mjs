// What every console browser script shares (host/tests/console_browser.rs runs one script per
// part of the console, each against its own `canopy demo`): launching Debian's Chromium, checks,
// axe-core audits, screenshots, signing in and out, reading a table's column.
//
// Each script is run as `node <script>.mjs <origin> <screenshotDir>`, throws on the first failed
// expectation (non-zero exit, the reason on stderr) and ends by printing `seen` as one JSON line.
import { chromium } from 'playwright-core';
import axe from 'axe-core';

export const [origin, shots] = process.argv.slice(2);
if (!origin || !shots) throw new Error('usage: node <script>.mjs <origin> <screenshotDir>');
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
/// What the script saw: the axe violations of each audited page, the screenshots taken.
export const seen = { axe: {}, screenshots: [] };

export function check(condition, message) {
  if (!condition) throw new Error(`expectation failed: ${message}`);
}

/// Runs axe-core on the page: no serious or critical violation.
export async function audit(page, name) {
  await page.evaluate(axe.source);
  const result = await page.evaluate(async () =>
    // eslint-disable-next-line no-undef
    await window.axe.run(document, { resultTypes: ['violations'] }));
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  seen.axe[name] = result.violations.map((v) => `${v.id}:${v.impact}`);
  check(bad.length === 0, `axe on ${name}: ${JSON.stringify(bad.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5),
  })))}`);
}

export async function shot(page, name) {
  const path = `${shots}/${name}.png`;
  await page.screenshot({ path, fullPage: false });
  seen.screenshots.push(path);
}

/// Texts of column `name` in the table of the page.
export async function column(page, name) {
  const headers = await page.$$eval('table thead th', (ths) => ths.map((th) => th.textContent.replace(/[▲▼]/g, '').trim()));
  const index = headers.indexOf(name);
  check(index >= 0, `column ${name} in ${headers}`);
  return page.$$eval(`table tbody tr td:nth-child(${index + 1})`, (tds) => tds.map((td) => td.textContent.trim()));
}

export async function signIn(page, email, password) {
  await page.goto(`${origin}/`);
  check(page.url().includes('/console/sign-in'), `/ leads to the sign-in page, got ${page.url()}`);
  await page.fill('#email', email);
  await page.fill('#password', password);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
}

export async function signOut(page) {
  await Promise.all([page.waitForNavigation(), page.click('form.signout button')]);
  check(page.url().includes('/console/sign-in'), `signed out to ${page.url()}`);
}

/// Headless Chromium with the flags these machines need.
export function launch() {
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage'],
  });
}

/// A new page at 1280 px in Paris time; Content-Security-Policy reports are collected in
/// `page.cspErrors` (a script ends by checking it is empty).
export async function newPage(browser, options = {}) {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 800 }, timezoneId: 'Europe/Paris', acceptDownloads: true, ...options,
  });
  const page = await context.newPage();
  page.cspErrors = [];
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) page.cspErrors.push(message.text());
  });
  return page;
}
