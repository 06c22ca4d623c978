// Actions and approvals in the console, for host/tests/console_browser.rs
// (console_actions_in_chromium), against `canopy demo`:
//
//   node actions.mjs <origin> <screenshotDir>
//
// As the admin: `Offer a coupon` from a customer's page (defaults, a required marker, the
// reason field appearing as an amount above the threshold is typed, then the success message
// and the action's HTML); `Mark as VIP` on two selected rows of the table; `Refund` on a pending
// order (the action's error, the form kept); `Export orders` (the browser downloads the CSV);
// `Attach a document` (a file read into the form); `Ship the order`, a form of two pages (Next
// refused while a required field of the page is empty, the change hook live on page two, values
// kept on Back, Enter moving on, the server refusing what the script let through); `Notify the
// warehouse`, a webhook result the browser calls (a local listener records the call; the page's
// CSP lets it connect to that origin only; a service without CORS is explained; an address that
// is not http is not called). As the editor, for whom `Mark as VIP` needs
// an approval: the request is filed and shows in their inbox; the admin approves it from the
// inbox and the customer is VIP. The viewer sees no action button and gets 403 by URL. axe-core
// on the form, result and inbox pages.
import http from 'node:http';
import {
  origin, seen, check, audit, shot, column, signIn, signOut, launch, newPage,
} from './lib.mjs';

// The warehouse's service of `Notify the warehouse` (a webhook result the browser calls): it
// records each call and allows the console's origin (CORS), except under `/no-cors`.
const calls = [];
const warehouse = http.createServer((request, response) => {
  let body = '';
  request.on('data', (chunk) => { body += chunk; });
  request.on('end', () => {
    const cors = request.url.startsWith('/no-cors') ? {} : {
      'Access-Control-Allow-Origin': origin,
      'Access-Control-Allow-Methods': 'POST',
      'Access-Control-Allow-Headers': 'content-type',
    };
    if (request.method !== 'OPTIONS') {
      calls.push({ method: request.method, url: request.url, type: request.headers['content-type'], body });
    }
    response.writeHead(request.method === 'OPTIONS' ? 204 : 202, cors);
    response.end();
  });
});
await new Promise((resolve) => { warehouse.listen(0, '127.0.0.1', resolve); });
const warehouseOrigin = `http://127.0.0.1:${warehouse.address().port}`;

const base = `${origin}/console`;
const click = (page, selector) => Promise.all([page.waitForNavigation(), page.click(selector)]);

