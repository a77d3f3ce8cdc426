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

  // pct1 says a share as people read one they asked for, as the server
  // does: one decimal (50.0%, not 49.98%), the exact share beside it.
  function pct1(x) {
    if (x > 0 && x < 0.0005) return '<0.1%';
    if (x < 1 && x >= 0.9995) return '>99.9%';
    return (100 * x).toFixed(1) + '%';
  }

  function exactPct(x) {
    return (100 * x).toFixed(5) + '%';
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

  // Times are rendered in UTC by the server; each reads in the browser's
  // own time zone, the UTC time in its title (unless it has one).
  function localTimes(root) {
    for (const t of root.querySelectorAll('time[datetime]:not([data-local])')) {
      // Only the times written as the server writes them ("2026-03-01
      // 09:00 UTC"); "3 h ago" and its title stay as they are.
      if (!/^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/.test(t.textContent.trim())) continue;
      const d = new Date(t.getAttribute('datetime'));
      if (Number.isNaN(d.getTime())) continue;
      t.dataset.local = '1';
      if (!t.title) t.title = t.textContent.trim();
      t.textContent = d.toLocaleString([], { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
    }
  }
  localTimes(document);

  // Folded parts (<details>) open when the address or a link points into
  // them: #change-targets, #ramps' form, #v12 in a folded list.
  function unfoldTo(node) {
    for (let d = node.closest('details'); d; d = d.parentElement && d.parentElement.closest('details')) d.open = true;
  }
  function unfoldHash() {
    let id = '';
    try {
      id = decodeURIComponent(window.location.hash.slice(1));
    } catch {
      return;
    }
    const target = id && document.getElementById(id);
    if (!target) return;
    if (target.tagName === 'DETAILS') target.open = true;
    unfoldTo(target);
    target.scrollIntoView();
  }
  window.addEventListener('hashchange', unfoldHash);
  unfoldHash();

  // Charts drawn in percentages of their width carry labels in pixels: on
  // a narrow screen, or for changes close in time, two may meet. Each
  // label is moved inside its chart, and one that would cover another is
  // left out (its figure stays in its bar's title and the chart's
  // summary). Axis labels go first, the figures over bars after them.
  function unclutter(svg) {
    const texts = [...svg.querySelectorAll('text')];
    for (const t of texts) {
      t.removeAttribute('transform');
      t.style.visibility = '';
    }
    const box = svg.getBoundingClientRect();
    if (box.width === 0) return;
    const figure = (t) => t.classList.contains('churn-label') || t.classList.contains('val') || t.classList.contains('val-range') || t.classList.contains('val-mod');
    const kept = [];
    for (const t of [...texts.filter((t) => !figure(t)), ...texts.filter(figure)]) {
      let r = t.getBoundingClientRect();
      let dx = 0;
      if (r.left < box.left) dx = box.left - r.left;
      else if (r.right > box.right) dx = box.right - r.right;
      if (dx !== 0) {
        t.setAttribute('transform', 'translate(' + dx.toFixed(1) + ' 0)');
        r = t.getBoundingClientRect();
      }
      if (kept.some((o) => r.left < o.right + 2 && o.left < r.right + 2 && r.top < o.bottom && o.top < r.bottom)) {
        t.style.visibility = 'hidden';
        continue;
      }
      kept.push(r);
    }
  }
  const charts = document.querySelectorAll('svg.over-time, svg.chart');
  if (charts.length > 0) {
    const all = () => charts.forEach(unclutter);
    all();
    let pending = false;
    window.addEventListener('resize', () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; all(); });
    });
  }

  // roughly says a count to three significant figures: 12,431 → 12,400.
  function roughly(n) {
    return Number(n.toPrecision(Math.min(3, Math.max(1, String(Math.round(n)).length)))).toLocaleString('en-US', { maximumFractionDigits: 0 });
  }

  // naturalCompare orders names as people count, as the server does
  // (list.go): digits by their number, so that feat-9 comes before
  // feat-49, the rest code unit by code unit.
  function naturalCompare(a, b) {
    const digit = (c) => c >= '0' && c <= '9';
    let i = 0;
    let j = 0;
    while (i < a.length && j < b.length) {
      if (digit(a[i]) && digit(b[j])) {
        const si = i;
        const sj = j;
        while (i < a.length && digit(a[i])) i++;
        while (j < b.length && digit(b[j])) j++;
        const na = a.slice(si, i).replace(/^0+/, '');
        const nb = b.slice(sj, j).replace(/^0+/, '');
        if (na.length !== nb.length) return na.length < nb.length ? -1 : 1;
        if (na !== nb) return na < nb ? -1 : 1;
        continue;
      }
      if (a[i] !== b[j]) return a[i] < b[j] ? -1 : 1;
      i++;
      j++;
    }
    if (a.length - i !== b.length - j) return a.length - i < b.length - j ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  // The features list: filter as the user types or picks, and sort, in
  // the page, keeping the URL in step so that it can be shared. Several
  // tags pick the features with every one of them.
  const listForm = document.getElementById('list-filter');
  let applyFilters = () => {};
  if (listForm) {
    listForm.classList.add('live');
    const body = document.querySelector('#features tbody');
    const none = document.getElementById('no-match');
    const count = document.getElementById('shown-count');
    const headCount = document.getElementById('feature-count');
    const q = document.getElementById('filter');
    const status = document.getElementById('filter-status');
    const tagBox = document.getElementById('filter-tags');
    const tagChecks = () => [...listForm.querySelectorAll('input[name=tag]')];
    const chosen = document.querySelector('#filter-tags .tags-chosen');
    const owner = document.getElementById('filter-owner');
    const sort = document.getElementById('sort');
    const apply = () => {
      const rows = [...body.querySelectorAll('tr.feature-row')];
      const text = q.value.trim().toLowerCase();
      const tags = tagChecks().filter((c) => c.checked).map((c) => c.value);
      chosen.textContent = tags.length ? tags.join(' + ') : 'Any';
      let shown = 0;
      let total = 0;
      for (const row of rows) {
        const d = row.dataset;
        const inScope = (status.value === 'archived') === (d.status === 'archived');
        if (inScope) total++;
        const match = d.search.includes(text) &&
          tags.every((t) => d.tags.includes(' ' + t + ' ')) &&
          (owner.value === '' || d.owner === owner.value) && inScope &&
          (status.value === '' || (status.value === 'stale' ? 'stale' in d : d.status === status.value));
        row.hidden = !match;
        if (match) shown++;
      }
      none.hidden = shown > 0;
      count.textContent = String(shown);
      headCount.textContent = shown === total ? String(total) : shown + ' of ' + total;
      const byName = sort.value === 'name';
      rows.sort((a, b) => byName ? naturalCompare(a.dataset.key, b.dataset.key)
        : (Number(b.dataset.changed) - Number(a.dataset.changed)) || naturalCompare(a.dataset.key, b.dataset.key));
      body.append(...rows);
      const params = new URLSearchParams(document.body.dataset.envQuery || '');
      for (const f of [q, status]) if (f.value.trim() !== '') params.set(f.name, f.value.trim());
      for (const t of tags) params.append('tag', t);
      if (owner.value.trim() !== '') params.set('owner', owner.value.trim());
      if (byName) params.set('sort', 'name');
      const search = params.toString();
      history.replaceState(null, '', location.pathname + (search ? '?' + search : '') + location.hash);
    };
    applyFilters = apply;
    q.addEventListener('input', apply);
    for (const f of [status, owner, sort]) f.addEventListener('change', apply);
    tagBox.addEventListener('change', apply);
    listForm.addEventListener('submit', (e) => { e.preventDefault(); apply(); });
    // The tag menu closes on a click elsewhere, and on Escape.
    document.addEventListener('click', (e) => {
      if (tagBox.open && !tagBox.contains(e.target)) tagBox.open = false;
    });
    tagBox.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && tagBox.open) {
        tagBox.open = false;
        tagBox.querySelector('summary').focus();
      }
    });
    // A tag in a row adds it to the filter.
    body.addEventListener('click', (e) => {
      const a = e.target.closest('a.tag');
      if (!a || e.ctrlKey || e.metaKey || e.shiftKey) return;
      e.preventDefault();
      let box = tagChecks().find((c) => c.value === a.dataset.tag);
      if (!box) {
        box = el('input', { type: 'checkbox', name: 'tag', value: a.dataset.tag });
        tagBox.querySelector('.tag-menu').append(el('label', {}, box, ' ' + a.dataset.tag));
      }
      box.checked = true;
      apply();
      tagBox.querySelector('summary').focus();
    });
    // "/" goes to the search, as on most sites; not while typing.
    document.addEventListener('keydown', (e) => {
      if (e.key !== '/' || e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
      const t = e.target;
      if (t.closest && t.closest('input, textarea, select, [contenteditable=""], [contenteditable=true], dialog[open]')) return;
      e.preventDefault();
      slash = true;
      q.focus();
      q.select();
    });
    // Where a key's press comes apart from its keydown (some input
    // methods, automation), its slash is not typed into the search.
    let slash = false;
    document.addEventListener('keypress', (e) => {
      if (slash && e.key === '/') e.preventDefault();
      slash = false;
    }, true);
    document.addEventListener('keyup', () => { slash = false; });
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
  // It shows once: right after this page applied the change (the script
  // notes it before leaving the form), not on reload or from a shared link.
  const banner = document.getElementById('banner');
  if (banner) {
    const mark = 'applied:' + window.location.pathname + ':' + banner.dataset.version;
    let fresh = false;
    try {
      fresh = window.sessionStorage.getItem(mark) === '1';
      window.sessionStorage.removeItem(mark);
    } catch {
      // No storage: show it this once anyway.
      fresh = true;
    }
    const url = new URL(window.location.href);
    url.searchParams.delete('changed');
    window.history.replaceState(null, '', url.pathname + url.search + url.hash);
    if (fresh) banner.focus();
    else banner.remove();
  }

  const dataNode = document.getElementById('feature-data');
  const feature = dataNode ? JSON.parse(dataNode.textContent) : null;
  const base = feature ? '/api/features/' + encodeURIComponent(feature.key) : '';

  // Pages that stay true: the dashboard's stream of changes (GET
  // /api/events). A feature's page says when its feature changed elsewhere
  // (another tab, a script, a ramp's step), with who changed what and the
  // churn, updates its shares, and offers to reload for the rest; the list
  // marks the rows of changed features. Changes this page applies reload
  // it anyway.
  let ownChange = false;
  const listTable = document.getElementById('features');
  if ((feature || listTable) && 'EventSource' in window) {
    const events = new EventSource(rolloutEnv('/api/events'));
    events.addEventListener('open', () => { document.body.dataset.live = 'open'; });
    events.addEventListener('error', () => { document.body.dataset.live = 'reconnecting'; });
    window.addEventListener('pagehide', () => events.close());
    let shownVersion = feature ? feature.version : 0;
    events.addEventListener('change', (e) => {
      let data;
      try {
        data = JSON.parse(e.data);
      } catch {
        return;
      }
      if (feature) {
        if (data.many) {
          liveBanner([el('p', { class: 'live-what' }, 'Many features changed at once, this one perhaps among them.')], true);
          return;
        }
        const mine = (data.features || []).find((f) => f.key === feature.key);
        if (!mine || ownChange) return;
        if (mine.deleted) {
          liveBanner([el('p', { class: 'live-what' }, 'This feature was deleted elsewhere: apps get not-found for it.')], false);
          return;
        }
        if (mine.version > shownVersion) {
          const from = shownVersion;
          shownVersion = mine.version;
          showChanged(from, mine.version);
        }
        return;
      }
      markRows(data);
    });

    async function showChanged(from, to) {
      let versions = [];
      let current = null;
      try {
        const [vr, fr] = await Promise.all([
          fetch(rolloutEnv(base + '/versions?limit=' + Math.min(to - from, 20)), { headers: { Accept: 'application/json' } }),
          fetch(rolloutEnv(base), { headers: { Accept: 'application/json' } }),
        ]);
        if (vr.ok) versions = (await vr.json()).versions || [];
        if (fr.ok) current = await fr.json();
      } catch {
        // Said below without the details.
      }
      if (to < shownVersion) return; // a later event is being shown
      const lines = [];
      for (const v of versions.filter((v) => v.version > from)) {
        const r = v.report || {};
        const churn = r.from_version === 0 ? 'created' : pct(r.churn || 0) + ' of users moved';
        const when = new Date(v.time);
        lines.push(el('li', { 'data-version': String(v.version) },
          el('b', {}, 'Version ' + v.version), ' by ', el('b', { class: 'live-actor' }, v.actor || 'someone'),
          ' at ', el('time', { datetime: v.time, title: when.toISOString().replace('.000Z', 'Z').replace('T', ' ') + ' UTC' }, when.toLocaleTimeString()), ': ', sentence(v.summary || 'changed'),
          // Summaries say in percentages whom the change moved; older ones did not.
          ...(/of users moved|no user moved/.test(v.summary || '') ? [] : [' · ', el('strong', { class: 'churn' }, churn)])));
      }
      const parts = [el('p', { class: 'live-what' }, 'This feature changed elsewhere: it is now at version ' + to + '.')];
      if (lines.length) parts.push(el('ul', { class: 'live-versions' }, ...lines));
      if (current) {
        updateFigures(current);
        parts.push(el('p', { class: 'hint' }, 'The shares below are updated. The forms, charts and history still show version ' +
          feature.version + ', and a change made from them would be refused: reload to act on version ' + to + '.'));
      }
      liveBanner(parts, true);
    }

    function updateFigures(f) {
      const version = document.getElementById('feature-version');
      if (version) {
        version.textContent = String(f.version);
        version.classList.add('live-updated');
      }
      for (const td of document.querySelectorAll('td[data-share]')) {
        const share = (f.shares || {})[td.dataset.share];
        const text = share === undefined ? '—' : pct1(share);
        const exact = share === undefined ? '' : exactPct(share);
        if (td.textContent.trim() !== text || td.dataset.exact !== exact) {
          td.textContent = text;
          td.dataset.exact = exact;
          td.title = exact ? 'Exactly ' + exact + ' of users' : '';
          td.classList.add('live-updated');
        }
      }
      const head = document.querySelector('.feature-head .status .badge');
      if (head && f.enabled !== feature.enabled) {
        head.textContent = f.enabled ? 'On' : 'Off';
        head.className = 'badge ' + (f.enabled ? 'on' : 'off') + ' live-updated';
      }
    }

    function liveBanner(parts, reload) {
      let box = document.getElementById('live-banner');
      if (!box) {
        box = el('section', { id: 'live-banner', class: 'live-banner', role: 'status', 'aria-live': 'polite' });
        const head = document.querySelector('.feature-head') || document.querySelector('.list-head');
        head.parentNode.insertBefore(box, head);
      }
      box.replaceChildren(...parts);
      if (reload) {
        const button = el('button', { type: 'button', class: 'live-reload' }, 'Reload the page');
        button.addEventListener('click', () => window.location.reload());
        box.append(button);
      } else {
        box.append(el('a', { href: rolloutEnv('/ui/') }, '← All features'));
      }
    }

    // refreshRows puts the list's rows of the features keys as they are
    // now: the server renders the list again, and the rows of these
    // features replace the page's (their status, shares, last change and
    // kill switch), new features join it. A row whose feature is gone stays,
    // marked. false: the list could not be read; the rows are only marked.
    async function refreshRows(keys) {
      let doc;
      try {
        const res = await fetch(window.location.pathname + window.location.search, { headers: { Accept: 'text/html' }, credentials: 'same-origin' });
        if (!res.ok) return false;
        doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      } catch {
        return false;
      }
      const body = listTable.querySelector('tbody');
      for (const key of keys) {
        const sel = 'tr[data-key="' + CSS.escape(key) + '"]';
        const fresh = doc.querySelector('#features ' + sel);
        const row = listTable.querySelector(sel);
        if (!fresh) continue;
        const adopted = document.importNode(fresh, true);
        if (row) {
          // A confirmation open in the row is the user's: keep the row.
          if (row.querySelector('dialog[open]')) continue;
          row.replaceWith(adopted);
        } else {
          body.append(adopted);
        }
        localTimes(adopted);
        for (const form of adopted.querySelectorAll('form[data-kind]')) bindForm(form);
      }
      applyFilters();
      return true;
    }

    async function markRows(data) {
      const changed = [];
      for (const f of data.features || []) changed.push(f.key);
      if (changed.length > 0 && !data.many) await refreshRows(changed);
      for (const f of data.features || []) {
        const row = listTable.querySelector('tr[data-key="' + CSS.escape(f.key) + '"]');
        if (row) {
          row.classList.add('live-changed');
          row.dataset.liveVersion = f.deleted ? 'deleted' : String(f.version);
        }
      }
      const marked = listTable.querySelectorAll('tr.live-changed').length;
      if (marked === 0 && !data.many && changed.length === 0) return;
      const text = data.many ? 'Many features changed since this page was loaded.'
        : (marked === 1 ? '1 feature' : marked + ' features') + ' changed since this page was loaded (marked below)' +
          (changed.some((k) => !listTable.querySelector('tr[data-key="' + CSS.escape(k) + '"]')) ? ', and new ones were created.' : '.');
      // The rows show the features as they are now; Reload for the rest.
      liveBanner([el('p', { class: 'live-what' }, text)], true);
    }
  }

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
  // Advanced: replica counts instead of percentages, for every bucket.
  const byReplicas = document.getElementById('new-by-replicas');
  if (byReplicas) {
    const form = byReplicas.form;
    const sync = () => form.classList.toggle('by-replicas', byReplicas.checked);
    byReplicas.addEventListener('change', sync);
    sync();
  }

  // The targets form: new bucket rows, "split equally" and the running
  // total.
  const targetsForm = document.querySelector('form[data-kind=targets]');
  if (targetsForm) {
    const list = targetsForm.querySelector('.new-targets');
    const template = targetsForm.querySelector('.new-target-template');
    const sum = targetsForm.querySelector('.target-sum .sum');
    const inputs = () => [...targetsForm.querySelectorAll('input[name=target], input[name=new-target]')];
    const total = () => {
      const all = inputs();
      const t = all.reduce((a, i) => a + (Number(i.value) || 0), 0);
      // Percentages rounded to two decimals may add up to 99.99 or 100.01:
      // the form takes them as meant (see exactTargets).
      const rounded = Math.abs(t - 100) > 1e-4 && Math.abs(t - 100) <= 0.005 * all.length + 1e-9;
      sum.textContent = (Math.round(100 * t) / 100) + '%' + (rounded ? ' — rounded, taken as 100%' : '');
      sum.classList.toggle('off-total', Math.abs(t - 100) > 1e-4 && !rounded);
    };
    targetsForm.addEventListener('input', total);
    targetsForm.querySelector('.add-target').addEventListener('click', () => {
      list.append(template.content.cloneNode(true));
      list.lastElementChild.querySelector('input').focus();
      total();
    });
    list.addEventListener('click', (ev) => {
      const button = ev.target.closest('.remove-target');
      if (!button) return;
      button.closest('.new-target').remove();
      targetsForm.querySelector('.add-target').focus();
      total();
    });
    targetsForm.querySelector('.split-equally').addEventListener('click', () => {
      const all = inputs();
      // Hundredths that add up to exactly 100.
      const base = Math.floor(10000 / all.length);
      let rest = 10000 - base * all.length;
      for (const i of all) {
        const n = base + (rest > 0 ? 1 : 0);
        if (rest > 0) rest--;
        i.value = String(n / 100);
      }
      total();
      targetsForm.dispatchEvent(new Event('change'));
    });
    total();
  }

  // A folded part that opens puts focus on its first field.
  for (const d of document.querySelectorAll('details.create-box')) {
    d.addEventListener('toggle', () => {
      if (!d.open) return;
      const first = d.querySelector('input:not([type=hidden]):not([disabled]), select, textarea');
      if (first) first.focus();
    });
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

  // parsePercent reads a percentage of users as a fraction.
  // parseTags reads tags separated by commas or spaces, lower case and
  // sorted, as the server keeps them.
  function parseTags(text) {
    const tags = [...new Set(text.toLowerCase().split(/[\s,]+/).filter((t) => t !== ''))];
    return tags.sort();
  }

  function parsePercent(text, label) {
    const n = Number(text);
    if (String(text).trim() === '' || !Number.isFinite(n) || n < 0 || n > 100) {
      throw new Error(label + ': give a percentage from 0 to 100, e.g. 25.');
    }
    return n / 100;
  }

  // exactTargets reads percentages typed for buckets ({name, text, label}
  // each) as fractions of users that add up to exactly 1, and keeps what
  // was typed. Percentages rounded to two decimals pass: 3 × 33.33 % (or
  // 33.34 + 33.33 + 33.33, as "split equally" gives) are equal thirds,
  // exactly, and other rounded shares are scaled to add up to 100 %, as
  // the API does in a mode.
  function exactTargets(entries) {
    const targets = {};
    const asked = {};
    const values = entries.map((e) => parsePercent(e.text, e.label));
    const sum = values.reduce((a, b) => a + b, 0);
    if (Math.abs(sum - 1) > 0.00005 * values.length) {
      throw new Error('The shares add up to ' + (100 * sum).toFixed(2) + '%: make them add up to 100%.');
    }
    const served = values.filter((v) => v > 0);
    const equal = served.length > 1 && served.every((v) => Math.abs(v - 1 / served.length) <= 0.0001 + 1e-12); // hundredths of a percent apart
    entries.forEach((e, i) => {
      let t = values[i];
      if (equal && t > 0) t = 1 / served.length;
      else if (Math.abs(sum - 1) > 1e-9) t = values[i] / sum;
      targets[e.name] = t;
      asked[e.name] = String(Number(e.text)) + '%' + (equal && t > 0 ? ' (1/' + served.length + ')' : '');
    });
    return { targets, asked };
  }

  // withGuards adds the form's comment and churn limit to the request.
  function withGuards(form, req) {
    const comment = form.elements.namedItem('comment');
    const maxChurn = form.elements.namedItem('max_churn');
    const extra = {};
    if (comment && comment.value.trim() !== '') extra.comment = comment.value.trim();
    if (maxChurn && maxChurn.value.trim() !== '') extra.max_churn = parsePercent(maxChurn.value, 'The churn limit');
    if (Object.keys(extra).length > 0) req.body = Object.assign(req.body || {}, extra);
    return req;
  }

  // Each kind of form builds its API request: method, path and body.
  const builders = {
    create(form) {
      const byReplicas = form.elements.namedItem('by-replicas').checked;
      const buckets = [];
      const entries = [];
      form.querySelectorAll('.bucket-row').forEach((row, i) => {
        const name = row.querySelector('[name=bucket-name]').value.trim();
        const share = row.querySelector('[name=bucket-share]').value.trim();
        const replicas = row.querySelector('[name=bucket-replicas]').value;
        const value = row.querySelector('[name=bucket-value]').value;
        if (name === '' && value === '' && (byReplicas || share === '')) return; // an unused row
        const b = { name };
        if (byReplicas) {
          b.replicas = parseReplicas(replicas, 'Bucket ' + (name || i + 1));
        } else {
          if (share === '') throw new Error('Give bucket ' + (name || i + 1) + ' its share of users in %, e.g. 50.');
          entries.push({ name, text: share, label: 'The share of bucket ' + (name || i + 1) });
        }
        if (value !== '') b.value = parseValue(value);
        buckets.push(b);
      });
      const body = { key: field(form, 'key').trim(), description: field(form, 'description'), buckets };
      let asked;
      if (!byReplicas && entries.length > 0) {
        const t = exactTargets(entries);
        body.targets = t.targets;
        asked = t.asked;
      }
      if (!form.elements.namedItem('salt-default').checked) body.salt = field(form, 'salt');
      const tags = parseTags(field(form, 'tags'));
      if (tags.length > 0) body.tags = tags;
      const owner = field(form, 'owner').trim();
      if (owner !== '') body.owner = owner;
      return { method: 'POST', path: '/api/features', body, create: true, key: body.key, asked };
    },
    targets(form) {
      const entries = [];
      const values = {};
      const names = new Set();
      for (const input of form.querySelectorAll('input[name=target]')) {
        entries.push({ name: input.dataset.bucket, text: input.value, label: 'The share of ' + input.dataset.bucket });
        names.add(input.dataset.bucket);
      }
      for (const row of form.querySelectorAll('.new-target')) {
        const name = row.querySelector('[name=new-name]').value.trim();
        const share = row.querySelector('[name=new-target]').value;
        const value = row.querySelector('[name=new-value]').value;
        if (name === '' && share.trim() === '' && value === '') continue;
        if (name === '') throw new Error('Give the new bucket a name.');
        if (names.has(name)) throw new Error('There is a bucket ' + name + ' already: give the new one another name.');
        names.add(name);
        entries.push({ name, text: share, label: 'The share of ' + name });
        if (value !== '') values[name] = parseValue(value);
      }
      const { targets, asked } = exactTargets(entries);
      return { plan: { method: 'POST', path: base + '/plan', body: { targets } }, values, asked };
    },
    describe(form) {
      // Only what differs from the page's version, so that the summary
      // says what changed.
      const body = {};
      const description = field(form, 'description');
      if (description !== form.dataset.description) body.description = description;
      const tags = parseTags(field(form, 'tags'));
      if (tags.join(', ') !== parseTags(form.dataset.tags).join(', ')) body.tags = tags;
      const owner = field(form, 'owner').trim();
      if (owner !== form.dataset.owner) body.owner = owner;
      if (Object.keys(body).length === 0) throw new Error('Nothing changed: edit the description, the tags or the owner first.');
      return { method: 'PATCH', path: base, body };
    },
    reshuffle() {
      return { method: 'POST', path: base + '/reshuffle', body: {} };
    },
    delete(form) {
      if (field(form, 'confirm').trim() !== form.dataset.key) throw new Error('Type the feature\'s key, ' + form.dataset.key + ', to confirm.');
      return { method: 'DELETE', path: base, body: {}, deletes: true };
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
      if (form.dataset.key) { // a feature of the list
        return { method: 'PATCH', path: '/api/features/' + encodeURIComponent(form.dataset.key), body, tag: form.dataset.tag, key: form.dataset.key, fallback: form.dataset.fallback, toggles: enabled ? 'on' : 'off' };
      }
      let fallback = feature.fallback || '';
      if (!enabled) {
        const chosen = field(form, 'fallback');
        if (chosen !== fallback) body.fallback = chosen;
        fallback = chosen;
      }
      return { method: 'PATCH', path: base, body, fallback, toggles: enabled ? 'on' : 'off' };
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
      const body = { version: Number(field(form, 'version')) };
      const keep = form.elements.namedItem('keep_overrides');
      if (keep && keep.checked) body.keep_overrides = true;
      return { method: 'POST', path: base + '/rollback', body, rollback: true };
    },
  };

  // send makes the request, as a dry run or for real. It resolves to
  // {body} or {error}; it never throws.
  // send makes the request req: a dry run, or for real; submit asks that
  // an editor's change above what editors may make alone become a change
  // request.
  async function send(req, dryRun, submit) {
    const headers = { Accept: 'application/json' };
    const init = { method: req.method, headers, credentials: 'same-origin' };
    if (req.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(req.body);
    }
    // The change applies only to the version the page shows, so that what
    // was previewed is what happens.
    const tag = req.tag || (feature && feature.tag);
    if (tag && !req.create) headers['If-Match'] = '"' + tag + '"';
    if (!dryRun) ownChange = true; // the page reloads after it: not "elsewhere"
    let res;
    try {
      const sep = req.path.includes('?') ? '&' : '?';
      res = await fetch(rolloutEnv(req.path + (dryRun ? sep + 'dry_run=true' : submit ? sep + 'submit=true' : '')), init);
    } catch (err) {
      return { error: 'Could not reach the server: ' + err.message + '. Nothing was changed.' };
    }
    if (res.status === 204) return { body: {} };
    let body = null;
    try {
      body = await res.json();
    } catch {
      // Not JSON: explained below.
    }
    if (!res.ok) return explain(res.status, body);
    if (!body) return { error: 'The server gave no report of the change. Nothing was changed; try again.' };
    return { body };
  }

  // explain turns a refusal into words for people, without HTTP codes; a
  // conflict with someone else's change offers to reload.
  function explain(status, body) {
    const e = body && body.error;
    if (status === 401) return { error: 'Your session has ended: sign in again. Nothing was changed.' };
    if (status === 403 && body && body.error && body.error.report) return { error: sentence(body.error.message) }; // above the editors' limit
    if (status === 403) return { error: 'Your token may read features but not change them. Nothing was changed.' };
    if (!e) return { error: 'The server could not make the change and did not say why. Nothing was changed; try again in a moment.' };
    if (e.code === 'precondition_failed' || status === 412) {
      return { error: 'Someone changed this feature since the page was loaded, so nothing was changed. Reload to see their change, then decide again.', reload: true, detail: e.message };
    }
    // The form shows where; the message says what (the API starts it with
    // the field it is about, which it names in e.field too).
    let text = e.message || 'The change was refused.';
    if (e.field && text.startsWith(e.field + ': ')) text = text.slice(e.field.length + 2);
    let msg = sentence(text.replace('more than max_churn', 'more than your churn limit of'));
    if (status >= 500) msg = 'The server could not make the change just now. Nothing was changed; try again in a moment.';
    return { error: msg };
  }

  function sentence(s) {
    s = s.replace(/\b(with|use|using) (PUT|POST|PATCH|DELETE|GET)\b[^:;.]*/g, '').replace(/\s+([:;.])/g, '$1').trim();
    if (!/[.!?]$/.test(s)) s += '.';
    return s.charAt(0).toUpperCase() + s.slice(1);
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

  // The two plans a change of several buckets offers, in the user's words.
  const planTitles = {
    nested: 'Only move users into or out of the changed buckets',
    exact: 'Rebalance exactly',
  };

  // planIn is the plan p answered, as its option of mode: that plan's
  // buckets and figures, with p's targets, tolerance and bound.
  function planIn(p, mode) {
    const o = p.options && p.options[mode];
    if (!o) return p;
    return Object.assign({}, p, o, { mode, varied: o.varied || [], replanned: !!o.replanned, cross_moves: o.cross_moves || [], cross_churn: o.cross_churn || 0 });
  }

  // previewPlan previews applying the plan of mode among those p offers:
  // a dry run of its buckets, which the Apply button then sends as they
  // are, on the version the page shows (If-Match), so that the plan
  // applied is the plan previewed.
  async function previewPlan(form, asked, p, mode, focusChoice) {
    const plan = planIn(p, mode);
    const buckets = plan.buckets.map((b) => (b.name in asked.values ? { name: b.name, replicas: b.replicas, value: asked.values[b.name] } : { name: b.name, replicas: b.replicas }));
    const req = { method: 'PUT', path: base + '/buckets', body: Object.assign({ buckets }, asked.body || {}), plan, answered: p, asked: asked.asked, from: asked, focusChoice };
    setBusy(form, true);
    const res = await send(req, true);
    setBusy(form, false);
    if (res.error) {
      clearOutcome(form);
      showError(form, res.error, res.reload);
      return;
    }
    showPreview(form, req, res.body);
  }

  // drifts lists the buckets whose share after misses its target by more
  // than the tolerance.
  function drifts(p) {
    return Object.keys(p.targets).sort().filter((n) => Math.abs((p.shares_after[n] || 0) - p.targets[n]) > p.tolerance + 1e-12);
  }

  // crossLine says, in red, which users switch between existing variants.
  function crossLine(p, cls) {
    return el('p', { class: cls }, pct(p.cross_churn) + ' switch between existing variants ' + p.cross_moves.map((m) => moveLabel(m.from) + '→' + moveLabel(m.to)).join(', ') + ': this affects a running experiment.');
  }

  // planChoice offers the two plans of a change of several buckets; picking
  // one previews it instead.
  function planChoice(form, req) {
    const p = req.answered;
    const box = el('fieldset', { class: 'plan-choice' }, el('legend', {}, 'Several buckets change: pick a plan'));
    for (const mode of ['nested', 'exact']) {
      const o = planIn(p, mode);
      const id = form.dataset.kind + '-plan-' + mode;
      const input = el('input', { type: 'radio', name: 'plan-mode', value: mode, id });
      input.checked = req.plan.mode === mode;
      const about = el('span', { class: 'option-about' });
      about.append(el('b', { class: 'num' }, pct(o.churn)), ' of users move. ');
      if (mode === 'nested') {
        const d = drifts(o);
        about.append(d.length === 0
          ? 'Every bucket lands within ' + (100 * o.tolerance).toFixed(2) + ' points of its target.'
          : el('span', { class: 'drift' }, 'The other buckets\' shares drift: ' + d.map((n) => n + ' ' + pct(o.shares_after[n] || 0) + ' (asked ' + pct(o.targets[n]) + ')').join(', ') + '.'));
      } else {
        about.append('Every bucket within ' + (100 * o.max_error).toFixed(3) + ' points of its target.');
      }
      const option = el('div', { class: 'plan-option' + (input.checked ? ' chosen' : ''), 'data-mode': mode },
        input, el('label', { for: id }, planTitles[mode]), about);
      if (o.cross_churn > 0 && o.cross_moves.length > 0) option.append(crossLine(o, 'option-cross'));
      box.append(option);
      input.addEventListener('change', () => {
        if (input.checked) previewPlan(form, req.from, p, mode, true);
      });
    }
    return box;
  }

  // askedList says, for each bucket, the share asked and the share
  // achieved, exactly: "on: you asked 1%: 1.00% (exact: 0.99881%)".
  // Buckets off their target by more than the tolerance say so.
  function askedList(asked, targets, after, tolerance, varied) {
    const list = el('ul', { class: 'plan-asked' });
    for (const n of Object.keys(targets).sort()) {
      const got = after[n] || 0;
      const typed = asked && n in asked ? asked[n] : pct(targets[n]);
      const li = el('li', { 'data-bucket': n }, n + ': you asked ' + typed + ': ' + pct(got) + ' (exact: ' + (100 * got).toFixed(5) + '%)');
      const off = got - targets[n];
      if (Math.abs(off) > tolerance + 1e-12) {
        li.classList.add('drift');
        li.append(el('span', { class: 'drift-note' }, ' — ' + (off > 0 ? '+' : '−') + (100 * Math.abs(off)).toFixed(2) + ' points' + (varied && varied.length > 0 && !varied.includes(n) ? ': drifts, as its replicas stay' : '')));
      }
      list.append(li);
    }
    return list;
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

    const heading = el('h3', { tabindex: '-1' }, 'Preview — nothing is changed yet');
    box.append(heading);
    if (req.plan) box.dataset.mode = req.plan.mode || '';
    if (req.answered && req.answered.options && req.answered.options.nested && req.answered.options.exact) box.append(planChoice(form, req));
    if (req.create) {
      box.append(el('p', { class: 'outcome' }, 'Every user will get a bucket, in these exact shares:'));
      if (req.asked) box.append(askedList(req.asked, req.body.targets, after, 0.0005, null));
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
      if (rep.churn > 0 && feature && feature.last_day > 0) box.append(el('p', { class: 'daily-moved' }, '≈ ' + roughly(rep.churn * feature.last_day) + ' of ≈ ' + roughly(feature.last_day) + ' users a day (from the distinct users of the last 24 h).'));
      const countBefore = feature ? feature.buckets.length : 0;
      if (feature && !req.toggles && !req.deletes && result.feature.buckets.length !== countBefore && rep.modulo_churn != null) {
        box.append(el('p', { class: 'modulo' }, 'Naive hash mod N would move ', el('b', { class: 'num' }, pct(rep.modulo_churn)), '.'));
      }
      if (feature && !req.toggles && !req.deletes && rep.churn > 0 && rep.method === 'exact' && rep.range_churn != null) {
        // The baseline product managers know, as the headline comparison:
        // contiguous ranges of a 0–100 % hash.
        box.append(el('p', { class: 'range' }, 'Range bucketing, as LaunchDarkly, Unleash, GrowthBook, Flipt and flagd split users, would move ',
          el('b', { class: 'num range-churn' }, pct(rep.range_churn)), '; rollout moves ', el('b', { class: 'num' }, pct(rep.churn)), '.'));
      }
      if (req.plan) {
        const p = req.plan;
        // The bound is for plans that hit the targets exactly; one within
        // max error of them may move a little fewer.
        const bound = p.churn >= p.lower_bound
          ? 'no plan can move fewer than ' + pct(p.lower_bound) + '.'
          : 'no plan that hits the targets exactly can move fewer than ' + pct(p.lower_bound) + '; this one moves a little fewer because its shares land within its max error of them.';
        box.append(el('p', { class: 'plan-churn' }, 'Moves ' + pct(p.churn) + ' of users; ' + bound));
        box.append(el('p', { class: 'plan-error' }, 'The planned shares are within ' + (100 * p.max_error).toFixed(3) + ' percentage points of the targets (max error).'));
        box.append(askedList(req.asked, p.targets, p.shares_after, p.tolerance, p.varied));
        if (p.replanned) box.append(el('p', { class: 'plan-replanned' }, 'This feature had too few ring points for shares exact to 0.05 points: this first change gives it more, and moves users once; later changes move users only into or out of the buckets that change.'));
        if (p.mode === 'nested' && p.varied && p.varied.length === 1) box.append(el('p', { class: 'plan-nested' }, 'Only the replicas of ' + p.varied[0] + ' change: users move only into or out of it, and changing the share back returns the same users.'));
        if (p.mode === 'nested' && p.varied && p.varied.length > 1) {
          const kept = Object.keys(p.targets).sort().filter((n) => !p.varied.includes(n));
          box.append(el('p', { class: 'plan-nested' }, 'Only the replicas of ' + p.varied.join(', ') + ' change' + (kept.length > 0 ? '; ' + kept.join(', ') + ' keep theirs, so their shares drift' : '') + '. Users move only into or out of the changed buckets, or between them.'));
        }
        if (p.cross_churn > 0 && p.cross_moves && p.cross_moves.length > 0) box.append(crossLine(p, 'plan-cross'));
        if (p.cut_short) {
          const why = p.cut_reason === 'deadline' ? 'it ran out of time' : 'it used up its budget of steps';
          box.append(el('p', { class: 'plan-cut' }, 'The planner stopped early (' + why + '): this is the best plan it found, and a longer search might move fewer users or come closer to the targets.'));
        }
      }
      if (req.toggles) {
        let what;
        if (req.toggles === 'on') what = 'Every user gets their bucket on the ring again.';
        else if (req.fallback) what = 'Every user gets ' + req.fallback + ' at once, until it is turned on again.';
        else what = 'No user gets a bucket: apps serve their default, until it is turned on again.';
        box.append(el('p', { class: 'confirm-what' }, el('b', {}, 'After this: '), what));
      }
      if (req.deletes) box.append(el('p', { class: 'confirm-what' }, el('b', {}, 'After this: '), 'apps get no bucket for ' + feature.key + '; it is archived with its history and can be restored.'));
      const moves = rep.moves || [];
      if (moves.length > 0) {
        const body = el('tbody');
        const cross = new Set(((req.plan && req.plan.cross_moves) || []).map((m) => m.from + '\u0000' + m.to));
        for (const m of moves.slice(0, MAX_MOVES)) {
          const switched = cross.has(m.from + '\u0000' + m.to);
          body.append(el('tr', switched ? { class: 'cross', title: 'switches users between existing variants' } : {}, el('td', {}, moveLabel(m.from)), el('td', { 'aria-hidden': 'true' }, '→'), el('td', {}, moveLabel(m.to)), el('td', { class: 'num' }, pct(m.share))));
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
    const planned = {};
    if (req.plan) for (const b of req.plan.buckets) planned[b.name] = b.replicas;
    for (const n of shown) {
      const row = el('tr', { 'data-bucket': n }, el('th', { scope: 'row' }, el('span', { class: 'swatch ' + colour(n), 'aria-hidden': 'true' }), n));
      if (!req.create) row.append(el('td', { class: 'num', 'data-label': 'Now' }, n in before ? pct(before[n]) : '—'));
      if (req.plan) row.append(el('td', { class: 'num target', 'data-label': 'Target' }, n in req.plan.targets ? pct(req.plan.targets[n]) : '—'));
      row.append(el('td', { class: 'num after', 'data-label': req.create ? 'Share' : 'After' }, n in after ? pct(after[n]) : '—'));
      if (req.plan) row.append(el('td', { class: 'num replicas', 'data-label': 'Replicas' }, n in planned ? String(planned[n]) + (planned[n] === 0 ? ' (0%, kept)' : '') : 'removed'));
      tbody.append(row);
    }
    const head = el('tr', {}, el('th', { scope: 'col' }, 'Bucket'));
    if (!req.create) head.append(el('th', { scope: 'col', class: 'num' }, 'Now'));
    if (req.plan) head.append(el('th', { scope: 'col', class: 'num' }, 'Target'));
    head.append(el('th', { scope: 'col', class: 'num' }, req.create ? 'Share' : 'After'));
    if (req.plan) head.append(el('th', { scope: 'col', class: 'num' }, 'Replicas'));
    box.append(el('table', { class: 'shares' }, el('thead', {}, head), tbody));

    if (req.rollback) pinsNote(box, result.feature);
    const escalated = escalate(form, box, req, rep);
    let label = req.create ? 'Create the feature' : 'Apply this change';
    if (req.answered && req.answered.options && req.answered.options.exact) label = req.plan.mode === 'nested' ? 'Apply: only move users into or out of the changed buckets' : 'Apply: rebalance exactly';
    if (req.toggles) label = req.toggles === 'on' ? 'Turn it on' : 'Turn it off';
    if (req.deletes) label = 'Archive ' + feature.key;
    if (result.needs) label = 'Submit for approval';
    if (result.needs) box.append(el('p', { class: 'needs notice' }, result.needs === 'approval' ? 'Approvals are required for this feature: the change will wait as a request until another editor or an admin approves it.' : 'This change is more than editors may make alone (above the churn limit, or a reshuffle): submit it, and it waits as a request until another editor or an admin approves it.'));
    const apply = el('button', { type: 'button', class: req.toggles || req.deletes || escalated.red ? 'apply danger' : 'apply' }, label);
    const cancel = el('button', { type: 'button', class: 'cancel secondary' }, 'Cancel');
    box.append(el('div', { class: 'actions' }, apply, cancel));
    if (escalated.confirm) escalated.confirm(apply);
    confirmIn(form);
    box.hidden = false;
    const chosen = req.focusChoice && box.querySelector('input[name=plan-mode]:checked');
    (chosen || heading).focus();

    apply.addEventListener('click', async () => {
      setBusy(form, true);
      const res = await send(req, false, result.needs === 'admin');
      if (res.error) {
        setBusy(form, false);
        showError(form, res.error, res.reload);
        return;
      }
      if (res.body.request) {
        // Approvals are required: the change waits as a request.
        window.location.assign(rolloutEnv('/ui/requests#request-' + res.body.request.id));
        return;
      }
      if (req.deletes) {
        window.location.assign(rolloutEnv('/ui/'));
        return;
      }
      const key = req.key || feature.key;
      const path = '/ui/features/' + encodeURIComponent(key);
      try {
        window.sessionStorage.setItem('applied:' + path + ':' + res.body.feature.version, '1');
      } catch {
        // No storage: the banner shows anyway.
      }
      window.location.assign(rolloutEnv(path + '?changed=' + res.body.feature.version));
    });
    cancel.addEventListener('click', () => {
      clearOutcome(form);
      const first = form.querySelector('input:not([type=hidden]):not([disabled]), select, button');
      if (first) first.focus();
    });
  }

  // escalate marks a big change: above the churn limit (the organisation's
  // default, 25 %) the preview turns amber and Apply waits for the
  // feature's key typed; a reshuffle's Apply is red.
  function escalate(form, box, req, rep) {
    const out = { red: form.dataset.kind === 'reshuffle' };
    const limit = (feature && feature.churn_limit) || 0.25;
    if (!feature || req.create || req.toggles || req.deletes || !(rep.churn > limit)) return out;
    box.classList.add('escalated');
    const id = form.dataset.kind + '-escalate';
    const input = el('input', { id, name: 'escalate-key', autocomplete: 'off', spellcheck: 'false' });
    box.append(el('div', { class: 'escalate', role: 'alert' },
      el('p', {}, el('b', {}, 'A big change: '), pct(rep.churn) + ' of users would move, above the churn limit of ' + pct(limit) + '.'),
      el('div', { class: 'field' }, el('label', { for: id }, 'Type ', el('b', {}, feature.key), ' to apply it'), input)));
    out.confirm = (apply) => {
      apply.disabled = true;
      input.addEventListener('input', () => { apply.disabled = input.value.trim() !== feature.key; });
    };
    return out;
  }

  // pinsNote names the pinned users a rollback would release: those pinned
  // now whom the version it restores does not pin to the same bucket.
  async function pinsNote(box, after) {
    const note = el('p', { class: 'pins-note', 'aria-live': 'polite' });
    box.append(note);
    let now = {};
    try {
      const res = await fetch(rolloutEnv(base), { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
      if (res.ok) now = (await res.json()).overrides || {};
    } catch {
      return;
    }
    note.dataset.done = '1';
    const kept = after.overrides || {};
    const dropped = Object.keys(now).sort().filter((u) => kept[u] !== now[u]);
    if (dropped.length === 0) {
      note.textContent = Object.keys(now).length > 0 ? 'Every pinned user stays pinned.' : '';
      return;
    }
    const shown = dropped.slice(0, 10).map((u) => u + ' (' + now[u] + ')').join(', ');
    note.append(el('b', {}, 'Releases ' + dropped.length + (dropped.length === 1 ? ' pinned user: ' : ' pinned users: ')), shown + (dropped.length > 10 ? ' and ' + (dropped.length - 10) + ' more' : '') + '.');
    if (box.closest('form').elements.namedItem('keep_overrides')) note.append(' Tick "Keep today\'s pinned users" to keep them.');
  }

  // confirmIn opens the dialog the form's outcome is in, if any: the
  // list's kill switches confirm in one, above the table, never cut by it.
  function confirmIn(form) {
    const dialog = form.querySelector('dialog.confirm');
    if (dialog && !dialog.open) dialog.showModal();
  }

  function showError(form, message, reload) {
    confirmIn(form);
    const p = form.querySelector('.error');
    p.textContent = message;
    if (reload) {
      const button = el('button', { type: 'button', class: 'reload secondary' }, 'Reload');
      button.addEventListener('click', () => window.location.reload());
      p.append(' ', button);
    }
    p.hidden = false;
  }

  function clearOutcome(form) {
    const p = form.querySelector('.error');
    p.textContent = '';
    p.hidden = true;
    const box = form.querySelector('.preview');
    box.replaceChildren();
    box.hidden = true;
    const dialog = form.querySelector('dialog.confirm');
    if (dialog && dialog.open) dialog.close();
  }

  function setBusy(form, busy) {
    form.setAttribute('aria-busy', busy ? 'true' : 'false');
    for (const b of form.querySelectorAll('button')) b.disabled = busy;
  }

  for (const form of document.querySelectorAll('form[data-kind]')) bindForm(form);

  // bindForm makes the change form preview, then apply, its change.
  function bindForm(form) {
    const build = builders[form.dataset.kind];
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearOutcome(form);
      let req;
      try {
        req = withGuards(form, build(form));
      } catch (err) {
        showError(form, err.message);
        return;
      }
      setBusy(form, true);
      if (req.plan) {
        // Targets: plan first, then preview applying the plan's buckets.
        const planned = await send(req.plan, false);
        if (planned.error) {
          setBusy(form, false);
          showError(form, planned.error, planned.reload);
          return;
        }
        await previewPlan(form, req, planned.body, planned.body.mode);
        return;
      }
      const res = await send(req, true);
      setBusy(form, false);
      if (res.error) {
        showError(form, res.error, res.reload);
        return;
      }
      showPreview(form, req, res.body);
    });
    // A preview or an error is of what the form said then: editing the
    // form drops it.
    const drop = (ev) => {
      if (ev.target.closest('.preview')) return; // the preview's own choice
      if (!form.querySelector('.preview').hidden || !form.querySelector('.error').hidden) clearOutcome(form);
    };
    form.addEventListener('input', drop);
    form.addEventListener('change', drop);
    // A confirmation in a dialog (the list's kill switches): closing it
    // drops the preview.
    const dialog = form.querySelector('dialog.confirm');
    if (dialog) {
      dialog.addEventListener('close', () => clearOutcome(form));
      dialog.querySelector('.dialog-close').addEventListener('click', () => dialog.close());
    }
  }
  // Ramps: start one, and pause, resume or cancel it. These go to the
  // ramps API; a ramp is not a version of the feature, so no If-Match.
  async function rampSend(path, body) {
    return send({ method: 'POST', path, body, create: true }, false);
  }

  // rampSpec reads the ramp form: the steps as fractions and the interval
  // as a Go duration.
  function rampSpec(form) {
    const text = field(form, 'steps').replace(/%/g, ' ').trim();
    if (text === '') throw new Error('Give the steps: the share of users the bucket gets at each, e.g. 5, 10, 25, 50.');
    const steps = text.split(/[\s,;]+/).filter((x) => x !== '').map((x, i) => parsePercent(x, 'Step ' + (i + 1)));
    // A ramp up (increasing steps above 0%) or down (decreasing, to 0% at the least).
    const down = steps.length > 1 && steps[1] < steps[0];
    for (let i = 0; i < steps.length; i++) {
      if (steps[i] === 0 && !down) throw new Error('Step ' + (i + 1) + ': give a share above 0% (0% ends a ramp down only).');
      if (i > 0 && !down && steps[i] <= steps[i - 1]) throw new Error('Step ' + (i + 1) + ' is not above step ' + i + ': the steps must increase (or all decrease, for a ramp down).');
      if (i > 0 && down && steps[i] >= steps[i - 1]) throw new Error('Step ' + (i + 1) + ' is not below step ' + i + ': the steps of a ramp down must all decrease.');
    }
    const n = Number(field(form, 'every'));
    if (!Number.isInteger(n) || n < 1) throw new Error('Give the time between steps as a whole number, e.g. 1 day.');
    const unit = field(form, 'unit');
    const every = unit === 'd' ? 24 * n + 'h' : n + unit;
    const ms = n * { m: 60e3, h: 3600e3, d: 86400e3 }[unit];
    const body = { bucket: field(form, 'bucket'), steps, every };
    const maxChurn = field(form, 'max_churn').trim();
    if (maxChurn !== '') body.max_churn = parsePercent(maxChurn, 'The churn limit');
    // The start is typed in local time; the API takes it in UTC.
    const startText = form.elements.namedItem('start') ? field(form, 'start') : '';
    let start = null;
    if (startText !== '') {
      start = new Date(startText);
      if (Number.isNaN(start.getTime())) throw new Error('Give the start as a date and a time, or leave it empty to start now.');
      body.start = start.toISOString().replace(/\.\d{3}Z$/, 'Z');
    }
    const comment = form.elements.namedItem('comment') ? field(form, 'comment').trim() : '';
    if (comment !== '') body.comment = comment;
    return { body, ms, start };
  }

  // localWhen says a time in the browser's time zone.
  function localWhen(d) {
    return d.toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  }

  // showRampPreview shows the dry run of a ramp: each step's time, the share
  // it reaches and the users it moves, or where the ramp would pause; and
  // the button that starts it.
  function showRampPreview(form, spec, answer) {
    const box = form.querySelector('.preview');
    box.replaceChildren();
    const heading = el('h3', { tabindex: '-1' }, 'Preview — nothing is started yet');
    box.append(heading);
    const tbody = el('tbody');
    let total = 0;
    let stops = '';
    for (const [i, st] of (answer.steps || []).entries()) {
      const when = new Date(st.at);
      const daily = feature && feature.last_day > 0 && st.churn > 0 ? [el('br'), el('span', { class: 'hint' }, ' (≈ ' + roughly(st.churn * feature.last_day) + ' users a day)')] : [];
      const moved = st.error ? [el('span', { class: 'error-text' }, 'would pause here: ' + st.error)] : [pct(st.churn), ...daily];
      if (st.error) stops = st.error;
      else total += st.churn;
      tbody.append(el('tr', { 'data-step': String(i + 1) },
        el('td', { class: 'num', 'data-label': 'Step' }, String(i + 1)),
        el('td', { class: 'when', 'data-label': 'When' }, el('time', { datetime: st.at, title: when.toISOString().slice(0, 16).replace('T', ' ') + ' UTC' }, localWhen(when))),
        el('td', { class: 'num', 'data-label': 'Share' }, pct(st.share), ' → ', el('b', { class: 'reached' }, st.error ? '—' : pct(st.reached))),
        el('td', { class: 'num moved', 'data-label': 'Users moved' }, ...moved)));
    }
    box.append(el('div', { class: 'table-wrap' }, el('table', { class: 'ramp-preview' },
      el('caption', { class: 'visually-hidden' }, 'What each step of the ramp would do'),
      el('thead', {}, el('tr', {}, el('th', { scope: 'col', class: 'num' }, 'Step'), el('th', { scope: 'col' }, 'When'), el('th', { scope: 'col', class: 'num' }, 'Asked → reached'), el('th', { scope: 'col', class: 'num' }, 'Users moved'))),
      tbody)));
    const r = answer.ramp || {};
    box.append(el('p', { class: 'ramp-total' }, 'In all ' + pct(total) + ' of users move, only ' + (spec.body.steps.length > 1 && spec.body.steps[1] < spec.body.steps[0] ? 'out of ' : 'into ') + spec.body.bucket +
      '. Each step lands within ' + (100 * (r.tolerance || 0.005)).toFixed(2) + ' points of its share' + (stops ? '; the ramp would pause where a step cannot apply.' : '.')));
    if (answer.needs) box.append(el('p', { class: 'needs notice' }, answer.needs === 'approval' ? 'Approvals are required for this feature: the ramp will wait as a request until another editor or an admin approves it.' : 'A step of this ramp moves more users than editors may move in one change: use smaller steps, or it needs an admin, or approvals on for this feature.'));
    const start = el('button', { type: 'button', class: 'apply' }, answer.needs === 'approval' ? 'Submit for approval' : 'Start the ramp');
    const cancel = el('button', { type: 'button', class: 'cancel secondary' }, 'Cancel');
    box.append(el('div', { class: 'actions' }, start, cancel));
    box.hidden = false;
    heading.focus();
    start.addEventListener('click', async () => {
      setBusy(form, true);
      const res = await rampSend(base + '/ramps', spec.body);
      if (res.error) {
        setBusy(form, false);
        showError(form, res.error, res.reload);
        return;
      }
      if (res.body.request) {
        // Approvals are required: the ramp waits as a request.
        window.location.assign(rolloutEnv('/ui/requests#request-' + res.body.request.id));
        return;
      }
      reloadAt('ramps');
    });
    cancel.addEventListener('click', () => clearOutcome(form));
  }

  function reloadAt(hash) {
    window.location.hash = hash;
    window.location.reload();
  }

  const rampForm = document.querySelector('form[data-ramp=create]');
  if (rampForm) {
    const schedule = rampForm.querySelector('.ramp-schedule');
    const error = rampForm.querySelector('.error');
    const describe = () => {
      error.hidden = true;
      error.textContent = '';
      try {
        const { body, ms, start } = rampSpec(rampForm);
        const from = start ? start.getTime() : Date.now();
        schedule.textContent = 'Schedule: ' + body.steps.map((s, i) => pct(s) + (i === 0 && !start ? ' now' : ' at ' + localWhen(new Date(from + i * ms)))).join(', ') + ' (your local time).';
      } catch {
        schedule.textContent = '';
      }
    };
    // A preview is of what the form said then: editing the form drops it.
    rampForm.addEventListener('input', (ev) => {
      if (!ev.target.closest('.preview') && !rampForm.querySelector('.preview').hidden) clearOutcome(rampForm);
    });
    rampForm.addEventListener('input', describe);
    rampForm.addEventListener('change', describe);
    describe();
    rampForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      let spec;
      try {
        spec = rampSpec(rampForm);
      } catch (err) {
        showError(rampForm, err.message);
        return;
      }
      clearOutcome(rampForm);
      setBusy(rampForm, true);
      const res = await rampSend(base + '/ramps', Object.assign({ dry_run: true }, spec.body));
      setBusy(rampForm, false);
      if (res.error) {
        showError(rampForm, res.error, res.reload);
        return;
      }
      showRampPreview(rampForm, spec, res.body);
    });
  }

  for (const box of document.querySelectorAll('.ramp-actions')) {
    box.addEventListener('click', async (ev) => {
      const button = ev.target.closest('button[data-ramp-action]');
      if (!button) return;
      const action = button.dataset.rampAction;
      const error = box.querySelector('.error');
      if (action === 'cancel' && !button.dataset.armed) {
        // Canceling cannot be undone: ask once more, in the button itself.
        button.dataset.armed = '1';
        button.textContent = 'Yes, cancel it: its remaining steps will not apply';
        button.focus();
        return;
      }
      error.hidden = true;
      setBusy(box, true);
      const res = await rampSend(base + '/ramps/' + encodeURIComponent(box.dataset.rampId) + '/' + action);
      if (res.error) {
        setBusy(box, false);
        // Most likely someone moved the ramp on since the page was loaded:
        // offer to show where it stands.
        error.textContent = res.error.replace(/^Ramp "[^"]*"/, 'This ramp').replace(/Nothing was changed/, 'The ramp was not changed') + ' ';
        const reload = el('button', { type: 'button', class: 'reload secondary' }, 'Reload');
        reload.addEventListener('click', () => reloadAt('ramps'));
        error.append(reload);
        error.hidden = false;
        return;
      }
      reloadAt('ramps');
    });
  }
  // The page after a single sign-on moves on at once: a navigation of
  // this site's own, so that the browser sends the strict session cookie.
  const onward = document.getElementById('signed-in-next');
  if (onward) location.replace(onward.getAttribute('href'));

  // What targeting.js shares of this script: the requests, their
  // refusals in words, and the forms' outcome.
  window.rolloutUI = Object.freeze({ send, el, pct, showError, clearOutcome, setBusy });
})();
