// A real browser through Canopy's sign-in page, for tests/e2e/login_browser.rs: headless
// Chromium (Debian's /usr/bin/chromium, or CHROMIUM) driven by playwright-core.
//
//   node browser.mjs <authorizationUrl> <email> <password>
//
// Opens the authorization URL, fills and submits the form as a user would, waits for the page
// the redirects end on, and prints one JSON line: {url, status, body} of that last page.
import { chromium } from 'playwright-core';

const [authorizationUrl, email, password] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage();
  await page.goto(authorizationUrl);
  await page.fill('input[name=email]', email);
  await page.fill('input[name=password]', password);
  const [response] = await Promise.all([
    page.waitForNavigation(),
    page.click('button[type=submit]'),
  ]);
  const body = await response.text();
  console.log(JSON.stringify({ url: page.url(), status: response.status(), body }));
} finally {
  await browser.close();
}
