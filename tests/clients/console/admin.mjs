// The console's administration in a real browser, for host/tests/console_browser.rs
// (`console_administration_in_chromium`), against `canopy demo`:
//
//   node admin.mjs <origin> <screenshotDir>
//
// As the admin: the "Administration" place; a token form refused field by field, then a token
// made (its secret shown once, working against /v1 as a Bearer), then only its name listed;
// its revocation after a confirmation, after which /v1 refuses it; the users list, a user's
// role changed, and a role that does not exist refused next to the field. As the editor: no
// "Administration" place, the 403 page for every administration URL typed, and their own
// tokens. axe-core on every page; screenshots for the README.
import {
  origin, seen, check, audit, shot, signIn, signOut, launch, newPage,
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

  // ----- workflows -----------------------------------------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('.admin-tabs a:has-text("Workflows")')]);
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

  // ----- the editor: no administration ------------------------------------------------
  await signOut(page);
  await signIn(page, 'editor@canopy.local', 'canopy-demo-editor');
  check(await page.locator('nav.side a', { hasText: 'Administration' }).count() === 0, 'no Administration place for the editor');
  for (const path of ['/console/admin/tokens', '/console/admin/users', '/console/admin/users/1', '/console/admin/permissions', '/console/admin/workflows', '/console/admin/logs', '/console/admin/plugins']) {
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
