// Actions and approvals in the console, for host/tests/console_browser.rs
// (console_actions_in_chromium), against `canopy demo`:
//
//   node actions.mjs <origin> <screenshotDir>
//
// As the admin: `Offer a coupon` from a customer's page (defaults, a required marker, the
// reason field appearing as an amount above the threshold is typed, then the success message
// and the action's HTML); `Mark as VIP` on two selected rows of the table; `Refund` on a pending
// order (the action's error, the form kept); `Export orders` (the browser downloads the CSV);
// `Attach a document` (a file read into the form). As the editor, for whom `Mark as VIP` needs
// an approval: the request is filed and shows in their inbox; the admin approves it from the
// inbox and the customer is VIP. The viewer sees no action button and gets 403 by URL. axe-core
// on the form, result and inbox pages.
import {
  origin, seen, check, audit, shot, signIn, signOut, launch, newPage,
} from './lib.mjs';

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
  await click(page, 'nav.side a:text-is("Inbox")');
  check((await page.$$('table.inbox tbody tr')).length === 1, 'the editor sees their request');
  check((await page.textContent('table.inbox tbody')).includes('you'), 'marked as theirs');
  // The editor sees no Refund (no right) but Attach a document on an order.
  await page.goto(`${base}/c/orders`);
  await click(page, 'table tbody tr:first-child a:text-is("Open")');
  const editorActions = await page.$$eval('.actions-bar a', (as) => as.map((a) => a.textContent.trim()));
  check(!editorActions.includes('Refund') && editorActions.includes('Attach a document'), `editor's order actions: ${editorActions}`);
  await signOut(page);

  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');
  await click(page, 'nav.side a:text-is("Inbox")');
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
}
