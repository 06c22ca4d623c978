// The Canopy console's one script. Every page works without it; it only refines forms:
// the browser's timezone at sign-in, and the filter builder (operators of the chosen field,
// no value box for operators that take none).
'use strict';

const NO_VALUE = new Set(['present', 'blank', 'missing', 'future', 'past', 'today', 'yesterday',
  'previous_month', 'previous_month_to_date', 'previous_quarter', 'previous_quarter_to_date',
  'previous_week', 'previous_week_to_date', 'previous_year', 'previous_year_to_date']);

function timezone() {
  const input = document.querySelector('input[data-timezone]');
  if (!input) return;
  try {
    input.value = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch (_) {
    input.value = 'UTC';
  }
}

function refreshRow(row) {
  const field = row.querySelector('[data-filter-field]');
  const operator = row.querySelector('[data-filter-operator]');
  const value = row.querySelector('[data-filter-value]');
  if (!field || !operator || !value) return;
  const chosen = field.options[field.selectedIndex];
  const allowed = new Set((chosen && chosen.dataset.operators || '').split(' ').filter(Boolean));
  let firstAllowed = null;
  for (const option of operator.options) {
    const ok = allowed.size === 0 || allowed.has(option.value);
    option.hidden = !ok;
    option.disabled = !ok;
    if (ok && firstAllowed === null) firstAllowed = option;
  }
  if (operator.selectedOptions[0] && operator.selectedOptions[0].disabled && firstAllowed) {
    operator.value = firstAllowed.value;
  }
  const needsValue = !NO_VALUE.has(operator.value);
  value.disabled = !needsValue;
  const label = row.querySelector('label[for="' + value.id + '"]');
  value.hidden = !needsValue;
  if (label) label.hidden = !needsValue;
}

function filters() {
  for (const row of document.querySelectorAll('.filter-row')) {
    refreshRow(row);
    row.addEventListener('change', () => refreshRow(row));
  }
}

document.addEventListener('DOMContentLoaded', () => {
  timezone();
  filters();
  actionForm();
  webhookCall();
});

/* ----- actions ----- */
// An action's form follows its change hooks as the user types: the form is posted (URL-encoded,
// with its CSRF token) to the console's `…/form` route, debounced, and the fields the server
// renders replace these; the focused field keeps its focus and what is being typed. A file is
// read into a data URI (`data:<mime>;name=<name>;base64,…`) in the hidden input the form posts.
function actionForm() {
  const form = document.querySelector('form[data-action-form]');
  if (!form) return;
  const fields = form.querySelector('#action-fields');
  const changed = form.querySelector('[data-changed]');
  const button = form.querySelector('[data-refresh-button]');
  if (button) button.hidden = true;
  const pages = actionPages(form, fields);
  let timer = null;
  let sequence = 0;
  let last = '';
  const fieldOf = (element) => {
    const field = element.closest('[data-field]');
    return field ? field.dataset.field : '';
  };
  const control = (field) => {
    for (const box of fields.querySelectorAll('[data-field]')) {
      if (box.dataset.field === field) return box.querySelector('input:not([type=hidden]), select, textarea');
    }
    return null;
  };
  const readOne = (file) => new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      const comma = url.indexOf(',');
      const mime = url.slice(5, comma).replace(/;base64$/, '') || file.type || 'application/octet-stream';
      resolve(`data:${mime};name=${encodeURIComponent(file.name)};base64,${url.slice(comma + 1)}`);
    };
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
  // `sequence` counts the user's changes, not the requests: an answer is applied only if
  // nothing was typed or chosen since its request was sent. Counting requests let the answer of
  // a refresh already in flight overwrite a choice made during the next one's debounce (a kind
  // chosen right after typing an amount came back as the old kind).
  const refresh = async () => {
    const mine = sequence;
    changed.value = last;
    const text = await postForm(form, form.dataset.refresh, () => mine === sequence);
    if (text === null) return;
    const active = document.activeElement;
    const focused = active && fields.contains(active) ? fieldOf(active) : null;
    const typed = focused !== null && active.type !== 'file' ? active.value : null;
    fields.innerHTML = text;
    pages.apply(false);
    if (focused !== null) {
      const again = control(focused);
      if (again) {
        if (typed !== null && again.value !== typed) again.value = typed;
        again.focus();
      }
    }
    form.dataset.refreshed = String(mine);
  };
  const schedule = (element) => {
    last = fieldOf(element);
    sequence += 1;
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  };
  const files = async (input) => {
    const hidden = document.getElementById(input.dataset.fileFor);
    if (!hidden) return;
    const uris = await Promise.all(Array.from(input.files).map(readOne));
    hidden.value = input.multiple ? JSON.stringify(uris) : (uris[0] || '');
    schedule(input);
  };
  const typedIn = (event) => {
    const target = event.target;
    if (!fields.contains(target)) return;
    if (target.type === 'file') {
      if (event.type === 'change') files(target);
      return;
    }
    schedule(target);
  };
  form.addEventListener('input', typedIn);
  form.addEventListener('change', typedIn);
}

