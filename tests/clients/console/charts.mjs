// Dashboards in a real browser, for host/tests/console_browser.rs (console_charts_in_chromium),
// against `canopy demo` and its dashboards (examples/shop/dashboard.toml):
//
//   node charts.mjs <origin> <screenshotDir>
//
// The admin signs in and lands on the home dashboard: one card per chart kind, each drawn as SVG
// with the seed's figures (5,000 orders, 1,000 per status), the value and the leaderboard equal
// to what `POST /forest/stats/{c}` answers for the same chart; the collection cards stay below.
// The orders table links its dashboard; a customer's page draws the plugin's `lifetime_value`;
// on a cancelled order the plugin's `items_ordered` fails and its message takes its place while
// the rest of the page is drawn (a paid order's is drawn).
// In another timezone the weekly chart buckets differently, as the wire does for that timezone.
// The viewer (below editor) sees only the charts their team lists; the editor sees their scope's
// figures. axe-core on every dashboard page; screenshots console-dashboard and
// console-collection-dashboard.
import {
  origin, seen, check, audit, shot, signIn, signOut, launch, newPage,
} from './lib.mjs';

/// The cards of the page: title, kind, and what each draws.
async function cards(page) {
  return page.$$eval('li.chart-card', (items) => items.map((li) => ({
    id: li.id,
    title: li.querySelector('.chart-title').textContent.trim(),
    kind: li.dataset.kind,
    error: li.querySelector('[role=alert]')?.textContent.trim() || null,
    empty: li.querySelector('.chart-empty')?.textContent.trim() || null,
    svg: !!li.querySelector('svg[role=img] title'),
    value: li.querySelector('[data-value]')?.dataset.value ?? null,
    previous: li.querySelector('[data-previous]')?.dataset.previous ?? null,
    objective: li.querySelector('[data-objective]')?.dataset.objective ?? null,
    legend: [...li.querySelectorAll('.legend li')].map((l) => [l.dataset.key, Number(l.dataset.value)]),
    slices: li.querySelectorAll('svg .slice').length,
    bars: li.querySelectorAll('svg .bar').length,
    lines: li.querySelectorAll('svg .line').length,
    table: [...li.querySelectorAll('table.chart-figures tbody tr')].map((tr) => [...tr.children].map((c) => c.textContent.trim())),
  })));
}

function byTitle(list, title) {
  const card = list.find((c) => c.title === title);
  check(card, `a card "${title}" in ${JSON.stringify(list.map((c) => c.title))}`);
  check(!card.error, `"${title}" has no error: ${card.error}`);
  return card;
}

const figure = (text) => Number(text.replace(/[^0-9.-]/g, ''));

/// What the wire answers for a chart body, with the console's own session as the bearer.
async function wire(page, collection, body, timezone) {
  const cookies = await page.context().cookies();
  const token = cookies.find((c) => c.name === 'canopy_console').value;
  const answer = await page.request.post(`${origin}/forest/stats/${collection}?timezone=${encodeURIComponent(timezone)}`, {
    headers: { Authorization: `Bearer ${token}` }, data: body,
  });
  check(answer.ok(), `POST /forest/stats/${collection}: ${answer.status()} ${await answer.text()}`);
  return (await answer.json()).data.attributes.value;
}

const WEEKLY = { type: 'Line', sourceCollectionName: 'orders', aggregator: 'Count', groupByFieldName: 'ordered_at', timeRange: 'Week' };

