// The dashboard's script. Pages are rendered by the server; this script
// filters the features list, and drives the change forms: each form first
// sends its change to the JSON API as a dry run and shows the report (the
// exact churn and the shares after), then sends it for real only when the
// user confirms, and shows the API's refusals next to the form.
'use strict';

(() => {
  const MAX_MOVES = 8;

  // pct formats a fraction of users as the server does: two decimals, and a
  // share that is not zero never reads as 0.00%.
  function pct(x) {
    if (x > 0 && x < 0.00005) return '<0.01%';
    if (x < 1 && x >= 0.99995) return '>99.99%';
    return (100 * x).toFixed(2) + '%';
  }

  // el makes an element; strings among the children become text, never
  // markup.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else e.setAttribute(k, v);
    }
    e.append(...children);
    return e;
  }

  function svgEl(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  // The features list: filter as the user types.
  const filter = document.getElementById('filter');
  if (filter) {
    const items = document.querySelectorAll('li[data-search]');
    const none = document.getElementById('no-match');
    filter.addEventListener('input', () => {
      const q = filter.value.trim().toLowerCase();
      let shown = 0;
      for (const item of items) {
        item.hidden = !item.dataset.search.includes(q);
        if (!item.hidden) shown++;
      }
      if (none) none.hidden = shown > 0;
    });
  }

  // The create form on a list of features is folded away; its link, or a
  // URL ending in #create, unfolds it.
  const createBox = document.getElementById('create');
  if (createBox && createBox.tagName === 'DETAILS') {
    const unfold = () => {
      createBox.open = true;
      document.getElementById('new-key').focus();
    };
    const link = document.getElementById('new-feature');
    if (link) link.addEventListener('click', unfold);
    if (window.location.hash === '#create') unfold();
  }

  // After a change, the page opens on its churn: move focus there so that
  // keyboard and screen reader users meet it first too.
  const banner = document.getElementById('banner');
  if (banner) banner.focus();

  const dataNode = document.getElementById('feature-data');
  const feature = dataNode ? JSON.parse(dataNode.textContent) : null;
  const base = feature ? '/api/features/' + encodeURIComponent(feature.key) : '';

  // The create form: bucket rows and the salt.
  const rows = document.getElementById('bucket-rows');
  const rowTemplate = document.getElementById('bucket-row-template');
  const addRow = document.getElementById('add-row');
  if (rows && rowTemplate && addRow) {
    addRow.addEventListener('click', () => {
      rows.append(rowTemplate.content.cloneNode(true));
      rows.lastElementChild.querySelector('input').focus();
    });
    rows.addEventListener('click', (ev) => {
      const button = ev.target.closest('.remove-row');
      if (!button) return;
      const row = button.closest('.bucket-row');
      const next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      (next ? next.querySelector('input') : addRow).focus();
    });
  }
  const saltDefault = document.getElementById('new-salt-default');
  if (saltDefault) {
    const field = document.getElementById('new-salt-field');
    const input = document.getElementById('new-salt');
    const sync = () => {
      field.hidden = saltDefault.checked;
      input.disabled = saltDefault.checked;
    };
    saltDefault.addEventListener('change', sync);
    sync();
  }

  // parseValue reads a bucket value: JSON when it parses, otherwise the text
  // as a JSON string.
  function parseValue(text) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }

  function parseReplicas(text, label) {
    const n = Number(text);
    if (text.trim() === '' || !Number.isInteger(n)) {
      throw new Error(label + ': give the replicas as a whole number, e.g. 100.');
    }
    return n;
  }

  function field(form, name) {
    return form.elements.namedItem(name).value;
  }

  // Each kind of form builds its API request: method, path and body.
  const builders = {
    create(form) {
      const buckets = [];
      form.querySelectorAll('.bucket-row').forEach((row, i) => {
        const name = row.querySelector('[name=bucket-name]').value.trim();
        const replicas = row.querySelector('[name=bucket-replicas]').value;
        const value = row.querySelector('[name=bucket-value]').value;
        if (name === '' && value === '') return; // an unused row
        const b = { name, replicas: parseReplicas(replicas, 'Bucket ' + (i + 1)) };
        if (value !== '') b.value = parseValue(value);
        buckets.push(b);
      });
      const body = { key: field(form, 'key').trim(), description: field(form, 'description'), buckets };
      if (!form.elements.namedItem('salt-default').checked) body.salt = field(form, 'salt');
      return { method: 'POST', path: '/api/features', body, create: true, key: body.key };
    },
    'add-bucket'(form) {
      const body = { name: field(form, 'name').trim(), replicas: parseReplicas(field(form, 'replicas'), 'Replicas') };
      const value = field(form, 'value');
      if (value !== '') body.value = parseValue(value);
      return { method: 'POST', path: base + '/buckets', body };
    },
    'update-bucket'(form) {
      const body = {};
      const replicas = field(form, 'replicas');
      const value = field(form, 'value');
      if (replicas !== '') body.replicas = parseReplicas(replicas, 'New replicas');
      if (value !== '') body.value = parseValue(value);
      if (replicas === '' && value === '') throw new Error('Give new replicas, a new value, or both.');
      return { method: 'PUT', path: base + '/buckets/' + encodeURIComponent(field(form, 'bucket')), body };
    },
    'remove-bucket'(form) {
      return { method: 'DELETE', path: base + '/buckets/' + encodeURIComponent(field(form, 'bucket')) };
    },
    toggle(form) {
      const enabled = form.dataset.enabled !== 'true';
      const body = { enabled };
      if (!enabled) {
        const fallback = field(form, 'fallback');
        if (fallback !== (feature.fallback || '')) body.fallback = fallback;
      }
      return { method: 'PATCH', path: base, body };
    },
    'set-override'(form) {
      const user = field(form, 'user');
      if (user === '') throw new Error('Give the user ID to pin.');
      return { method: 'PUT', path: base + '/overrides/' + encodeURIComponent(user), body: { bucket: field(form, 'bucket') } };
    },
    'clear-override'(form) {
      const user = field(form, 'user');
      if (user === '') throw new Error('Give the user ID to release.');
      return { method: 'DELETE', path: base + '/overrides/' + encodeURIComponent(user) };
    },
    rollback(form) {
      return { method: 'POST', path: base + '/rollback', body: { version: Number(field(form, 'version')) } };
    },
  };

  // send makes the request, as a dry run or for real. It resolves to
  // {body} or {error}; it never throws.
  async function send(req, dryRun) {
    const headers = { Accept: 'application/json' };
    const init = { method: req.method, headers, credentials: 'same-origin' };
    if (req.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(req.body);
    }
    // The change applies only to the version the page shows, so that what
    // was previewed is what happens.
    if (feature && !req.create) headers['If-Match'] = '"' + feature.tag + '"';
    let res;
    try {
      res = await fetch(req.path + (dryRun ? '?dry_run=true' : ''), init);
    } catch (err) {
      return { error: 'Could not reach the server: ' + err.message + '. Nothing was changed.' };
    }
    let body = null;
    try {
      body = await res.json();
    } catch {
      // Not JSON: explained below.
    }
    if (!res.ok) return { error: explain(res.status, body) };
    if (!body) return { error: 'The server answered ' + res.status + ' with no report.' };
    return { body };
  }

  function explain(status, body) {
    const e = body && body.error;
    if (!e) return 'The server refused the change (HTTP ' + status + ') without saying why. Nothing was changed.';
    let msg = e.message || e.code;
    if (e.code === 'precondition_failed') msg += ' Reload the page to see what changed, then try again.';
    return msg + ' (' + status + ' ' + e.code + ')';
  }

  // The colour of each bucket, as the server assigns it: by place in the
  // feature's list, new buckets after.
  function colourer(names) {
    const order = feature ? feature.buckets.map((b) => b.name) : [];
    for (const n of names) if (!order.includes(n)) order.push(n);
    return (name) => 'c' + (order.indexOf(name) % 8);
  }

  function moveLabel(b) {
    return b === null || b === undefined ? 'no bucket' : b;
  }

  // direction says where all moves go, when they share a destination or an
  // origin, in the server's words.
  function direction(moves) {
    if (moves.length === 0) return '';
    const to = moves[0].to;
    const from = moves[0].from;
    if (moves.every((m) => m.to === to)) return to === null ? 'all to no bucket (apps serve their default)' : 'all into ' + to;
    if (moves.every((m) => m.from === from)) return from === null ? 'all from no bucket' : 'all out of ' + from;
    return '';
  }

  function barOf(names, shares, colour) {
    const svg = svgEl('svg', { width: '100%', height: '100%', role: 'img', 'aria-label': 'Shares after: ' + names.map((n) => n + ' ' + pct(shares[n] || 0)).join(', ') });
    let x = 0;
    for (const n of names) {
      const w = 100 * (shares[n] || 0);
      if (w > 0) svg.append(svgEl('rect', { x: x.toFixed(3) + '%', y: 0, width: w.toFixed(3) + '%', height: '100%', class: colour(n) }));
      if (w >= 1.5 + 2.5 * [...n].length) { // as the server's labelWidth
        const t = svgEl('text', { x: (x + w / 2).toFixed(3) + '%', y: '50%', 'dominant-baseline': 'central', 'text-anchor': 'middle' });
        t.textContent = n;
        svg.append(t);
      }
      x += w;
    }
    return el('div', { class: 'bar' }, svg);
  }

  // showPreview fills the form's preview with the dry run's report, and the
  // buttons that apply or drop it.
  function showPreview(form, req, result) {
    const rep = result.report;
    const box = form.querySelector('.preview');
    box.replaceChildren();
    const before = rep.shares_before || {};
    const after = rep.shares_after || {};
    const names = [];
    for (const b of result.feature.buckets) names.push(b.name);
    for (const n of Object.keys(before)) if (!names.includes(n)) names.push(n);
    const colour = colourer(names);

    const heading = el('h4', { tabindex: '-1' }, 'Preview — nothing is changed yet');
    box.append(heading);
    if (req.create) {
      box.append(el('p', { class: 'outcome' }, 'Every user will get a bucket, in these exact shares:'));
    } else {
      const moved = rep.method === 'expected' ? ' of users expected to move (new salt)' : ' of users would move';
      const dir = direction(rep.moves || []);
      const overrides = rep.override_changes || [];
      const overridden = overrides.length + (overrides.length === 1 ? ' overridden user' : ' overridden users');
      let outcome;
      if (rep.churn > 0) outcome = el('p', { class: 'outcome' }, el('span', { class: 'big' }, pct(rep.churn)), moved + (dir ? ', ' + dir : ''));
      else if (overrides.length > 0) outcome = el('p', { class: 'outcome' }, 'Only ' + overridden + ' would change bucket');
      else outcome = el('p', { class: 'outcome' }, 'No user would change bucket');
      box.append(outcome);
      if (rep.churn > 0 && overrides.length > 0) box.append(el('p', {}, overridden + ' would change bucket too.'));
      if (rep.churn > 0 || rep.modulo_churn > 0) {
        box.append(el('p', { class: 'modulo' }, 'Naive hash mod N would move ', el('b', { class: 'num' }, pct(rep.modulo_churn)), '.'));
      }
      const moves = rep.moves || [];
      if (moves.length > 0) {
        const body = el('tbody');
        for (const m of moves.slice(0, MAX_MOVES)) {
          body.append(el('tr', {}, el('td', {}, moveLabel(m.from)), el('td', { 'aria-hidden': 'true' }, '→'), el('td', {}, moveLabel(m.to)), el('td', { class: 'num' }, pct(m.share))));
        }
        if (moves.length > MAX_MOVES) body.append(el('tr', {}, el('td', { colspan: '4' }, 'and ' + (moves.length - MAX_MOVES) + ' smaller moves')));
        box.append(el('table', { class: 'moves' },
          el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'from'), el('th', { 'aria-hidden': 'true' }), el('th', { scope: 'col' }, 'to'), el('th', { scope: 'col', class: 'num' }, 'users'))),
          body));
      }
    }

    const shown = names.filter((n) => n in after || n in before);
    if (Object.keys(after).length > 0) box.append(barOf(shown.filter((n) => n in after), after, colour));
    else box.append(el('p', {}, 'After it, no bucket is served: apps use their default.'));
    const tbody = el('tbody');
    for (const n of shown) {
      const row = el('tr', { 'data-bucket': n }, el('th', { scope: 'row' }, el('span', { class: 'swatch ' + colour(n), 'aria-hidden': 'true' }), n));
      if (!req.create) row.append(el('td', { class: 'num' }, n in before ? pct(before[n]) : '—'));
      row.append(el('td', { class: 'num after' }, n in after ? pct(after[n]) : '—'));
      tbody.append(row);
    }
    const head = el('tr', {}, el('th', { scope: 'col' }, 'Bucket'));
    if (!req.create) head.append(el('th', { scope: 'col', class: 'num' }, 'Now'));
    head.append(el('th', { scope: 'col', class: 'num' }, req.create ? 'Share' : 'After'));
    box.append(el('table', { class: 'shares' }, el('thead', {}, head), tbody));

    const apply = el('button', { type: 'button', class: 'apply' }, req.create ? 'Create the feature' : 'Apply this change');
    const cancel = el('button', { type: 'button', class: 'cancel secondary' }, 'Cancel');
    box.append(el('div', { class: 'actions' }, apply, cancel));
    box.hidden = false;
    heading.focus();

    apply.addEventListener('click', async () => {
      setBusy(form, true);
      const res = await send(req, false);
      if (res.error) {
        setBusy(form, false);
        showError(form, res.error);
        return;
      }
      const key = req.create ? req.key : feature.key;
      window.location.assign('/ui/features/' + encodeURIComponent(key) + '?changed=' + res.body.feature.version);
    });
    cancel.addEventListener('click', () => {
      clearOutcome(form);
      const first = form.querySelector('input:not([type=hidden]):not([disabled]), select, button');
      if (first) first.focus();
    });
  }

  function showError(form, message) {
    const p = form.querySelector('.error');
    p.textContent = message;
    p.hidden = false;
  }

  function clearOutcome(form) {
    const p = form.querySelector('.error');
    p.textContent = '';
    p.hidden = true;
    const box = form.querySelector('.preview');
    box.replaceChildren();
    box.hidden = true;
  }

  function setBusy(form, busy) {
    form.setAttribute('aria-busy', busy ? 'true' : 'false');
    for (const b of form.querySelectorAll('button')) b.disabled = busy;
  }

  for (const form of document.querySelectorAll('form[data-kind]')) {
    const build = builders[form.dataset.kind];
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearOutcome(form);
      let req;
      try {
        req = build(form);
      } catch (err) {
        showError(form, err.message);
        return;
      }
      setBusy(form, true);
      const res = await send(req, true);
      setBusy(form, false);
      if (res.error) {
        showError(form, res.error);
        return;
      }
      showPreview(form, req, res.body);
    });
    // A preview is of what the form said then: editing the form drops it.
    const drop = () => {
      if (!form.querySelector('.preview').hidden) clearOutcome(form);
    };
    form.addEventListener('input', drop);
    form.addEventListener('change', drop);
  }
})();