// A form of pages (the agent's `Page` layout) shows one page at a time: Next checks the page's
// required fields first, Back keeps what was typed (every page stays in the form, hidden, so the
// form posts every value and the server checks them all). The run button shows on the last page;
// Enter on an earlier page goes to the next one. After the server refused a value, the first
// page with a message opens.
function actionPages(form, fields) {
  let current = 1;
  const all = () => Array.from(fields.querySelectorAll('section.form-page'));
  const run = form.querySelector('button[name=run]');
  const clear = (page) => {
    for (const error of page.querySelectorAll('[data-client-error]')) error.remove();
    for (const box of page.querySelectorAll('.field[data-client-invalid]')) {
      box.classList.remove('invalid');
      delete box.dataset.clientInvalid;
      for (const control of box.querySelectorAll('[aria-invalid]')) {
        control.removeAttribute('aria-invalid');
        control.removeAttribute('aria-describedby');
      }
    }
  };
  // The required fields of `page` left empty get a message; answers the first one's control.
  const check = (page) => {
    clear(page);
    let first = null;
    for (const box of page.querySelectorAll('.field[data-field]')) {
      if (!box.querySelector('.required')) continue;
      const inputs = Array.from(box.querySelectorAll('[name]'))
        .filter((i) => i.name === `v:${box.dataset.field}`);
      const filled = inputs.some((i) => (i.type === 'checkbox' ? i.checked : i.value.trim() !== ''));
      if (filled) continue;
      const control = box.querySelector('input:not([type=hidden]), select, textarea, fieldset');
      const label = box.querySelector('label, legend');
      const message = document.createElement('span');
      message.className = 'field-error';
      message.dataset.clientError = '';
      message.id = `ce-${box.dataset.field.replace(/[^A-Za-z0-9_-]/g, '_')}`;
      const name = label ? label.firstChild.textContent.trim() : box.dataset.field;
      message.textContent = `${name} is required.`;
      box.appendChild(message);
      box.classList.add('invalid');
      box.dataset.clientInvalid = '';
      if (control) {
        control.setAttribute('aria-invalid', 'true');
        control.setAttribute('aria-describedby', message.id);
      }
      if (!first) first = control;
    }
    return first;
  };
  const show = (focus) => {
    const list = all();
    if (list.length === 0) return;
    current = Math.min(Math.max(current, 1), list.length);
    list.forEach((page, i) => {
      page.hidden = i + 1 !== current;
      const buttons = page.querySelector('[data-page-buttons]');
      if (buttons) buttons.hidden = false;
    });
    if (run) run.hidden = current !== list.length;
    form.dataset.page = String(current);
    if (focus) {
      const heading = list[current - 1].querySelector('.form-step');
      if (heading) heading.focus();
    }
  };
  const next = () => {
    const list = all();
    const page = list[current - 1];
    if (!page) return;
    const invalid = check(page);
    if (invalid) {
      invalid.focus();
      return;
    }
    current += 1;
    show(true);
  };
  fields.addEventListener('click', (event) => {
    const target = event.target.closest && event.target.closest('[data-page-next], [data-page-back]');
    if (!target) return;
    if (target.matches('[data-page-next]')) {
      next();
    } else {
      current -= 1;
      show(true);
    }
  });
  form.addEventListener('submit', (event) => {
    const list = all();
    if (list.length > 1 && current < list.length && !(event.submitter && event.submitter.name === 'refresh')) {
      event.preventDefault();
      next();
    }
  });
  const list = all();
  const refused = list.findIndex((page) => page.querySelector('.field.invalid'));
  if (refused >= 0) current = refused + 1;
  show(false);
  return { apply: (focus) => show(focus) };
}
/* ----- admin ----- */
// A button[data-copy=<input id>] copies that input's value (a new token's secret); without the
// script the input stays selectable by hand.
document.addEventListener('click', async (event) => {
  const button = event.target.closest && event.target.closest('button[data-copy]');
  if (!button) return;
  const input = document.getElementById(button.dataset.copy);
  if (!input) return;
  input.select();
  try {
    await navigator.clipboard.writeText(input.value);
  } catch (_) {
    document.execCommand('copy');
  }
  const done = button.parentElement.querySelector('[data-copied]');
  if (done) done.hidden = false;
});
/* ----- admin: add a chart ----- */
// The chart form refreshes its fields and preview as the admin types: the form is posted
// (URL-encoded, with its CSRF token) to its `data-preview` route, debounced, and the server's
// fields and drawing replace these; the focused control keeps its focus and what is typed. The
// "Preview" button does the same without the script. The page comes with its first preview.
function chartForm() {
  const form = document.querySelector('form[data-chart-form]');
  if (!form) return;
  const editor = form.querySelector('#chart-editor');
  const button = form.querySelector('[data-preview-button]');
  if (button) button.hidden = true;
  let timer = null;
  let sequence = 0;
  // As the action form's: an answer is applied only if nothing changed since its request.
  const refresh = async () => {
    const mine = sequence;
    const text = await postForm(form, form.dataset.preview, () => mine === sequence, 'do');
    if (text === null) return;
    const active = document.activeElement;
    const focused = active && editor.contains(active) ? active.id : null;
    const typed = focused && active.tagName === 'INPUT' && active.type !== 'checkbox' ? active.value : null;
    editor.innerHTML = text;
    refreshFilterRows(editor);
    if (focused) {
      const again = document.getElementById(focused);
      if (again) {
        if (typed !== null && again.value !== typed) again.value = typed;
        again.focus();
      }
    }
    form.dataset.refreshed = String(mine);
  };
  const schedule = () => {
    sequence += 1;
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  };
  form.addEventListener('input', (event) => { if (editor.contains(event.target)) schedule(); });
  form.addEventListener('change', (event) => { if (editor.contains(event.target)) schedule(); });
}