const browser = await launch();
try {
  // ----- the admin's home dashboard ----------------------------------------------------------
  const page = await newPage(browser);
  await signIn(page, 'admin@canopy.local', 'canopy-demo-admin');
  check(page.url().endsWith('/console/'), `signed in to the dashboard: ${page.url()}`);
  check((await page.textContent('h1')).trim() === 'Dashboard', 'the home page is the dashboard');
  const home = await cards(page);
  seen.home = home.map((c) => `${c.kind}:${c.title}`);
  const kinds = new Set(home.map((c) => c.kind));
  for (const kind of ['value', 'objective', 'percentage', 'distribution', 'time-based', 'multiple-time-based', 'leaderboard', 'plugin']) {
    check(kinds.has(kind), `a ${kind} chart on the dashboard: ${[...kinds]}`);
  }
  for (const card of home) check(!card.error, `${card.title}: ${card.error}`);

  const revenue = byTitle(home, 'Revenue, last 24 months');
  const revenueWire = await wire(page, 'orders', {
    type: 'Value', sourceCollectionName: 'orders', aggregator: 'Sum', aggregateFieldName: 'total',
    filter: { field: 'ordered_at', operator: 'PreviousXDays', value: 730 },
  }, 'Europe/Paris');
  check(Number(revenue.value) === Number(revenueWire.countCurrent), `revenue ${revenue.value} = the wire's ${JSON.stringify(revenueWire)}`);
  check(Number(revenue.previous) === Number(revenueWire.countPrevious), `previous revenue ${revenue.previous} = the wire's`);
  const change = await page.textContent(`#${revenue.id} .chart-change`);
  check(/%|no figure/.test(change) && /previous period/.test(change), `the change since the previous period: ${change}`);

  const statuses = ['pending', 'paid', 'shipped', 'delivered', 'cancelled'];
  const byStatus = byTitle(home, 'Orders by status');
  check(byStatus.svg && byStatus.slices === 5, `a donut of 5 slices: ${byStatus.slices}`);
  check(statuses.every((s) => byStatus.legend.some(([k, v]) => k === s && v === 1000)), `1,000 orders per status: ${JSON.stringify(byStatus.legend)}`);
  const plugin = byTitle(home, 'Orders by status, from the shop plugin');
  check(plugin.slices === 5 && statuses.every((s) => plugin.legend.some(([k, v]) => k === s && v === 1000)), `the plugin's orders_by_status: ${JSON.stringify(plugin.legend)}`);

  const delivered = byTitle(home, 'Delivered orders');
  check(delivered.svg && Number(delivered.value) === 20, `20% of the orders are delivered: ${delivered.value}`);
  const objective = byTitle(home, 'Deliveries toward 1,500');
  check(objective.svg && Number(objective.value) === 1000 && Number(objective.objective) === 1500, `1,000 of 1,500: ${objective.value}/${objective.objective}`);
  check((await page.getAttribute(`#${objective.id} svg rect.fill`, 'width')) === '200', 'the bar is two thirds full');

  const weekly = byTitle(home, 'Orders per week');
  check(weekly.svg && weekly.bars === weekly.table.length && weekly.bars > 70, `one bar per week: ${weekly.bars} bars, ${weekly.table.length} rows`);
  check(weekly.table.reduce((sum, row) => sum + figure(row[1]), 0) === 5000, 'the weeks hold the 5,000 orders');
  const weeklyWire = await wire(page, 'orders', WEEKLY, 'Europe/Paris');
  check(JSON.stringify(weekly.table.map((r) => [r[0], figure(r[1])])) === JSON.stringify(weeklyWire.map((p) => [p.label, p.values.value])), 'the weeks are the wire\'s');

  const monthly = byTitle(home, 'Paid and cancelled orders per month');
  check(monthly.lines === 2, `two lines: ${monthly.lines}`);
  check(JSON.stringify(monthly.legend) === JSON.stringify([['paid', 1000], ['cancelled', 1000]]), `1,000 paid and 1,000 cancelled: ${JSON.stringify(monthly.legend)}`);
  check(monthly.table.length >= 17 && monthly.table[0][0] === 'Jan 24', `one row per month from Jan 24: ${monthly.table.map((r) => r[0])}`);

  const top = byTitle(home, 'Top customers');
  const topWire = await wire(page, 'customers', {
    type: 'Leaderboard', sourceCollectionName: 'customers', aggregator: 'Sum', aggregateFieldName: 'total',
    relationshipFieldName: 'orders', labelFieldName: 'email', limit: 5,
  }, 'Europe/Paris');
  check(top.table.length === 5 && top.bars === 5, `5 bars: ${top.bars}`);
  check(JSON.stringify(top.table.map((r) => [r[0], figure(r[1])])) === JSON.stringify(topWire.map((r) => [r.key, Math.round(r.value * 100) / 100])), `the leaderboard is the wire's: ${JSON.stringify(top.table)} vs ${JSON.stringify(topWire)}`);
  // The collection cards stay below the charts.
  check(await page.isVisible('ul.cards a.card:text-is("orders")'), 'the collection cards are below');
  await audit(page, 'dashboard');
  await shot(page, 'console-dashboard');

  // ----- a collection's dashboard, from its table ------------------------------------------
  await Promise.all([page.waitForNavigation(), page.click('nav.side a:text-is("orders")')]);
  await Promise.all([page.waitForNavigation(), page.click('nav.tabs a:text-is("Dashboard")')]);
  check(page.url().endsWith('/console/c/orders/dashboard'), `the orders dashboard: ${page.url()}`);
  const orders = await cards(page);
  seen.orders = orders.map((c) => `${c.kind}:${c.title}`);
  check(orders.length === 3, `three charts on the orders dashboard: ${seen.orders}`);
  check(Number(byTitle(orders, 'Shipped among paid orders').value) === 100 / 3 || Math.abs(Number(byTitle(orders, 'Shipped among paid orders').value) - 33.333) < 0.01, 'a third of the paid orders are shipped');
  const perMonth = byTitle(orders, 'Revenue per month');
  check(perMonth.lines === 1 && perMonth.table.length >= 17, `one line of months: ${perMonth.table.length}`);
  await audit(page, 'collection-dashboard');
  await shot(page, 'console-collection-dashboard');
  // A collection without charts has no dashboard tab.
  await Promise.all([page.waitForNavigation(), page.click('nav.side a:text-is("products")')]);
  check(!(await page.isVisible('nav.tabs a:text-is("Dashboard")')), 'no dashboard tab on products');

  // ----- a plugin chart on a record ---------------------------------------------------------
  await page.goto(`${origin}/console/c/customers/r/1`);
  const record = await cards(page);
  const lifetime = byTitle(record, 'Lifetime value');
  const lifetimeWire = await page.request.get(`${origin}/forest/_charts/customers/lifetime_value?record_id=1&timezone=Europe/Paris`, {
    headers: { Authorization: `Bearer ${(await page.context().cookies()).find((c) => c.name === 'canopy_console').value}` },
  });
  check(lifetimeWire.ok(), `GET lifetime_value: ${lifetimeWire.status()}`);
  const lifetimeValue = (await lifetimeWire.json()).countCurrent;
  check(lifetimeValue > 0 && Math.abs(Number(lifetime.value) - lifetimeValue) < 0.005, `customer 1's lifetime value ${lifetime.value} = ${lifetimeValue}`);
  await audit(page, 'record-chart');

  // ----- a chart that fails: its message in its place, the rest of the page drawn ------------
  await page.goto(`${origin}/console/c/orders?ff=status&fo=equal&fv=cancelled`);
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child a:text-is("Open")')]);
  const failed = (await cards(page)).find((c) => c.title === 'Items ordered') || {};
  check(/This order is cancelled: its items went back to stock/.test(failed.error || ''), `the failing chart's message: ${JSON.stringify(failed)}`);
  check(!failed.svg && failed.value === null, 'no figure in place of the failed chart');
  check((await page.$$('dl.fields div')).length > 3, 'the record\'s fields are drawn');
  check(await page.isVisible('section.collab'), 'the rest of the page is drawn');
  await audit(page, 'record-chart-failed');
  seen.failedChart = failed.error;
  await page.goto(`${origin}/console/c/orders?ff=status&fo=equal&fv=paid`);
  await Promise.all([page.waitForNavigation(), page.click('table tbody tr:first-child a:text-is("Open")')]);
  const items = byTitle(await cards(page), 'Items ordered');
  check(items.error === null && Number(items.value) > 0, `a paid order's items are counted: ${JSON.stringify(items)}`);
  check(page.cspErrors.length === 0, `no CSP violation: ${page.cspErrors}`);
  await signOut(page);

  // ----- another timezone --------------------------------------------------------------------
  const far = await newPage(browser, { timezoneId: 'Pacific/Kiritimati' });
  await signIn(far, 'admin@canopy.local', 'canopy-demo-admin');
  check((await far.textContent('main .hint')).includes('Pacific/Kiritimati'), 'dates in the user\'s timezone');
  const farWeekly = byTitle(await cards(far), 'Orders per week');
  const farWire = await wire(far, 'orders', WEEKLY, 'Pacific/Kiritimati');
  check(JSON.stringify(farWeekly.table.map((r) => [r[0], figure(r[1])])) === JSON.stringify(farWire.map((p) => [p.label, p.values.value])), 'the weeks are the wire\'s in that timezone');
  check(JSON.stringify(farWeekly.table) !== JSON.stringify(weekly.table), 'UTC+14 puts some orders in another week than Paris');
  check(far.cspErrors.length === 0, `no CSP violation: ${far.cspErrors}`);
  await signOut(far);

  // ----- the viewer sees only their team's charts; the editor their scope's figures -----------
  const viewer = await newPage(browser);
  await signIn(viewer, 'viewer@canopy.local', 'canopy-demo-viewer');
  const viewed = await cards(viewer);
  seen.viewer = viewed.map((c) => c.title);
  check(JSON.stringify(seen.viewer) === JSON.stringify(['Revenue, last 24 months', 'Orders by status', 'Orders by status, from the shop plugin']), `the viewer's charts: ${seen.viewer}`);
  check(viewed.length < home.length, 'fewer charts than the admin');
  check(byTitle(viewed, 'Orders by status').slices === 5, 'the viewer\'s chart is drawn');
  await audit(viewer, 'viewer-dashboard');
  await viewer.goto(`${origin}/console/c/customers/dashboard`);
  check((await viewer.textContent('main')).includes('None of this dashboard\'s charts is open to you'), 'the viewer is told why the customers dashboard is empty');
  check(viewer.cspErrors.length === 0, `no CSP violation: ${viewer.cspErrors}`);
  await signOut(viewer);

  const editor = await newPage(browser);
  await signIn(editor, 'editor@canopy.local', 'canopy-demo-editor');
  const edited = await cards(editor);
  const scoped = byTitle(edited, 'Orders by status');
  check(JSON.stringify(scoped.legend) === JSON.stringify([['paid', 1000], ['shipped', 1000]]) || JSON.stringify(scoped.legend) === JSON.stringify([['shipped', 1000], ['paid', 1000]]), `the editor's team sees paid and shipped orders only: ${JSON.stringify(scoped.legend)}`);
  check(Number(byTitle(edited, 'Delivered orders').value) === 0, 'no delivered order in the editor\'s scope');
  check(editor.cspErrors.length === 0, `no CSP violation: ${editor.cspErrors}`);
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
