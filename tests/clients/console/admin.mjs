// The console's administration in a real browser, for host/tests/console_browser.rs
// (`console_administration_in_chromium`), against `canopy demo`:
//
//   node admin.mjs <origin> <screenshotDir>
//
// As the admin: the "Administration" place; a token form refused field by field, then a token
// made (its secret shown once, working against /v1 as a Bearer), then only its name listed;
// its revocation after a confirmation, after which /v1 refuses it; the users list, a user's
// role changed, and a role that does not exist refused next to the field. Teams and roles made,
// renamed, refused (blank, taken, still held) and removed once unused; a role given collection
// and action rights; a user made (after bad input refused field by field) who, signed in in a
// second browser context, has exactly those rights; the action then made to need an approval
// (their run is filed), a condition built and read back; a team scope that hides a customer
// from them; their removal after a confirmation (never one's own). Every administration page at
// 390 px without sideways scroll. A chart added to the orders dashboard (bad input refused
// first, a live preview as the form is filled), drawn there, then removed. As the editor: no "Administration" place, the 403 page for
// every administration URL typed, and their own tokens. axe-core on every page; screenshots for
// the README.
import {
  origin, seen, check, audit, shot, signIn, signOut, launch, newPage, column,
} from './lib.mjs';

const browser = await launch();
try {
  const page = await newPage(browser);

  // ----- the admin's tokens -------------------------------------------------------------
  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');
  const place = page.locator('nav.side a', { hasText: 'Administration' });
  check(await place.count() === 1, 'the admin has an Administration place');
  await Promise.all([page.waitForNavigation(), place.click()]);
  check(page.url().endsWith('/console/admin/tokens'), `Administration opens the tokens: ${page.url()}`);
  check(await page.isVisible('h1:has-text("Application tokens")'), 'tokens heading');
  await audit(page, 'admin-tokens');

  // Nothing filled: each refusal next to its field, nothing made.
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check(/name/i.test(await page.textContent('#t-name-error')), 'the name is required');
  check(/scope/i.test(await page.textContent('#t-scopes-error')), 'a scope is required');
  check(await page.getAttribute('#t-name', 'aria-invalid') === 'true', 'the name is marked invalid');
  await audit(page, 'admin-token-errors');

  await page.fill('#t-name', 'ci-script');
  await page.check('input[name=scope][value=all]');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  const secret = await page.inputValue('#secret');
  check(/^cnp_[0-9A-Za-z]{49}$/.test(secret), `the secret is shown: ${secret.slice(0, 6)}…`);
  check(/only time/.test(await page.textContent('.secret [role=alert]')), 'with a warning');
  check(await page.isVisible('button[data-copy=secret]'), 'and a copy button');
  await audit(page, 'admin-token-created');
  await shot(page, 'console-admin-tokens');

  // The token works against the API as the admin.
  const project = (await page.textContent('[data-project]')).trim();
  check(project.length > 0, 'the page names the project');
  const api = `${origin}/v1/project/${encodeURIComponent(project)}/tokens`;
  const bearer = { headers: { Authorization: `Bearer ${secret}` } };
  const before = await page.request.get(api, bearer);
  check(before.status() === 200, `the new token works: ${before.status()}`);
  const listed = await before.json();
  check(listed.data.some((t) => t.name === 'ci-script'), 'the API lists it');

  // Shown once: the list has its name and hint, never the secret again.
  await page.goto(`${origin}/console/admin/tokens`);
  check(!(await page.content()).includes(secret), 'the secret is not shown again');
  check(await page.locator('#secret').count() === 0, 'no secret box');
  const row = page.locator('table.tokens tbody tr', { hasText: 'ci-script' });
  check(await row.count() === 1, 'the token is listed by name');
  check((await row.textContent()).includes('admin@canopy.local'), 'with its owner');

  // Revoked after a confirmation: the API refuses it from then on.
  await Promise.all([page.waitForNavigation(), row.locator('a', { hasText: 'Revoke' }).click()]);
  check(await page.isVisible('h1:has-text("Revoke the token")'), 'a confirmation first');
  await audit(page, 'admin-token-revoke');
  await Promise.all([page.waitForNavigation(), page.click('button.danger')]);
  check(page.url().includes('/console/admin/tokens?revoked=1'), `back to the list: ${page.url()}`);
  check(/revoked/.test(await page.textContent('.notice')), 'a notice says so');
  check(await page.locator('table.tokens tbody tr', { hasText: 'ci-script' }).count() === 0, 'gone from the list');
  const after = await page.request.get(api, bearer);
  check(after.status() === 401, `the revoked token is refused: ${after.status()}`);

  // ----- users ------------------------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Users")')]);
  check(page.url().endsWith('/console/admin/users'), `the users tab: ${page.url()}`);
  await audit(page, 'admin-users');
  const editor = page.locator('table.users tbody tr', { hasText: 'editor@canopy.local' });
  check((await editor.textContent()).includes('Support'), 'the editor has the role Support');
  await Promise.all([page.waitForNavigation(), editor.locator('a', { hasText: 'Edit' }).click()]);
  await audit(page, 'admin-user');
  await page.selectOption('#u-role', 'Viewer');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check(page.url().includes('/console/admin/users?saved=1'), `saved: ${page.url()}`);
  const changed = page.locator('table.users tbody tr', { hasText: 'editor@canopy.local' });
  check((await changed.textContent()).includes('Viewer'), 'the editor now has the role Viewer');

  // A role that no longer exists (a stale form): refused next to the field, nothing changed.
  await Promise.all([page.waitForNavigation(), changed.locator('a', { hasText: 'Edit' }).click()]);
  await page.$eval('#u-role', (select) => {
    select.add(new Option('Ghost', 'Ghost'));
    select.value = 'Ghost';
  });
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check(/no role named "Ghost"/.test(await page.textContent('#u-role-error')), 'the role is refused next to it');
  check(await page.getAttribute('#u-role', 'aria-invalid') === 'true', 'the role is marked invalid');
  await audit(page, 'admin-user-error');
  await shot(page, 'console-admin-users');
  // Back to Support, as the demo has it.
  await page.selectOption('#u-role', 'Support');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check(page.url().includes('saved=1'), 'the role is restored');

  // ----- permissions ------------------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Permissions")')]);
  await page.selectOption('#p-role', { label: 'Support' });
  await Promise.all([page.waitForNavigation(), page.click('form.toolbar button:has-text("Show its rights")')]);
  check(await page.isVisible('h2:has-text("Collection rights of Support")'), 'the grid of Support');
  const exportOrders = 'input[name="right:orders:export"]';
  const browseOrders = 'input[name="right:orders:browse"]';
  check(await page.isChecked(browseOrders) && await page.isChecked(exportOrders), 'Support browses and exports orders');
  check(!(await page.isChecked('input[name="right:orders:delete"]')), 'Support does not delete orders');
  const vip = page.locator('table.actions-rights tbody tr', { hasText: 'Mark as VIP' });
  check(/yes\s*yes/.test((await vip.textContent()).replace(/\s+/g, ' ')), 'Mark as VIP: trigger, with approval');
  check((await page.textContent('ul.scopes')).includes('Shipping'), 'the team scopes are listed');
  await audit(page, 'admin-permissions');
  // Export taken from Support on orders, then given back.
  await page.uncheck(exportOrders);
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the rights of Support")')]);
  check(/saved/.test(await page.textContent('.notice')), 'the rights are saved');
  check(!(await page.isChecked(exportOrders)) && await page.isChecked(browseOrders), 'only export was taken away');
  await page.check(exportOrders);
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the rights of Support")')]);
  check(await page.isChecked(exportOrders), 'export is given back');
  // What the editor can do: their role's rights and their team's scope.
  await page.selectOption('#p-user', { label: 'editor@canopy.local' });
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Show what they can do")')]);
  const who = await page.textContent('.who-can');
  check(who.includes('Support') && who.includes('Shipping') && /status/.test(who), `what the editor can do: ${who}`);
  check((await page.locator('table.user-rights tbody tr', { hasText: 'orders' }).first().textContent()).includes('browse'), 'the editor browses orders');
  await audit(page, 'admin-permissions-user');
  await shot(page, 'console-admin-permissions');

  // ----- teams and roles ------------------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Teams & roles")')]);
  check(page.url().endsWith('/console/admin/groups'), `the teams and roles tab: ${page.url()}`);
  check(await page.locator('li.group[data-group="Shipping"]').count() === 1, 'the demo\'s teams are listed');
  await audit(page, 'admin-groups');
  const teamCount = await page.locator('li.group').count();
  // A blank name: refused next to the field, nothing made.
  await page.fill('#g-team-new', '   ');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Create the team")')]);
  check(/must not be empty/.test(await page.textContent('#g-team-new-error')), 'a blank team name is refused next to it');
  check(await page.getAttribute('#g-team-new', 'aria-invalid') === 'true', 'the name is marked invalid');
  check(await page.locator('li.group').count() === teamCount, 'no team was made');
  await audit(page, 'admin-groups-error');
  await page.fill('#g-team-new', 'Nordic');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Create the team")')]);
  check(/Created/.test(await page.textContent('.notice')), 'the team is created');
  await page.fill('#g-role-new', 'Auditor');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Create the role")')]);
  check(await page.locator('li.group[data-group="Auditor"]').count() === 1, 'the role is created');
  // A taken name, and a role still held: each refused next to it.
  await page.fill('#g-role-new', 'Auditor');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Create the role")')]);
  check(/already exists/.test(await page.textContent('#g-role-new-error')), 'a taken name is refused');
  const support = page.locator('li.group[data-group="Support"]');
  await Promise.all([page.waitForNavigation(), support.locator('button:has-text("Remove")').click()]);
  check(/held by 1 user/.test(await page.textContent('li.group[data-group="Support"] .field-error')), 'a held role is not removed');
  check(await page.locator('li.group[data-group="Support"]').count() === 1, 'Support is still there');
  // Renamed.
  const nordic = page.locator('li.group[data-group="Nordic"]');
  await nordic.locator('input[name=name]').fill('Nordic Ops');
  await Promise.all([page.waitForNavigation(), nordic.locator('button:has-text("Rename")').click()]);
  check(await page.locator('li.group[data-group="Nordic Ops"]').count() === 1, 'the team is renamed');
  await shot(page, 'console-admin-groups');

  // ----- the rights of the new role --------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Permissions")')]);
  await page.selectOption('#p-role', { label: 'Auditor' });
  await Promise.all([page.waitForNavigation(), page.click('form.toolbar button:has-text("Show its rights")')]);
  for (const right of ['customers:browse', 'customers:read', 'orders:browse', 'orders:read']) {
    await page.check(`input[name="right:${right}"]`);
  }
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the rights of Auditor")')]);
  check(/saved/.test(await page.textContent('.notice')), 'the grid of Auditor is saved');
  const coupon = () => page.locator('table.actions-rights tbody tr', { hasText: 'Offer a coupon' });
  check(/no\s*no\s*no/.test((await coupon().textContent()).replace(/\s+/g, ' ')), 'Auditor has no right on Offer a coupon yet');
  await Promise.all([page.waitForNavigation(), coupon().locator('a:has-text("Edit")').click()]);
  check(await page.isVisible('h1:has-text("Offer a coupon")'), 'the action\'s rights open');
  const actionRightsUrl = page.url();
  await audit(page, 'admin-action-rights');
  await page.check('input[name=trigger]');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the rights on this action")')]);
  check(/action's rights were saved/.test(await page.textContent('.notice')), 'the action right is saved');
  check(/yes\s*no\s*no/.test((await coupon().textContent()).replace(/\s+/g, ' ')), 'Auditor may trigger Offer a coupon');

  // ----- a new user --------------------------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Users")')]);
  const userCount = await page.locator('table.users tbody tr').count();
  await Promise.all([page.waitForNavigation(), page.click('a:has-text("Add a user")')]);
  check(await page.isVisible('h1:has-text("Add a user")'), 'the new user\'s form');
  await audit(page, 'admin-user-new');
  // Bad input: each refusal next to its field, nobody made.
  await page.fill('#u-tags', 'region');
  await page.fill('#u-password', 'short');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check(/email is required/.test(await page.textContent('#u-email-error')), 'the email is required');
  check(/key=value/.test(await page.textContent('#u-tags-error')), 'a tag line without = is refused');
  check(/at least 8/.test(await page.textContent('#u-password-error')), 'a short password is refused');
  check(await page.inputValue('#u-password') === '', 'the password is not sent back');
  await audit(page, 'admin-user-new-errors');
  await page.goto(`${origin}/console/admin/users`);
  check(await page.locator('table.users tbody tr').count() === userCount, 'nobody was made');
  // A taken email: refused next to it.
  await page.goto(`${origin}/console/admin/users/new`);
  await page.fill('#u-email', 'viewer@canopy.local');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check(/already exists/.test(await page.textContent('#u-email-error')), 'a taken email is refused next to it');
  await page.fill('#u-email', 'auditor@canopy.local');
  await page.fill('#u-first', 'Aud');
  await page.fill('#u-last', 'Itor');
  await page.selectOption('#u-level', 'user');
  await page.selectOption('#u-role', 'Auditor');
  await page.check('input[name=team][value="Nordic Ops"]');
  await page.fill('#u-tags', 'region=NO');
  await page.fill('#u-password', 'auditor-pass-1');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check(page.url().includes('created=1'), `the user is created: ${page.url()}`);
  const auditorRow = page.locator('table.users tbody tr', { hasText: 'auditor@canopy.local' });
  check((await auditorRow.textContent()).includes('Auditor') && (await auditorRow.textContent()).includes('Nordic Ops'), 'with their role and team');

  // Signed in elsewhere, they have exactly the rights given.
  const other = await newPage(browser);
  await signIn(other, 'auditor@canopy.local', 'auditor-pass-1');
  const places = await other.$$eval('nav.side a', (links) => links.map((a) => a.textContent.trim()));
  check(places.includes('customers') && places.includes('orders'), `they browse customers and orders: ${places}`);
  check(!places.includes('products') && !places.includes('Administration'), `and nothing else: ${places}`);
  await other.goto(`${origin}/console/c/customers`);
  check(await other.locator('a:has-text("Add a record")').count() === 0, 'they cannot add customers');
  check(await other.locator('table tbody a:text-is("Edit")').count() === 0, 'nor edit them');
  const emails = await column(other, 'email');
  const firstEmail = emails[0];
  await Promise.all([other.waitForNavigation(), other.click('table tbody tr:first-child a:text-is("Open")')]);
  const customerUrl = other.url();
  const buttons = await other.$$eval('.actions-bar a', (links) => links.map((a) => a.textContent.trim()));
  check(buttons.includes('Offer a coupon') && !buttons.includes('Mark as VIP'), `only the action given: ${buttons}`);
  await Promise.all([other.waitForNavigation(), other.click('.actions-bar a:text-is("Offer a coupon")')]);
  await Promise.all([other.waitForNavigation(), other.click('button[name=run]')]);
  check(/^Coupon of 10/.test((await other.textContent('#action-message')).trim()), 'the action runs without approval');
  const forbidden = await other.goto(`${origin}/console/c/products`);
  check(forbidden.status() === 403, `products are refused to them: ${forbidden.status()}`);

  // The action now needs an approval: a bad condition first (refused next to it, nothing saved).
  await page.goto(actionRightsUrl);
  await page.check('input[name=approvalRequired]');
  await page.selectOption('#rc-f-1', 'email');
  await page.selectOption('#rc-o-1', 'equal');
  await page.fill('#rc-v-1', '');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the rights on this action")')]);
  check(/needs a value/.test(await page.textContent('#rc-error')), 'a condition without its value is refused next to it');
  await audit(page, 'admin-action-rights-error');
  await page.goto(actionRightsUrl);
  check(!(await page.isChecked('input[name=approvalRequired]')), 'nothing was saved');
  await page.check('input[name=approvalRequired]');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the rights on this action")')]);
  check(/yes\s*yes\s*no/.test((await coupon().textContent()).replace(/\s+/g, ' ')), 'Offer a coupon needs an approval for Auditor');
  await other.goto(customerUrl);
  await Promise.all([other.waitForNavigation(), other.click('.actions-bar a:text-is("Offer a coupon")')]);
  await Promise.all([other.waitForNavigation(), other.click('button[name=run]')]);
  check(/\/console\/inbox\/\d+\?done=filed$/.test(other.url()), `the run is filed for approval: ${other.url()}`);
  // A condition: it needs an approval only for one customer (the builder round-trips it).
  await page.goto(actionRightsUrl);
  await page.selectOption('#rc-f-1', 'email');
  await page.selectOption('#rc-o-1', 'equal');
  await page.fill('#rc-v-1', firstEmail);
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the rights on this action")')]);
  check((await coupon().textContent()).includes(firstEmail), 'the condition is listed');
  await page.goto(actionRightsUrl);
  check(await page.inputValue('#rc-v-1') === firstEmail, 'and shown back in the builder');
  await shot(page, 'console-admin-action-rights');

  // A team scope: a customer vanishes for the team's user.
  await page.goto(`${origin}/console/admin/permissions`);
  await page.selectOption('#s-team', { label: 'Nordic Ops' });
  await page.selectOption('#s-collection', 'customers');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Set a scope")')]);
  check(await page.isVisible('h1:has-text("Scope of the team Nordic Ops on customers")'), 'the scope form');
  check(await page.locator('#current-user-variables option[value="{{currentUser.tags.region}}"]').count() === 1, 'the variables are offered, tags included');
  await audit(page, 'admin-scope');
  await page.selectOption('#sc-f-1', 'id');
  await page.selectOption('#sc-o-1', 'equal');
  await page.fill('#sc-v-1', '');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the scope")')]);
  check(/needs a value/.test(await page.textContent('#sc-error')), 'a bad scope is refused next to it');
  await page.selectOption('#sc-f-1', 'email');
  await page.selectOption('#sc-o-1', 'not_equal');
  await page.fill('#sc-v-1', firstEmail);
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Save the scope")')]);
  check(/scope was saved/.test(await page.textContent('.notice')), 'the scope is saved');
  check((await page.textContent('ul.scopes')).includes(firstEmail), 'and listed');
  await other.goto(`${origin}/console/c/customers`);
  const remaining = await column(other, "email");
  check(!remaining.includes(firstEmail) && remaining.length > 0, `${firstEmail} vanished for the team's user`);
  // The preview says so too.
  await page.selectOption('#p-user', { label: 'auditor@canopy.local' });
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Show what they can do")')]);
  const auditorCan = await page.textContent('.who-can');
  check(auditorCan.includes('Auditor') && auditorCan.includes('Nordic Ops') && auditorCan.includes(firstEmail), `what the auditor can do: ${auditorCan}`);
  await shot(page, 'console-admin-scope');

  // Removed after a confirmation; never oneself.
  await page.goto(`${origin}/console/admin/users`);
  await Promise.all([page.waitForNavigation(), page.locator('table.users tbody tr', { hasText: 'auditor@canopy.local' }).locator('a', { hasText: 'Edit' }).click()]);
  await Promise.all([page.waitForNavigation(), page.click('a:has-text("Remove this user")')]);
  check(await page.isVisible('h1:has-text("Remove auditor@canopy.local?")'), 'a confirmation first');
  await audit(page, 'admin-user-remove');
  await Promise.all([page.waitForNavigation(), page.click('button.danger')]);
  check(/removed/.test(await page.textContent('.notice')), 'the user is removed');
  check(await page.locator('table.users tbody tr', { hasText: 'auditor@canopy.local' }).count() === 0, 'and gone from the list');
  await Promise.all([page.waitForNavigation(), page.locator('table.users tbody tr', { hasText: 'admin@canopy.local' }).locator('a', { hasText: 'Edit' }).click()]);
  check(await page.locator('a:has-text("Remove this user")').count() === 0, 'no removal of oneself');
  const gone = await other.goto(`${origin}/console/c/customers`);
  check(other.url().includes('/console/sign-in') || gone.status() >= 400, `the removed user is let in no more: ${gone.status()} ${other.url()}`);
  await other.context().close();
  // Now unused, the team and the role are removed.
  await page.goto(`${origin}/console/admin/groups`);
  await Promise.all([page.waitForNavigation(), page.locator('li.group[data-group="Nordic Ops"]').locator('button:has-text("Remove")').click()]);
  check(await page.locator('li.group[data-group="Nordic Ops"]').count() === 0, 'the unused team is removed');
  await Promise.all([page.waitForNavigation(), page.locator('li.group[data-group="Auditor"]').locator('button:has-text("Remove")').click()]);
  check(await page.locator('li.group[data-group="Auditor"]').count() === 0, 'the unused role is removed');
  // The admin log has each change, as the API writes them.
  await page.goto(`${origin}/console/admin/logs?log=admin&resource=role`);
  const roleChanges = await page.$$eval('table.logs tbody tr', (rows) => rows.map((r) => r.textContent));
  check(roleChanges.some((t) => t.includes('Auditor')), `the admin log has the role's changes: ${roleChanges.length}`);

  // ----- add a chart ------------------------------------------------------------------------------
  await page.goto(`${origin}/console/c/orders/dashboard`);
  await Promise.all([page.waitForNavigation(), page.click('a:has-text("Add a chart")')]);
  check(page.url().includes('/console/admin/charts?dashboard=orders'), `the dashboard leads to the chart form: ${page.url()}`);
  check(await page.inputValue('#c-dashboard') === 'orders', 'for the orders dashboard');
  check(await page.isVisible('.empty:has-text("No chart added")'), 'no chart added yet, the page says what to do');
  // The preview draws as soon as the page opens (a count of orders), and follows the form.
  await page.waitForSelector('#chart-preview .chart-card svg, #chart-preview .chart-figure', { timeout: 10000 });
  await audit(page, 'admin-charts');
  // Bad input: no title, a target that is not a number; refused next to each, nothing added.
  await page.selectOption('#c-kind', 'objective');
  await page.waitForSelector('#c-objective');
  await page.fill('#c-objective', 'lots');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Add the chart")')]);
  check(/needs a title/.test(await page.textContent('#c-title-error')), 'a chart without a title is refused');
  check(/is a number/.test(await page.textContent('#c-objective-error')), 'a target that is not a number is refused');
  check(await page.getAttribute('#c-title', 'aria-invalid') === 'true', 'the title is marked invalid');
  check(await page.locator('table.added-charts').count() === 0, 'nothing was added');
  await audit(page, 'admin-charts-errors');
  // A distribution of orders by status, drawn live, then added.
  await page.fill('#c-title', 'Orders by status (added)');
  await page.selectOption('#c-kind', 'distribution');
  await page.waitForSelector('#c-group');
  await page.selectOption('#c-group', 'status');
  await page.waitForFunction(() => {
    const card = document.querySelector('#chart-preview .chart-card');
    return card && card.dataset.kind === 'distribution' && card.querySelector('svg') && /Orders by status \(added\)/.test(card.textContent);
  }, null, { timeout: 10000 });
  check(await page.inputValue('#c-title') === 'Orders by status (added)', 'the title typed survives the refresh');
  // The screenshot shows the drawing, below the form.
  await page.$eval('#chart-preview', (preview) => preview.scrollIntoView({ block: 'center' }));
  await shot(page, 'console-admin-chart');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Add the chart")')]);
  check(/added to its dashboard/.test(await page.textContent('.notice')), 'the chart is added');
  const addedRow = page.locator('table.added-charts tbody tr', { hasText: 'Orders by status (added)' });
  check((await addedRow.textContent()).includes('orders'), 'listed with its dashboard');
  await page.goto(`${origin}/console/c/orders/dashboard`);
  const addedCard = page.locator('li.chart-card', { hasText: 'Orders by status (added)' });
  check(await addedCard.count() === 1 && await addedCard.locator('svg').count() === 1, 'the orders dashboard draws it');
  // Removed: gone from the dashboard.
  await page.goto(`${origin}/console/admin/charts`);
  await Promise.all([page.waitForNavigation(), page.locator('table.added-charts tbody tr', { hasText: 'Orders by status (added)' }).locator('button:has-text("Remove")').click()]);
  check(/removed/.test(await page.textContent('.notice')), 'the chart is removed');
  await page.goto(`${origin}/console/c/orders/dashboard`);
  check(await page.locator('li.chart-card', { hasText: 'Orders by status (added)' }).count() === 0, 'and gone from the dashboard');
  // A chart of the home dashboard: added, drawn on the home page, removed from it.
  await page.goto(`${origin}/console/admin/charts`);
  await page.selectOption('#c-dashboard', '');
  await page.fill('#c-title', 'Customers (added to home)');
  await page.selectOption('#c-kind', 'value');
  await page.waitForTimeout(600);
  await page.selectOption('#c-collection', 'customers');
  await page.waitForTimeout(600);
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Add the chart")')]);
  check(/added to its dashboard/.test(await page.textContent('.notice')), `the home chart is added: ${await page.textContent('main')}`);
  check((await page.locator('table.added-charts tbody tr', { hasText: 'Customers (added to home)' }).textContent()).includes('Home'), 'listed on the home dashboard');
  await page.goto(`${origin}/console/`);
  check(await page.locator('li.chart-card', { hasText: 'Customers (added to home)' }).count() === 1, 'the home dashboard draws it');
  await page.goto(`${origin}/console/admin/charts`);
  await Promise.all([page.waitForNavigation(), page.locator('table.added-charts tbody tr', { hasText: 'Customers (added to home)' }).locator('button:has-text("Remove")').click()]);
  check(/removed/.test(await page.textContent('.notice')), 'the home chart is removed');
  await page.goto(`${origin}/console/`);
  check(await page.locator('li.chart-card', { hasText: 'Customers (added to home)' }).count() === 0, 'and gone from the home dashboard');

  // ----- no-code actions (the demo runs with both experimental switches on) -------------------
  await page.goto(`${origin}/console/admin/actions`);
  check(await page.isVisible('.empty:has-text("No no-code action yet")'), 'no action yet, the page says what to do');
  await audit(page, 'admin-no-code');
  // A value of the wrong type is refused, naming the field; what was typed stays; nothing added.
  await page.selectOption('#n-collection', 'orders');
  await page.fill('#n-name', 'Mark as shipped');
  await page.selectOption('#n-type', 'update-record');
  await page.selectOption('#n-scope', 'bulk');
  await page.fill('#n-fields', 'total = lots');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Add the action")')]);
  check(/wrong type for "total"/.test(await page.textContent('[role=alert]')), `a wrong value is refused: ${await page.textContent('main')}`);
  check(await page.inputValue('#n-name') === 'Mark as shipped', 'the name typed stays');
  check(await page.locator('table.no-code-actions').count() === 0, 'nothing was added');
  await audit(page, 'admin-no-code-error');
  await page.fill('#n-fields', 'status = shipped');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Add the action")')]);
  check(/Added/.test(await page.textContent('.notice')), `the action is added: ${await page.textContent('main')}`);
  const noCodeRow = page.locator('table.no-code-actions tbody tr', { hasText: 'Mark as shipped' });
  check((await noCodeRow.textContent()).includes('status = "shipped"'), 'listed with what it sets');
  // Served at once: in an order's actions, and it writes when run.
  await page.goto(`${origin}/console/c/orders`);
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child a:text-is("Open")')]);
  await Promise.all([page.waitForNavigation(), page.click('.actions-bar a:text-is("Mark as shipped")')]);
  await Promise.all([page.waitForNavigation(), page.click('main form button[type=submit]')]);
  check(/Success/.test(await page.textContent('main')), `the action ran: ${await page.textContent('main')}`);
  // Removed: gone from the list and from the orders' actions.
  await page.goto(`${origin}/console/admin/actions`);
  await Promise.all([page.waitForNavigation(), page.locator('table.no-code-actions tbody tr', { hasText: 'Mark as shipped' }).locator('button:has-text("Remove")').click()]);
  check(/Removed/.test(await page.textContent('.notice')), 'the action is removed');
  await page.goto(`${origin}/console/c/orders`);
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child a:text-is("Open")')]);
  check(await page.locator('.actions-bar a:text-is("Mark as shipped")').count() === 0, 'and gone from the orders');

  // ----- workflows -----------------------------------------------------------------------------
  await page.goto(`${origin}/console/admin/workflows`);
  check(page.url().endsWith('/console/admin/workflows'), `the workflows tab: ${page.url()}`);
  const hook = page.locator('li.workflow', { hasText: 'refund' });
  check(await hook.count() === 1, 'the demo has a workflow');
  const oldUrl = await hook.locator('input.secret-value').inputValue();
  check(/\/workflow-hooks\//.test(oldUrl), `its webhook URL: ${oldUrl.replace(/hooks\/.*/, 'hooks/…')}`);
  await audit(page, 'admin-workflows');
  await Promise.all([page.waitForNavigation(), hook.locator('button:has-text("Disable")').click()]);
  check(/disabled/.test(await page.textContent('.notice')), 'the webhook is disabled');
  await Promise.all([page.waitForNavigation(), page.locator('li.workflow', { hasText: 'refund' }).locator('button:has-text("Enable")').click()]);
  check(/enabled/.test(await page.textContent('.notice')), 'and enabled again');
  await Promise.all([page.waitForNavigation(), page.locator('li.workflow', { hasText: 'refund' }).locator('button:has-text("Regenerate")').click()]);
  const newUrl = await page.locator('li.workflow', { hasText: 'refund' }).locator('input.secret-value').inputValue();
  check(newUrl !== oldUrl, 'regenerating gives a new URL');
  const stale = await page.request.post(oldUrl, { data: {} });
  check(stale.status() >= 400, `the old URL is refused: ${stale.status()}`);

  // ----- plugins --------------------------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Plugins")')]);
  const plugins = await page.$$eval('table.plugins tbody tr', (rows) => rows.map((r) => r.textContent));
  check(plugins.some((t) => /shop/.test(t)), `the demo's plugin is listed: ${plugins}`);
  check(plugins.some((t) => /shop.*rust/.test(t)), `the demo's plugin is listed with its language: ${plugins}`);
  await audit(page, 'admin-plugins');
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Reload the plugins")')]);
  check(/Reloaded: \d+ plugin/.test(await page.textContent('.notice')), 'the plugins are reloaded');

  // ----- logs ----------------------------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Logs")')]);
  await audit(page, 'admin-logs');
  // The admin log has the token made and revoked above.
  await Promise.all([page.waitForNavigation(), page.click('nav[aria-label="Which log"] a:has-text("Administration changes")')]);
  await page.selectOption('#l-resource', 'token');
  await page.fill('#l-user', 'admin@canopy.local');
  await Promise.all([page.waitForNavigation(), page.click('.log-filters button[type=submit]')]);
  check(page.url().includes('resource=token'), `the filter is in the URL: ${page.url()}`);
  const tokenChanges = await page.$$eval('table.logs tbody tr', (rows) => rows.map((r) => r.textContent));
  check(tokenChanges.some((t) => t.includes('ci-script')), `the admin log names the token: ${tokenChanges}`);
  check(tokenChanges.every((t) => t.includes('token')), 'only token changes');
  check(!(await page.content()).includes(secret), 'never its secret');
  await audit(page, 'admin-logs-filtered');
  // The activity log, filtered by user and collection; a bad date range is refused.
  await page.goto(`${origin}/console/admin/logs?log=activity&user=admin%40canopy.local&from=2030-01-02&to=2030-01-01`);
  check(/start date is after/.test(await page.textContent('[role=alert]')), 'a reversed range is refused');
  await page.goto(`${origin}/console/admin/logs?log=activity&user=nobody%40canopy.local`);
  check(await page.isVisible('.empty:has-text("No entry matches")'), 'an empty result says what to do');

  // ----- phone width: every administration page fits 390 px -------------------------------------
  const phone = await newPage(browser, { viewport: { width: 390, height: 844 }, isMobile: true });
  await signIn(phone, 'admin@canopy.local', 'canopy-demo-admin');
  const supportId = await page.evaluate(async (base) => {
    const html = await (await fetch(`${base}/console/admin/permissions`)).text();
    const match = /<option value="(\d+)"[^>]*>Support<\/option>/.exec(html);
    return match && match[1];
  }, origin);
  check(supportId, 'the role Support has an id');
  const shippingId = await page.evaluate(async (base) => {
    const html = await (await fetch(`${base}/console/admin/permissions`)).text();
    const match = /<option value="(\d+)"[^>]*>Shipping<\/option>/.exec(html);
    return match && match[1];
  }, origin);
  check(shippingId, 'the team Shipping has an id');
  const phonePages = [
    ['tokens', '/console/admin/tokens'],
    ['users', '/console/admin/users'],
    ['user-new', '/console/admin/users/new'],
    ['groups', '/console/admin/groups'],
    ['permissions', `/console/admin/permissions?role=${supportId}`],
    ['charts', '/console/admin/charts'],
    ['no-code', '/console/admin/actions'],
    ['action-rights', `/console/admin/permissions/${supportId}/actions/customers/Mark%20as%20VIP`],
    ['scope', `/console/admin/scopes?team=${shippingId}&collection=orders`],
    ['workflows', '/console/admin/workflows'],
    ['plugins', '/console/admin/plugins'],
    ['logs', '/console/admin/logs'],
  ];
  for (const [name, path] of phonePages) {
    const answer = await phone.goto(`${origin}${path}`);
    check(answer.status() === 200, `${path} at 390 px: ${answer.status()}`);
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `no sideways scroll on ${path} at 390 px: ${overflow}`);
    await audit(phone, `admin-phone-${name}`);
  }
  // The scope of Shipping reads back as rows: status in paid, shipped.
  await phone.goto(`${origin}/console/admin/scopes?team=${shippingId}&collection=orders`);
  check(await phone.inputValue('#sc-v-1') === 'paid, shipped', 'the demo scope shows as a row');
  await shot(phone, 'console-admin-phone-scope');
  await phone.goto(`${origin}/console/admin/users`);
  await shot(phone, 'console-admin-phone-users');
  await phone.goto(`${origin}/console/admin/permissions?role=${supportId}`);
  await shot(phone, 'console-admin-phone-permissions');
  check(phone.cspErrors.length === 0, `no CSP violation at 390 px: ${phone.cspErrors}`);
  await phone.context().close();

  // ----- the editor: no administration ------------------------------------------------
  await signOut(page);
  await signIn(page, 'editor@canopy.local', 'canopy-demo-editor');
  check(await page.locator('nav.side a', { hasText: 'Administration' }).count() === 0, 'no Administration place for the editor');
  for (const path of ['/console/admin/tokens', '/console/admin/users', '/console/admin/users/1', '/console/admin/users/new', '/console/admin/users/1/remove', '/console/admin/groups', '/console/admin/scopes?team=1&collection=orders', '/console/admin/charts', '/console/admin/actions', '/console/admin/permissions', '/console/admin/workflows', '/console/admin/logs', '/console/admin/plugins']) {
    const answer = await page.goto(`${origin}${path}`);
    check(answer.status() === 403, `${path} is refused to the editor: ${answer.status()}`);
    check(/do not have the right/.test(await page.textContent('[role=alert]')), `${path} says why`);
  }
  await audit(page, 'admin-forbidden');
  // Their own tokens, as the API allows them.
  await page.goto(`${origin}/console/tokens`);
  check(await page.isVisible('h1:has-text("My tokens")'), 'the editor has My tokens');
  await page.fill('#t-name', 'my-script');
  await page.check('input[name=scope][value="notes:read"]');
  await Promise.all([page.waitForNavigation(), page.click('form.stack button[type=submit]')]);
  check((await page.inputValue('#secret')).startsWith('cnp_'), 'the editor made a token');
  check(await page.locator('table.tokens tbody tr', { hasText: 'my-script' }).count() === 1, 'and sees it listed');
  check(await page.locator('table.tokens thead th', { hasText: 'Owner' }).count() === 0, 'only their own');
  await audit(page, 'my-tokens');

  check(page.cspErrors.length === 0, `no CSP violation: ${page.cspErrors}`);
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
