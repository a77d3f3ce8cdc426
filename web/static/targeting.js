// Targeting on the dashboard: a feature's rules edited as sentences and
// previewed before they apply, its bucket_by, the "test a context" box, and
// the segments page. Requests go through app.js's send (If-Match of the
// page's version, refusals in words).
'use strict';

(() => {
  const ui = window.rolloutUI;
  if (!ui) return;
  const { send, el, pct, showError, clearOutcome, setBusy } = ui;

  const featureNode = document.getElementById('feature-data');
  const feature = featureNode ? JSON.parse(featureNode.textContent) : null;
  const base = feature ? '/api/features/' + encodeURIComponent(feature.key) : '';
  const dataNode = document.getElementById('targeting-data') || document.getElementById('segments-data');
  const data = dataNode ? JSON.parse(dataNode.textContent) : null;
  if (!data) return;
  const labels = Object.fromEntries(data.operators.map((o) => [o.op, o.label]));
  const segments = featureNode ? data.segments || [] : []; // keys, on a feature's page

  const NO_VALUE = ['present', 'absent'];
  const LIST = ['in', 'not_in'];
  const NUMBER = ['lt', 'lte', 'gt', 'gte'];
  // The operators that take ignore_case, and the attributes it is ticked
  // for by itself (e-mail-like names) until the box is touched.
  const FOLD = ['eq', 'neq', 'in', 'not_in', 'starts_with', 'ends_with', 'contains'];
  const mailLike = (attr) => /e-?mail/i.test(attr);
  const hints = {
    in: 'DE, AT', not_in: 'DE, AT', lt: '10', lte: '10', gt: '10', gte: '10',
    semver_lt: '4.2', semver_lte: '4.2', semver_eq: '4.2.0', semver_gte: '4.2', semver_gt: '4.2',
    before: '2026-01-01T00:00:00Z', after: '2026-01-01T00:00:00Z', matches: '^pro-', eq: 'enterprise', neq: 'free',
    starts_with: 'pro-', ends_with: '@example.com', contains: 'beta',
  };

  // valueText shows a condition's value in its field: a list joined by
  // commas, a string bare, anything else as JSON.
  function valueText(v) {
    if (v === undefined || v === null) return '';
    if (Array.isArray(v)) return v.join(', ');
    if (typeof v === 'string') return v;
    return JSON.stringify(v);
  }

  // conditionWords says a condition as the server's pages do.
  function conditionWords(c) {
    if (c.any) return '(' + c.any.map(conditionWords).join(' or ') + ')';
    if (c.ignore_case) return conditionWords({ ...c, ignore_case: false }) + ' (any case)';
    const words = labels[c.op] || c.op;
    if (c.op === 'in_segment') return words + ' ' + valueText(c.value);
    if (NO_VALUE.includes(c.op)) return c.attribute + ' ' + words;
    if (words.endsWith(' (semver)')) return c.attribute + ' ' + words.slice(0, -9) + ' ' + valueText(c.value) + ' (semver)';
    if (words.endsWith(' (number)')) return c.attribute + ' ' + words.slice(0, -9) + ' ' + valueText(c.value);
    return c.attribute + ' ' + words + ' ' + valueText(c.value);
  }

  function ruleWords(r) {
    const when = r.conditions.length === 0 ? 'Everyone' : 'If ' + r.conditions.map(conditionWords).join(' and ');
    let what = r.serve.bucket;
    if (r.serve.ring) what = 'the ring' + (r.serve.bucket_by ? ', bucketed by ' + r.serve.bucket_by : '');
    if (r.serve.split) what = splitWords(r.serve);
    return when + ' → serve ' + what;
  }

  // splitWords says a rule's split: "a split: off 50 %, on 50 %".
  function splitWords(serve) {
    const parts = Object.keys(serve.split).sort().map((b) => b + ' ' + Math.round(serve.split[b] * 10000) / 100 + ' %');
    return 'a split: ' + parts.join(', ') + (serve.bucket_by ? ', bucketed by ' + serve.bucket_by : '');
  }

  let uid = 0;
  const id = (p) => p + '-' + (++uid);

  // conditionFields are one condition's fields, laid out as words of a
  // sentence: [attribute] [operator] [value] [ignore case], or "in segment
  // [key]"; the operator shows the fields it takes.
  function conditionFields(c, withSegments) {
    const attr = el('input', { name: 'attribute', 'aria-label': 'Attribute', placeholder: 'attribute, e.g. country', autocomplete: 'off', spellcheck: 'false', class: 'attr' });
    attr.value = c.attribute || '';
    const op = el('select', { name: 'op', 'aria-label': 'Operator', class: 'op' });
    for (const o of data.operators) {
      if (o.op === 'in_segment' && !withSegments) continue;
      op.append(el('option', { value: o.op }, o.label));
    }
    op.value = c.op || 'eq';
    const value = el('input', { name: 'value', 'aria-label': 'Value', autocomplete: 'off', spellcheck: 'false', class: 'val' });
    const seg = el('select', { name: 'segment', 'aria-label': 'Segment', class: 'seg' });
    for (const k of segments) seg.append(el('option', { value: k }, k));
    if (c.op === 'in_segment') {
      if (c.value && !segments.includes(c.value)) seg.append(el('option', { value: c.value }, c.value));
      seg.value = c.value || '';
    } else {
      value.value = valueText(c.value);
    }
    const fold = el('input', { type: 'checkbox', name: 'ignore_case', class: 'fold' });
    const foldLabel = el('label', { class: 'fold-label' }, fold, ' ignore case');
    // A condition that exists keeps its choice; a new one follows its
    // attribute (e-mail-like: ticked) until the box is touched.
    fold.checked = c.ignore_case === true;
    if (c.attribute !== undefined) fold.dataset.touched = '1';
    fold.addEventListener('change', () => { fold.dataset.touched = '1'; });
    attr.addEventListener('input', () => {
      if (!fold.dataset.touched) fold.checked = mailLike(attr.value.trim());
    });
    const sync = () => {
      const o = op.value;
      attr.hidden = o === 'in_segment';
      foldLabel.hidden = !FOLD.includes(o);
      value.hidden = o === 'in_segment' || NO_VALUE.includes(o);
      seg.hidden = o !== 'in_segment';
      value.placeholder = hints[o] || 'value';
      value.setAttribute('aria-label', LIST.includes(o) ? 'Values, separated by commas' : 'Value');
    };
    op.addEventListener('change', sync);
    sync();
    return [attr, op, value, seg, foldLabel];
  }

  // conditionRow is one condition of a list: its fields, or an any-of
  // group's.
  function conditionRow(c, withSegments) {
    if (c.any) return anyGroup(c, withSegments);
    const li = el('li', { class: 'cond' });
    const lead = el('span', { class: 'cond-lead', 'aria-hidden': 'true' }, 'If');
    const remove = el('button', { type: 'button', class: 'remove-cond secondary', 'aria-label': 'Remove this condition', title: 'Remove this condition' }, '×');
    li.append(lead, ...conditionFields(c, withSegments), remove);
    return li;
  }

  // anyGroup is an any-of condition ({"any":[…]}): alternatives joined by
  // "or", each a condition's fields, with buttons to add and remove them.
  // One loaded from the server is kept exactly (li.dataset.any: a value
  // such as "12" stays a string) until it is edited.
  function anyGroup(c, withSegments) {
    const li = el('li', { class: 'cond cond-group' });
    if (!c.fresh) li.dataset.any = JSON.stringify({ any: c.any });
    const lead = el('span', { class: 'cond-lead', 'aria-hidden': 'true' }, 'If');
    const alts = el('ol', { class: 'alts' });
    const addAlt = el('button', { type: 'button', class: 'add-alt secondary' }, 'Add an alternative');
    const words = el('span', { class: 'cond-any' });
    const reads = el('p', { class: 'any-reads hint' }, 'Reads: ', words);
    const box = el('div', { class: 'any-box' },
      el('p', { class: 'any-title' }, 'one of these holds:'), alts, el('div', { class: 'any-actions' }, addAlt), reads);
    const remove = el('button', { type: 'button', class: 'remove-cond secondary', 'aria-label': 'Remove this any-of group', title: 'Remove this any-of group' }, '×');
    li.append(lead, box, remove);
    const relabel = () => {
      alts.querySelectorAll(':scope > li.alt').forEach((a, i) => {
        a.querySelector('.alt-lead').textContent = i === 0 ? 'either' : 'or';
        a.querySelector('.remove-alt').setAttribute('aria-label', 'Remove alternative ' + (i + 1));
      });
    };
    const altRow = (a) => el('li', { class: 'alt' },
      el('span', { class: 'alt-lead', 'aria-hidden': 'true' }, 'or'),
      ...conditionFields(a.any ? {} : a, withSegments),
      el('button', { type: 'button', class: 'remove-alt secondary', title: 'Remove this alternative' }, '×'));
    const changed = () => {
      delete li.dataset.any;
      li.dispatchEvent(new Event('input', { bubbles: true }));
    };
    const say = () => {
      try {
        words.textContent = conditionWords(readAny(li, 'This group'));
        reads.hidden = false;
      } catch {
        reads.hidden = true;
      }
    };
    for (const a of c.any) alts.append(altRow(a));
    addAlt.addEventListener('click', () => {
      alts.append(altRow({ op: 'eq' }));
      relabel();
      alts.lastElementChild.querySelector('input:not([hidden]), select').focus();
      changed();
    });
    alts.addEventListener('click', (ev) => {
      const b = ev.target.closest('.remove-alt');
      if (!b) return;
      const a = b.closest('li.alt');
      const next = a.nextElementSibling || a.previousElementSibling;
      a.remove();
      relabel();
      (next ? next.querySelector('input:not([hidden]), select') : addAlt).focus();
      changed();
    });
    // Typing in an alternative: the group is no longer kept as loaded.
    alts.addEventListener('input', () => { delete li.dataset.any; });
    alts.addEventListener('change', () => { delete li.dataset.any; });
    li.addEventListener('input', say);
    li.addEventListener('change', say);
    relabel();
    say();
    return li;
  }

  // readAny reads an any-of group: two alternatives at least, none of
  // them a group itself.
  function readAny(li, where) {
    if (li.dataset.any) return JSON.parse(li.dataset.any);
    const rows = [...li.querySelectorAll(':scope .alts > li.alt')];
    if (rows.length < 2) throw new Error(where + ': an any-of group needs at least two alternatives joined by "or"; add one, or remove the group and add a plain condition.');
    return {
      any: rows.map((a, i) => {
        if (a.querySelector('.cond-group')) throw new Error(where + ', alternative ' + (i + 1) + ': an alternative cannot be an any-of group itself (groups do not nest).');
        return readFields(a, where + ', alternative ' + (i + 1));
      }),
    };
  }

  // readCondition reads a condition's fields; where says which, for errors.
  function readCondition(li, where) {
    if (li.classList.contains('cond-group')) return readAny(li, where);
    return readFields(li, where);
  }

  // readFields reads one condition's fields (a row or an alternative).
  function readFields(li, where) {
    const c = readPlainCondition(li, where);
    if (FOLD.includes(c.op) && li.querySelector('[name=ignore_case]').checked &&
      (typeof c.value === 'string' || Array.isArray(c.value))) c.ignore_case = true;
    return c;
  }

  function readPlainCondition(li, where) {
    const op = li.querySelector('[name=op]').value;
    if (op === 'in_segment') {
      const key = li.querySelector('[name=segment]').value;
      if (!key) throw new Error(where + ': there is no segment to choose: create one on the Segments page first.');
      return { op, value: key };
    }
    const attribute = li.querySelector('[name=attribute]').value.trim();
    if (attribute === '') throw new Error(where + ': give the attribute, e.g. country.');
    if (NO_VALUE.includes(op)) return { attribute, op };
    const text = li.querySelector('[name=value]').value.trim();
    if (LIST.includes(op)) {
      const list = text.split(',').map((x) => x.trim()).filter((x) => x !== '');
      if (list.length === 0) throw new Error(where + ': give the values, separated by commas, e.g. DE, AT.');
      return { attribute, op, value: list };
    }
    if (NUMBER.includes(op)) {
      const n = Number(text);
      if (text === '' || !Number.isFinite(n)) throw new Error(where + ': give a number, e.g. 10.');
      return { attribute, op, value: n };
    }
    if ((op === 'eq' || op === 'neq') && text !== '') {
      // A number or a boolean is sent as one: "eq 12" holds for 12 and "12".
      if (text === 'true' || text === 'false') return { attribute, op, value: text === 'true' };
      const n = Number(text);
      if (/^-?\d+(\.\d+)?$/.test(text) && Number.isFinite(n)) return { attribute, op, value: n };
    }
    if (text === '') throw new Error(where + ': give the value.');
    return { attribute, op, value: text };
  }

  // A list of conditions: "If" before the first, "and" before the others.
  // addGroup, if given, is the button that adds an any-of group.
  function wireConditions(list, conditions, withSegments, addButton, addGroup) {
    const relabel = () => {
      list.querySelectorAll(':scope > li.cond').forEach((li, i) => {
        li.querySelector('.cond-lead').textContent = i === 0 ? 'If' : 'and';
      });
    };
    for (const c of conditions) list.append(conditionRow(c, withSegments));
    addButton.addEventListener('click', () => {
      list.append(conditionRow({ op: 'eq' }, withSegments));
      relabel();
      list.lastElementChild.querySelector('input:not([hidden]), select').focus();
      list.dispatchEvent(new Event('input', { bubbles: true }));
    });
    if (addGroup) {
      addGroup.addEventListener('click', () => {
        list.append(anyGroup({ any: [{ op: 'eq' }, { op: 'eq' }], fresh: true }, withSegments));
        relabel();
        list.lastElementChild.querySelector('input:not([hidden]), select').focus();
        list.dispatchEvent(new Event('input', { bubbles: true }));
      });
    }
    list.addEventListener('click', (ev) => {
      const b = ev.target.closest('.remove-cond');
      if (!b) return;
      const li = b.closest('li.cond');
      const next = li.nextElementSibling || li.previousElementSibling;
      li.remove();
      relabel();
      (next ? next.querySelector('input:not([hidden]), select') : addButton).focus();
      list.dispatchEvent(new Event('input', { bubbles: true }));
    });
    relabel();
  }

  function readConditions(list, where) {
    return [...list.querySelectorAll(':scope > li.cond')].map((li, i) => readCondition(li, where + ', condition ' + (i + 1)));
  }

  // markApplied notes the version this page applied, so that the page that
  // follows shows its banner (see app.js).
  function goToVersion(version) {
    const path = '/ui/features/' + encodeURIComponent(feature.key);
    try {
      window.sessionStorage.setItem('applied:' + path + ':' + version, '1');
    } catch {
      // No storage: the banner shows anyway.
    }
    window.location.assign(rolloutEnv(path + '?changed=' + version + '#targeting'));
  }

  // estimateFrom says what an estimate counted: rules by name, "" the ring.
  function estimateFrom(from) {
    return (from || []).map((r) => (r === '' ? 'the ring' : 'rule ' + r)).join(', ');
  }

  // previewBox fills the form's preview with paragraphs and the buttons
  // that apply or drop it.
  function previewBox(form, parts, applyLabel, apply) {
    const box = form.querySelector('.preview');
    box.replaceChildren();
    const heading = el('h3', { tabindex: '-1' }, 'Preview — nothing is changed yet');
    box.append(heading, ...parts);
    const ok = el('button', { type: 'button', class: 'apply' }, applyLabel);
    const cancel = el('button', { type: 'button', class: 'cancel secondary' }, 'Cancel');
    box.append(el('div', { class: 'actions' }, ok, cancel));
    box.hidden = false;
    heading.focus();
    ok.addEventListener('click', async () => {
      setBusy(form, true);
      const res = await apply();
      if (res && res.error) {
        setBusy(form, false);
        showError(form, res.error, res.reload);
      }
    });
    cancel.addEventListener('click', () => clearOutcome(form));
  }

  // Editing a form drops its preview or error: they are of what it said.
  function dropOnEdit(form) {
    const drop = () => {
      const p = form.querySelector('.preview');
      const e = form.querySelector('.error');
      if ((p && !p.hidden) || (e && !e.hidden)) clearOutcome(form);
    };
    form.addEventListener('input', drop);
    form.addEventListener('change', drop);
  }

  // ---- A feature's rules ----
  const rulesForm = document.querySelector('form[data-targeting=rules]');
  if (rulesForm && feature) {
    const list = rulesForm.querySelector('.rule-list');
    const none = rulesForm.querySelector('.no-rule-yet');
    const addRule = rulesForm.querySelector('.add-rule');

    const renumber = () => {
      const cards = [...list.querySelectorAll(':scope > li.rule')];
      cards.forEach((li, i) => {
        li.querySelector('.rule-n').textContent = 'Rule ' + (i + 1);
        const name = li.querySelector('[name=rule-name]').value || 'rule ' + (i + 1);
        li.querySelector('.up').disabled = i === 0;
        li.querySelector('.down').disabled = i === cards.length - 1;
        li.querySelector('.up').setAttribute('aria-label', 'Move ' + name + ' up');
        li.querySelector('.down').setAttribute('aria-label', 'Move ' + name + ' down');
        li.querySelector('.remove-rule').setAttribute('aria-label', 'Remove ' + name);
      });
      none.hidden = cards.length > 0;
    };

    // sentenceOf says a rule card as it stands, or what is missing.
    const sentenceOf = (li) => {
      try {
        return ruleWords(readRule(li, 'This rule'));
      } catch (err) {
        return err.message;
      }
    };

    const ruleCard = (r) => {
      const li = el('li', { class: 'rule' });
      const nameId = id('rule-name');
      const name = el('input', { id: nameId, name: 'rule-name', autocomplete: 'off', spellcheck: 'false', class: 'rule-name-input' });
      name.value = r.name || '';
      // A new rule suggests its name as a placeholder, never as text the
      // user's typing would append to; left empty, it is the name.
      if (r.placeholder) name.placeholder = r.placeholder;
      const head = el('div', { class: 'rule-head' },
        el('span', { class: 'drag-handle', title: 'Drag to reorder', 'aria-hidden': 'true' }, '⠿'),
        el('span', { class: 'rule-n' }, 'Rule'),
        el('label', { for: nameId }, 'Name'), name,
        el('span', { class: 'rule-moves' },
          el('button', { type: 'button', class: 'up secondary', title: 'Move up' }, '↑'),
          el('button', { type: 'button', class: 'down secondary', title: 'Move down' }, '↓'),
          el('button', { type: 'button', class: 'remove-rule secondary' }, 'Remove')));
      const conds = el('ol', { class: 'conds' });
      const addCond = el('button', { type: 'button', class: 'add-cond secondary' }, 'Add a condition');
      const addAny = el('button', { type: 'button', class: 'add-any secondary' }, 'Add an any-of group');
      const serve = el('select', { name: 'serve', 'aria-label': 'What the rule serves', class: 'serve' });
      for (const b of data.buckets) serve.append(el('option', { value: 'bucket:' + b }, b));
      serve.append(el('option', { value: 'ring' }, 'the ring'));
      serve.value = r.serve && r.serve.ring ? 'ring' : 'bucket:' + ((r.serve && r.serve.bucket) || data.buckets[0] || '');
      serve.append(el('option', { value: 'split' }, 'a split…'));
      // A split's shares, a percentage per bucket. Its planned ring is
      // kept (li.dataset.ring) and sent back, so that the server plans
      // a change of shares from it, moving only the users it must.
      const shares = el('span', { class: 'split-shares' });
      for (const b of data.buckets) {
        const share = el('input', { type: 'number', name: 'split-share', min: '0', max: '100', step: '0.01', inputmode: 'decimal',
          'aria-label': 'Share of ' + b + ' in the split, %', class: 'split-share' });
        share.dataset.bucket = b;
        const v = r.serve && r.serve.split ? r.serve.split[b] : undefined;
        share.value = v === undefined ? '0' : String(Math.round(v * 10000) / 100);
        shares.append(el('label', { class: 'split-one' }, b + ' ', share, ' %'));
      }
      if (r.serve && r.serve.split) {
        // Kept exactly (1/3 is not 33.33 %) until a share is edited.
        li.dataset.split = JSON.stringify(r.serve.split);
        if (r.serve.split_ring) li.dataset.ring = JSON.stringify(r.serve.split_ring);
        serve.value = 'split';
      }
      shares.addEventListener('input', () => { delete li.dataset.split; });
      const by = el('input', { name: 'serve-by', 'aria-label': 'Bucketed by (empty: the feature\'s)', placeholder: data.bucket_by || 'user ID', autocomplete: 'off', spellcheck: 'false', class: 'by' });
      by.value = (r.serve && r.serve.bucket_by) || '';
      const byWrap = el('span', { class: 'ring-by' }, 'bucketed by ', by);
      const serveLine = el('div', { class: 'serve-line' }, el('span', { class: 'arrow' }, '→ serve'), serve, shares, byWrap);
      const said = el('p', { class: 'rule-sentence' });
      li.append(head, conds, el('div', { class: 'cond-actions' }, addCond, addAny), serveLine, said);
      wireConditions(conds, r.conditions || [], true, addCond, addAny);
      const sync = () => {
        byWrap.hidden = serve.value !== 'ring' && serve.value !== 'split';
        shares.hidden = serve.value !== 'split';
        said.textContent = sentenceOf(li);
      };
      li.addEventListener('input', sync);
      li.addEventListener('change', sync);
      li.sync = sync;
      sync();
      return li;
    };

    const readRule = (li, where) => {
      const nameInput = li.querySelector('[name=rule-name]');
      const name = nameInput.value.trim() || nameInput.placeholder;
      if (name === '') throw new Error(where + ': give it a name, e.g. staff.');
      const conditions = readConditions(li.querySelector('.conds'), where);
      const s = li.querySelector('[name=serve]').value;
      let serve;
      if (s === 'split') {
        serve = { split: readSplit(li, where) };
        if (li.dataset.ring) serve.split_ring = JSON.parse(li.dataset.ring);
        const by = li.querySelector('[name=serve-by]').value.trim();
        if (by !== '') serve.bucket_by = by;
      } else if (s === 'ring') {
        serve = { ring: true };
        const by = li.querySelector('[name=serve-by]').value.trim();
        if (by !== '') serve.bucket_by = by;
      } else {
        serve = { bucket: s.slice('bucket:'.length) };
      }
      return { name, conditions, serve };
    };

    // readSplit reads a rule's split, in percentages that must add up to
    // 100, as shares of 1 (buckets at 0 % left out).
    const readSplit = (li, where) => {
      if (li.dataset.split) return JSON.parse(li.dataset.split);
      const split = {};
      let hundredths = 0;
      for (const input of li.querySelectorAll('[name=split-share]')) {
        const pct = Number(input.value);
        if (input.value.trim() === '' || !Number.isFinite(pct) || pct < 0 || pct > 100) {
          throw new Error(where + ': the share of ' + input.dataset.bucket + ' must be a percentage from 0 to 100.');
        }
        const h = Math.round(pct * 100);
        hundredths += h;
        if (h > 0) split[input.dataset.bucket] = h / 10000;
      }
      if (hundredths !== 10000) {
        throw new Error(where + ': the split\'s shares add up to ' + hundredths / 100 + ' %, not 100 %.');
      }
      return split;
    };

    const readRules = () => [...list.querySelectorAll(':scope > li.rule')].map((li, i) => readRule(li, 'Rule ' + (i + 1)));

    for (const r of data.rules) list.append(ruleCard(r));
    renumber();

    addRule.addEventListener('click', () => {
      const names = new Set([...list.querySelectorAll('[name=rule-name]')].map((i) => i.value || i.placeholder));
      let n = list.children.length + 1;
      while (names.has('rule-' + n)) n++;
      list.append(ruleCard({ name: '', placeholder: 'rule-' + n, conditions: [{ op: 'eq' }], serve: { bucket: data.buckets[0] } }));
      renumber();
      list.lastElementChild.querySelector('.cond [name=attribute]').focus();
      clearOutcome(rulesForm);
    });
    list.addEventListener('click', (ev) => {
      const b = ev.target.closest('button');
      if (!b) return;
      const li = b.closest('li.rule');
      if (b.classList.contains('up') && li.previousElementSibling) {
        li.previousElementSibling.before(li);
        b.focus();
      } else if (b.classList.contains('down') && li.nextElementSibling) {
        li.nextElementSibling.after(li);
        b.focus();
      } else if (b.classList.contains('remove-rule')) {
        const next = li.nextElementSibling || li.previousElementSibling;
        li.remove();
        (next ? next.querySelector('[name=rule-name]') : addRule).focus();
      } else {
        return;
      }
      renumber();
      clearOutcome(rulesForm);
    });
    list.addEventListener('input', renumber);

    // Drag a card by its handle to reorder (the arrows do the same from
    // the keyboard).
    let dragged = null;
    list.addEventListener('pointerdown', (ev) => {
      const handle = ev.target.closest('.drag-handle');
      if (handle) handle.closest('li.rule').draggable = true;
    });
    list.addEventListener('dragstart', (ev) => {
      dragged = ev.target.closest && ev.target.closest('li.rule');
      if (!dragged) return;
      dragged.classList.add('dragging');
      ev.dataTransfer.effectAllowed = 'move';
      ev.dataTransfer.setData('text/plain', dragged.querySelector('[name=rule-name]').value);
    });
    list.addEventListener('dragover', (ev) => {
      if (!dragged) return;
      ev.preventDefault();
      const over = ev.target.closest('li.rule');
      if (!over || over === dragged) return;
      const box = over.getBoundingClientRect();
      if (ev.clientY > box.top + box.height / 2) over.after(dragged);
      else over.before(dragged);
    });
    list.addEventListener('drop', (ev) => {
      if (dragged) ev.preventDefault();
    });
    list.addEventListener('dragend', () => {
      if (!dragged) return;
      dragged.classList.remove('dragging');
      dragged.draggable = false;
      dragged = null;
      renumber();
      clearOutcome(rulesForm);
    });

    rulesForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearOutcome(rulesForm);
      let rules;
      try {
        rules = readRules();
      } catch (err) {
        showError(rulesForm, err.message);
        return;
      }
      setBusy(rulesForm, true);
      const res = await send({ method: 'POST', path: base + '/preview', body: { rules } }, false);
      setBusy(rulesForm, false);
      if (res.error) {
        showError(rulesForm, res.error, res.reload);
        return;
      }
      const rep = res.body;
      const parts = [];
      const changes = rep.rules || [];
      if (changes.length === 0) {
        parts.push(el('p', { class: 'outcome' }, 'No user would change bucket: these rules serve everyone what the current ones do.'));
      } else {
        parts.push(el('p', { class: 'outcome' }, changes.length === 1 ? 'One population would change bucket:' : changes.length + ' populations would change bucket:'));
        parts.push(el('ul', { class: 'populations' }, ...changes.map((c) => el('li', {}, c.text,
          ...(c.estimate ? [' ', el('span', { class: 'estimate', title: 'evaluations in the last 24 hours served by ' + estimateFrom(c.estimate.from) }, '≈ ' + c.estimate.text)] : [])))));
        parts.push(el('p', { class: 'hint' }, 'Each estimate is an upper bound: the evaluations of the last 24 hours served by the rules or ring the population comes from, which served other users too. Which users match depends on the contexts apps send, which rollout does not keep.'));
      }
      if (rep.churn > 0) parts.push(el('p', {}, 'The ring moves ', el('b', { class: 'num' }, pct(rep.churn)), ' of users too.'));
      else parts.push(el('p', { class: 'ring-same' }, 'The ring does not change: users no rule matches keep their buckets.'));
      const said = rules.length === 0 ? [el('p', {}, 'After this, the feature has no rules.')]
        : [el('p', {}, 'After this, in order:'), el('ol', { class: 'rules-after' }, ...rules.map((r) => el('li', {}, el('span', { class: 'rule-name' }, r.name), ' ' + ruleWords(r))))];
      parts.push(...said);
      const body = { rules };
      const comment = rulesForm.elements.namedItem('comment').value.trim();
      if (comment !== '') body.comment = comment;
      previewBox(rulesForm, parts, 'Apply these rules', async () => {
        const r = await send({ method: 'PUT', path: base + '/rules', body }, false);
        if (r.error) return r;
        goToVersion(r.body.feature.version);
        return null;
      });
    });
    dropOnEdit(rulesForm);
  }

  // ---- A feature's bucket_by ----
  const byForm = document.querySelector('form[data-targeting=bucket-by]');
  if (byForm && feature) {
    byForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearOutcome(byForm);
      const attr = byForm.elements.namedItem('bucket_by').value.trim();
      const body = { bucket_by: attr };
      const comment = byForm.elements.namedItem('comment').value.trim();
      if (comment !== '') body.comment = comment;
      setBusy(byForm, true);
      const res = await send({ method: 'PATCH', path: base, body }, true);
      setBusy(byForm, false);
      if (res.error) {
        showError(byForm, res.error, res.reload);
        return;
      }
      const rep = res.body.report;
      const what = attr === '' ? 'the user ID' : 'the attribute ' + attr;
      const parts = [];
      if (attr === (data.bucket_by || '')) {
        parts.push(el('p', { class: 'outcome' }, 'No user would change bucket: the ring hashes ' + what + ' already.'));
      } else {
        parts.push(el('p', { class: 'outcome' }, el('span', { class: 'big' }, pct(rep.churn)), ' of users expected to move: the ring places every user anew by ' + what + '.'));
        if (attr !== '') parts.push(el('p', {}, 'Contexts without ' + attr + ' get the fallback, or no bucket when the feature has none.'));
      }
      previewBox(byForm, parts, 'Apply', async () => {
        const r = await send({ method: 'PATCH', path: base, body }, false);
        if (r.error) return r;
        goToVersion(r.body.feature.version);
        return null;
      });
    });
    dropOnEdit(byForm);
  }

  // ---- Test a context ----
  const testForm = document.querySelector('form[data-targeting=test]');
  if (testForm && feature) {
    const rows = testForm.querySelector('.attr-rows');
    const result = testForm.querySelector('.test-result');
    const attrRow = () => {
      const li = el('li', { class: 'attr-row' });
      const key = el('input', { name: 'attr-key', 'aria-label': 'Attribute', placeholder: 'country', autocomplete: 'off', spellcheck: 'false' });
      const value = el('input', { name: 'attr-value', 'aria-label': 'Value', placeholder: 'DE', autocomplete: 'off', spellcheck: 'false' });
      const type = el('select', { name: 'attr-type', 'aria-label': 'Type of the value' },
        el('option', { value: 'text' }, 'text'), el('option', { value: 'number' }, 'number'),
        el('option', { value: 'bool' }, 'true/false'), el('option', { value: 'list' }, 'list (a, b)'));
      const remove = el('button', { type: 'button', class: 'remove-attr secondary', 'aria-label': 'Remove this attribute', title: 'Remove this attribute' }, '×');
      li.append(key, el('span', { class: 'eq', 'aria-hidden': 'true' }, '='), value, type, remove);
      return li;
    };
    rows.append(attrRow());
    testForm.querySelector('.add-attr').addEventListener('click', () => {
      rows.append(attrRow());
      rows.lastElementChild.querySelector('input').focus();
    });
    rows.addEventListener('click', (ev) => {
      const b = ev.target.closest('.remove-attr');
      if (!b) return;
      b.closest('li').remove();
      testForm.querySelector('.add-attr').focus();
    });
    const readContext = () => {
      const ctx = {};
      for (const li of rows.querySelectorAll('li')) {
        const k = li.querySelector('[name=attr-key]').value.trim();
        const v = li.querySelector('[name=attr-value]').value;
        const type = li.querySelector('[name=attr-type]').value;
        if (k === '' && v.trim() === '') continue;
        if (k === '') throw new Error('Give the attribute\'s name for the value ' + v + '.');
        if (type === 'number') {
          const n = Number(v);
          if (v.trim() === '' || !Number.isFinite(n)) throw new Error(k + ': give a number, e.g. 12.');
          ctx[k] = n;
        } else if (type === 'bool') {
          const t = v.trim().toLowerCase();
          if (t !== 'true' && t !== 'false') throw new Error(k + ': give true or false.');
          ctx[k] = t === 'true';
        } else if (type === 'list') {
          ctx[k] = v.split(',').map((x) => x.trim()).filter((x) => x !== '');
        } else {
          ctx[k] = v;
        }
      }
      return ctx;
    };
    testForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const err = testForm.querySelector('.error');
      err.hidden = true;
      result.hidden = true;
      const user = testForm.elements.namedItem('user').value;
      let context;
      try {
        if (user.trim() === '') throw new Error('Give a user ID.');
        context = readContext();
      } catch (e) {
        showError(testForm, e.message);
        return;
      }
      setBusy(testForm, true);
      const res = await send({ method: 'POST', path: '/ui/features/' + encodeURIComponent(feature.key) + '/test', body: { user, context }, create: true }, false);
      setBusy(testForm, false);
      if (res.error) {
        showError(testForm, res.error.replace(/ Nothing was changed\.?/, ''));
        return;
      }
      const a = res.body;
      const bucket = a.bucket === null ? 'no bucket' : a.bucket;
      const answer = el('p', { class: 'test-answer', 'data-bucket': a.bucket === null ? '' : a.bucket, 'data-reason': a.reason, 'data-rule': a.rule || '' },
        'User ', el('code', {}, a.user), ' gets ', el('b', {}, bucket), ': ' + a.text + '.');
      const detail = el('p', { class: 'hint' }, 'Value ', el('code', { class: 'test-value' }, JSON.stringify(a.value)), ' · version ' + a.version + ' · reason ', el('code', {}, a.reason));
      result.replaceChildren(answer, detail, ...explanation(a.explain));
      result.hidden = false;
    });
  }

  // ---- A feature's prerequisites ----
  const prereqForm = document.querySelector('form[data-prerequisites]');
  if (prereqForm && feature) {
    // readPrerequisites reads "feature: bucket, bucket" lines.
    const readPrerequisites = () => prereqForm.elements.namedItem('prerequisites').value.split('\n')
      .map((line) => line.trim()).filter((line) => line !== '')
      .map((line, i) => {
        const [key, buckets] = line.split(':');
        const list = (buckets || '').split(',').map((b) => b.trim()).filter((b) => b !== '');
        if (!key.trim() || list.length === 0) throw new Error('Line ' + (i + 1) + ': write feature: bucket, bucket (e.g. new-api: on).');
        return { feature: key.trim(), buckets: list };
      });
    prereqForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearOutcome(prereqForm);
      let prerequisites;
      try {
        prerequisites = readPrerequisites();
      } catch (err) {
        showError(prereqForm, err.message);
        return;
      }
      const body = { prerequisites };
      const comment = prereqForm.elements.namedItem('comment').value.trim();
      if (comment !== '') body.comment = comment;
      setBusy(prereqForm, true);
      const res = await send({ method: 'PUT', path: base + '/prerequisites', body }, true);
      setBusy(prereqForm, false);
      if (res.error) {
        showError(prereqForm, res.error, res.reload);
        return;
      }
      const said = prerequisites.length === 0 ? 'After this, the feature has no prerequisites.'
        : 'After this, users get the feature\'s own answer only when ' + prerequisites.map((p) => p.feature + ' serves them ' + p.buckets.join(' or ')).join(', and ') + '; the others get its fallback.';
      previewBox(prereqForm, [el('p', { class: 'outcome' }, said)], 'Apply these prerequisites', async () => {
        const r = await send({ method: 'PUT', path: base + '/prerequisites', body }, false);
        if (r.error) return r;
        goToVersion(r.body.feature.version);
        return null;
      });
    });
    dropOnEdit(prereqForm);
  }

  // explanation shows why an answer is what it is: each prerequisite, each
  // rule tried with each condition and why it held or not, then the ring.
  function explanation(x) {
    if (!x) return [];
    const mark = (ok) => el('span', { class: ok ? 'held' : 'failed', 'aria-label': ok ? 'holds' : 'does not hold' }, ok ? '✓ ' : '✗ ');
    const items = [];
    if (x.disabled) items.push(el('li', {}, 'The feature is off: nothing else is tested.'));
    for (const p of x.prerequisites || []) {
      items.push(el('li', { class: 'explain-prerequisite', 'data-passed': String(p.passed) }, mark(p.passed), 'Prerequisite ', el('code', {}, p.feature), ': ' + p.why));
    }
    if (x.override) items.push(el('li', {}, 'An override serves ', el('b', {}, x.override), '.'));
    for (const r of x.rules || []) {
      const conds = el('ul', {}, ...r.conditions.map((c) => el('li', { class: 'explain-condition', 'data-matched': String(c.matched) }, mark(c.matched), c.why)));
      items.push(el('li', { class: 'explain-rule', 'data-matched': String(r.matched) }, mark(r.matched), 'Rule ', el('b', {}, r.name), r.why ? ': ' + r.why : '', conds));
    }
    if (x.ring) items.push(el('li', { class: 'explain-ring' }, 'The ring: ' + x.ring.why + (x.ring.bucket ? ' → ' + x.ring.bucket : '') + '.'));
    return [el('p', { class: 'hint' }, 'Why:'), el('ol', { class: 'explain' }, ...items)];
  }

  // ---- The segments page ----
  const segmentsNode = document.getElementById('segments-data');
  if (segmentsNode) {
    const byKey = Object.fromEntries(data.segments.map((s) => [s.key, s]));
    for (const form of document.querySelectorAll('form[data-segment-form]')) {
      const creating = form.dataset.segmentForm === 'create';
      const seg = creating ? { conditions: [{ op: 'eq' }] } : byKey[form.dataset.key];
      const conds = form.querySelector('.conds');
      wireConditions(conds, seg ? seg.conditions : [], false, form.querySelector('.add-cond'));
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        clearOutcome(form);
        let body;
        try {
          const conditions = readConditions(conds, 'Condition list');
          body = { description: form.elements.namedItem('description').value, conditions };
          if (creating) {
            body.key = form.elements.namedItem('key').value.trim();
            if (body.key === '') throw new Error('Give the segment a key, e.g. staff.');
          } else {
            const c = form.elements.namedItem('comment').value.trim();
            if (c !== '') body.comment = c;
          }
        } catch (err) {
          showError(form, err.message.replace('Condition list, condition', 'Condition'));
          return;
        }
        const key = creating ? body.key : form.dataset.key;
        const req = creating
          ? { method: 'POST', path: '/api/segments', body, create: true }
          : { method: 'PUT', path: '/api/segments/' + encodeURIComponent(key), body, tag: form.dataset.tag };
        setBusy(form, true);
        const res = await send(req, true);
        setBusy(form, false);
        if (res.error) {
          showError(form, res.error.replace('this feature', 'this segment'), res.reload);
          return;
        }
        const when = body.conditions.length === 0 ? 'everyone' : body.conditions.map(conditionWords).join(' and ');
        const features = res.body.features || [];
        const parts = [el('p', { class: 'outcome' }, (creating ? 'Creates segment ' : 'Segment ') + key + (creating ? ': ' : ' becomes: ') + 'users whose ' + when + '.')];
        if (!creating) {
          if (features.length === 0) parts.push(el('p', { class: 'seg-features' }, 'No feature uses it: no user changes bucket.'));
          else parts.push(el('p', { class: 'seg-features' }, 'Each feature that uses it gets a new version — ' + features.join(', ') + ' — and users who enter or leave the segment change bucket there.'));
        }
        previewBox(form, parts, creating ? 'Create the segment' : 'Apply this change', async () => {
          const r = await send(req, false);
          if (r.error) return r;
          // A new query each time: the same URL with a fragment would not reload.
          const v = r.body.segment ? r.body.segment.version : 0;
          window.location.assign(rolloutEnv('/ui/segments?saved=' + encodeURIComponent(key) + '&v=' + v + '#segment-' + encodeURIComponent(key)));
          return null;
        });
      });
      dropOnEdit(form);
    }
    for (const form of document.querySelectorAll('form.segment-delete')) {
      const button = form.querySelector('button');
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const err = form.querySelector('.error');
        if (!button.dataset.armed) {
          // Deleting cannot be undone: ask once more, in the button itself.
          button.dataset.armed = '1';
          button.textContent = 'Yes, delete ' + form.dataset.key;
          button.focus();
          return;
        }
        err.hidden = true;
        setBusy(form, true);
        const res = await send({ method: 'DELETE', path: '/api/segments/' + encodeURIComponent(form.dataset.key), tag: form.dataset.tag }, false);
        setBusy(form, false);
        if (res.error) {
          res.error = res.error.replace('this feature', 'this segment');
          delete button.dataset.armed;
          button.textContent = 'Delete…';
          showError(form, res.error);
          return;
        }
        window.location.assign(rolloutEnv('/ui/segments'));
      });
    }
    // User lists: IDs pasted one per line; a create, an add, a remove or
    // a replace of every user, previewed by a dry run that counts the
    // users who enter and leave the list.
    for (const form of document.querySelectorAll('form[data-list-form]')) {
      const creating = form.dataset.listForm === 'create';
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        clearOutcome(form);
        const users = form.elements.namedItem('users').value.split(/\r?\n/).map((u) => u.trim()).filter((u) => u !== '');
        const description = form.elements.namedItem('description').value;
        const key = creating ? form.elements.namedItem('key').value.trim() : form.dataset.key;
        const mode = creating ? 'create' : form.elements.namedItem('mode').value;
        if (key === '') {
          showError(form, 'Give the list a key, e.g. beta-testers.');
          return;
        }
        if (users.length === 0 && mode !== 'replace' && mode !== 'create') {
          showError(form, 'Paste the user IDs, one per line.');
          return;
        }
        let req;
        const path = '/api/segments/' + encodeURIComponent(key);
        switch (mode) {
          case 'create': req = { method: 'POST', path: '/api/segments', body: { key, description, users }, create: true }; break;
          case 'replace': req = { method: 'PUT', path, body: { description, users }, tag: form.dataset.tag }; break;
          default: req = { method: 'POST', path: path + '/users', body: { [mode]: users }, tag: form.dataset.tag };
        }
        if (!creating) {
          const c = form.elements.namedItem('comment').value.trim();
          if (c !== '') req.body.comment = c;
        }
        setBusy(form, true);
        const res = await send(req, true);
        setBusy(form, false);
        if (res.error) {
          showError(form, res.error.replace('this feature', 'this list'), res.reload);
          return;
        }
        const d = res.body.users || { added: 0, removed: 0, size: 0 };
        const features = res.body.features || [];
        const parts = [el('p', { class: 'outcome list-outcome', 'data-added': d.added, 'data-removed': d.removed, 'data-size': d.size },
          (creating ? 'Creates user list ' + key + ' of ' : 'User list ' + key + ': ' + d.added + ' added, ' + d.removed + ' removed; it will hold ') +
          d.size + (d.size === 1 ? ' user.' : ' users.'))];
        if (!creating) {
          if (features.length === 0) parts.push(el('p', { class: 'seg-features' }, 'No feature uses it: no user changes bucket.'));
          else parts.push(el('p', { class: 'seg-features' }, 'Each feature that uses it gets a new version — ' + features.join(', ') + ' — and only the users added or removed can change bucket there.'));
        }
        previewBox(form, parts, creating ? 'Create the list' : 'Apply this change', async () => {
          const r = await send(req, false);
          if (r.error) return r;
          const v = r.body.segment ? r.body.segment.version : 0;
          window.location.assign(rolloutEnv('/ui/segments?saved=' + encodeURIComponent(key) + '&v=' + v + '#segment-' + encodeURIComponent(key)));
          return null;
        });
      });
      dropOnEdit(form);
    }
  }
})();