function refreshFilterRows(root) {
  for (const row of root.querySelectorAll('.filter-row')) {
    refreshRow(row);
    row.addEventListener('change', () => refreshRow(row));
  }
}

document.addEventListener('DOMContentLoaded', chartForm);

/* ----- an action's webhook result ----- */
// The browser calls the webhook an action answered, as Forest's UI does (the page's CSP lets it
// connect to that one origin), and says what came back: the status, or why the call failed.
function webhookCall() {
  const box = document.querySelector('[data-webhook]');
  if (!box) return;
  const outcome = box.querySelector('#webhook-outcome');
  const again = box.querySelector('[data-webhook-again]');
  const say = (text, failed) => {
    outcome.textContent = text;
    outcome.classList.toggle('error', failed);
    outcome.dataset.done = failed ? 'failed' : 'ok';
  };
  const call = async () => {
    const method = (box.dataset.method || 'POST').toUpperCase();
    const options = { method, mode: 'cors', credentials: 'omit', redirect: 'follow' };
    try {
      options.headers = new Headers(JSON.parse(box.dataset.headers || '{}'));
    } catch (_) {
      say('Not called: the action gave headers the browser cannot send.', true);
      return;
    }
    if (box.dataset.body && method !== 'GET' && method !== 'HEAD') options.body = box.dataset.body;
    say(`Calling ${box.dataset.url} …`, false);
    delete outcome.dataset.done;
    if (again) again.hidden = true;
    try {
      const response = await fetch(box.dataset.url, options);
      const status = `${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
      if (response.ok) {
        say(`Called: the service answered ${status}.`, false);
      } else {
        say(`The service refused the call: it answered ${status}.`, true);
      }
    } catch (_) {
      say('The call failed: the service could not be reached, or it does not let this console call '
        + `it (CORS: it must answer with Access-Control-Allow-Origin: ${window.location.origin}).`, true);
    }
    if (again) again.hidden = false;
  };
  if (again) again.addEventListener('click', call);
  call();
}
/* ----- data: select the page, then every matching record ----- */
// The table's header checkbox (hidden without the script) checks every row of the page; once
// they all are, the "Select all N matching records" link shows (the server renders the
// selection of the whole query at that link, so the selection works without the script too).
document.addEventListener('DOMContentLoaded', () => {
  const form = document.getElementById('bulk');
  if (!form) return;
  const page = form.querySelector('input[data-select-page]');
  const boxes = Array.from(form.querySelectorAll('tbody input[type=checkbox][name=id]'));
  const banner = form.querySelector('[data-select-all]');
  if (!page || boxes.length === 0) return;
  page.hidden = false;
  const sync = () => {
    const checked = boxes.filter((box) => box.checked).length;
    page.checked = checked === boxes.length;
    page.indeterminate = checked > 0 && checked < boxes.length;
    if (banner) banner.hidden = !page.checked;
  };
  page.addEventListener('change', () => {
    for (const box of boxes) box.checked = page.checked;
    sync();
  });
  for (const box of boxes) box.addEventListener('change', sync);
  sync();
});

// Posts a form's text fields (all but `skip`) to `url`, a live refresh or preview of part of
// the page, and returns the answer's HTML; null when the request failed or a newer one started
// meanwhile (`isLatest`), so that a slow answer never overwrites what the user typed since.
async function postForm(form, url, isLatest, skip) {
  const body = new URLSearchParams();
  for (const [key, value] of new FormData(form)) {
    if (typeof value === 'string' && key !== skip) body.append(key, value);
  }
  let response;
  try {
    response = await fetch(url, {
      method: 'POST', body, credentials: 'same-origin',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
  } catch (_) {
    return null;
  }
  if (!response.ok || !isLatest()) return null;
  const text = await response.text();
  return isLatest() ? text : null;
}