const browser = await launch();
try {
  const page = await newPage(browser);
  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');

  // ----- a dynamic form: Offer a coupon ---------------------------------------------------
  await page.goto(`${base}/c/customers`);
  await click(page, 'table tbody tr:first-child a:text-is("Open")');
  const customerUrl = page.url();
  await click(page, '.actions-bar a:text-is("Offer a coupon")');
  check((await page.textContent('h1')).trim() === 'Offer a coupon', 'the action form opens');
  check((await page.inputValue('[data-field="Amount"] input')) === '10', 'the default amount');
  check(/^Hello .+, here is a gift\.$/.test(await page.inputValue('[data-field="Message"] textarea')), 'the message a hook computed');
  check(await page.isVisible('[data-field="Amount"] .required'), 'Amount is marked required');
  check((await page.$('[data-field="Reason"]')) === null, 'no reason field for a small coupon');
  check(await page.isHidden('[data-refresh-button]'), 'the script replaces the refresh button');
  await audit(page, 'action-form');
  await page.fill('[data-field="Amount"] input', '');
  await page.type('[data-field="Amount"] input', '75', { delay: 60 });
  await page.waitForSelector('[data-field="Reason"] input', { timeout: 10000 });
  check((await page.inputValue('[data-field="Amount"] input')) === '75', 'the typed amount survives the refresh');
  await page.fill('[data-field="Reason"] input', 'A loyal customer');
  await page.selectOption('[data-field="Kind"] select', 'Percent');
  await page.waitForTimeout(600);
  check((await page.inputValue('[data-field="Reason"] input')) === 'A loyal customer', 'the reason is kept');
  await shot(page, 'console-action-form');
  await click(page, 'button[name=run]');
  const coupon = await page.textContent('#action-message');
  check(/^Coupon of 75 \(Percent\) sent to .+/.test(coupon.trim()), `coupon sent: ${coupon}`);
  check((await page.$$('.action-html b')).length === 1, 'the action\'s HTML is shown');
  await audit(page, 'action-result');
  seen.coupon = coupon.trim();
  // Back under the threshold the reason goes away; a required field left empty is refused.
  await page.goto(customerUrl);
  await click(page, '.actions-bar a:text-is("Offer a coupon")');
  await page.fill('[data-field="Amount"] input', '');
  await page.waitForTimeout(600);
  await click(page, 'button[name=run]');
  check(/Amount is required/.test(await page.textContent('[data-field="Amount"] .field-error')), 'required amount refused');
  check((await page.getAttribute('[data-field="Amount"] input', 'aria-invalid')) === 'true', 'aria-invalid on the amount');
  await audit(page, 'action-form-error');

  // ----- a bulk action on selected rows ------------------------------------------------------
  await page.goto(`${base}/c/customers?ff=is_vip&fo=equal&fv=false`);
  const boxes = await page.$$('#bulk input[type=checkbox][name=id]');
  check(boxes.length >= 3, `non-VIP customers to select: ${boxes.length}`);
  await boxes[0].check();
  await boxes[1].check();
  await click(page, '#bulk button:text-is("Mark as VIP")');
  check(/Runs on 2 selected records of customers/.test(await page.textContent('main')), 'the form names the selection');
  check((await page.$$('ul.selected li')).length === 2, 'both selected records listed');
  await click(page, 'button[name=run]');
  check(/2 customers are now VIP/.test(await page.textContent('#action-message')), 'bulk action ran');
  check((await page.$$('.result-links a:text-is("Changed: orders")')).length === 1, 'the invalidated collection is linked');
  // A single action with two rows selected is refused plainly.
  await page.goto(`${base}/c/customers?ff=is_vip&fo=equal&fv=false`);
  const more = await page.$$('#bulk input[type=checkbox][name=id]');
  await more[0].check();
  await more[1].check();
  const refused = await Promise.all([page.waitForNavigation(), page.click('#bulk button:text-is("Offer a coupon")')]);
  check(refused[0].status() === 400, `a single action on two rows: ${refused[0].status()}`);

  // ----- an action that answers an error: the form is kept ------------------------------------
  await page.goto(`${base}/c/orders?ff=status&fo=equal&fv=pending`);
  await click(page, 'table tbody tr:first-child a:text-is("Open")');
  await click(page, '.actions-bar a:text-is("Refund")');
  await page.fill('[data-field="Reason"] textarea', 'Damaged parcel');
  await click(page, 'button[name=run]');
  const refusal = await page.textContent('[role=alert]');
  check(/only a paid, shipped or delivered order can be refunded/.test(refusal), `refund error: ${refusal}`);
  check((await page.inputValue('[data-field="Reason"] textarea')) === 'Damaged parcel', 'the form keeps the reason');
  await audit(page, 'action-error');

  // ----- a file download -------------------------------------------------------------------
  await page.goto(`${base}/c/orders`);
  await click(page, '.actions-bar a:text-is("Export orders")');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('button[name=run]')]);
  check(download.suggestedFilename() === 'orders.csv', `downloaded ${download.suggestedFilename()}`);
  const csv = await new Promise((resolve, reject) => {
    download.createReadStream().then((stream) => {
      let text = '';
      stream.on('data', (chunk) => { text += chunk; });
      stream.on('end', () => resolve(text));
      stream.on('error', reject);
    }, reject);
  });
  check(csv.startsWith('id,status,total\n') && csv.split('\n').length > 3, `the CSV: ${csv.slice(0, 60)}`);

  // ----- a file field ----------------------------------------------------------------------
  await page.goto(`${base}/c/orders`);
  await click(page, 'table tbody tr:first-child a:text-is("Open")');
  await click(page, '.actions-bar a:text-is("Attach a document")');
  await page.setInputFiles('[data-field="Document"] input[type=file]', {
    name: 'invoice.txt', mimeType: 'text/plain', buffer: Buffer.from('Invoice 42: 12.50 EUR'),
  });
  await page.waitForFunction(() => (document.querySelector('[data-field="Document"] input[type=hidden]') || {}).value?.startsWith('data:text/plain;name=invoice.txt;base64,'));
  await click(page, 'button[name=run]');
  const attached = await page.textContent('#action-message');
  check(/Attached invoice\.txt \(21 bytes\) to order #\d+/.test(attached), `attached: ${attached}`);

  // ----- a form of two pages: Ship the order ------------------------------------------------
  await page.goto(`${base}/c/orders?ff=status&fo=equal&fv=pending`);
  await click(page, 'table tbody tr:first-child a:text-is("Open")');
  const orderUrl = page.url();
  await click(page, '.actions-bar a:text-is("Ship the order")');
  const pageShown = () => page.$$eval('section.form-page', (ps) => ps.map((p) => !p.hidden));
  check(JSON.stringify(await pageShown()) === '[true,false]', `page 1 of 2 shows: ${await pageShown()}`);
  check((await page.textContent('section.form-page:not([hidden]) h2')).trim() === 'Step 1 of 2', 'the page says where it is');
  check(await page.isHidden('button[name=run]'), 'no run button before the last page');
  check(await page.isVisible('button:text-is("Next: the customer")'), 'the agent\'s next label');
  await audit(page, 'action-pages');
  // Next with the page's required fields empty: refused on the page, focus on the first.
  await page.click('button[data-page-next]');
  check(JSON.stringify(await pageShown()) === '[true,false]', 'still on page 1');
  check(/Carrier is required/.test(await page.textContent('[data-field="Carrier"] .field-error')), 'the carrier is required');
  check(/Tracking number is required/.test(await page.textContent('[data-field="Tracking number"] .field-error')), 'the tracking number is required');
  check(await page.evaluate(() => document.activeElement.closest('[data-field]')?.dataset.field) === 'Carrier', 'focus on the first missing field');
  await page.selectOption('[data-field="Carrier"] select', 'Courier');
  await page.fill('[data-field="Tracking number"] input', 'TRK-42');
  // Enter in a field of page 1 moves to page 2 (it does not submit).
  await page.press('[data-field="Tracking number"] input', 'Enter');
  await page.waitForFunction(() => document.querySelector('section.form-page[data-page="2"]')?.hidden === false);
  check(await page.evaluate(() => document.activeElement.matches('section.form-page[data-page="2"] h2')), 'focus on page 2\'s heading');
  check(await page.isVisible('button[name=run]'), 'the run button on the last page');
  check(await page.isVisible('button:text-is("Back: the parcel")'), 'the agent\'s previous label');
  check(await page.isVisible('[data-field="Message"] textarea'), 'the message shows while the customer is notified');
  // The change hook is live on page 2: not notifying hides the message, notifying shows it.
  await page.selectOption('[data-field="Notify the customer"] select', 'false');
  await page.waitForSelector('[data-field="Message"]', { state: 'detached', timeout: 10000 });
  check(JSON.stringify(await pageShown()) === '[false,true]', 'still on page 2 after the hook');
  await page.selectOption('[data-field="Notify the customer"] select', 'true');
  await page.waitForSelector('[data-field="Message"] textarea', { timeout: 10000 });
  await page.fill('[data-field="Message"] textarea', 'On its way');
  await page.waitForTimeout(600);
  // Back keeps page 1's values; the keyboard reaches Next again.
  await page.click('button:text-is("Back: the parcel")');
  check(JSON.stringify(await pageShown()) === '[true,false]', 'back on page 1');
  check((await page.inputValue('[data-field="Tracking number"] input')) === 'TRK-42', 'the tracking number is kept');
  check((await page.inputValue('[data-field="Carrier"] select')) === 'Courier', 'the carrier is kept');
  await page.focus('button[data-page-next]');
  await page.keyboard.press('Enter');
  check(JSON.stringify(await pageShown()) === '[false,true]', 'the keyboard moves to page 2');
  check((await page.inputValue('[data-field="Message"] textarea')) === 'On its way', 'the message is kept');
  await shot(page, 'console-action-pages');
  // The server checks every page: a required field emptied behind the script's back is refused,
  // page 1 opens on it, and the order is not shipped.
  await page.evaluate(() => {
    document.querySelector('[data-field="Tracking number"] input').value = '';
    const form = document.querySelector('form[data-action-form]');
    const run = document.createElement('input');
    run.type = 'hidden'; run.name = 'run'; run.value = '1';
    form.appendChild(run);
    form.submit();
  });
  await page.waitForSelector('#form-error');
  check(/Tracking number is required/.test(await page.textContent('[data-field="Tracking number"] .field-error')), 'the server refuses the missing tracking number');
  check(JSON.stringify(await pageShown()) === '[true,false]', 'page 1 opens on the refused field');
  check((await page.inputValue('[data-field="Carrier"] select')) === 'Courier', 'the refused form keeps the carrier');
  const stillPending = await (await page.context().request.get(orderUrl)).text();
  check(/pending/.test(stillPending) && !/>shipped</.test(stillPending), 'the refused form changed nothing');
  await page.fill('[data-field="Tracking number"] input', 'TRK-43');
  await page.click('button[data-page-next]');
  await click(page, 'button[name=run]');
  const shipped = await page.textContent('#action-message');
  check(/^Order #\d+ shipped by Courier \(TRK-43\); the customer is told: On its way$/.test(shipped.trim()), `shipped: ${shipped}`);
  seen.shipped = shipped.trim();

  // ----- a webhook result, called by the browser --------------------------------------------
  const notify = async (url) => {
    await page.goto(orderUrl);
    await click(page, '.actions-bar a:text-is("Notify the warehouse")');
    await page.fill('[data-field="Warehouse URL"] input', url);
    await page.waitForTimeout(400);
    const [response] = await Promise.all([page.waitForNavigation(), page.click('button[name=run]')]);
    return response;
  };
  // An empty address is refused on the form, and nothing is called.
  await page.goto(orderUrl);
  await click(page, '.actions-bar a:text-is("Notify the warehouse")');
  await page.fill('[data-field="Warehouse URL"] input', '');
  await page.waitForTimeout(400);
  await click(page, 'button[name=run]');
  check(/Warehouse URL is required/.test(await page.textContent('[data-field="Warehouse URL"] .field-error')), 'an empty address is refused');
  const called = await notify(`${warehouseOrigin}/orders`);
  const csp = called.headers()['content-security-policy'];
  check(csp.endsWith(`connect-src 'self' ${warehouseOrigin}`), `the result's CSP lets the page call the warehouse only: ${csp}`);
  await page.waitForSelector('#webhook-outcome[data-done]', { timeout: 10000 });
  const outcome = await page.textContent('#webhook-outcome');
  check(/Called: the service answered 202/.test(outcome), `the webhook's outcome: ${outcome}`);
  check(calls.length === 1 && calls[0].method === 'POST' && calls[0].url === '/orders', `the warehouse got one call: ${JSON.stringify(calls)}`);
  check(calls[0].type === 'application/json' && JSON.parse(calls[0].body).status === 'shipped', `the call's body: ${JSON.stringify(calls[0])}`);
  await audit(page, 'action-webhook');
  await shot(page, 'console-action-webhook');
  // Another page's CSP names no other origin.
  const plain = await page.goto(orderUrl);
  check(!plain.headers()['content-security-policy'].includes(warehouseOrigin), 'the CSP of other pages is unchanged');
  // A service that does not allow the console's origin: the failure is explained.
  await notify(`${warehouseOrigin}/no-cors`);
  await page.waitForSelector('#webhook-outcome[data-done=failed]', { timeout: 10000 });
  check(/CORS/.test(await page.textContent('#webhook-outcome')), `a CORS failure explained: ${await page.textContent('#webhook-outcome')}`);
  // An address that is not http(s) is not called.
  await notify('ftp://127.0.0.1/orders');
  check(/Not called: The console only calls http and https services/.test(await page.textContent('#webhook-outcome')), `a non-http address is not called: ${(await page.textContent('main')).replace(/\s+/g, ' ').slice(0, 400)}`);
  await signOut(page);

  // ----- an approval: the editor asks, the admin approves -------------------------------------
  await signIn(page, 'editor@canopy.local', 'canopy-demo-editor');
  await page.goto(`${base}/c/customers?ff=is_vip&fo=equal&fv=false`);
  const ids = await page.$$eval('#bulk input[type=checkbox][name=id]', (inputs) => inputs.map((i) => i.value));
  const asked = ids[0];
  await page.check(`#bulk input[type=checkbox][value="${asked}"]`);
  await click(page, '#bulk button:text-is("Mark as VIP")');
  await click(page, 'button[name=run]');
  check(/\/console\/inbox\/\d+\?done=filed$/.test(page.url()), `filed: ${page.url()}`);
  check(/your request is filed/.test(await page.textContent('#approval-notice')), 'the editor is told');
  check((await page.textContent('#approval-status')).trim() === 'pending', 'pending');
  check((await page.$$('form.decide')).length === 0, 'the editor may not approve their own request');
  await audit(page, 'approval-request');
  check((await page.$$('#inbox-count')).length === 0, 'no badge for a request the editor may not decide');
  await click(page, 'nav.side a[href$="/inbox"]');
  check((await page.$$('table.inbox tbody tr')).length === 1, 'the editor sees their request');
  check((await page.textContent('table.inbox tbody')).includes('you'), 'marked as theirs');
  // The editor sees no Refund (no right) but Attach a document on an order.
  await page.goto(`${base}/c/orders`);
  await click(page, 'table tbody tr:first-child a:text-is("Open")');
  const editorActions = await page.$$eval('.actions-bar a', (as) => as.map((a) => a.textContent.trim()));
  check(!editorActions.includes('Refund') && editorActions.includes('Attach a document'), `editor's order actions: ${editorActions}`);
  await signOut(page);

  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');
  check((await page.textContent('#inbox-count')).replace(/\s+/g, ' ').trim() === '(1 waiting for your decision)', `the admin's inbox badge: ${await page.textContent('#inbox-count')}`);
  await click(page, 'nav.side a[href$="/inbox"]');
  const rows = await page.$$('table.inbox tbody tr');
  check(rows.length === 1, `one pending request for the admin: ${rows.length}`);
  check((await page.textContent('table.inbox tbody')).includes('editor@canopy.local'), 'the requester is shown');
  await audit(page, 'inbox');
  await shot(page, 'console-inbox');
  await click(page, 'table.inbox tbody tr:first-child a');
  await page.fill('#comment', 'Fine by me');
  await click(page, 'form.decide button:text-is("Approve and run")');
  check(/Approved/.test(await page.textContent('#approval-notice')), 'approved notice');
  check((await page.textContent('#approval-status')).trim() === 'approved', 'approved status');
  check(/1 customers are now VIP/.test(await page.textContent('#approval-outcome')), 'the action ran on approval');
  check((await page.textContent('main')).includes('Fine by me'), 'the comment is kept');
  await audit(page, 'approval-decided');
  await page.goto(`${base}/c/customers/r/${encodeURIComponent(asked)}`);
  const vip = await page.textContent('dl.fields div:has(dt:text-is("is_vip")) dd');
  check(vip.trim() === 'Yes', `the approved customer is VIP: ${vip}`);
  await page.goto(`${base}/inbox?view=decided`);
  check((await page.textContent('table.inbox tbody')).includes('approved'), 'history lists the decision');
  await page.goto(`${base}/inbox`);
  check(/Nothing is waiting/.test(await page.textContent('main')), 'nothing pending any more');
  check((await page.$$('#inbox-count')).length === 0, 'no badge once decided');
  await signOut(page);

  // ----- a bulk action on every matching record but one ("Select all N matching records") -----
  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');
  const notVip = `${base}/c/customers?ff=is_vip&fo=equal&fv=false`;
  await page.goto(notVip);
  const matching = Number((await page.textContent('#count')).trim().split(' ')[0]);
  check(matching > (await page.$$('#bulk tbody input[name=id]')).length, `more non-VIP customers than a page: ${matching}`);
  await page.check('input[data-select-page]');
  await click(page, `[data-select-all] a:text-is("Select all ${matching} matching records")`);
  const rowsAll = await page.$$('#bulk tbody input[type=checkbox][name=id]');
  const leftOut = await rowsAll[0].getAttribute('value');
  await rowsAll[0].uncheck();
  await click(page, '#bulk button:text-is("Mark as VIP")');
  const runsOn = (await page.textContent('main')).replace(/\s+/g, ' ');
  check(runsOn.includes(`Runs on ${matching - 1} records of customers: every one matching the table's view (1 left out).`), `the form names the whole selection: ${runsOn.slice(0, 300)}`);
  await audit(page, 'action-select-all');
  await click(page, 'button[name=run]');
  check(new RegExp(`${matching - 1} customers are now VIP`).test(await page.textContent('#action-message')), `bulk action on all matching: ${await page.textContent('#action-message')}`);
  await page.goto(notVip);
  check((await page.textContent('#count')).trim() === '1 record', `only the row left out stays non-VIP: ${await page.textContent('#count')}`);
  check((await column(page, 'id')).join() === leftOut, `the row left out: ${await column(page, 'id')} vs ${leftOut}`);
  seen.bulkSelectAll = { matching, ran: matching - 1 };
  await signOut(page);

  // ----- the viewer: no button, 403 by URL ---------------------------------------------------
  await signIn(page, 'viewer@canopy.local', 'canopy-demo-viewer');
  await page.goto(customerUrl);
  check((await page.$$('.actions-bar')).length === 0, 'the viewer sees no action');
  await page.goto(`${base}/c/customers`);
  check((await page.$$('#bulk')).length === 0, 'no selection for the viewer');
  const id = customerUrl.split('/r/')[1];
  const forbidden = await page.goto(`${base}/c/customers/actions/offer-a-coupon?id=${id}`);
  check(forbidden.status() === 403, `the viewer's typed URL: ${forbidden.status()}`);
  check(/do not have the right/.test(await page.textContent('body')), 'a clear 403 page');

  check(page.cspErrors.length === 0, `no CSP violation: ${page.cspErrors}`);
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
  warehouse.close();
}
