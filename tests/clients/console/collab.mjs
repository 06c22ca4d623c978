// Collaboration on a record, in a real browser (host/tests/console_browser.rs,
// `console_collaboration_in_chromium`), against `canopy demo`:
//
//   node collab.mjs <origin> <screenshotDir>
//
// As the admin, on one order: a note refused without a message (the title kept), then added and
// seen in the thread with its author and time, a reply, then archived; the order edited through
// the console's form and the change seen in History with its value before and after; the
// Activity tab listing what was done; the review workflow started on the order, its manual step
// completed with an answer, its manual update (the form of the columns it sets: a value that is
// not a number refused next to its field with nothing written, then a total written), and the
// run's steps drawn done; the runs list and the run's picture never disagree on its state. As the viewer: no archive button on
// the admin's note. axe-core on the record page with each tab. Prints one JSON line of what it saw.
import {
  origin, seen, check, audit, shot, signIn, signOut, launch, newPage,
} from './lib.mjs';

const ORDER = 3;
const browser = await launch();
try {
  const page = await newPage(browser);
  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');
  const recordUrl = `${origin}/console/c/orders/r/${ORDER}`;
  const go = async (url) => { await page.goto(url); };
  const submit = async (selector) => {
    await Promise.all([page.waitForNavigation(), page.click(selector)]);
  };

  // ----- notes ------------------------------------------------------------------------------
  await go(`${recordUrl}?panel=notes`);
  const panelTabs = await page.$$eval('nav[aria-label=Collaboration] a', (as) => as.map((a) => a.textContent.trim()));
  for (const tab of ['Notes', 'Activity', 'History', 'Workflows']) {
    check(panelTabs.includes(tab), `the panel has a ${tab} tab: ${panelTabs}`);
  }
  check(/No note on this record yet/.test(await page.textContent('section.collab')), 'the empty thread says what to do');
  await audit(page, 'collab-notes-empty');
  // Refused: no message (the browser's `required` is bypassed to reach the server). The title
  // stays.
  await page.$eval('#note-content', (t) => t.removeAttribute('required'));
  await page.fill('#note-title', 'Customer called');
  await submit('form.new-note button[type=submit]');
  check(/title and a first message/.test(await page.textContent('section.collab [role=alert]')), 'a note without a message is refused');
  check((await page.inputValue('#note-title')) === 'Customer called', 'the typed title is kept');
  await page.fill('#note-content', 'They asked when the parcel ships.\n\nTold them within two days <b>promised</b>.');
  await submit('form.new-note button[type=submit]');
  check(/Note added/.test(await page.textContent('section.collab [role=status]')), 'note added notice');
  const note = 'ol.notes > li.note:first-child';
  check((await page.textContent(`${note} h4`)).trim() === 'Customer called', 'the note is in the thread');
  const meta = await page.textContent(`${note} .thread li:first-child .meta`);
  check(/Canopy Admin|admin@canopy\.local/i.test(meta) || meta.includes('·'), `the message's author: ${meta}`);
  check(/\d{4}-\d{2}-\d{2} \d{2}:\d{2} (CET|CEST|UTC)/.test(meta), `the message's time in the user's zone: ${meta}`);
  const text = await page.textContent(`${note} .thread li:first-child .text`);
  check(text.includes('<b>promised</b>'), `markup typed is shown as text, not run: ${text}`);
  // A reply.
  await page.fill(`${note} textarea[name=content]`, 'Shipped today.');
  await submit(`${note} form.reply button[type=submit]`);
  check((await page.$$(`${note} .thread li`)).length === 2, 'the reply is in the thread');
  await audit(page, 'collab-notes');
  await shot(page, 'console-notes');

  // ----- the viewer sees the note, but no archive button on another's note ---------------------
  const viewer = await newPage(browser);
  await signIn(viewer, 'viewer@canopy.local', 'canopy-demo-viewer');
  await viewer.goto(`${recordUrl}?panel=notes`);
  check((await viewer.textContent(`${note} h4`)).trim() === 'Customer called', 'the viewer reads the note');
  check((await viewer.$$(`${note} .inline-form`)).length === 0, 'no archive button on a note that is not theirs');
  await viewer.context().close();

  // Archive.
  await submit(`${note} .inline-form button`);
  check(/Note archived/.test(await page.textContent('section.collab [role=status]')), 'archived notice');
  check(/Archived/.test(await page.textContent(`${note} .badge`)), 'the note shows as archived');
  check((await page.$$(`${note} form.reply`)).length === 0, 'an archived note takes no reply');

  // ----- edit through the console, then History ---------------------------------------------
  await go(`${recordUrl}/edit`);
  const totalInput = 'label:text-is("total") + input';
  const before = await page.inputValue(totalInput);
  const after = (Number(before) + 11.5).toFixed(2);
  await page.fill(totalInput, after);
  await submit('form.edit button[type=submit]');
  check(/Saved/.test(await page.textContent('[role=status]')), 'the order is saved');
  await go(`${recordUrl}?panel=history`);
  const change = 'ol.history > li:first-child';
  check(/Updated/.test(await page.textContent(`${change} .meta`)), 'the newest change is the update');
  const row = await page.$$eval(`${change} table.diff tbody tr`, (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent.trim())));
  const total = row.find((r) => r[0] === 'total');
  check(total, `the total is in the change: ${JSON.stringify(row)}`);
  check(Number(total[1]) === Number(before) && Number(total[2]) === Number(after), `before → after: ${JSON.stringify(total)} (${before} → ${after})`);
  await audit(page, 'collab-history');
  await shot(page, 'console-history');

  // ----- activity ---------------------------------------------------------------------------
  await go(`${recordUrl}?panel=activity`);
  const actions = await page.$$eval('ol.timeline .action', (spans) => spans.map((s) => s.textContent.trim()));
  for (const action of ['createNote', 'createMessage', 'update']) {
    check(actions.includes(action), `activity lists ${action}: ${actions}`);
  }
  await audit(page, 'collab-activity');

  // ----- workflows: start the review, complete its manual step -------------------------------
  await go(`${recordUrl}?panel=runs`);
  const options = await page.$$eval('#start-workflow option', (os) => os.map((o) => o.textContent.trim()));
  check(options.some((o) => o.startsWith('review')), `the review workflow is offered: ${options}`);
  await audit(page, 'collab-runs-empty');
  // The selected run's row in the list and the run's picture show one state (one read).
  const agree = async () => {
    const row = await page.$eval('tr.selected .state', (s) => s.textContent.trim()).catch(() => null);
    const pictured = await page.$eval('article.run h3 .state', (s) => s.textContent.trim()).catch(() => null);
    check(row === pictured, `the runs list and the run agree: ${row} vs ${pictured}`);
  };
  await page.selectOption('#start-workflow', { label: options.find((o) => o.startsWith('review')) });
  await submit('form.start-run button[type=submit]');
  check(/Workflow started/.test(await page.textContent('section.collab [role=status]')), 'started notice');
  // The run is queued, then runs to its manual step: follow it.
  let waiting = false;
  for (let i = 0; i < 40 && !waiting; i += 1) {
    await agree();
    waiting = (await page.$$('form.step-form')).length > 0;
    if (!waiting) {
      await page.waitForTimeout(250);
      await page.goto(page.url().replace(/[&?](started|completed)=1/, ''));
    }
  }
  check(waiting, `the run waits on its manual step: ${await page.textContent('article.run')}`);
  check(/Review the order/.test(await page.textContent('form.step-form h4')), 'the step to complete');
  const classes = await page.$$eval('ol.steps li.step', (lis) => lis.map((li) => li.className));
  check(classes[0].includes('done') && classes[1].includes('current') && classes[2].includes('ahead'), `steps drawn: ${classes}`);
  await audit(page, 'collab-run-waiting');
  // Refused: no answer (the browser's `required` is bypassed to reach the server).
  await page.$eval('#step-answer', (t) => t.removeAttribute('required'));
  await submit('form.step-form button[type=submit]');
  const refusal = await page.textContent('form.step-form [role=alert]').catch(() => '');
  check(refusal.length > 0, `an empty answer is refused next to the form: ${refusal}`);
  await page.fill('#step-answer', 'Status and total checked: all good.');
  await submit('form.step-form button[type=submit]');
  // The manual update: the form of the columns it sets, each typed by the collection.
  let correcting = false;
  for (let i = 0; i < 40 && !correcting; i += 1) {
    await agree();
    correcting = /Correct the order/.test(await page.textContent('form.step-form h4').catch(() => ''));
    if (!correcting) {
      await page.waitForTimeout(250);
      await page.goto(page.url().replace(/[&?](started|completed)=1/, ''));
    }
  }
  check(correcting, `the run waits on its manual update: ${await page.textContent('article.run')}`);
  check(await page.isVisible('form.step-form [data-field="status"] input'), 'the status to set');
  check(await page.isVisible('form.step-form [data-field="total"] input'), 'the total to set');
  check(/Left empty, the workflow sets/.test(await page.textContent('form.step-form [data-field="total"]')), 'a field left empty keeps the workflow\'s value');
  await audit(page, 'collab-step-form');
  await page.$eval('article.run', (a) => a.scrollIntoView());
  await shot(page, 'console-step-form');
  const totalOf = async () => {
    const html = await (await page.context().request.get(recordUrl)).text();
    const match = /<dt>total<\/dt>\s*<dd[^>]*>([^<]*)</.exec(html);
    return match ? match[1].trim() : html.slice(0, 0);
  };
  const totalBefore = await totalOf();
  // Refused: a total that is not a number, next to its field; nothing is written.
  await page.$eval('form.step-form [data-field="total"] input', (i) => { i.type = 'text'; });
  await page.fill('form.step-form [data-field="total"] input', 'lots');
  await submit('form.step-form button[type=submit]');
  check(/not a number/.test(await page.textContent('form.step-form [data-field="total"] .field-error')), 'a bad total is refused next to its field');
  // (A number input shows no text that is not a number: the page sends it back as typed.)
  check((await page.getAttribute('form.step-form [data-field="total"] input', 'value')) === 'lots', 'what was typed is kept');
  check(/Correct the order/.test(await page.textContent('form.step-form h4')), 'the run still waits');
  check((await totalOf()) === totalBefore, `nothing written: ${await totalOf()} vs ${totalBefore}`);
  await page.fill('form.step-form [data-field="total"] input', '42.5');
  await submit('form.step-form button[type=submit]');
  let ended = false;
  for (let i = 0; i < 40 && !ended; i += 1) {
    await agree();
    ended = /Succeeded/.test(await page.textContent('article.run h3'));
    if (!ended) {
      await page.waitForTimeout(250);
      await page.goto(page.url().replace(/[&?](started|completed)=1/, ''));
    }
  }
  check(ended, `the run succeeded: ${await page.textContent('article.run')}`);
  const done = await page.$$eval('ol.steps li.step', (lis) => lis.map((li) => li.className));
  check(done.length === 4 && done.every((c) => c.includes('done')), `every step drawn done: ${done}`);
  const written = await totalOf();
  check(Number(written) === 42.5, `the manual update wrote the total: ${written}`);
  await audit(page, 'collab-run');
  await page.$eval('article.run', (a) => a.scrollIntoView());
  await shot(page, 'console-run');

  // ----- a manual trigger-action step: the action's form, live as the user types ---------------
  await go(`${origin}/console/c/customers`);
  await submit('table tbody tr:first-child a:text-is("Open")');
  const customerUrl = page.url().split('?')[0];
  await go(`${customerUrl}?panel=runs`);
  const choices = await page.$$eval('#start-workflow option', (os) => os.map((o) => o.textContent.trim()));
  await page.selectOption('#start-workflow', { label: choices.find((o) => o.startsWith('coupon')) });
  await submit('form.start-run button[type=submit]');
  let choosing = false;
  for (let i = 0; i < 40 && !choosing; i += 1) {
    choosing = /Choose the coupon/.test(await page.textContent('form.step-form h4').catch(() => ''));
    if (!choosing) {
      await page.waitForTimeout(250);
      await page.goto(page.url().replace(/[&?](started|completed)=1/, ''));
    }
  }
  check(choosing, `the run waits on the coupon step: ${await page.textContent('article.run')}`);
  check((await page.inputValue('form.step-form [data-field="Amount"] input')) === '10', 'the action\'s default amount (its load hook)');
  check((await page.$('form.step-form [data-field="Reason"]')) === null, 'no reason for a small coupon');
  check(await page.isVisible('form.step-form .hint:has-text("are required")'), 'the required-fields hint, for a required amount');
  await page.fill('form.step-form [data-field="Amount"] input', '');
  await page.type('form.step-form [data-field="Amount"] input', '80', { delay: 60 });
  await page.waitForSelector('form.step-form [data-field="Reason"] input', { timeout: 10000 });
  check((await page.inputValue('form.step-form [data-field="Amount"] input')) === '80', 'the typed amount survives the change hook');
  await page.fill('form.step-form [data-field="Reason"] input', 'A late parcel');
  await page.waitForTimeout(600);
  await audit(page, 'collab-step-action');
  await submit('form.step-form button[type=submit]');
  let sent = false;
  for (let i = 0; i < 40 && !sent; i += 1) {
    sent = /Succeeded/.test(await page.textContent('article.run h3'));
    if (!sent) {
      await page.waitForTimeout(250);
      await page.goto(page.url().replace(/[&?](started|completed)=1/, ''));
    }
  }
  check(sent, `the coupon run succeeded: ${await page.textContent('article.run')}`);
  await go(`${customerUrl}?panel=activity`);
  const ran = await page.$$eval('ol.timeline li', (lis) => lis.map((li) => li.textContent.replace(/\s+/g, ' ')));
  // The engine runs the action as the person who completed the step, and says which step.
  check(ran.some((line) => / Ada Admin action workflow coupon: step offer done/.test(line)), `the action's activity entry: ${ran.join(' | ')}`);
  seen.stepAction = true;

  // ----- at phone width -----------------------------------------------------------------------
  await page.setViewportSize({ width: 390, height: 844 });
  await go(`${recordUrl}?panel=notes`);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 1, `no sideways scroll at 390 px: ${overflow}`);
  await audit(page, 'collab-phone');

  await signOut(page);
  check(page.cspErrors.length === 0, `no CSP violation: ${page.cspErrors}`);
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
