// The admin pages (tokens, webhooks, environments) and the archived
// features: each reads and changes what it shows through the JSON API.
// Text from the server is set with textContent only, never as HTML.
(function () {
  'use strict';
  const root = document.getElementById('admin');
  if (!root) return;

  // api makes a request and resolves to {status, body} or {error}: words
  // for people; it never throws.
  async function api(method, path, body) {
    const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(rolloutEnv(path), init);
    } catch (err) {
      return { error: 'Could not reach the server: ' + err.message + '. Nothing was changed.' };
    }
    let data = null;
    if (res.status !== 204) {
      try { data = await res.json(); } catch { /* not JSON */ }
    }
    if (res.ok) return { status: res.status, body: data || {} };
    if (res.status === 401) return { error: 'Your session has ended: sign in again. Nothing was changed.' };
    if (res.status === 403) return { error: 'Your token may not do this. Nothing was changed.' };
    if (res.status >= 500) return { error: 'The server could not do this just now. Nothing was changed; try again in a moment.' };
    const msg = (data && data.error && data.error.message) || 'The server refused and did not say why.';
    return { error: msg.charAt(0).toUpperCase() + msg.slice(1) + (/[.!?]$/.test(msg) ? '' : '.') };
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function when(iso) {
    if (!iso) return null;
    const d = new Date(iso);
    return el('time', { datetime: iso, title: d.toISOString(), text: d.toLocaleString() });
  }

  function ago(iso) {
    if (!iso) return 'never';
    const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
    if (s < 120) return 'in the last 2 minutes';
    if (s < 3600 * 1.5) return Math.round(s / 60) + ' minutes ago';
    if (s < 86400 * 1.5) return Math.round(s / 3600) + ' hours ago';
    return Math.round(s / 86400) + ' days ago';
  }

  function show(id, text) {
    const e = document.getElementById(id);
    e.textContent = text || '';
    e.hidden = !text;
  }

  // confirmInline replaces button with a question and two buttons: the
  // action runs only on the second click.
  function confirmInline(button, question, yes, action) {
    const cell = button.parentNode;
    const saved = [...cell.childNodes];
    const cancel = () => { box.replaceWith(...saved); button.focus(); };
    const go = el('button', { type: 'button', class: 'danger confirm-yes', text: yes, onclick: async () => {
      go.disabled = true;
      await action();
    } });
    const box = el('span', { class: 'confirm', role: 'group', 'aria-label': question },
      el('span', { class: 'confirm-q', text: question + ' ' }), go, ' ',
      el('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: cancel }));
    cell.replaceChildren(box);
    go.focus();
  }

  document.addEventListener('click', async (ev) => {
    const b = ev.target.closest('button.copy');
    if (!b) return;
    const text = document.getElementById(b.dataset.copy).textContent;
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = 'Copied';
    } catch {
      const r = document.createRange();
      r.selectNodeContents(document.getElementById(b.dataset.copy));
      getSelection().removeAllRanges();
      getSelection().addRange(r);
      b.textContent = 'Selected: press Ctrl+C';
    }
  });

  // Tokens.
  async function loadTokens() {
    const body = document.getElementById('tokens-body');
    const r = await api('GET', '/api/tokens');
    if (r.error) { body.replaceChildren(el('tr', {}, el('td', { colspan: 6, text: r.error }))); return; }
    const rows = r.body.tokens.map((t) => el('tr', { class: t.active ? 'token' : 'token revoked', 'data-name': t.name },
      el('th', { scope: 'row' }, el('span', { class: 'name', text: t.name })),
      el('td', {}, el('span', { class: 'role-chip role-' + t.role, text: t.role }), t.environment ? el('span', { class: 'hint token-env', text: ' ' + t.environment + ' only' }) : null),
      el('td', {}, when(t.created_at), t.created_by ? el('span', { class: 'hint', text: ' by ' + t.created_by }) : null),
      el('td', { class: 'last-used', text: ago(t.last_used_at) }),
      el('td', { text: t.active ? 'active' : 'revoked' }),
      el('td', {}, t.active ? el('button', { type: 'button', class: 'secondary revoke', text: 'Revoke', onclick: (ev) =>
        confirmInline(ev.currentTarget, 'Revoke ' + t.name + '? Whatever uses it stops working.', 'Yes, revoke', async () => {
          const res = await api('DELETE', '/api/tokens/' + encodeURIComponent(t.id));
          show('token-error', res.error);
          await loadTokens();
        }) }) : null)));
    body.replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { colspan: 6, class: 'hint', text: 'No token yet.' }))]));
  }

  function tokensPage() {
    const form = document.getElementById('token-form');
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      show('token-error', '');
      document.getElementById('token-secret').hidden = true;
      const body = { name: form.name.value.trim(), role: form.role.value };
      if (form.environment && form.environment.value) body.environment = form.environment.value;
      const r = await api('POST', '/api/tokens', body);
      btn.disabled = false;
      if (r.error) { show('token-error', r.error); return; }
      document.getElementById('token-secret-value').textContent = r.body.token;
      document.querySelector('#token-secret .copy').textContent = 'Copy';
      document.getElementById('token-secret').hidden = false;
      form.reset();
      await loadTokens();
    });
    loadTokens();
  }

  // Webhooks.
  async function loadHooks() {
    const list = document.getElementById('hooks-list');
    const r = await api('GET', '/api/webhooks');
    if (r.error) { list.replaceChildren(el('li', { text: r.error })); return; }
    const items = r.body.webhooks.map((h) => {
      const log = el('div', { class: 'hook-log', hidden: true });
      const state = el('p', { class: 'hook-state' },
        el('span', { class: 'state-chip state-' + h.state, text: h.state === 'paused' ? 'Paused' : 'Active' }),
        h.state === 'paused' ? el('span', { class: 'why', text: ' since ', }) : null,
        h.state === 'paused' ? when(h.paused_at) : null,
        h.state === 'paused' ? el('span', { class: 'why', text: ': ' + h.paused_reason }) : null,
        h.state === 'active' && h.failures > 0 ? el('span', { class: 'why', text: ' · ' + h.failures + ' failed attempt' + (h.failures > 1 ? 's' : '') + ' in a row; next try ' }) : null,
        h.state === 'active' && h.failures > 0 ? when(h.next_attempt_at) : null);
      const actions = el('p', { class: 'hook-actions' },
        el('button', { type: 'button', class: 'secondary show-log', 'aria-expanded': 'false', text: 'Delivery log', onclick: async (ev) => {
          const b = ev.currentTarget;
          if (!log.hidden) { log.hidden = true; b.setAttribute('aria-expanded', 'false'); return; }
          b.setAttribute('aria-expanded', 'true');
          await loadLog(h.id, log);
        } }), ' ',
        h.state === 'paused' ? el('button', { type: 'button', class: 'resume', text: 'Resume', onclick: async () => {
          const res = await api('POST', '/api/webhooks/' + encodeURIComponent(h.id) + '/resume');
          show('hook-error', res.error);
          await loadHooks();
        } }) : null, ' ',
        el('span', {}, el('button', { type: 'button', class: 'secondary delete', text: 'Delete', onclick: (ev) =>
          confirmInline(ev.currentTarget, 'Delete this webhook and its log?', 'Yes, delete', async () => {
            const res = await api('DELETE', '/api/webhooks/' + encodeURIComponent(h.id));
            show('hook-error', res.error);
            await loadHooks();
          }) })));
      return el('li', { class: 'hook admin-card hook-' + h.state, 'data-id': h.id },
        el('h3', {}, el('code', { class: 'hook-url', text: h.url })),
        el('p', { class: 'hint' }, 'Events: ' + h.events.join(', ') + ' · added ', when(h.created_at), h.created_by ? ' by ' + h.created_by : ''),
        state, actions, log);
    });
    list.replaceChildren(...(items.length ? items : [el('li', { class: 'hint', text: 'No webhook yet.' })]));
  }

  async function loadLog(id, box) {
    const r = await api('GET', '/api/webhooks/' + encodeURIComponent(id));
    box.hidden = false;
    if (r.error) { box.replaceChildren(el('p', { text: r.error })); return; }
    const ds = r.body.deliveries || [];
    if (!ds.length) { box.replaceChildren(el('p', { class: 'hint', text: 'No delivery yet: the next event of the audit log is sent within seconds.' })); return; }
    box.replaceChildren(el('div', { class: 'table-wrap' }, el('table', { class: 'admin-table log-table' },
      el('thead', {}, el('tr', {}, ...['Time', 'Event', 'Attempt', 'Answer', 'Error'].map((t) => el('th', { scope: 'col', text: t })))),
      el('tbody', {}, ...ds.map((d) => el('tr', { class: d.error ? 'failed' : 'ok' },
        el('td', {}, when(d.time)),
        el('td', { class: 'log-event', text: d.event_kind + ' #' + d.event_id }),
        el('td', { text: String(d.attempt) }),
        el('td', { class: 'status', text: d.status ? String(d.status) : '—' }),
        el('td', { class: 'log-error', text: d.error ? d.error + (d.detail ? ': ' + d.detail : '') : 'delivered' })))))));
  }

  function webhooksPage() {
    const form = document.getElementById('hook-form');
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      show('hook-error', '');
      document.getElementById('hook-secret-box').hidden = true;
      const events = form.events.value.split(',').map((s) => s.trim()).filter(Boolean);
      const body = { url: form.url.value.trim(), events: events.length ? events : ['*'] };
      if (form.secret.value) body.secret = form.secret.value;
      const r = await api('POST', '/api/webhooks', body);
      btn.disabled = false;
      if (r.error) { show('hook-error', r.error); return; }
      document.getElementById('hook-secret-value').textContent = r.body.secret;
      document.querySelector('#hook-secret-box .copy').textContent = 'Copy';
      document.getElementById('hook-secret-box').hidden = false;
      form.reset();
      await loadHooks();
    });
    loadHooks();
  }

  // Archived features.
  async function loadArchived() {
    const body = document.getElementById('archived-body');
    const canWrite = root.dataset.canWrite === 'true';
    const canPurge = root.dataset.canPurge === 'true';
    const r = await api('GET', '/api/features?archived=true');
    if (r.error) { body.replaceChildren(el('tr', {}, el('td', { colspan: 5, text: r.error }))); return; }
    const rows = r.body.features.map((f) => {
      const shares = Object.entries(f.shares || {}).sort((a, b) => b[1] - a[1])
        .map(([n, s]) => n + ' ' + (Math.round(s * 10000) / 100) + ' %').join(', ');
      const actions = el('td', { class: 'actions' });
      if (canWrite) {
        actions.append(el('button', { type: 'button', class: 'restore', text: 'Restore…', onclick: (ev) => restorePreview(ev.currentTarget, f) }));
      }
      if (canPurge) {
        actions.append(' ', el('button', { type: 'button', class: 'secondary purge', text: 'Purge…', onclick: (ev) => purgeForm(ev.currentTarget, f.key) }));
      }
      return el('tr', { class: 'archived-feature', 'data-key': f.key },
        el('th', { scope: 'row' }, el('span', { class: 'key', text: f.key }), f.description ? el('div', { class: 'hint', text: f.description }) : null),
        el('td', { text: shares || 'no bucket' }),
        el('td', { class: 'archived-by' }, ...(f.archived_by
          ? ['by ', el('b', { text: f.archived_by }), ', ', when(f.archived_at), f.archive_comment ? el('div', { class: 'why', text: '“' + f.archive_comment + '”' }) : el('div', { class: 'hint', text: 'no reason given' })]
          : [el('span', { class: 'hint', text: 'not recorded' })])),
        el('td', {}, 'v' + f.version + ', ', when(f.updated_at)),
        actions);
    });
    body.replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { colspan: 5, class: 'hint empty', text: 'No archived feature.' }))]));
  }

  // restorePreview asks the server what restoring f would do (a dry run),
  // says it — the share of users that get a bucket again, and the shares
  // served — and restores only on a second click.
  async function restorePreview(button, f) {
    const cell = button.parentNode;
    const saved = [...cell.childNodes];
    button.disabled = true;
    show('archived-done', '');
    const dry = await api('POST', '/api/features/' + encodeURIComponent(f.key) + '/restore?dry_run=true', {});
    button.disabled = false;
    if (dry.error) { show('archived-error', dry.error); return; }
    show('archived-error', '');
    const rep = dry.body.report || {};
    const after = Object.entries(rep.shares_after || dry.body.feature.shares || {}).sort((a, b) => b[1] - a[1])
      .map(([n, x]) => n + ' ' + (Math.round(x * 10000) / 100) + ' %').join(', ');
    const churn = typeof rep.churn === 'number' ? (Math.round(rep.churn * 10000) / 100) + ' %' : '—';
    const needs = dry.body.needs === 'approval';
    const go = el('button', { type: 'button', class: 'confirm-restore', text: needs ? 'Submit for approval' : 'Restore it' });
    const box = el('div', { class: 'restore-preview', role: 'status' },
      el('p', {}, el('b', { class: 'churn', text: churn }), ' of users would get a bucket of ' + f.key + ' again: ' + (after || 'no bucket') + '.'),
      needs ? el('p', { class: 'hint', text: 'Approvals are required for ' + f.key + ': the restore will wait as a request.' }) : null,
      go, ' ', el('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => cell.replaceChildren(...saved) }));
    go.addEventListener('click', async () => {
      go.disabled = true;
      const res = await api('POST', '/api/features/' + encodeURIComponent(f.key) + '/restore', {});
      show('archived-error', res.error);
      const done = res.body && res.body.request
        ? 'Approvals are required for ' + f.key + ': its restore waits as a request until another editor or an admin approves it (Requests).'
        : f.key + ' is served again, as version ' + (res.body && res.body.feature.version) + '.';
      show('archived-done', res.error ? '' : done);
      await loadArchived();
    });
    cell.replaceChildren(box);
    go.focus();
  }

  // purgeForm asks for the feature's key, typed, before purging.
  function purgeForm(button, key) {
    const cell = button.parentNode;
    const saved = [...cell.childNodes];
    const id = 'purge-' + key.replace(/[^A-Za-z0-9_-]/g, '_');
    const input = el('input', { id, autocomplete: 'off', spellcheck: 'false', class: 'purge-key' });
    const go = el('button', { type: 'submit', class: 'danger confirm-purge', disabled: true, text: 'Purge for good' });
    input.addEventListener('input', () => { go.disabled = input.value !== key; });
    const form = el('form', { class: 'purge-form' },
      el('label', { for: id }, 'Type ', el('b', { text: key }), ' to purge it and its history (its audit log stays):'),
      input, go, ' ', el('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => cell.replaceChildren(...saved) }));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (input.value !== key) return;
      go.disabled = true;
      show('archived-done', '');
      const res = await api('DELETE', '/api/features/' + encodeURIComponent(key) + '?purge=true');
      show('archived-error', res.error);
      show('archived-done', res.error ? '' : key + ' was purged; its key is free again.');
      await loadArchived();
    });
    cell.replaceChildren(form);
    input.focus();
  }

  // Environments: create (empty or copied), rename, protect, delete. Each
  // change reloads the page, whose header and lists then show it; a
  // refusal (a deletion while tokens are scoped to the environment, or of
  // the last one) is said in the API's words.
  function environmentsPage() {
    const done = (text) => {
      try { window.sessionStorage.setItem('env-done', text); } catch { /* shown by the list anyway */ }
      window.location.reload();
    };
    try {
      const text = window.sessionStorage.getItem('env-done');
      window.sessionStorage.removeItem('env-done');
      if (text) show('env-done', text);
    } catch { /* no storage */ }
    const form = document.getElementById('env-form');
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      show('env-error', '');
      const body = { key: form.key.value.trim(), name: form.name.value.trim(), protected: form.protected.checked, require_comment: form.require_comment.checked };
      if (form.copy_from.value) body.copy_from = form.copy_from.value;
      const btn = form.querySelector('button[type=submit]');
      btn.disabled = true;
      const r = await api('POST', '/api/environments', body);
      btn.disabled = false;
      if (r.error) { show('env-error', r.error); return; }
      done('Environment ' + r.body.key + ' created' + (body.copy_from ? ' as a copy of ' + body.copy_from : '') + '.');
    });
    for (const f of document.querySelectorAll('form.env-rename')) {
      f.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        show('env-error', '');
        const r = await api('PATCH', '/api/environments/' + encodeURIComponent(f.dataset.env), { name: f.name.value.trim() });
        if (r.error) { show('env-error', r.error); return; }
        done('Environment ' + f.dataset.env + ' renamed ' + r.body.name + '.');
      });
    }
    for (const box of document.querySelectorAll('input.env-protect')) {
      box.addEventListener('change', async () => {
        show('env-error', '');
        box.disabled = true;
        const r = await api('PATCH', '/api/environments/' + encodeURIComponent(box.dataset.env), { protected: box.checked });
        box.disabled = false;
        if (r.error) { box.checked = !box.checked; show('env-error', r.error); return; }
        done('Environment ' + box.dataset.env + (r.body.protected ? ' is protected.' : ' is no longer protected.'));
      });
    }
    for (const box of document.querySelectorAll('input.env-comment')) {
      box.addEventListener('change', async () => {
        show('env-error', '');
        box.disabled = true;
        const r = await api('PATCH', '/api/environments/' + encodeURIComponent(box.dataset.env), { require_comment: box.checked });
        box.disabled = false;
        if (r.error) { box.checked = !box.checked; show('env-error', r.error); return; }
        done('Environment ' + box.dataset.env + (r.body.require_comment ? ' requires a comment on every change.' : ' no longer requires comments.'));
      });
    }
    for (const b of document.querySelectorAll('button.env-delete')) {
      b.addEventListener('click', (ev) => {
        const key = b.dataset.env;
        const row = b.closest('tr');
        confirmInline(ev.currentTarget, 'Delete ' + key + '? Its features\' configurations go; its history stays in the audit log.', 'Yes, delete', async () => {
          const r = await api('DELETE', '/api/environments/' + encodeURIComponent(key));
          if (r.error) {
            show('env-error', r.error);
            const yes = row.querySelector('.confirm-yes');
            if (yes) yes.disabled = false;
            return;
          }
          done('Environment ' + key + ' deleted.');
        });
      });
    }
  }

  switch (root.dataset.page) {
    case 'environments': environmentsPage(); break;
    case 'tokens': tokensPage(); break;
    case 'webhooks': webhooksPage(); break;
    case 'archived': loadArchived(); break;
  }
})();
