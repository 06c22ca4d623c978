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
  const refresh = async () => {
    const mine = ++sequence;
    changed.value = last;
    const body = new URLSearchParams();
    for (const [key, value] of new FormData(form)) {
      if (typeof value === 'string') body.append(key, value);
    }
    let response;
    try {
      response = await fetch(form.dataset.refresh, {
        method: 'POST', body, credentials: 'same-origin',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      });
    } catch (_) {
      return;
    }
    if (!response.ok || mine !== sequence) return;
    const text = await response.text();
    if (mine !== sequence) return;
    const active = document.activeElement;
    const focused = active && fields.contains(active) ? fieldOf(active) : null;
    const typed = focused !== null && active.type !== 'file' ? active.value : null;
    fields.innerHTML = text;
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
