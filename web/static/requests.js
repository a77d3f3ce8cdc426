// The change requests page (approve, reject, cancel) and the settings
// page (save): each form sends its one request to the API and reloads the
// page on success, or says in words why nothing was done.
(() => {
  'use strict';

  // call sends body to the API's path, in the environment env when given
  // (the inbox lists every environment's requests), else the page's.
  async function call(method, path, body, env) {
    let res;
    try {
      res = await fetch(env ? path + '?env=' + encodeURIComponent(env) : rolloutEnv(path), {
        method, credentials: 'same-origin',
        headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
    } catch (err) {
      return { error: 'Could not reach the server: ' + err.message + '. Nothing was done.' };
    }
    let data = null;
    try {
      data = await res.json();
    } catch {
      // Not JSON: explained below.
    }
    if (res.ok) return { body: data };
    if (res.status === 401) return { error: 'Your session has ended: sign in again. Nothing was done.' };
    const msg = data && data.error && data.error.message;
    if (res.status >= 500 || !msg) return { error: 'The server could not do it just now. Nothing was done; try again in a moment.' };
    return { error: msg.charAt(0).toUpperCase() + msg.slice(1) + (/[.!?]$/.test(msg) ? '' : '.'), status: res.status };
  }

  function showError(form, text) {
    const p = form.querySelector('.error');
    p.textContent = text;
    p.hidden = false;
  }

  function busy(form, on) {
    form.setAttribute('aria-busy', on ? 'true' : 'false');
    for (const b of form.querySelectorAll('button')) b.disabled = on;
  }

  for (const form of document.querySelectorAll('form[data-decide]')) {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const decision = (ev.submitter && ev.submitter.value) || 'approve';
      const comment = form.querySelector('textarea[name=comment]');
      busy(form, true);
      const res = await call('POST', '/api/requests/' + encodeURIComponent(form.dataset.decide) + '/' + decision, { comment: comment ? comment.value : '' }, form.dataset.env);
      busy(form, false);
      if (res.error) {
        // A feature that moved on was previewed again: reload to see it.
        showError(form, res.error + (res.status === 412 ? ' Reload the page to see the new preview.' : ''));
        return;
      }
      window.location.reload();
    });
  }

  const settings = document.querySelector('form[data-settings]');
  if (settings) {
    settings.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const text = settings.querySelector('[name=max_churn]').value.replace('%', '').trim();
      const percent = Number(text);
      if (text === '' || !Number.isFinite(percent) || percent < 0 || percent > 100) {
        showError(settings, 'Give the churn limit as a percentage between 0 and 100, e.g. 25.');
        return;
      }
      const mode = (settings.querySelector('[name=approvals]:checked') || {}).value || 'off';
      const features = settings.querySelector('[name=features]').value.split(/[\s,;]+/).filter((k) => k !== '');
      if (mode === 'some' && features.length === 0) {
        showError(settings, 'List the features that need approvals, or choose "No feature".');
        return;
      }
      const body = {
        max_churn: percent / 100,
        require_approval: { all: mode === 'all', features: mode === 'some' ? features : [] },
        version: Number(settings.dataset.version),
        comment: settings.querySelector('[name=comment]').value,
      };
      busy(settings, true);
      const res = await call('PUT', '/api/settings', body);
      busy(settings, false);
      if (res.error) {
        showError(settings, res.error);
        return;
      }
      window.location.reload();
    });
  }
})();
