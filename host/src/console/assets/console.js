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
});

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
