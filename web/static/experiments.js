// Experiments on a feature's page: the form that starts one, and each
// experiment's results in words — per bucket its users and rate or mean,
// the lift against the control as a bar with its interval — with the
// sample-ratio, multiple-exposure and dropped-exposure warnings, a chart
// of each lift's interval day by day (history), and a stop button.
'use strict';

(() => {
  const ui = window.rolloutUI;
  const box = document.getElementById('experiments');
  const featureNode = document.getElementById('feature-data');
  if (!ui || !box || !featureNode) return;
  const { send, el, showError, setBusy } = ui;
  const feature = JSON.parse(featureNode.textContent);
  const base = '/api/features/' + encodeURIComponent(feature.key) + '/experiments';
  const list = box.querySelector('.experiment-list');
  const form = box.querySelector('form[data-experiment=start]');

  const pct = (x, digits = 1) => (100 * x).toFixed(digits) + ' %';
  const signed = (x) => (x >= 0 ? '+' : '−') + Math.abs(100 * x).toFixed(0) + ' %';

  async function get(path) {
    // In the page's environment (env.js), as send's requests are.
    const res = await fetch(rolloutEnv(path), { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
    if (!res.ok) throw new Error('the server answered ' + res.status);
    return res.json();
  }

  // sentence says one bucket's figure for a metric against the control's.
  function sentence(bucket, control, m, mc, kind) {
    const figure = (x) => (kind === 'conversion' ? pct(x) : x.toFixed(2));
    const verb = kind === 'conversion' ? 'converts' : 'averages';
    let s = bucket + ' ' + verb + ' ' + figure(m.mean) + ' vs ' + figure(mc.mean);
    if (m.not_enough_data || !m.lift) return s + ': not enough data yet';
    s += ', ' + signed(m.lift.value) + ' (' + signed(m.lift.ci[0]) + ' to ' + signed(m.lift.ci[1]) + ')';
    return s + (m.significant ? ', significant' : ', not significant yet');
  }

  // liftBar draws the lift's interval on a scale from −50 % to +50 %
  // (wider when the interval is), 0 marked.
  function liftBar(m) {
    const bar = el('div', { class: 'lift-bar', role: 'img' });
    if (!m.lift) return bar;
    const span = Math.max(0.5, Math.abs(m.lift.ci[0]), Math.abs(m.lift.ci[1]));
    const at = (x) => (50 + 50 * x / span).toFixed(2) + '%';
    bar.setAttribute('aria-label', 'lift ' + signed(m.lift.value) + ', interval ' + signed(m.lift.ci[0]) + ' to ' + signed(m.lift.ci[1]));
    const iv = el('span', { class: 'lift-interval' + (m.significant ? (m.better ? ' better' : ' worse') : '') });
    iv.style.left = at(m.lift.ci[0]);
    iv.style.width = ((50 * (m.lift.ci[1] - m.lift.ci[0])) / span).toFixed(2) + '%';
    const dot = el('span', { class: 'lift-value' });
    dot.style.left = at(m.lift.value);
    const zero = el('span', { class: 'lift-zero' });
    zero.style.left = '50%';
    bar.append(zero, iv, dot);
    return bar;
  }

  // svg makes an SVG element with attributes.
  const svg = (tag, attrs = {}) => {
    const n = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    return n;
  };

  // liftChart draws a lift's history: one point a day, its interval as a
  // band, the lift as a line, 0 as a dashed line; each point's title
  // says its day and figures. null when there are no days to draw.
  function liftChart(history, metric, bucket) {
    const days = (history || []).filter((p) => p.lift);
    if (days.length === 0) return null;
    const W = 600, H = 140, padX = 44, padY = 12;
    let lo = 0, hi = 0;
    for (const p of days) { lo = Math.min(lo, p.lift.ci[0]); hi = Math.max(hi, p.lift.ci[1]); }
    if (hi - lo < 0.1) { hi += 0.05; lo -= 0.05; }
    const x = (i) => (days.length === 1 ? W / 2 : padX + (i * (W - 2 * padX)) / (days.length - 1)).toFixed(1);
    const y = (v) => (padY + ((hi - v) * (H - 2 * padY)) / (hi - lo)).toFixed(1);
    const chart = svg('svg', { class: 'lift-chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'data-metric': metric, 'data-bucket': bucket, 'data-days': days.length,
      'aria-label': 'lift of ' + bucket + ' on ' + metric + ' over ' + days.length + (days.length === 1 ? ' day' : ' days') + ', today ' + signed(days[days.length - 1].lift.value) });
    const band = days.map((p, i) => x(i) + ',' + y(p.lift.ci[1])).concat(days.map((p, i) => x(i) + ',' + y(p.lift.ci[0])).reverse());
    chart.append(svg('polygon', { class: 'lift-band', points: band.join(' ') }));
    chart.append(svg('line', { class: 'lift-zero-line', x1: padX / 2, x2: W - padX / 2, y1: y(0), y2: y(0) }));
    const zero = svg('text', { class: 'lift-axis', x: 2, y: Number(y(0)) + 4 });
    zero.textContent = '0 %';
    chart.append(zero);
    chart.append(svg('polyline', { class: 'lift-line', points: days.map((p, i) => x(i) + ',' + y(p.lift.value)).join(' ') }));
    days.forEach((p, i) => {
      const dot = svg('circle', { class: 'lift-day', cx: x(i), cy: y(p.lift.value), r: 3.5, 'data-at': p.at });
      const title = svg('title');
      title.textContent = new Date(p.at).toLocaleDateString() + ': ' + signed(p.lift.value) + ' (' + signed(p.lift.ci[0]) + ' to ' + signed(p.lift.ci[1]) + ')';
      dot.append(title);
      chart.append(dot);
    });
    return chart;
  }

  function renderResults(node, r, kinds) {
    node.replaceChildren();
    const control = r.buckets.find((b) => b.control);
    const users = r.buckets.map((b) => b.bucket + ' ' + b.users.toLocaleString('en') + ' users').join(', ');
    node.append(el('p', { class: 'exp-users' }, users + '.'));
    if (r.srm && r.srm.mismatch) node.append(el('p', { class: 'warning exp-srm' }, 'Sample-ratio mismatch: the users per bucket do not match the shares served (p = ' + r.srm.p_value.toPrecision(2) + '). Check how exposures are recorded before trusting the results.'));
    else if (r.srm && r.srm.waiting) node.append(el('p', { class: 'hint exp-srm' }, 'The sample-ratio check waits until every bucket expects 100 users.'));
    if (r.dropped_exposures > 0) node.append(el('p', { class: 'warning exp-dropped' }, r.dropped_exposures.toLocaleString('en') + ' first exposures could not be recorded (the database was out of reach for long): those users are left out unless served again, and the results may lean.'));
    if (r.multiple_exposures > 0) node.append(el('p', { class: 'warning exp-multiple' }, r.multiple_exposures.toLocaleString('en') + ' users were served more than one bucket (a change of shares, an override or a rule): they are left out.'));
    for (const metric of r.experiment.metrics) {
      const mc = control && control.metrics[metric];
      if (!mc) continue;
      const ul = el('ul', { class: 'exp-metric', 'data-metric': metric });
      for (const b of r.buckets) {
        const m = b.metrics[metric];
        if (b.control || !m) continue;
        const li = el('li', { 'data-bucket': b.bucket }, el('span', { class: 'exp-sentence' }, sentence(b.bucket, control.bucket, m, mc, kinds[metric])));
        li.append(liftBar(m));
        const chart = liftChart(m.history, metric, b.bucket);
        if (chart) li.append(chart);
        ul.append(li);
      }
      node.append(el('h5', {}, metric), ul);
    }
  }

  async function render() {
    let xs;
    let metrics;
    try {
      [xs, metrics] = await Promise.all([get(base), get('/api/metrics')]);
    } catch (err) {
      list.replaceChildren(el('li', { class: 'error' }, 'Could not read the experiments: ' + err.message + '.'));
      return;
    }
    const kinds = Object.fromEntries(metrics.metrics.map((m) => [m.key, m.kind]));
    const running = xs.experiments.some((x) => x.status === 'running');
    if (form) {
      form.hidden = running;
      // Its fold too: no second experiment while one runs.
      const fold = form.closest('details');
      if (fold) fold.hidden = running;
      const field = form.querySelector('.exp-metrics');
      if (!field.querySelector('input') && metrics.metrics.length > 0) {
        document.getElementById('exp-no-metrics').hidden = true;
        for (const m of metrics.metrics) {
          field.append(el('label', {}, el('input', { type: 'checkbox', name: 'metric', value: m.key }), ' ' + m.key + ' (' + m.kind + ')'));
        }
      }
    }
    document.getElementById('no-experiments').hidden = xs.experiments.length > 0;
    list.replaceChildren();
    for (const x of xs.experiments) {
      const li = el('li', { class: 'experiment state-' + x.status, 'data-experiment-id': x.id, 'data-state': x.status });
      li.append(el('h3', { class: 'exp-h' }, el('span', { class: 'badge' }, x.status === 'running' ? 'Running' : 'Stopped'), ' ' + x.name + ' ',
        el('span', { class: 'hint' }, '· control ' + x.control + ' · started by ' + (x.started_by || 'someone') + ' ' + new Date(x.started_at).toLocaleString())));
      if (x.hypothesis) li.append(el('p', { class: 'hint' }, x.hypothesis));
      const results = el('div', { class: 'exp-results' }, 'Reading the results…');
      li.append(results);
      if (x.status === 'running' && form) {
        const stop = el('button', { type: 'button', class: 'danger', 'data-experiment-action': 'stop' }, 'Stop the experiment');
        stop.addEventListener('click', async () => {
          stop.disabled = true;
          const res = await send({ method: 'POST', path: base + '/' + encodeURIComponent(x.id) + '/stop', create: true }, false);
          stop.disabled = false;
          if (res.error) {
            li.append(el('p', { class: 'error', role: 'alert' }, res.error));
            return;
          }
          render();
        });
        li.append(stop);
      }
      list.append(li);
      get(base + '/' + encodeURIComponent(x.id) + '/results').then((r) => renderResults(results, r, kinds), (err) => {
        results.textContent = 'Could not read the results: ' + err.message + '.';
      });
    }
  }

  if (form) {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const body = {
        name: form.elements.name.value,
        control: form.elements.control.value,
        metrics: [...form.querySelectorAll('input[name=metric]:checked')].map((i) => i.value),
        hypothesis: form.elements.hypothesis.value,
      };
      setBusy(form, true);
      const res = await send({ method: 'POST', path: base, body, create: true }, false);
      setBusy(form, false);
      if (res.error) {
        showError(form, res.error);
        return;
      }
      form.querySelector('.error').hidden = true;
      render();
    });
  }
  render();
})();
