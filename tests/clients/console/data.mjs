// The console's data gaps in a real browser, for host/tests/console_browser.rs: linking records on
// a relation tab (associate, remove with a confirmation, bad ids refused without effect, the
// editor's scope and buttons), a record with a composite primary key edited and deleted, a nested
// OR-in-AND filter built with the builder (partly from the keyboard) and shared by its address,
// and "Select all N matching records" with a bulk delete of every matching record but one.
//
//   node data.mjs <origin> <screenshotDir>
//
// Any failed expectation throws: the process exits non-zero with the reason on stderr. Prints one
// JSON line of what it saw.
import {
  origin, seen, check, audit, shot, column, signIn, signOut, launch, newPage,
} from './lib.mjs';

const go = async (page, action) => {
  const [response] = await Promise.all([page.waitForNavigation(), action()]);
  return response;
};
const count = async (page) => (await page.textContent('#count')).trim();
const tabRows = async (page) => page.$$eval(
  'section[aria-labelledby=related-title] table tbody tr',
  (trs) => trs.map((tr) => tr.textContent.replace(/\s+/g, ' ').trim()),
);

const browser = await launch();
try {
  const page = await newPage(browser);
  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');
  const csrf = await page.$eval('form.signout input[name=csrf]', (i) => i.value);

  // ----- associate on a many-to-many tab, then remove with a confirmation ---------------------
  // Product 4 is tagged "bestseller" only (examples/shop/seed.sql).
  const product = `${origin}/console/c/products/r/4`;
  await page.goto(`${product}?tab=labels`);
  let rows = await tabRows(page);
  check(rows.length === 1 && rows[0].includes('bestseller'), `product 4's labels: ${rows}`);
  check((await page.$$('button:text-is("Remove")')).length === 1, 'a Remove button per row');
  await page.click('details.add-existing summary');
  await page.fill('#pick', 'eco');
  await go(page, () => page.press('#pick', 'Enter'));
  const found = await page.$$eval('ul.candidates li', (lis) => lis.map((li) => li.textContent.replace(/\s+/g, ' ').trim()));
  check(found.length === 1 && found[0].startsWith('eco'), `the tags' own search finds eco: ${found}`);
  await audit(page, 'relation-add');
  await shot(page, 'console-relation-add');
  await go(page, () => page.click('ul.candidates button:text-is("Add")'));
  check(/Added to labels/.test(await page.textContent('[role=status]')), 'added notice');
  rows = await tabRows(page);
  check(rows.length === 2 && rows.some((r) => r.includes('eco')), `eco is linked: ${rows}`);
  seen.associated = rows.length;

  // Bad ids: refused with a message next to the control, nothing linked.
  const addUrl = `${product}/related/labels/add`;
  const missing = await page.request.post(addUrl, { form: { csrf, id: '999' } });
  check(missing.status() === 400, `a missing tag: ${missing.status()}`);
  check(/There is no record 999 in tags that you may see; nothing was added/.test(await missing.text()), 'missing tag message');
  const notAnId = await page.request.post(addUrl, { form: { csrf, id: 'abc' } });
  check(notAnId.status() === 400 && /is not an id of tags/.test(await notAnId.text()), `not an id: ${notAnId.status()}`);
  const empty = await page.request.post(addUrl, { form: { csrf, id: '' } });
  check(empty.status() === 400 && /Choose a record to add/.test(await empty.text()), `nothing chosen: ${empty.status()}`);
  const noCsrf = await page.request.post(addUrl, { form: { id: '1' } });
  check(noCsrf.status() === 403, `add without CSRF: ${noCsrf.status()}`);
  await page.goto(`${product}?tab=labels`);
  check((await tabRows(page)).length === 2, 'refused adds changed nothing');
  // Nothing selected: a message, nothing removed.
  await go(page, () => page.click('button:text-is("Remove selected")'));
  check(/Select at least one record of labels to remove/.test(await page.textContent('#link-error')), 'nothing selected');
  await audit(page, 'relation-error');

  // Remove eco (its own row's button), confirm, and it is gone; the tag itself is kept.
  await page.goto(`${product}?tab=labels`);
  await go(page, () => page.click('button[aria-label="Remove eco from labels"]'));
  check(/Remove 1 record from labels of products/.test(await page.textContent('h1')), 'removal confirmation');
  check(/The links are removed. The tags records are kept/.test(await page.textContent('main')), 'says what happens');
  await audit(page, 'relation-remove-confirm');
  await go(page, () => page.click('form.buttons button:text-is("Remove it")'));
  check(/1 record removed from labels/.test(await page.textContent('[role=status]')), 'removed notice');
  rows = await tabRows(page);
  check(rows.length === 1 && !rows.some((r) => r.includes('eco')), `eco unlinked: ${rows}`);
  await page.goto(`${origin}/console/c/tags?q=eco`);
  check((await count(page)) === '1 record', 'the tag eco is kept');
  seen.dissociated = rows.length;

  // One-to-many whose foreign key may not be empty (orders.customer_id): no Remove; the admin may
  // delete.
  // Customer 32 has five paid orders (1, 1001, …, 4001).
  await page.goto(`${origin}/console/c/customers/r/32?tab=purchases`);
  check((await tabRows(page)).length === 5, 'customer 32 has five purchases');
  check((await page.$$('button:text-is("Remove selected")')).length === 0, 'no Remove where the key may not be empty');
  check((await page.$$('button:text-is("Delete selected")')).length === 1, 'the admin may delete purchases');
  check((await page.$$('details.add-existing')).length === 1, 'the admin may add purchases');

  // ----- a composite primary key: view, edit, delete ---------------------------------------------
  await page.goto(`${origin}/console/c/order_items`);
  await go(page, () => page.click('table tbody tr:first-child td.actions a:text-is("Edit")'));
  check(/\/console\/c\/order_items\/r\/\d+%7C\d+\/edit$/.test(page.url()), `composite id in the address: ${page.url()}`);
  for (const key of ['order_id', 'product_id']) {
    check((await page.getAttribute(`label:text-is("${key}") + input`, 'readonly')) !== null, `${key} is read-only`);
  }
  await page.fill('label:text-is("quantity") + input', '9');
  await go(page, () => page.click('form.edit button[type=submit]'));
  check(/Saved/.test(await page.textContent('[role=status]')), 'composite record saved');
  check((await page.textContent('dt:text-is("quantity") + dd')).trim() === '9', 'the new quantity');
  const itemUrl = page.url().split('?')[0];
  seen.composite = itemUrl.split('/r/')[1];
  await go(page, () => page.click('a.button:text-is("Delete")'));
  await go(page, () => page.click('button:text-is("Delete this record")'));
  check(/was deleted/.test(await page.textContent('[role=status]')), 'composite record deleted');
  check((await page.goto(itemUrl)).status() === 404, 'the composite record is gone');

  // ----- a nested filter: status = paid AND (id < 20 OR id > 4990) ---------------------------
  await page.goto(`${origin}/console/c/orders`);
  await page.click('details.filters summary');
  await page.selectOption('#ff-1', 'status');
  await page.selectOption('#fo-1', 'equal');
  await page.fill('#fv-1', 'paid');
  await go(page, () => page.click('button[aria-label="Add a group to all filters"]'));
  check((await page.inputValue('#ga-r-1')) === 'or', 'a group in an AND group is an OR');
  check(await page.evaluate(() => document.activeElement && document.activeElement.id === 'ff-3'), 'the new condition has the focus');
  await page.selectOption('#ff-3', 'id');
  await page.selectOption('#fo-3', 'less_than');
  await page.fill('#fv-3', '20');
  // From the keyboard: the group's "Add a condition", then Enter in the last value applies.
  await page.focus('button[aria-label="Add a condition to group 1"]');
  await go(page, () => page.keyboard.press('Enter'));
  await page.selectOption('#ff-4', 'id');
  await page.selectOption('#fo-4', 'greater_than');
  await page.fill('#fv-4', '4990');
  await go(page, () => page.press('#fv-4', 'Enter'));
  const shared = page.url();
  const tree = JSON.parse(new URL(shared).searchParams.get('filters'));
  check(tree.aggregator === 'and' && tree.conditions[1].aggregator === 'or', `the address carries the tree: ${shared}`);
  let ids = (await column(page, 'id')).map(Number).sort((a, b) => a - b);
  check(JSON.stringify(ids) === '[1,6,11,16,4991,4996]', `paid and (id < 20 or id > 4990): ${ids}`);
  check((await count(page)) === '6 records', `count: ${await count(page)}`);
  check((await column(page, 'status')).every((s) => s === 'paid'), 'all paid');
  await audit(page, 'nested-filter');
  await shot(page, 'console-nested-filter');
  // The shared address shows the same rows and the same builder.
  const other = await newPage(browser);
  await signIn(other, 'viewer@canopy.local', 'canopy-demo-viewer');
  await other.goto(shared);
  ids = (await column(other, 'id')).map(Number).sort((a, b) => a - b);
  check(JSON.stringify(ids) === '[1,6,11,16,4991,4996]', `the shared link: ${ids}`);
  check((await other.inputValue('#ga-r-1')) === 'or' && (await other.inputValue('#fv-4')) === '4990', 'the builder from the address');
  await other.context().close();
  // Removing the group's first condition keeps the rest.
  await page.goto(shared);
  await go(page, () => page.click('button[aria-label="Remove condition 3"]'));
  await go(page, () => page.click('#table-form button[type=submit]'));
  ids = (await column(page, 'id')).map(Number).sort((a, b) => a - b);
  check(JSON.stringify(ids) === '[4991,4996]', `after removing a condition: ${ids}`);

  // ----- select all matching records, then delete them but one ------------------------------
  const tagOne = `${origin}/console/c/product_tags?filters=${encodeURIComponent('{"field":"tag_id","operator":"equal","value":1}')}`;
  await page.goto(`${origin}/console/c/product_tags`);
  const totalBefore = Number((await count(page)).split(' ')[0]);
  await page.goto(tagOne);
  const matching = Number((await count(page)).split(' ')[0]);
  check(matching > 25, `more tag-1 links than a page: ${matching}`);
  check(await page.isHidden('[data-select-all]'), 'no "select all" before the page is selected');
  await page.check('input[data-select-page]');
  check(await page.isVisible('[data-select-all]'), '"select all" offered once the page is selected');
  await go(page, () => page.click(`[data-select-all] a:text-is("Select all ${matching} matching records")`));
  check(/Selected: all \d+ matching records/.test(await page.textContent('#select-all-status')), 'every matching record selected');
  const boxes = await page.$$('#bulk tbody input[type=checkbox][name=id]');
  check((await Promise.all(boxes.map((b) => b.isChecked()))).every(Boolean), 'the rows show checked');
  const kept = await boxes[0].getAttribute('value');
  await boxes[0].uncheck();
  await go(page, () => page.click('button:text-is("Delete selected")'));
  check((await page.textContent('h1')).trim() === `Delete ${matching - 1} records of product_tags?`, `confirmation: ${await page.textContent('h1')}`);
  check((await page.$$eval('ul.excluded li', (lis) => lis.map((li) => li.textContent))).join().includes(kept), 'the unchecked row is left out');
  await audit(page, 'select-all-confirm');
  await go(page, () => page.click(`button:text-is("Delete these ${matching - 1} records")`));
  check((await page.textContent('[role=status]')).includes(`${matching - 1} records were deleted`), 'deleted notice');
  await page.goto(tagOne);
  check((await count(page)) === '1 record', `one tag-1 link left: ${await count(page)}`);
  await page.goto(`${origin}/console/c/product_tags`);
  const totalAfter = Number((await count(page)).split(' ')[0]);
  check(totalAfter === totalBefore - (matching - 1), `only the matching ones: ${totalBefore} -> ${totalAfter}`);
  seen.selectAll = { matching, deleted: matching - 1 };
  await signOut(page);

  // ----- the editor: their buttons and their scope ------------------------------------------------
  await signIn(page, 'editor@canopy.local', 'canopy-demo-editor');
  const editorCsrf = await page.$eval('form.signout input[name=csrf]', (i) => i.value);
  await page.goto(`${origin}/console/c/customers/r/32?tab=purchases`);
  check((await tabRows(page)).length === 5, 'the editor sees the five paid purchases');
  check((await page.$$('details.add-existing')).length === 1, 'the editor may add purchases (edit on customers and orders)');
  check((await page.$$('button:text-is("Remove selected")')).length === 0, 'editor: no Remove');
  check((await page.$$('button:text-is("Delete selected")')).length === 0, 'editor: no Delete (no delete right on orders)');
  // Order 5 is pending: outside the editor's scope (paid and shipped orders).
  const before = await tabRows(page);
  const outside = await page.request.post(`${origin}/console/c/customers/r/32/related/purchases/add`, { form: { csrf: editorCsrf, id: '5' } });
  check(outside.status() === 400 && /There is no record 5 in orders that you may see/.test(await outside.text()), `out of scope: ${outside.status()}`);
  const forbidden = await page.request.post(`${origin}/console/c/customers/r/32/related/purchases/remove`, { form: { csrf: editorCsrf, mode: 'delete', id: '1001', confirm: '1' } });
  check(forbidden.status() === 403, `delete without the right: ${forbidden.status()}`);
  await page.goto(`${origin}/console/c/customers/r/32?tab=purchases`);
  check(JSON.stringify(await tabRows(page)) === JSON.stringify(before), 'refusals changed nothing');
  await audit(page, 'editor-relation');
  // The editor has no delete on orders: no "select all".
  await page.goto(`${origin}/console/c/orders`);
  check((await page.$$('[data-select-all]')).length === 0, 'editor: no select all without delete');
  await signOut(page);

  check(page.cspErrors.length === 0, `no CSP violation: ${page.cspErrors}`);
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
