// Promotions between environments (issue #31), on a feature's page and on
// the compare page: each is first sent to POST /api/features/K/promote as
// a dry run, whose report (the exact churn in the target) the page shows;
// Apply sends the same promotion for real, pinned to the source's version
// and, with If-Match, to the target's, so that what was previewed is what
// happens. Refusals are said next to the form; when either side changed
// meanwhile, the page says which.
'use strict';

(() => {
  const ui = window.rolloutUI;
  if (!ui) return;
  const { send, el, pct, showError, clearOutcome, setBusy } = ui;

  function readJSON(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  // direction says where all moves go, in the server's words.
  function direction(moves) {
    if (moves.length === 0) return '';
    const { to, from } = moves[0];
    if (moves.every((m) => m.to === to)) return to === null ? 'all to no bucket (apps serve their default)' : 'all into ' + to;
    if (moves.every((m) => m.from === from)) return from === null ? 'all from no bucket' : 'all out of ' + from;
    return '';
  }

  function label(b) { return b === null || b === undefined ? 'no bucket' : b; }

  // sharesLine says shares in words, in the order of names.
  function sharesLine(names, shares) {
    return names.filter((n) => n in shares).map((n) => n + ' ' + pct(shares[n])).join(', ') || 'no bucket served';
  }

  // preview shows a promotion's report: the churn in the target, its
  // moves, the shares before and after, the populations rules move.
  function preview(form, target, report, apply) {
    const box = form.querySelector('.preview');
    const moves = report.moves || [];
    const churn = report.churn || 0;
    const dir = direction(moves);
    const names = [...new Set([...Object.keys(report.shares_before || {}), ...Object.keys(report.shares_after || {})])].sort();
    const outcome = churn > 0
      ? [el('b', { class: 'big' }, pct(churn)), ' of users in ' + target.name + ' would move' + (dir ? ', ' + dir : '')]
      : ['No user in ' + target.name + ' would change bucket'];
    const parts = [
      el('h3', { tabindex: '-1' }, 'Preview in ' + target.name + (target.protected ? ' (protected)' : '')),
      el('p', { class: 'outcome' }, ...outcome),
    ];
    if (moves.length) {
      parts.push(el('ul', { class: 'promote-moves' }, ...moves.slice(0, 8).map((m) => el('li', {}, label(m.from) + ' → ' + label(m.to) + ' ' + pct(m.share)))));
    }
    parts.push(el('p', { class: 'promote-shares' }, 'Shares in ' + target.name + ': ', el('span', { class: 'before' }, sharesLine(names, report.shares_before || {})),
      ' → ', el('b', { class: 'after' }, sharesLine(names, report.shares_after || {}))));
    for (const r of report.rules || []) parts.push(el('p', { class: 'hint' }, r.text));
    if (target.protected) parts.push(el('p', { class: 'hint' }, target.name + ' is protected: an editor\'s promotion there waits for approval as a change request.'));
    const button = el('button', { type: 'button', class: 'apply' + (target.protected ? ' danger' : '') }, 'Apply to ' + target.name);
    button.addEventListener('click', apply);
    parts.push(button);
    box.replaceChildren(...parts);
    box.hidden = false;
    box.querySelector('h3').focus();
  }

  // moved names the sides of a promotion that changed since the page was
  // loaded, from the feature's configuration in every environment now.
  async function moved(key, sides) {
    try {
      const res = await fetch(rolloutEnv('/api/features/' + encodeURIComponent(key) + '/environments'), { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
      if (!res.ok) return [];
      const now = (await res.json()).environments || [];
      return sides.filter((s) => {
        const p = now.find((e) => e.environment === s.key);
        return !p || p.version !== s.version;
      });
    } catch {
      return [];
    }
  }

  // promote previews, then on Apply makes, the promotion of key from
  // source to target (each {key, name, protected, version, tag}).
  async function promote(form, key, source, target, include, comment, done) {
    const body = { from: source.key, to: target.key, from_version: source.version };
    if (include) body.include = include;
    if (comment) body.comment = comment;
    const req = { method: 'POST', path: '/api/features/' + encodeURIComponent(key) + '/promote', tag: target.tag, body };
    const refused = async (res) => {
      let msg = res.error;
      if (res.reload) {
        const sides = await moved(key, [source, target]);
        if (sides.length) {
          msg = sides.map((s) => s.name).join(' and ') + (sides.length > 1 ? ' have' : ' has') +
            ' changed since this page was loaded (it showed version ' + sides.map((s) => s.version).join(' and ') + '), so nothing was changed. Reload to see the change, then preview again.';
        }
      }
      showError(form, msg, res.reload);
    };
    clearOutcome(form);
    setBusy(form, true);
    const dry = await send(req, true);
    setBusy(form, false);
    if (dry.error) {
      await refused(dry);
      return;
    }
    preview(form, target, dry.body.report || {}, async () => {
      setBusy(form, true);
      const res = await send(req, false);
      if (res.error) {
        setBusy(form, false);
        form.querySelector('.preview').hidden = true;
        await refused(res);
        return;
      }
      done(res.body);
    });
  }

  // after goes where a promotion leaves the user: the feature's page in
  // the target with the churn banner, or the target's requests.
  function after(key, target) {
    return (body) => {
      const q = target.key === 'production' ? '' : 'env=' + encodeURIComponent(target.key);
      if (body.request) {
        window.location.assign('/ui/requests' + (q ? '?' + q : '') + '#request-' + body.request.id);
        return;
      }
      const path = '/ui/features/' + encodeURIComponent(key);
      try {
        window.sessionStorage.setItem('applied:' + path + ':' + body.feature.version, '1');
      } catch {
        // No storage: the banner shows anyway.
      }
      window.location.assign(path + '?' + (q ? q + '&' : '') + 'changed=' + body.feature.version);
    };
  }

  // A feature's page: the promote form.
  const data = readJSON('promote-data');
  const form = document.getElementById('promote-form');
  if (data && form) {
    const envOf = (k) => data.environments.find((e) => e.key === k);
    form.addEventListener('input', () => clearOutcome(form));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const source = envOf(form.elements.from.value);
      const target = envOf(form.elements.to.value);
      if (source.key === target.key) {
        clearOutcome(form);
        showError(form, 'Pick two different environments: the source and the target are both ' + source.name + '.');
        return;
      }
      const include = [...form.querySelectorAll('input[name=include]:checked')].map((i) => i.value);
      if (include.length === 0) {
        clearOutcome(form);
        showError(form, 'Pick at least one part to promote.');
        return;
      }
      promote(form, data.key, source, target, include, form.elements.comment.value.trim(), after(data.key, target));
    });
  }

  // The compare page: a promotion's preview per differing feature, with
  // the default parts.
  const compare = readJSON('compare-data');
  if (compare) {
    for (const f of document.querySelectorAll('form.compare-promote')) {
      f.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const row = f.closest('tr');
        const key = f.dataset.key;
        const source = { key: compare.from, name: compare.from_name, version: Number(row.dataset.fromVersion) };
        const target = { key: compare.to, name: compare.to_name, protected: compare.to_protected, version: Number(row.dataset.toVersion), tag: row.dataset.toTag };
        promote(f, key, source, target, null, '', after(key, target));
      });
    }
    const batch = document.getElementById('batch-promote');
    if (batch) batch.addEventListener('submit', (ev) => {
      ev.preventDefault();
      promoteBatch(batch, compare);
    });
  }

  // promoteBatch previews, then on Apply makes, the promotion of the ticked
  // features of the compare page as one batch, each pinned to the
  // versions of both sides the page shows.
  async function promoteBatch(form, compare) {
    clearOutcome(form);
    const keys = [...document.querySelectorAll('input[name=batch]:checked')].map((i) => i.value);
    if (keys.length === 0) {
      showError(form, 'Tick at least one feature to promote.');
      return;
    }
    const versions = {};
    for (const key of keys) {
      const row = document.querySelector('tr.compare-row[data-key="' + CSS.escape(key) + '"]');
      versions[key] = { from: Number(row.dataset.fromVersion), to: Number(row.dataset.toVersion) };
    }
    const body = { from: compare.from, to: compare.to, features: keys, versions };
    const comment = form.elements.comment.value.trim();
    if (comment) body.comment = comment;
    const req = { method: 'POST', path: '/api/environments/promote', body };
    setBusy(form, true);
    const dry = await send(req, true);
    setBusy(form, false);
    if (dry.error) {
      showError(form, dry.error, dry.reload);
      return;
    }
    const target = compare.to_name;
    const total = dry.body.total_churn || 0;
    const box = form.querySelector('.preview');
    const items = (dry.body.features || []).map((f) => el('li', { 'data-key': f.feature }, f.feature + ': ' +
      (f.to_version === f.from_version ? 'alike already, unchanged' : pct(f.churn || 0) + ' of its users move')));
    const button = el('button', { type: 'button', class: 'apply' + (compare.to_protected ? ' danger' : '') }, 'Apply ' + keys.length + (keys.length === 1 ? ' promotion' : ' promotions') + ' to ' + target);
    box.replaceChildren(
      el('h3', { tabindex: '-1' }, 'Preview in ' + target + (compare.to_protected ? ' (protected)' : '')),
      el('p', { class: 'outcome' }, el('b', { class: 'big batch-total' }, pct(total)), ' of users in all, summed over the features'),
      el('ul', { class: 'promote-moves batch-features' }, ...items),
      button);
    box.hidden = false;
    box.querySelector('h3').focus();
    button.addEventListener('click', async () => {
      setBusy(form, true);
      const res = await send(req, false);
      setBusy(form, false);
      if (res.error) {
        box.hidden = true;
        // A batch names the feature that moved on.
        const text = res.detail ? res.detail.charAt(0).toUpperCase() + res.detail.slice(1) + '. Reload the page to see it.' : res.error;
        showError(form, text, res.reload);
        return;
      }
      window.location.reload();
    });
  }
})();
