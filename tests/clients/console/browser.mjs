// The console in a real browser, for host/tests/console_browser.rs: headless Chromium (Debian's
// /usr/bin/chromium, or CHROMIUM) driven by playwright-core, against `canopy demo`.
//
//   node browser.mjs <origin> <screenshotDir>
//
// Signs in (a wrong password first), browses orders with a filter, a sort and a segment, edits
// a product (two validation errors, then a save), deletes a record after its confirmation,
// refuses forms without or with a wrong CSRF token and a cross-site text/plain post, and signs in
// as the editor (fewer collections, fewer buttons, an order outside their scope unreachable by
// URL). axe-core runs on every main page: no serious or critical violation. Screenshots of the
// main pages go to <screenshotDir>. Any failed expectation throws: the process exits non-zero
// with the reason on stderr. Prints one JSON line of what it saw.
import { readFile } from 'node:fs/promises';
import {
  origin, seen, check, audit, shot, column, signIn, signOut, launch,
} from './lib.mjs';

const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, timezoneId: 'Europe/Paris', acceptDownloads: true });
  const page = await context.newPage();
  const cspErrors = [];
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) cspErrors.push(message.text());
  });

  // ----- sign-in ------------------------------------------------------------------------
  await page.goto(`${origin}/`);
  check(page.url().includes('/console/sign-in'), `/ redirects to sign-in: ${page.url()}`);
  const csp = (await page.request.get(page.url())).headers()['content-security-policy'] || '';
  check(csp.includes("script-src 'self'") && csp.includes("frame-ancestors 'none'") && !csp.includes('unsafe-inline'), `strict CSP: ${csp}`);
  await audit(page, 'sign-in');
  await shot(page, 'console-sign-in');
  await page.fill('#email', 'admin@canopy.local');
  await page.fill('#password', 'not-the-password');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  const wrong = await page.textContent('[role=alert]');
  check(/Wrong email or password/.test(wrong), `wrong password message: ${wrong}`);
  check((await page.inputValue('#email')) === 'admin@canopy.local', 'the email is kept');
  await page.fill('#password', 'canopy-demo-admin');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  check(page.url().endsWith('/console/'), `signed in to the home page: ${page.url()}`);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'canopy_console');
  check(session && session.httpOnly && session.sameSite === 'Lax', `session cookie: ${JSON.stringify(session)}`);
  const adminCollections = await page.$$eval('nav.side ul:not(.places) a', (as) => as.map((a) => a.textContent.trim()));
  for (const name of ['orders', 'customers', 'products', 'order_items']) {
    check(adminCollections.includes(name), `admin sidebar has ${name}: ${adminCollections}`);
  }
  await audit(page, 'home');
  await shot(page, 'console-home');

  // ----- table: filter, sort, segment -------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('nav.side a:text-is("orders")')]);
  const allCount = await page.textContent('#count');
  check(/^\d+ records$/.test(allCount.trim()), `orders count: ${allCount}`);
  await page.click('details.filters summary');
  await page.selectOption('#ff-1', 'status');
  await page.selectOption('#fo-1', 'equal');
  await page.fill('#fv-1', 'paid');
  await Promise.all([page.waitForNavigation(), page.click('#table-form button[type=submit]')]);
  const statuses = await column(page, 'status');
  check(statuses.length > 0 && statuses.every((s) => s === 'paid'), `filtered on paid: ${statuses}`);
  const paidCount = await page.textContent('#count');
  check(paidCount !== allCount, `the count follows the filter: ${paidCount} vs ${allCount}`);
  // Sort by total: ascending, then descending.
  await Promise.all([page.waitForNavigation(), page.click('th a:has-text("total")')]);
  let totals = (await column(page, 'total')).map(Number);
  check(totals.every((t, i) => i === 0 || totals[i - 1] <= t), `ascending totals: ${totals}`);
  await Promise.all([page.waitForNavigation(), page.click('th a:has-text("total")')]);
  totals = (await column(page, 'total')).map(Number);
  check(totals.every((t, i) => i === 0 || totals[i - 1] >= t), `descending totals: ${totals}`);
  check((await column(page, 'status')).every((s) => s === 'paid'), 'the filter is kept while sorting');
  check((await page.getAttribute('th[aria-sort=descending]', 'aria-sort')) === 'descending', 'aria-sort');
  // Segment: Above average (orders above the mean total), still filtered and sorted.
  await Promise.all([page.waitForNavigation(), page.click('nav.segments a:has-text("Above average")')]);
  check((await page.getAttribute('nav.segments a:has-text("Above average")', 'aria-current')) === 'true', 'segment marked current');
  const segmentCount = Number((await page.textContent('#count')).split(' ')[0]);
  check(segmentCount > 0 && segmentCount < Number(paidCount.split(' ')[0]), `segment narrows: ${segmentCount} < ${paidCount}`);
  await audit(page, 'table');
  await shot(page, 'console-table');
  // CSV export of exactly this table: the same filter and segment, the shown columns.
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('a:text-is("Export CSV")')]);
  const csv = (await readFile(await download.path(), 'utf8')).trim().split('\n');
  const head = csv[0].split(',');
  check(head.includes('status') && head.includes('total'), `CSV header: ${csv[0]}`);
  check(csv.length - 1 === segmentCount, `CSV rows ${csv.length - 1} = the table's count ${segmentCount}`);
  const statusAt = head.indexOf('status');
  check(csv.slice(1).every((line) => line.split(',')[statusAt] === 'paid'), 'CSV keeps the filter');
  // An operator the field does not support is refused with a message, nothing listed.
  await page.goto(`${origin}/console/c/orders?ff=total&fo=contains&fv=1`);
  check(/cannot be filtered/.test(await page.textContent('[role=alert]')), 'bad operator message');

  // order_items: no count (disableCount).
  await page.goto(`${origin}/console/c/order_items`);
  check(/Count disabled/.test(await page.textContent('#count')), 'order_items has no count');

  // Search (the shop searches customers by email and names).
  await page.goto(`${origin}/console/c/customers`);
  await page.fill('#q', 'customer12@example.com');
  await Promise.all([page.waitForNavigation(), page.click('#table-form button[type=submit]')]);
  check((await page.textContent('#count')).trim() === '1 record', `search count: ${await page.textContent('#count')}`);
  check((await column(page, 'email'))[0] === 'customer12@example.com', 'the customer found');

  // ----- record page ----------------------------------------------------------------------
  await page.goto(`${origin}/console/c/customers`);
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child td.actions a:text-is("Open")')]);
  check(/\/console\/c\/customers\/r\//.test(page.url()), `record page: ${page.url()}`);
  const tabs = await page.$$eval('nav.tabs a', (as) => as.map((a) => a.textContent.trim()));
  check(tabs.includes('purchases'), `a tab per to-many relation: ${tabs}`);
  await Promise.all([page.waitForNavigation(), page.click('nav.tabs a:text-is("purchases")')]);
  await audit(page, 'record');
  await shot(page, 'console-record');

  // ----- edit: validation errors, then a save --------------------------------------------------
  await page.goto(`${origin}/console/c/products`);
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child td.actions a:text-is("Edit")')]);
  const editUrl = page.url();
  const priceInput = 'label:text-is("price") + input';
  await page.fill(priceInput, 'abc');
  await Promise.all([page.waitForNavigation(), page.click('form.edit button[type=submit]')]);
  check(/Enter a number/.test(await page.textContent('.field.invalid .field-error')), 'type error next to price');
  check((await page.inputValue(priceInput)) === 'abc', 'the typed value is kept');
  await page.fill(priceInput, '-5');
  await Promise.all([page.waitForNavigation(), page.click('form.edit button[type=submit]')]);
  const rule = await page.textContent('[role=alert]');
  check(/Nothing was saved/.test(rule), `the datasource's validation: ${rule}`);
  check((await page.inputValue(priceInput)) === '-5', 'the typed value is kept after a rule');
  await audit(page, 'edit-error');
  await shot(page, 'console-edit-error');
  await page.fill(priceInput, '19.75');
  await Promise.all([page.waitForNavigation(), page.click('form.edit button[type=submit]')]);
  check(/Saved/.test(await page.textContent('[role=status]')), 'saved notice');
  const recordUrl = page.url().split('?')[0];
  const price = await page.textContent('dt:text-is("price") + dd');
  check(price.trim() === '19.75', `saved price: ${price}`);

  // ----- CSRF and cross-site writes are refused, and change nothing ----------------------------
  const noToken = await page.request.post(editUrl, { form: { 'field:price': '1' } });
  check(noToken.status() === 403, `no CSRF token: ${noToken.status()}`);
  const badToken = await page.request.post(editUrl, { form: { csrf: 'forged', 'field:price': '2' } });
  check(badToken.status() === 403, `wrong CSRF token: ${badToken.status()}`);
  const csrf = await page.$eval('form.signout input[name=csrf]', (i) => i.value);
  const textPlain = await page.request.post(editUrl, {
    headers: { 'content-type': 'text/plain' },
    data: `csrf=${csrf}&field:price=3`,
  });
  check(textPlain.status() === 403, `text/plain post: ${textPlain.status()}`);
  const crossSite = await page.request.post(editUrl, {
    headers: { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
    form: { csrf, 'field:price': '4' },
  });
  check(crossSite.status() === 403, `cross-site post: ${crossSite.status()}`);
  await page.goto(recordUrl);
  check((await page.textContent('dt:text-is("price") + dd')).trim() === '19.75', 'refused posts changed nothing');

  // ----- create: an empty form, a duplicate, then a new record ------------------------------------
  await page.goto(`${origin}/console/c/tags`);
  await Promise.all([page.waitForNavigation(), page.click('a.button:text-is("Add a record")')]);
  const newUrl = page.url();
  await Promise.all([page.waitForNavigation(), page.click('form.edit button[type=submit]')]);
  check(/Fill in at least one field/.test(await page.textContent('[role=alert]')), 'an empty create is refused');
  await page.fill('label:text-is("label") + input', 'made-in-the-console');
  await audit(page, 'create');
  await Promise.all([page.waitForNavigation(), page.click('form.edit button[type=submit]')]);
  check(/Created/.test(await page.textContent('[role=status]')), `created notice at ${page.url()}`);
  check((await page.textContent('dt:text-is("label") + dd')).trim() === 'made-in-the-console', 'the new tag');
  await page.goto(newUrl);
  await page.fill('label:text-is("label") + input', 'made-in-the-console');
  await Promise.all([page.waitForNavigation(), page.click('form.edit button[type=submit]')]);
  const duplicate = await page.textContent('[role=alert]');
  check(/Nothing was created/.test(duplicate), `a duplicate label is refused: ${duplicate}`);
  check((await page.inputValue('label:text-is("label") + input')) === 'made-in-the-console', 'typed label kept');

  // ----- delete with a confirmation -------------------------------------------------------------
  await page.goto(`${origin}/console/c/product_tags`);
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child td.actions a:text-is("Open")')]);
  const tagUrl = page.url();
  await Promise.all([page.waitForNavigation(), page.click('a.button:text-is("Delete")')]);
  check(/cannot be undone/.test(await page.textContent('main')), 'the confirmation says what it deletes');
  await audit(page, 'delete');
  await Promise.all([page.waitForNavigation(), page.click('button:text-is("Delete this record")')]);
  check(/was deleted/.test(await page.textContent('[role=status]')), 'deleted notice');
  const gone = await page.goto(tagUrl);
  check(gone.status() === 404, `the deleted record is gone: ${gone.status()}`);

  // Bulk delete: two selected rows, a confirmation listing them, then both gone.
  await page.goto(`${origin}/console/c/product_tags`);
  const before = Number((await page.textContent('#count')).split(' ')[0]);
  const boxes = await page.$$('#bulk input[type=checkbox][name=id]');
  check(boxes.length >= 2, 'rows can be selected');
  await boxes[0].check();
  await boxes[1].check();
  await Promise.all([page.waitForNavigation(), page.click('button:text-is("Delete selected")')]);
  check((await page.$$('ul.ids li')).length === 2, 'the confirmation lists the two records');
  await audit(page, 'bulk-delete');
  await Promise.all([page.waitForNavigation(), page.click('button:text-is("Delete these 2 records")')]);
  check(/2 records were deleted/.test(await page.textContent('[role=status]')), 'bulk deleted notice');
  const after = Number((await page.textContent('#count')).split(' ')[0]);
  check(after === before - 2, `count after a bulk delete: ${before} -> ${after}`);

  // An order outside the editor's scope (status pending), found as the admin.
  await page.goto(`${origin}/console/c/orders?ff=status&fo=equal&fv=pending`);
  const pendingHref = await page.getAttribute('table tbody tr:first-child td.actions a:text-is("Open")', 'href');
  check(pendingHref, 'a pending order exists');
  await signOut(page);

  // ----- a phone-width screen ---------------------------------------------------------------------
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
  const small = await phone.newPage();
  await signIn(small, 'viewer@canopy.local', 'canopy-demo-viewer');
  await small.goto(`${origin}/console/c/orders`);
  const overflow = await small.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 1, `no horizontal page scroll at phone width: ${overflow}px`);
  // The viewer reads everything and changes nothing: no edit link, no edit or delete button.
  check((await small.$$('td.actions a:text-is("Edit")')).length === 0, 'viewer: no Edit link');
  check((await small.$$('a.button:text-is("Add a record")')).length === 0, 'viewer: no Add button');
  await Promise.all([small.waitForNavigation(), small.click('table tbody tr:first-child td.actions a:text-is("Open")')]);
  check((await small.$$('a.button')).length === 0, 'viewer: no Edit or Delete button');
  await audit(small, 'record-phone');
  await small.goto(`${origin}/console/c/orders`);
  await shot(small, 'console-phone');
  await phone.close();

  // ----- the editor: only allowed collections and buttons, scope by URL ---------------------------
  await signIn(page, 'editor@canopy.local', 'canopy-demo-editor');
  const editorCollections = await page.$$eval('nav.side ul:not(.places) a', (as) => as.map((a) => a.textContent.trim()));
  const allowed = ['orders', 'customers', 'order_items', 'products', 'tags', 'product_tags'];
  check(editorCollections.every((c) => allowed.includes(c)), `editor sidebar: ${editorCollections}`);
  check(editorCollections.includes('orders'), 'editor browses orders');
  const hidden = adminCollections.filter((c) => !allowed.includes(c));
  for (const name of hidden) {
    const refused = await page.goto(`${origin}/console/c/${name}`);
    check(refused.status() === 403, `editor refused ${name}: ${refused.status()}`);
  }
  await page.goto(`${origin}/console/c/orders`);
  check((await column(page, 'status')).every((s) => s === 'paid' || s === 'shipped'), 'editor sees only scoped orders');
  check((await page.$$('td.actions a:text-is("Edit")')).length > 0, 'editor may edit orders');
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child td.actions a:text-is("Open")')]);
  check((await page.$$('a.button:text-is("Edit")')).length === 1, 'editor: Edit button on an order');
  check((await page.$$('a.button:text-is("Delete")')).length === 0, 'editor: no Delete button on an order');
  const outOfScope = await page.goto(`${origin}${pendingHref}`);
  check(outOfScope.status() === 404, `out-of-scope order by URL: ${outOfScope.status()}`);
  const outOfScopeEdit = await page.goto(`${origin}${pendingHref}/edit`);
  check(outOfScopeEdit.status() === 404, `out-of-scope edit by URL: ${outOfScopeEdit.status()}`);
  const noDelete = await page.goto(`${origin}${pendingHref}/delete`);
  check(noDelete.status() === 403, `delete without the right: ${noDelete.status()}`);
  check((await page.$$('a.button:text-is("Add a record")')).length === 0, 'editor: no Add on orders');
  check((await page.$$('button:text-is("Delete selected")')).length === 0, 'editor: no bulk delete on orders');
  // The editor may add customers; the shop's hook refuses an email without "@", nothing is created.
  await page.goto(`${origin}/console/c/customers/new`);
  await page.fill('label:text-is("first_name") + input', 'Nora');
  await page.fill('label:text-is("last_name") + input', 'Console');
  await page.fill('label:text-is("email") + input', 'nora.example.com');
  await page.fill('label:text-is("created_at") + input', '2025-01-02T03:04:05');
  await Promise.all([page.waitForNavigation(), page.click('form.edit button[type=submit]')]);
  const hook = await page.textContent('[role=alert]');
  check(/Nothing was created/.test(hook), `the hook's refusal: ${hook}`);
  await page.goto(`${origin}/console/c/order_items`);
  check((await page.$$('td.actions a:text-is("Edit")')).length === 0, 'editor: no Edit on order_items');
  check((await page.$$('a.button:text-is("Add a record")')).length === 0, 'editor: no Add on order_items');
  const noAdd = await page.goto(`${origin}/console/c/order_items/new`);
  check(noAdd.status() === 403, `create without the right: ${noAdd.status()}`);
  await page.goto(`${origin}/console/c/order_items`);
  await audit(page, 'editor-table');
  await signOut(page);

  check(cspErrors.length === 0, `no CSP violation: ${cspErrors}`);
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
