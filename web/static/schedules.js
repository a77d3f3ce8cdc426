// Scheduled changes on a feature's page (templates/schedules.html): the
// form that schedules switching the feature on or off at a time, and the
// cancel buttons of the pending ones. Both go to the schedules API and
// reload the page at the section.
'use strict';

(() => {
  const ui = window.rolloutUI;
  const box = document.getElementById('schedules');
  const featureNode = document.getElementById('feature-data');
  if (!ui || !box || !featureNode) return;
  const { send, setBusy } = ui;
  const feature = JSON.parse(featureNode.textContent);
  const base = '/api/features/' + encodeURIComponent(feature.key) + '/schedules';

  function reload() {
    location.hash = 'schedules';
    location.reload();
  }

  function fail(node, text) {
    node.textContent = text;
    node.hidden = false;
  }

  const form = box.querySelector('form[data-schedule=create]');
  if (form) {
    form.addEventListener('input', () => { form.querySelector('.error').hidden = true; });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const error = form.querySelector('.error');
      error.hidden = true;
      // The time is typed in local time; the API takes it in UTC.
      const at = new Date(form.elements.namedItem('at').value);
      if (Number.isNaN(at.getTime())) return fail(error, 'Give the date and the time of the change.');
      if (at.getTime() <= Date.now()) return fail(error, 'Give a time in the future: a change for now is made with the switch above.');
      const body = {
        at: at.toISOString().replace(/\.\d{3}Z$/, 'Z'),
        change: { kind: 'patch', body: { enabled: form.elements.namedItem('enabled').value === 'true' } },
      };
      const comment = form.elements.namedItem('comment').value.trim();
      if (comment !== '') body.comment = comment;
      setBusy(form, true);
      const res = await send({ method: 'POST', path: base, body, create: true }, false);
      if (res.error) {
        setBusy(form, false);
        return fail(error, res.error);
      }
      reload();
    });
  }

  for (const button of box.querySelectorAll('button[data-schedule-cancel]')) {
    button.addEventListener('click', async () => {
      const item = button.closest('li[data-schedule-id]');
      const res = await send({ method: 'POST', path: base + '/' + encodeURIComponent(item.dataset.scheduleId) + '/cancel', create: true }, false);
      if (res.error) {
        let error = item.querySelector('.error');
        if (!error) {
          error = document.createElement('p');
          error.className = 'error';
          error.setAttribute('role', 'alert');
          item.append(error);
        }
        return fail(error, res.error);
      }
      reload();
    });
  }
})();
