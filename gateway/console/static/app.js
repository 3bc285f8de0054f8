// The Toolplex console: plain ES2020, no dependency, no request to any other origin.
// Every string that comes from the API is put in the page as text (textContent, DOM nodes): never as HTML.

const ASSET_BASE = templated(document.body.dataset.assetBase);
const VERSION = templated(document.body.dataset.version);
// The console's own path (`fronts.console.path`): the assets live under <path>/assets/<digest>.
const BASE = ASSET_BASE ? ASSET_BASE.replace(/\/assets\/[^/]*\/?$/, '') : '/console';
const API = BASE + '/api';
const TOKEN_KEY = 'toolplex.console.token';
const SVG_NS = 'http://www.w3.org/2000/svg';
const REFRESH_MS = 5000;

function templated(value) {
  return value && !value.startsWith('{{') ? value : '';
}

// ---------------------------------------------------------------------------------------------- DOM building

function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  add(el, children);
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value != null) el.setAttribute(key, String(value));
  }
  add(el, children);
  return el;
}

const DIRECT = new Set(['value', 'checked', 'disabled', 'selected', 'type', 'name', 'id', 'htmlFor', 'title', 'rows']);

function setProps(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key === 'class') el.className = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (DIRECT.has(key)) el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
}

function add(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

// Replace an element's children: arrays flattened, null and false left out (never the text "null").
function fill(el, ...children) {
  el.replaceChildren();
  add(el, children);
  return el;
}

const text = (value) => document.createTextNode(value == null ? '' : String(value));
const code = (value, cls) => h('code', { class: cls }, value);
const muted = (value) => h('span', { class: 'muted' }, value);
const dash = () => muted('–');

function badge(label, tone, title) {
  return h('span', { class: ['badge', tone && 'badge-' + tone], title }, label);
}

function toolLink(id, label) {
  return h('a', { href: '#/tool/' + encodeURIComponent(id) }, label ?? id);
}

function section(title, ...children) {
  return h('section', { class: 'panel' }, title ? h('h2', null, title) : null, ...children);
}

function table(columns, rows, opts = {}) {
  // columns: [{label, cls}], rows: arrays of cells (nodes or strings), or {cells, cls}.
  if (!rows.length) return h('p', { class: 'empty' }, opts.empty || 'Nothing yet.');
  return h(
    'table',
    { class: ['grid', opts.cls] },
    h('thead', null, h('tr', null, columns.map((c) => h('th', { class: c.cls, scope: 'col' }, c.label)))),
    h(
      'tbody',
      null,
      rows.map((row) => {
        const cells = Array.isArray(row) ? row : row.cells;
        return h(
          'tr',
          { class: Array.isArray(row) ? null : row.cls },
          cells.map((cell, i) => h('td', { class: columns[i] && columns[i].cls }, cell)),
        );
      }),
    ),
  );
}

function keyValues(pairs) {
  return h(
    'dl',
    { class: 'kv' },
    pairs.filter(Boolean).map(([key, value]) => [h('dt', null, key), h('dd', null, value ?? dash())]),
  );
}

// ---------------------------------------------------------------------------------------------- formatting

function fmtMs(value) {
  if (value == null || Number.isNaN(value)) return '–';
  if (value === 0) return '0 ms';
  if (value >= 1000) return (value / 1000).toFixed(value >= 10000 ? 1 : 2) + ' s';
  if (value >= 100) return value.toFixed(0) + ' ms';
  if (value >= 10) return value.toFixed(1) + ' ms';
  return value.toFixed(2) + ' ms';
}

function fmtRate(value) {
  if (value == null || Number.isNaN(value)) return '–';
  return (value * 100).toFixed(value > 0 && value < 0.1 ? 1 : 0) + ' %';
}

function fmtNumber(value) {
  if (value == null) return '–';
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  return value.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

const pad = (n) => String(n).padStart(2, '0');

function fmtTime(iso, withDate = true) {
  if (!iso) return dash();
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return text(iso);
  const clock = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  const day = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  return h('time', { datetime: iso, title: iso }, withDate ? `${day} ${clock}` : clock);
}

function minuteLabel(epochMinute) {
  const date = new Date(epochMinute * 60000);
  return `${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    const out = {};
    for (const key of Object.keys(value).sort()) out[key] = sortKeys(value[key]);
    return out;
  }
  return value;
}

const pretty = (value) => JSON.stringify(value, null, 2);

function jsonBlock(value, cls) {
  return h('pre', { class: ['json', cls] }, value === undefined ? '' : pretty(value));
}

// ---------------------------------------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(status, kind, message) {
    super(message);
    this.status = status;
    this.kind = kind;
  }
}

const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

async function api(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  const bearer = token.get();
  if (bearer) headers.Authorization = 'Bearer ' + bearer;
  const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    headers['X-Toolplex-Console'] = '1';
    init.body = JSON.stringify(body ?? {});
  }
  let response;
  try {
    response = await fetch(API + path, init);
  } catch (err) {
    throw new ApiError(0, 'unavailable', 'The gateway did not answer (' + err.message + ').');
  }
  const raw = await response.text();
  let data = null;
  if (raw) {
    try {
      data = JSON.parse(raw);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    const failure = new ApiError(
      response.status,
      error.kind || 'http_' + response.status,
      error.message || `${response.status} ${response.statusText}`,
    );
    if (response.status === 401 && path !== '/me') signedOut('Your token was refused: sign in again.');
    throw failure;
  }
  return data;
}

function errorBox(err) {
  return h(
    'div',
    { class: 'alert alert-error', role: 'alert' },
    h('strong', null, err.kind || 'error'),
    ' ',
    err.status ? muted(`(${err.status})`) : null,
    ' ',
    err.message || String(err),
  );
}

// ---------------------------------------------------------------------------------------------- the shell

const app = document.getElementById('app');
let me = null;
let renderGeneration = 0;
let refreshTimer = null;

async function boot() {
  try {
    me = await api('/me');
  } catch (err) {
    if (err.status === 401) return showSignIn(token.get() ? 'That token was refused.' : null);
    fill(app, h('main', { class: 'view' }, errorBox(err)));
    return;
  }
  showShell();
}

function signedOut(message) {
  token.clear();
  me = null;
  stopRefresh();
  showSignIn(message);
}

function showSignIn(message) {
  const input = h('input', {
    type: 'password',
    id: 'token',
    name: 'token',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    placeholder: 'API key or bearer token',
  });
  const status = h('div', { class: 'signin-status', role: 'status' }, message ? errorBox({ kind: 'sign-in', message }) : null);
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'signin', autocomplete: 'off' },
    h('div', { class: 'signin-brand' }, brandMark(), h('span', null, 'Toolplex console')),
    h('p', { class: 'muted' }, 'Sign in with the same credentials the fronts take: an API key, a JWT or an OAuth access token.'),
    h('label', { htmlFor: 'token' }, 'Token'),
    input,
    button,
    status,
    h('p', { class: 'fineprint muted' }, 'The token stays in this tab (session storage) and is sent as Authorization: Bearer.'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (!value) return;
    button.disabled = true;
    token.set(value);
    try {
      me = await api('/me');
    } catch (err) {
      token.clear();
      button.disabled = false;
      fill(status, errorBox(err.status === 401 ? { kind: 'sign-in', message: 'That token was refused.' } : err));
      input.select();
      return;
    }
    showShell();
  });
  fill(app, h('main', { class: 'signin-page' }, form));
  input.focus();
}

function brandMark() {
  return h('img', { class: 'mark', src: ASSET_BASE ? ASSET_BASE + '/icon.svg' : 'icon.svg', alt: '', width: 22, height: 22 });
}

const NAV = [
  { route: 'catalog', label: 'Catalog' },
  { route: 'backends', label: 'Backends' },
  { route: 'traffic', label: 'Traffic' },
  { route: 'state', label: 'State' },
  { route: 'pins', label: 'Pins', admin: true },
];

function showShell() {
  const who = h(
    'div',
    { class: 'who' },
    me.auth
      ? h('span', { class: 'principal', title: 'Signed in as' }, me.principal ?? 'anonymous')
      : h('span', { class: 'principal', title: 'Auth is off: the local operator' }, 'local operator'),
    me.admin ? badge('admin', 'admin') : null,
    me.auth ? h('a', { href: '#', class: 'signout', onclick: (e) => { e.preventDefault(); signedOut(null); } }, 'Sign out') : null,
  );
  const nav = h(
    'nav',
    { class: 'nav', 'aria-label': 'Pages' },
    NAV.filter((item) => !item.admin || me.admin).map((item) =>
      h('a', { href: '#/' + item.route, 'data-route': item.route }, item.label),
    ),
  );
  const header = h(
    'header',
    { class: 'top' },
    h('a', { class: 'brand', href: '#/catalog' }, brandMark(), h('span', null, 'Toolplex'), h('span', { class: 'brand-sub' }, 'console')),
    nav,
    h('div', { class: 'spacer' }),
    h('span', { class: 'version', title: 'Gateway version and replica' }, 'v' + (me.version || VERSION), me.replica ? ' · ' + me.replica : ''),
    who,
  );
  const view = h('main', { class: 'view', id: 'view' });
  fill(app, header, view);
  if (!location.hash || location.hash === '#' || location.hash === '#/') {
    history.replaceState(null, '', '#/catalog');
  }
  route();
}

function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, '');
  const cut = raw.indexOf('?');
  const path = cut < 0 ? raw : raw.slice(0, cut);
  const params = new URLSearchParams(cut < 0 ? '' : raw.slice(cut + 1));
  const slash = path.indexOf('/');
  const name = slash < 0 ? path : path.slice(0, slash);
  let arg = slash < 0 ? '' : path.slice(slash + 1);
  try {
    arg = decodeURIComponent(arg);
  } catch {
    /* leave it as it came */
  }
  return { name: name || 'catalog', arg, params };
}

const PAGES = {
  catalog: pageCatalog,
  tool: pageTool,
  backends: pageBackends,
  traffic: pageTraffic,
  state: pageState,
  pins: pagePins,
};

function route() {
  const view = document.getElementById('view');
  if (!view || !me) return;
  stopRefresh();
  const generation = ++renderGeneration;
  const { name, arg, params } = parseRoute();
  for (const link of document.querySelectorAll('.nav a')) {
    const current = link.dataset.route === name || (name === 'tool' && link.dataset.route === 'catalog');
    link.classList.toggle('active', current);
    if (current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const page = PAGES[name];
  fill(view);
  if (!page) {
    view.append(section('Not found', h('p', null, 'No page here. ', h('a', { href: '#/catalog' }, 'Back to the catalog.'))));
    return;
  }
  document.title = (name === 'tool' ? arg : NAV.find((n) => n.route === name)?.label || name) + ' · Toolplex console';
  const live = () => generation === renderGeneration;
  Promise.resolve(page(view, { arg, params, live })).catch((err) => {
    if (live() && err.status !== 401) fill(view, errorBox(err));
  });
}

function stopRefresh() {
  if (refreshTimer) clearInterval(refreshTimer);
  refreshTimer = null;
}

// A page that shows live figures reloads them every few seconds while it is shown (and the box is ticked).
function autoRefresh(ctx, toolbar, reload) {
  const box = h('input', { type: 'checkbox', checked: true, id: 'auto-refresh' });
  const refresh = h('button', { type: 'button', class: 'ghost', onclick: () => reload() }, 'Refresh');
  const start = () => {
    stopRefresh();
    if (box.checked) refreshTimer = setInterval(() => (ctx.live() ? reload() : stopRefresh()), REFRESH_MS);
  };
  box.addEventListener('change', start);
  toolbar.append(refresh, h('label', { class: 'check' }, box, ' auto-refresh'));
  start();
}

function pageHead(title, ...extra) {
  return h('div', { class: 'page-head' }, h('h1', null, title), ...extra);
}

// ---------------------------------------------------------------------------------------------- Catalog

async function pageCatalog(view, ctx) {
  const initial = ctx.params.get('q') || '';
  const input = h('input', {
    type: 'search',
    class: 'search',
    id: 'catalog-search',
    value: initial,
    placeholder: 'Search tools: a name, a toolkit, words of a description…',
    'aria-label': 'Search tools',
    autocomplete: 'off',
  });
  const count = h('span', { class: 'muted count' });
  const results = h('div', { class: 'results' }, h('p', { class: 'loading' }, 'Loading the catalog…'));
  view.append(pageHead('Catalog', count), h('div', { class: 'toolbar' }, input), results);

  let sequence = 0;
  async function load() {
    const mine = ++sequence;
    const q = input.value.trim();
    history.replaceState(null, '', '#/catalog' + (q ? '?q=' + encodeURIComponent(q) : ''));
    let data;
    try {
      data = await api('/tools' + (q ? '?q=' + encodeURIComponent(q) : ''));
    } catch (err) {
      if (mine === sequence && ctx.live()) fill(results, errorBox(err));
      return;
    }
    if (mine !== sequence || !ctx.live()) return;
    const tools = data.tools || [];
    count.textContent = q
      ? `${tools.length} of ${fmtNumber(data.total ?? tools.length)} matching “${q}”`
      : `${fmtNumber(data.total ?? tools.length)} tools`;
    fill(results, catalogTable(tools, q));
  }
  let timer = null;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(load, 180);
  });
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') {
      clearTimeout(timer);
      load();
    }
  });
  await load();
  if (ctx.live()) input.focus();
}

function catalogTable(tools, q) {
  const columns = [
    { label: 'Tool', cls: 'col-tool' },
    { label: 'Toolkit' },
    { label: 'Version' },
    { label: 'Backend' },
    { label: 'Origin' },
    { label: 'Names per front', cls: 'col-names' },
  ];
  const rows = tools.map((tool) => ({
    cls: ['tool-row', tool.quarantined ? 'row-quarantined' : null].filter(Boolean).join(' '),
    cells: [
      [
        h(
          'div',
          { class: 'tool-name' },
          toolLink(tool.id, tool.name),
          tool.quarantined ? badge('quarantined', 'error', 'Its definition changed since it was approved') : null,
        ),
        h('div', { class: 'desc' }, tool.description || ''),
      ],
      tool.toolkit,
      code(tool.version),
      tool.backend,
      badge(tool.origin || '?', 'neutral'),
      groupedNames(tool.names),
    ],
  }));
  return table(columns, rows, { cls: 'catalog', empty: q ? `No tool matches “${q}”.` : 'No tool in the catalog.' });
}

// The catalog's compact form: each distinct name once, with the fronts that use it.
function groupedNames(names) {
  const groups = new Map();
  for (const [front, name] of Object.entries(names || {})) {
    if (!groups.has(name)) groups.set(name, []);
    groups.get(name).push(front);
  }
  if (!groups.size) return dash();
  return h(
    'ul',
    { class: 'name-groups' },
    [...groups].map(([name, fronts]) => h('li', { title: fronts.join(', ') }, code(name), ' ', muted(fronts.join(' · ')))),
  );
}

function frontNames(names) {
  const entries = Object.entries(names || {});
  if (!entries.length) return dash();
  return h(
    'dl',
    { class: 'names' },
    entries.map(([front, name]) => [h('dt', null, front), h('dd', null, code(name))]),
  );
}

// ---------------------------------------------------------------------------------------------- Tool page

async function pageTool(view, ctx) {
  const id = ctx.arg;
  view.append(h('p', { class: 'loading' }, 'Loading ' + id + '…'));
  const tool = await api('/tools/' + encodeURIComponent(id));
  if (!ctx.live()) return;

  const tags = (tool.tags || []).map((tag) => badge(tag, 'neutral'));
  const head = h(
    'div',
    { class: 'tool-head' },
    h('div', { class: 'crumbs' }, h('a', { href: '#/catalog' }, 'Catalog'), ' / ', tool.toolkit),
    h(
      'div',
      { class: 'title-row' },
      h('h1', null, tool.name),
      badge('v' + tool.version, 'neutral'),
      tool.quarantined ? badge('quarantined', 'error', 'Its definition changed since it was approved') : null,
      tool.side_effects === true ? badge('side effects', 'warn') : null,
      tool.side_effects === false ? badge('no side effects', 'ok') : null,
    ),
    h('p', { class: 'description' }, tool.description || muted('No description.')),
    keyValues([
      ['Qualified name', code(tool.qualified_name)],
      ['Toolkit', tool.toolkit],
      ['Backend', [tool.backend, ' ', badge(tool.origin || '?', 'neutral')]],
      [
        'Versions',
        (tool.versions || [tool.version]).map((version, i) => [
          i ? ', ' : null,
          version === tool.version ? h('strong', null, version) : toolLink(`${tool.name}@${version}`, version),
        ]),
      ],
      tags.length ? ['Tags', tags] : null,
    ]),
  );

  const pin = me.admin && tool.pin ? pinBlock(tool.pin, () => route()) : null;
  const callPanel = section('Call', callForm(tool));
  const side = h(
    'div',
    { class: 'side' },
    section('Names per front', frontNames(tool.names)),
    section('Input schema', jsonBlock(tool.input_schema || {}, 'schema')),
    section('Output schema', tool.output_schema ? jsonBlock(tool.output_schema, 'schema') : h('p', { class: 'empty' }, 'None declared.')),
  );
  const pending = pin && normalizePin(tool.pin).state === 'pending';
  fill(view,
    head,
    pending ? pin : null,
    h('div', { class: 'columns' }, h('div', { class: 'main-col' }, callPanel), side),
    pin && !pending ? pin : null,
  );
}

// -- the form generated from the input schema

function resolveSchema(schema, root, depth = 0) {
  // $ref into the schema's own $defs/definitions, and Optional[X] (anyOf X, null) unwrapped.
  let current = schema || {};
  let nullable = false;
  for (let i = 0; i < 8 && current && typeof current === 'object'; i += 1) {
    if (typeof current.$ref === 'string' && current.$ref.startsWith('#/') && depth < 20) {
      const target = current.$ref
        .slice(2)
        .split('/')
        .reduce((node, part) => (node ? node[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined), root);
      if (!target) break;
      const { $ref, ...rest } = current;
      current = { ...target, ...rest };
      continue;
    }
    const union = current.anyOf || current.oneOf;
    if (Array.isArray(union)) {
      const others = union.filter((option) => !(option && option.type === 'null'));
      const { anyOf, oneOf, ...rest } = current;
      if (others.length === 1 && others.length < union.length) {
        nullable = true;
        current = { ...others[0], ...rest };
        continue;
      }
      // int | float (pydantic writes anyOf integer, number): one number field
      const numeric = (option) => option && (option.type === 'integer' || option.type === 'number');
      if (others.length > 1 && others.every(numeric)) {
        nullable = nullable || others.length < union.length;
        const merged = Object.assign({}, ...others.map(({ type, ...bounds }) => bounds));
        current = { ...merged, ...rest, type: others.some((o) => o.type === 'number') ? 'number' : 'integer' };
        continue;
      }
    }
    if (Array.isArray(current.type)) {
      const types = current.type.filter((t) => t !== 'null');
      if (types.length === 1) {
        nullable = nullable || types.length < current.type.length;
        current = { ...current, type: types[0] };
      }
    }
    break;
  }
  return { schema: current, nullable };
}

function fieldKind(schema) {
  if (Array.isArray(schema.enum) && schema.enum.length) return 'enum';
  if ('const' in schema) return 'enum';
  if (schema.type === 'string') return 'string';
  if (schema.type === 'integer') return 'integer';
  if (schema.type === 'number') return 'number';
  if (schema.type === 'boolean') return 'boolean';
  return 'json';
}

function buildField(name, propSchema, root, required, index) {
  const { schema } = resolveSchema(propSchema, root);
  const kind = fieldKind(schema);
  const id = 'arg-' + index;
  const hasDefault = Object.prototype.hasOwnProperty.call(schema, 'default');
  const label = h(
    'label',
    { htmlFor: id, class: 'field-label' },
    h('span', { class: 'field-name' }, schema.title && schema.title.toLowerCase() !== name.toLowerCase() ? `${schema.title} (${name})` : name),
    required ? h('span', { class: 'required', title: 'required' }, '*') : null,
    h('span', { class: 'field-type' }, kind === 'json' ? schemaType(schema) : kind),
  );
  const hints = [];
  if (schema.description) hints.push(schema.description);
  const bounds = [];
  if (schema.minimum != null) bounds.push('≥ ' + schema.minimum);
  if (schema.exclusiveMinimum != null) bounds.push('> ' + schema.exclusiveMinimum);
  if (schema.maximum != null) bounds.push('≤ ' + schema.maximum);
  if (schema.exclusiveMaximum != null) bounds.push('< ' + schema.exclusiveMaximum);
  if (schema.minLength != null) bounds.push('at least ' + schema.minLength + ' characters');
  if (schema.maxLength != null) bounds.push('at most ' + schema.maxLength + ' characters');
  if (bounds.length) hints.push(bounds.join(', '));
  if (hasDefault) hints.push('default: ' + JSON.stringify(schema.default));

  let control;
  let read;
  let write;
  const dataAttrs = { id, name, 'data-arg': name, 'data-kind': kind };
  if (kind === 'enum') {
    const options = Array.isArray(schema.enum) ? schema.enum : [schema.const];
    control = h(
      'select',
      dataAttrs,
      required && hasDefault ? null : h('option', { value: '' }, required ? '— choose —' : '— not set —'),
      options.map((option, i) => h('option', { value: String(i) }, typeof option === 'string' ? option : JSON.stringify(option))),
    );
    read = () => (control.value === '' ? undefined : options[Number(control.value)]);
    write = (value) => {
      const at = options.findIndex((option) => JSON.stringify(option) === JSON.stringify(value));
      control.value = at < 0 ? '' : String(at);
    };
  } else if (kind === 'boolean') {
    if (required || hasDefault) {
      control = h('input', { ...dataAttrs, type: 'checkbox' });
      read = () => control.checked;
      write = (value) => {
        control.checked = value === true;
      };
    } else {
      control = h(
        'select',
        dataAttrs,
        h('option', { value: '' }, '— not set —'),
        h('option', { value: 'true' }, 'true'),
        h('option', { value: 'false' }, 'false'),
      );
      read = () => (control.value === '' ? undefined : control.value === 'true');
      write = (value) => {
        control.value = value === true ? 'true' : value === false ? 'false' : '';
      };
    }
  } else if (kind === 'number' || kind === 'integer') {
    control = h('input', {
      ...dataAttrs,
      type: 'number',
      step: kind === 'integer' ? '1' : 'any',
      min: schema.minimum,
      max: schema.maximum,
      inputmode: kind === 'integer' ? 'numeric' : 'decimal',
    });
    read = () => {
      const raw = control.value.trim();
      if (raw === '') {
        if (control.validity && control.validity.badInput) throw new Error(`${name}: not a number`);
        return undefined;
      }
      const value = Number(raw);
      if (!Number.isFinite(value)) throw new Error(`${name}: not a number`);
      return value;
    };
    write = (value) => {
      control.value = typeof value === 'number' ? String(value) : '';
    };
  } else if (kind === 'string') {
    const long = (schema.maxLength == null || schema.maxLength > 200) && /text|body|content|prompt|query|message/i.test(name);
    control = long
      ? h('textarea', { ...dataAttrs, rows: 3, spellcheck: 'false' })
      : h('input', { ...dataAttrs, type: 'text', spellcheck: 'false', autocomplete: 'off' });
    if (schema.format) control.setAttribute('placeholder', schema.format);
    read = () => (control.value === '' ? undefined : control.value);
    write = (value) => {
      control.value = value == null ? '' : typeof value === 'string' ? value : JSON.stringify(value);
    };
  } else {
    control = h('textarea', { ...dataAttrs, rows: 4, class: 'json-input', spellcheck: 'false', placeholder: 'JSON' });
    read = () => {
      const raw = control.value.trim();
      if (raw === '') return undefined;
      try {
        return JSON.parse(raw);
      } catch (err) {
        throw new Error(`${name}: not valid JSON (${err.message})`);
      }
    };
    write = (value) => {
      control.value = value === undefined ? '' : pretty(value);
    };
  }
  if (required) control.setAttribute('aria-required', 'true');
  if (hasDefault) write(schema.default);
  const wrapper = h(
    'div',
    { class: ['field', 'field-' + kind] },
    label,
    control,
    hints.length ? h('div', { class: 'hint' }, hints.join(' · ')) : null,
  );
  return { name, wrapper, read, write };
}

function schemaType(schema) {
  if (schema.type === 'array') return 'array (JSON)';
  if (schema.type === 'object') return 'object (JSON)';
  if (Array.isArray(schema.type)) return schema.type.join(' | ') + ' (JSON)';
  if (schema.anyOf || schema.oneOf) return 'any of (JSON)';
  return 'JSON';
}

function callForm(tool) {
  const root = tool.input_schema || {};
  const { schema } = resolveSchema(root, root);
  const properties = schema && typeof schema.properties === 'object' && schema.properties ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const formable = schema.type === 'object' || schema.properties;
  const fields = formable ? Object.entries(properties).map(([name, prop], i) => buildField(name, prop, root, required.has(name), i)) : [];

  const rawArea = h('textarea', { class: 'json-input raw', id: 'raw-arguments', rows: 10, spellcheck: 'false', 'aria-label': 'Arguments as JSON' });
  const rawBox = h('div', { class: 'raw-box', hidden: true }, h('label', { htmlFor: 'raw-arguments', class: 'field-label' }, 'Arguments (JSON object)'), rawArea);
  const fieldBox = h(
    'div',
    { class: 'fields' },
    fields.length ? fields.map((f) => f.wrapper) : h('p', { class: 'empty' }, formable ? 'This tool takes no arguments.' : 'Its input schema is not an object with properties: write the arguments as JSON.'),
  );
  const rawToggle = h('input', { type: 'checkbox', id: 'raw-toggle' });
  const problem = h('div', { class: 'form-problem', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'primary', id: 'call-button' }, 'Call');
  const result = h('div', { class: 'result', id: 'call-result' });

  const fromFields = () => {
    const args = {};
    for (const field of fields) {
      const value = field.read();
      if (value !== undefined) args[field.name] = value;
    }
    return args;
  };
  const fromRaw = () => {
    let value;
    try {
      value = JSON.parse(rawArea.value.trim() || '{}');
    } catch (err) {
      throw new Error('Arguments: not valid JSON (' + err.message + ')');
    }
    if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('Arguments: a JSON object is needed');
    return value;
  };

  rawToggle.addEventListener('change', () => {
    fill(problem);
    try {
      if (rawToggle.checked) {
        rawArea.value = pretty(fromFields());
      } else {
        const value = fromRaw();
        for (const field of fields) field.write(value[field.name]);
      }
    } catch (err) {
      rawToggle.checked = !rawToggle.checked;
      fill(problem, errorBox({ kind: 'form', message: err.message }));
      return;
    }
    rawBox.hidden = !rawToggle.checked;
    fieldBox.hidden = rawToggle.checked;
  });
  if (!formable) {
    rawToggle.checked = true;
    rawToggle.disabled = true;
    rawArea.value = '{}';
    rawBox.hidden = false;
    fieldBox.hidden = true;
  }

  const form = h(
    'form',
    { class: 'call-form', novalidate: true },
    h('div', { class: 'form-bar' }, h('label', { class: 'check' }, rawToggle, ' raw JSON'), required.size ? muted('* required') : null),
    fieldBox,
    rawBox,
    problem,
    h('div', { class: 'actions' }, button),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    fill(problem);
    let args;
    try {
      args = rawToggle.checked ? fromRaw() : fromFields();
    } catch (err) {
      fill(problem, errorBox({ kind: 'form', message: err.message }));
      return;
    }
    button.disabled = true;
    button.textContent = 'Calling…';
    fill(result, h('p', { class: 'loading' }, 'Calling ' + tool.name + '…'));
    try {
      const answer = await api('/tools/' + encodeURIComponent(tool.id) + '/call', { method: 'POST', body: { arguments: args } });
      fill(result, callResult(answer));
    } catch (err) {
      if (err.status !== 401) fill(result, errorBox(err));
    } finally {
      button.disabled = false;
      button.textContent = 'Call';
    }
  });
  return h('div', null, form, result);
}

function callResult(answer) {
  const ok = answer.ok === true;
  const summary = h(
    'div',
    { class: 'result-head' },
    badge(ok ? 'ok' : 'error', ok ? 'ok' : 'error'),
    !ok && answer.error ? code(answer.error.kind, 'kind') : null,
    h('span', { class: 'metric', title: 'Duration' }, fmtMs(answer.duration_ms)),
    answer.trace_id ? h('span', { class: 'metric' }, 'trace ', code(answer.trace_id, 'trace-id')) : null,
    answer.call_id ? h('span', { class: 'metric' }, 'call ', code(answer.call_id, 'call-id')) : null,
  );
  const outcome = ok
    ? h('div', { class: 'value' }, h('h3', null, 'Value'), jsonBlock(answer.value, 'value-json'))
    : h('div', { class: 'alert alert-error error-message' }, (answer.error && answer.error.message) || 'The call failed.');
  return h('div', { class: ['result-box', ok ? 'is-ok' : 'is-error'] }, summary, outcome, answersTabs(answer.answers || {}));
}

function answersTabs(answers) {
  const fronts = Object.keys(answers);
  if (!fronts.length) return null;
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'What each front answers' });
  const panel = h('div', { class: 'tab-panel', role: 'tabpanel' });
  const select = (front) => {
    for (const tab of tabs.children) {
      const on = tab.dataset.front === front;
      tab.setAttribute('aria-selected', on ? 'true' : 'false');
      tab.classList.toggle('active', on);
    }
    const answer = answers[front] || {};
    panel.setAttribute('data-front', front);
    fill(panel,
      h('div', { class: 'answer-status' }, 'HTTP ', h('strong', { class: 'status-code' }, answer.status ?? '–'), ' · what a client of ', code(front), ' receives'),
      jsonBlock(answer.body, 'answer-body'),
    );
  };
  for (const front of fronts) {
    const status = answers[front] && answers[front].status;
    tabs.append(
      h(
        'button',
        { type: 'button', role: 'tab', class: 'tab', 'data-front': front, onclick: () => select(front) },
        front,
        ' ',
        h('span', { class: ['status', status >= 400 ? 'status-bad' : 'status-good'] }, status ?? '–'),
      ),
    );
  }
  select(fronts[0]);
  return h('div', { class: 'answers' }, h('h3', null, 'Per front'), tabs, panel);
}

// -- pins: the approved and current definitions side by side

const PIN_TONES = { approved: 'ok', pending: 'warn', rejected: 'error', unpinned: 'neutral' };
const PIN_STATES = { changed: 'pending', approved: 'approved', unrecorded: 'unpinned', rejected: 'rejected' };

// One shape for a pin, whichever the server sends: the contract's (state, approved_hash, current_hash,
// approved/current definitions) or gateway.pinning's PinView (status, approved/pending summaries with their hash,
// approved_definition/pending_definition).
function normalizePin(raw) {
  const summaries = raw.status !== undefined || 'approved_definition' in raw || 'pending_definition' in raw;
  if (!summaries) {
    return {
      pin: raw.pin,
      state: raw.state,
      approvedHash: raw.approved_hash ?? null,
      currentHash: raw.current_hash ?? null,
      changed: raw.changed || [],
      approved: raw.approved ?? null,
      current: raw.current ?? null,
      diff: raw.diff || '',
      details: [],
      quarantined: raw.quarantined === true,
    };
  }
  const approved = raw.approved && typeof raw.approved === 'object' ? raw.approved : null;
  const pending = raw.pending && typeof raw.pending === 'object' ? raw.pending : null;
  const approvedDefinition = raw.approved_definition ?? null;
  const pendingDefinition = raw.pending_definition ?? null;
  const details = [];
  if (raw.mode) details.push(['Mode', badge(raw.mode, raw.mode === 'enforce' ? 'accent' : 'neutral')]);
  if (approved && (approved.approved_at || approved.by || approved.source)) {
    details.push([
      'Approved',
      [approved.source ? approved.source + ' ' : '', approved.by ? 'by ' + approved.by + ' ' : '', approved.approved_at ? fmtTime(approved.approved_at) : null],
    ]);
  }
  if (pending && pending.first_seen) details.push(['Changed at', fmtTime(pending.first_seen)]);
  if (raw.rejected && raw.rejected.length) details.push(['Rejected', `${raw.rejected.length} definition${raw.rejected.length === 1 ? '' : 's'}`]);
  if (raw.in_file) details.push(['Pin file', 'yes']);
  return {
    pin: raw.pin,
    state: raw.state ?? PIN_STATES[raw.status] ?? raw.status ?? 'unpinned',
    approvedHash: raw.approved_hash ?? (approved ? approved.hash : null),
    currentHash: raw.current_hash ?? (pending ? pending.hash : approved ? approved.hash : null),
    changed: raw.changed ?? (pending && pending.changed) ?? [],
    approved: approvedDefinition,
    current: pendingDefinition ?? (pending ? null : approvedDefinition),
    diff: raw.diff || '',
    details,
    quarantined: raw.quarantined === true,
  };
}

function pinBlock(raw, after) {
  const pin = normalizePin(raw);
  const status = h('div', { class: 'pin-status', role: 'status' });
  const decide = (action) => async () => {
    fill(status, muted(action === 'approve' ? 'Approving…' : 'Rejecting…'));
    try {
      await api('/pins/' + encodeURIComponent(pin.pin) + '/' + action, { method: 'POST', body: {} });
    } catch (err) {
      if (err.status !== 401) fill(status, errorBox(err));
      return;
    }
    after();
  };
  const undecided = pin.state === 'pending';
  const actions = h(
    'div',
    { class: 'actions' },
    h('button', { type: 'button', class: 'primary approve', disabled: !undecided, onclick: decide('approve') }, 'Approve'),
    h('button', { type: 'button', class: 'danger reject', disabled: !undecided, onclick: decide('reject') }, 'Reject'),
    undecided ? null : muted('Nothing awaits a decision.'),
  );
  return h(
    'section',
    { class: ['panel', 'pin-block', 'pin-' + pin.state], 'data-pin': pin.pin },
    h(
      'h2',
      null,
      'Pin ',
      badge(pin.state, PIN_TONES[pin.state] || 'neutral'),
      pin.quarantined ? badge('quarantined', 'error') : null,
    ),
    keyValues([
      ['Pin', code(pin.pin)],
      ['Changed', pin.changed.length ? pin.changed.map((field) => badge(field, 'warn')) : dash()],
      ['Approved hash', pin.approvedHash ? code(pin.approvedHash, 'hash') : dash()],
      ['Current hash', pin.currentHash ? code(pin.currentHash, 'hash') : dash()],
      ...pin.details,
    ]),
    pin.approved || pin.current ? sideBySide(pin.approved, pin.current) : null,
    actions,
    status,
  );
}

function lineDiff(left, right) {
  // The longest common subsequence of lines; ops: ['=', a, b], ['-', a], ['+', b].
  const n = left.length;
  const m = right.length;
  if (n * m > 4_000_000) {
    return [...left.map((line) => ['-', line]), ...right.map((line) => ['+', line])];
  }
  const width = m + 1;
  const lcs = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lcs[i * width + j] =
        left[i] === right[j] ? lcs[(i + 1) * width + j + 1] + 1 : Math.max(lcs[(i + 1) * width + j], lcs[i * width + j + 1]);
    }
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (left[i] === right[j]) {
      ops.push(['=', left[i], right[j]]);
      i += 1;
      j += 1;
    } else if (lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
      ops.push(['-', left[i]]);
      i += 1;
    } else {
      ops.push(['+', right[j]]);
      j += 1;
    }
  }
  while (i < n) ops.push(['-', left[i++]]);
  while (j < m) ops.push(['+', right[j++]]);
  return ops;
}

function sideBySide(approved, current) {
  const left = approved ? pretty(sortKeys(approved)).split('\n') : [];
  const right = current ? pretty(sortKeys(current)).split('\n') : [];
  const ops = lineDiff(left, right);
  const rows = [];
  let a = 0;
  let b = 0;
  for (let k = 0; k < ops.length; ) {
    if (ops[k][0] === '=') {
      a += 1;
      b += 1;
      rows.push(['same', a, ops[k][1], b, ops[k][2]]);
      k += 1;
      continue;
    }
    const removed = [];
    const added = [];
    while (k < ops.length && ops[k][0] !== '=') {
      if (ops[k][0] === '-') removed.push(ops[k][1]);
      else added.push(ops[k][1]);
      k += 1;
    }
    for (let r = 0; r < Math.max(removed.length, added.length); r += 1) {
      const hasLeft = r < removed.length;
      const hasRight = r < added.length;
      rows.push([
        'change',
        hasLeft ? (a += 1) : null,
        hasLeft ? removed[r] : null,
        hasRight ? (b += 1) : null,
        hasRight ? added[r] : null,
      ]);
    }
  }
  const changes = rows.filter((row) => row[0] === 'change').length;
  return h(
    'div',
    { class: 'diff-wrap' },
    h('div', { class: 'diff-caption muted' }, changes ? `${changes} changed line${changes === 1 ? '' : 's'}` : 'The definitions are the same.'),
    h(
      'table',
      { class: 'diff', 'aria-label': 'Approved definition against the current one' },
      h('colgroup', null, h('col', { class: 'ln' }), h('col', { class: 'code' }), h('col', { class: 'ln' }), h('col', { class: 'code' })),
      h('thead', null, h('tr', null, h('th', { colspan: 2 }, 'Approved'), h('th', { colspan: 2 }, 'Current'))),
      h(
        'tbody',
        null,
        rows.map(([kind, ln, lt, rn, rt]) =>
          h(
            'tr',
            { class: 'diff-' + kind },
            h('td', { class: 'ln' }, ln ?? ''),
            h('td', { class: ['code', kind === 'change' && lt != null ? 'del' : null, lt == null ? 'blank' : null] }, lt ?? ''),
            h('td', { class: 'ln' }, rn ?? ''),
            h('td', { class: ['code', kind === 'change' && rt != null ? 'ins' : null, rt == null ? 'blank' : null] }, rt ?? ''),
          ),
        ),
      ),
    ),
  );
}

// ---------------------------------------------------------------------------------------------- Backends

const STATE_TONES = { up: 'ok', down: 'error', starting: 'warn', closed: 'ok', open: 'error', half_open: 'warn', 'half-open': 'warn' };

async function pageBackends(view, ctx) {
  const toolbar = h('div', { class: 'toolbar right' });
  const body = h('div', null, h('p', { class: 'loading' }, 'Loading the backends…'));
  view.append(pageHead('Backends', toolbar), body);
  const load = async () => {
    let data;
    try {
      data = await api('/backends');
    } catch (err) {
      if (ctx.live() && err.status !== 401) fill(body, errorBox(err));
      return;
    }
    if (ctx.live()) fill(body, backendsView(data));
  };
  autoRefresh(ctx, toolbar, load);
  await load();
}

function backendsView(data) {
  const stats = data.stats || {};
  const windowMinutes = data.window_minutes ?? 15;
  const replicas = data.replicas || [];
  if (!replicas.length) return h('p', { class: 'empty' }, 'No replica reported.');
  return replicas.map((replica) =>
    h(
      'section',
      { class: 'panel replica', 'data-replica': replica.id },
      h(
        'h2',
        null,
        'Replica ',
        code(replica.id),
        replica.self ? badge('this one', 'accent') : null,
        replica.leaving ? badge('leaving', 'warn') : null,
        h('span', { class: 'h-extra muted' }, replica.url || '', replica.reported_at ? [' · reported ', fmtTime(replica.reported_at)] : null),
      ),
      table(
        [
          { label: 'Backend' },
          { label: 'Kind' },
          { label: 'State' },
          { label: 'Tools', cls: 'num' },
          { label: 'Breaker' },
          { label: 'Last error' },
          { label: `Calls (${windowMinutes} min)`, cls: 'num' },
          { label: 'Errors', cls: 'num' },
          { label: 'Error rate', cls: 'num' },
          { label: 'p50', cls: 'num' },
          { label: 'p99', cls: 'num' },
        ],
        (replica.backends || []).map((backend) => {
          // this replica's own figures for the backend when the server gives them, else the gateway's
          const stat = ('stats' in backend ? backend.stats : stats[backend.name]) || {};
          return {
            cls: backend.state === 'down' ? 'row-bad' : null,
            cells: [
              h('strong', null, backend.name),
              badge(backend.kind, 'neutral'),
              badge(backend.state, STATE_TONES[backend.state] || 'neutral'),
              fmtNumber(backend.tools ?? 0),
              breakerCell(backend.breaker),
              [
                backend.error
                  ? h('div', { class: 'last-error' }, h('div', { class: 'error-text' }, backend.error), h('div', { class: 'muted small' }, 'at ', fmtTime(backend.last_error_at || backend.checked_at)))
                  : backend.last_error
                    ? h(
                        'div',
                        { class: 'last-error recovered' },
                        h('div', { class: 'muted' }, backend.last_error),
                        h('div', { class: 'muted small' }, 'at ', fmtTime(backend.last_error_at), ' · up again, checked ', fmtTime(backend.checked_at, false)),
                      )
                    : backend.checked_at
                      ? muted(['none · checked ', fmtTime(backend.checked_at, false)])
                      : dash(),
                (backend.warnings || []).map((warning) => h('div', { class: 'warning-text small' }, '⚠ ', warning)),
              ],
              fmtNumber(stat.calls ?? 0),
              fmtNumber(stat.errors ?? 0),
              h('span', { class: stat.error_rate > 0 ? 'bad' : null }, fmtRate(stat.error_rate ?? (stat.calls ? 0 : null))),
              fmtMs(stat.p50_ms),
              fmtMs(stat.p99_ms),
            ],
          };
        }),
        { empty: 'No backend on this replica.' },
      ),
    ),
  );
}

function breakerCell(breaker) {
  if (!breaker) return muted('none');
  const { state, ...rest } = typeof breaker === 'object' ? breaker : { state: breaker };
  const details = Object.entries(rest)
    .filter(([, value]) => value != null && typeof value !== 'object')
    .map(([key, value]) => `${key.replace(/_/g, ' ')}: ${value}`);
  return h('span', null, badge(String(state).replace('_', '-'), STATE_TONES[state] || 'neutral'), details.length ? h('div', { class: 'muted small' }, details.join(' · ')) : null);
}

// ---------------------------------------------------------------------------------------------- Traffic

async function pageTraffic(view, ctx) {
  let minutes = Number(ctx.params.get('minutes')) || 60;
  const range = h(
    'select',
    { 'aria-label': 'Time window', id: 'traffic-window' },
    [5, 15, 30, 60].map((m) => h('option', { value: String(m), selected: m === minutes }, m < 60 ? `last ${m} min` : 'last hour')),
  );
  const toolbar = h('div', { class: 'toolbar right' }, range);
  const body = h('div', null, h('p', { class: 'loading' }, 'Loading the traffic…'));
  view.append(pageHead('Traffic', toolbar), body);
  const load = async () => {
    let data;
    try {
      data = await api('/traffic?minutes=' + minutes);
    } catch (err) {
      if (ctx.live() && err.status !== 401) fill(body, errorBox(err));
      return;
    }
    if (ctx.live()) fill(body, trafficView(data));
  };
  range.addEventListener('change', () => {
    minutes = Number(range.value);
    history.replaceState(null, '', '#/traffic?minutes=' + minutes);
    load();
  });
  autoRefresh(ctx, toolbar, load);
  await load();
}

function trafficView(data) {
  const totals = data.totals || {};
  const minutes = data.minutes || 60;
  const now = data.now || Math.floor(Date.now() / 60000);
  const start = now - minutes + 1;
  const inFlight = data.in_flight || { total: 0, by_front: {}, by_replica: {} };
  const tiles = h(
    'div',
    { class: 'tiles' },
    tile('Calls', fmtNumber(totals.calls ?? 0), perSecond(totals.per_second ?? 0)),
    tile('Errors', fmtNumber(totals.errors ?? 0), totals.calls ? fmtRate(totals.errors / totals.calls) : '–', totals.errors ? 'bad' : null),
    tile('p50', fmtMs(totals.p50_ms), 'latency'),
    tile('p99', fmtMs(totals.p99_ms), 'latency'),
    tile('In flight', fmtNumber(inFlight.total ?? 0), inFlightDetail(inFlight), null, 'in-flight'),
  );
  const points = totals.points || [];
  const charts = h(
    'div',
    { class: 'chart-row' },
    section('Calls per minute', legend([['ok', 'calls'], ['err', 'errors']]), callsChart(points, start, now)),
    section('Latency', legend([['p50', 'p50'], ['p99', 'p99']]), latencyChart(points, start, now)),
  );
  const breakdown = h(
    'div',
    { class: 'breakdown' },
    ['front', 'backend', 'tool'].map((dimension) => section('By ' + dimension, seriesTable(dimension, (data.series || {})[dimension] || [], start, now))),
  );
  return [tiles, charts, breakdown, section('Failed calls', failuresTable(data.failures || []))];
}

function perSecond(rate) {
  if (rate >= 1) return `${fmtNumber(Math.round(rate * 10) / 10)} / s`;
  if (rate * 60 >= 0.1) return `${fmtNumber(Math.round(rate * 600) / 10)} / min`;
  return rate > 0 ? '< 0.1 / min' : 'none';
}

function tile(label, value, sub, tone, cls) {
  return h('div', { class: ['tile', tone, cls] }, h('div', { class: 'tile-label' }, label), h('div', { class: 'tile-value' }, value), sub ? h('div', { class: 'tile-sub' }, sub) : null);
}

function inFlightDetail(inFlight) {
  const parts = Object.entries(inFlight.by_front || {}).filter(([, n]) => n).map(([front, n]) => `${front} ${n}`);
  const replicas = Object.entries(inFlight.by_replica || {}).filter(([, n]) => n).map(([replica, n]) => `${replica} ${n}`);
  if (!parts.length && !replicas.length) return 'none now';
  return [parts.join(', '), replicas.length ? ' · on ' + replicas.join(', ') : ''].join('');
}

function legend(items) {
  return h('div', { class: 'legend' }, items.map(([cls, label]) => h('span', { class: 'legend-item' }, h('i', { class: 'swatch swatch-' + cls }), label)));
}

// The top of a chart's y axis: four equal steps of a round size (whole steps for counts).
function niceMax(value, whole = false) {
  if (!(value > 0)) return whole ? 4 : 1;
  const raw = value / 4;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const factor of [1, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
    const step = factor * power;
    if (whole && (step < 1 || !Number.isInteger(step))) continue;
    if (step >= raw) return step * 4;
  }
  return 40 * power;
}

function chartFrame(width, height, pad, maxY, start, end, formatY) {
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const span = Math.max(1, end - start + 1);
  const x = (minute) => pad.left + ((minute - start) / span) * plotW;
  const y = (value) => pad.top + plotH - (value / maxY) * plotH;
  const group = s('g', { class: 'axes' });
  for (let i = 0; i <= 4; i += 1) {
    const value = (maxY * i) / 4;
    const yy = y(value);
    group.append(
      s('line', { x1: pad.left, x2: width - pad.right, y1: yy, y2: yy, class: i ? 'gridline' : 'baseline' }),
      s('text', { x: pad.left - 6, y: yy + 3.5, 'text-anchor': 'end', class: 'tick' }, formatY(value)),
    );
  }
  const step = span <= 20 ? 5 : span <= 60 ? 10 : span <= 180 ? 30 : 120;
  for (let minute = Math.ceil(start / step) * step; minute <= end; minute += step) {
    const xx = x(minute);
    group.append(
      s('line', { x1: xx, x2: xx, y1: pad.top + plotH, y2: pad.top + plotH + 4, class: 'baseline' }),
      s('text', { x: xx, y: height - 6, 'text-anchor': 'middle', class: 'tick' }, minuteLabel(minute)),
    );
  }
  return { x, y, plotW, plotH, span, group };
}

function callsChart(points, start, end) {
  const width = 600;
  const height = 170;
  const pad = { left: 44, right: 10, top: 10, bottom: 24 };
  const inRange = points.filter((p) => p[0] >= start && p[0] <= end);
  const maxY = niceMax(Math.max(0, ...inRange.map((p) => p[1])), true);
  const frame = chartFrame(width, height, pad, maxY, start, end, (v) => fmtNumber(Math.round(v * 10) / 10));
  const barW = Math.max(1, (frame.plotW / frame.span) * 0.8);
  const bars = s('g', { class: 'bars' });
  for (const [minute, calls, errors] of inRange) {
    const x0 = frame.x(minute) + (frame.plotW / frame.span - barW) / 2;
    const okCalls = Math.max(0, calls - errors);
    const okTop = frame.y(okCalls);
    const label = `${minuteLabel(minute)}: ${calls} call${calls === 1 ? '' : 's'}, ${errors} error${errors === 1 ? '' : 's'}`;
    const bar = s('g', { class: 'bar' }, s('title', null, label));
    if (okCalls) bar.append(s('rect', { x: x0, y: okTop, width: barW, height: frame.y(0) - okTop, class: 'fill-ok' }));
    if (errors) {
      const errTop = frame.y(calls);
      bar.append(s('rect', { x: x0, y: errTop, width: barW, height: okTop - errTop, class: 'fill-err' }));
    }
    bars.append(bar);
  }
  return chartSvg(width, height, frame.group, bars, inRange.length ? null : emptyNote(width, height));
}

function latencyChart(points, start, end) {
  const width = 600;
  const height = 170;
  const pad = { left: 56, right: 10, top: 10, bottom: 24 };
  const inRange = points.filter((p) => p[0] >= start && p[0] <= end);
  const maxY = niceMax(Math.max(0, ...inRange.map((p) => Math.max(p[3] ?? 0, p[4] ?? 0))));
  const frame = chartFrame(width, height, pad, maxY, start, end, (v) => fmtMs(v));
  const half = frame.plotW / frame.span / 2;
  const lines = s('g', { class: 'lines' });
  for (const [index, cls] of [[4, 'p99'], [3, 'p50']]) {
    // consecutive minutes joined; a minute without calls breaks the line
    let path = '';
    let previous = null;
    for (const point of inRange) {
      const value = point[index];
      if (value == null) {
        previous = null;
        continue;
      }
      const cmd = previous != null && point[0] === previous + 1 ? 'L' : 'M';
      path += `${cmd}${(frame.x(point[0]) + half).toFixed(1)},${frame.y(value).toFixed(1)}`;
      previous = point[0];
    }
    if (path) lines.append(s('path', { d: path, class: 'line line-' + cls }));
    for (const point of inRange) {
      if (point[index] == null) continue;
      lines.append(
        s(
          'circle',
          { cx: (frame.x(point[0]) + half).toFixed(1), cy: frame.y(point[index]).toFixed(1), r: 2.4, class: 'dot dot-' + cls },
          s('title', null, `${minuteLabel(point[0])} ${cls}: ${fmtMs(point[index])}`),
        ),
      );
    }
  }
  return chartSvg(width, height, frame.group, lines, inRange.length ? null : emptyNote(width, height));
}

function emptyNote(width, height) {
  return s('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'empty-note' }, 'No calls in this window');
}

function chartSvg(width, height, ...children) {
  return s('svg', { viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img', preserveAspectRatio: 'xMidYMid meet' }, ...children);
}

function sparkline(points, start, end) {
  const width = 170;
  const height = 22;
  const span = Math.max(1, end - start + 1);
  const inRange = points.filter((p) => p[0] >= start && p[0] <= end);
  const maxY = Math.max(1, ...inRange.map((p) => p[1]));
  const barW = Math.max(1, width / span);
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, class: 'spark', 'aria-hidden': 'true' });
  svg.append(s('line', { x1: 0, x2: width, y1: height - 0.5, y2: height - 0.5, class: 'baseline' }));
  for (const [minute, calls, errors] of inRange) {
    const x = ((minute - start) / span) * width;
    const hAll = Math.max(1, (calls / maxY) * (height - 2));
    const hErr = errors ? Math.max(1, (errors / maxY) * (height - 2)) : 0;
    svg.append(s('rect', { x: x.toFixed(1), y: (height - hAll).toFixed(1), width: barW.toFixed(1), height: (hAll - hErr).toFixed(1), class: 'fill-ok' }));
    if (hErr) svg.append(s('rect', { x: x.toFixed(1), y: (height - hErr).toFixed(1), width: barW.toFixed(1), height: hErr.toFixed(1), class: 'fill-err' }));
  }
  return svg;
}

// p50 and p99 of each minute as two lines (a minute with one point: dots), scaled to the row's own p99.
function latencyline(points, start, end) {
  const width = 170;
  const height = 22;
  const span = Math.max(1, end - start + 1);
  const inRange = points.filter((p) => p[0] >= start && p[0] <= end && (p[3] != null || p[4] != null));
  const maxY = Math.max(0.001, ...inRange.map((p) => p[4] ?? p[3] ?? 0));
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, class: 'spark spark-latency', 'aria-hidden': 'true' });
  svg.append(s('line', { x1: 0, x2: width, y1: height - 0.5, y2: height - 0.5, class: 'baseline' }));
  const x = (p) => (((p[0] - start + 0.5) / span) * width).toFixed(1);
  const y = (value) => (height - 1.5 - (value / maxY) * (height - 4)).toFixed(1);
  for (const [name, index] of [['p99', 4], ['p50', 3]]) {
    const at = inRange.filter((p) => p[index] != null);
    if (at.length === 1) svg.append(s('circle', { cx: x(at[0]), cy: y(at[0][index]), r: 1.6, class: 'lat-' + name }));
    else if (at.length) svg.append(s('polyline', { points: at.map((p) => `${x(p)},${y(p[index])}`).join(' '), class: 'lat-' + name }));
  }
  return svg;
}

function seriesTable(dimension, series, start, end) {
  const sorted = [...series].sort((a, b) => (b.calls ?? 0) - (a.calls ?? 0) || String(a.key).localeCompare(String(b.key)));
  return table(
    [{ label: dimension[0].toUpperCase() + dimension.slice(1) }, { label: 'Calls', cls: 'num' }, { label: 'Err', cls: 'num' }, { label: 'p50', cls: 'num' }, { label: 'p99', cls: 'num' }, { label: 'calls per minute', cls: 'spark-col' }, { label: 'p50 / p99 per minute', cls: 'spark-col' }],
    sorted.map((row) => ({
      cls: 'series-row',
      cells: [
        dimension === 'tool' ? toolLink(row.key) : code(row.key),
        fmtNumber(row.calls ?? 0),
        h('span', { class: row.errors ? 'bad' : null }, fmtNumber(row.errors ?? 0)),
        fmtMs(row.p50_ms),
        fmtMs(row.p99_ms),
        sparkline(row.points || [], start, end),
        latencyline(row.points || [], start, end),
      ],
    })),
    { cls: 'compact series-' + dimension, empty: 'No calls in this window.' },
  );
}

function failuresTable(failures) {
  const showPrincipal = failures.some((f) => Object.prototype.hasOwnProperty.call(f, 'principal'));
  const columns = [
    { label: 'At' },
    { label: 'Kind' },
    { label: 'Front' },
    { label: 'Backend' },
    { label: 'Tool' },
    { label: 'Message', cls: 'col-message' },
    { label: 'Trace id' },
    ...(showPrincipal ? [{ label: 'Principal' }] : []),
    { label: 'Replica' },
  ];
  return table(
    columns,
    failures.map((f) => ({
      cls: 'failure-row',
      cells: [
        fmtTime(f.at, false),
        badge(f.kind, 'error'),
        f.front ?? dash(),
        f.backend ?? dash(),
        f.tool ? toolLink(f.tool) : dash(),
        h('span', { class: 'message', title: f.message || '' }, f.message || ''),
        f.trace_id ? code(f.trace_id, 'trace-id') : dash(),
        ...(showPrincipal ? [f.principal ?? dash()] : []),
        f.replica ?? dash(),
      ],
    })),
    { cls: 'failures', empty: 'No failed call in this window.' },
  );
}

// ---------------------------------------------------------------------------------------------- State

async function pageState(view, ctx) {
  const toolbar = h('div', { class: 'toolbar right' });
  const body = h('div', null, h('p', { class: 'loading' }, 'Loading the state…'));
  view.append(pageHead('State', toolbar), body);
  const load = async () => {
    let data;
    try {
      data = await api('/state');
    } catch (err) {
      if (ctx.live() && err.status !== 401) fill(body, errorBox(err));
      return;
    }
    if (ctx.live()) fill(body, stateView(data));
  };
  autoRefresh(ctx, toolbar, load);
  await load();
}

function stateView(data) {
  const config = data.config || {};
  const reloads = config.reloads || [];
  const sessions = [...(data.sessions || [])].sort((a, b) => String(a.front).localeCompare(String(b.front)) || String(a.principal).localeCompare(String(b.principal)));
  const total = sessions.reduce((sum, row) => sum + (row.count || 0), 0);
  return h(
    'div',
    { class: 'state-grid' },
    section(
      'Configuration',
      keyValues([
        ['Generation', h('strong', { class: 'generation' }, config.generation ?? '–')],
        ['Source', config.source ? code(config.source) : dash()],
        ['Loaded at', fmtTime(config.loaded_at)],
      ]),
      h('h3', null, 'Reloads'),
      config.reloads === undefined && config.applied !== undefined
        ? h(
            'p',
            { class: 'muted reload-counts' },
            `${fmtNumber(config.applied)} applied, ${fmtNumber(config.refused ?? 0)} refused; their messages are shown to admins.`,
          )
        : table(
        [{ label: 'At', cls: 'col-reload' }, { label: 'Message' }],
        reloads.map((reload) => ({
          cls: reload.ok ? 'reload-ok' : 'row-bad reload-failed',
          cells: [
            [
              h('div', null, fmtTime(reload.at)),
              h(
                'div',
                { class: 'reload-result' },
                reload.ok ? badge('ok', 'ok') : badge('failed', 'error'),
                muted(' generation ' + (reload.generation ?? '–')),
              ),
            ],
            h('pre', { class: ['reload-message', reload.ok ? null : 'error-text'] }, reload.message || ''),
          ],
        })),
          { empty: 'No reload since the gateway started.' },
        ),
    ),
    h(
      'div',
      { class: 'state-side' },
      section(
        'Sessions',
        h('p', { class: 'muted' }, `${fmtNumber(total)} open session${total === 1 ? '' : 's'}`),
        table(
          [{ label: 'Front' }, { label: 'Principal' }, { label: 'Sessions', cls: 'num' }],
          sessions.map((row) => [code(row.front), row.principal ?? muted('anonymous'), fmtNumber(row.count ?? 0)]),
          { empty: 'No open session.' },
        ),
      ),
      section(
        'Replicas',
        table(
          [{ label: 'Replica' }, { label: 'Started' }, { label: 'Lease' }, { label: 'Config' }],
          (data.replicas || []).map((replica) => ({
            cls: 'replica-row',
            cells: [
              [
                h('div', null, code(replica.id), ' ', replica.self ? badge('this one', 'accent') : null, replica.leaving ? badge('leaving', 'warn') : null),
                replica.url ? h('div', { class: 'muted small' }, replica.url) : null,
              ],
              fmtTime(replica.started),
              leaseCell(replica.lease),
              replicaConfig(replica.config),
            ],
          })),
          { empty: 'No replica reported.' },
        ),
      ),
    ),
  );
}

function leaseCell(lease) {
  if (!lease) return dash();
  return h(
    'div',
    { class: 'lease', title: lease.lease_s ? `a lease of ${lease.lease_s} s, renewed while the replica runs` : null },
    h('div', null, 'renewed ', fmtTime(lease.renewed, false)),
    h('div', { class: 'muted small' }, 'expires ', fmtTime(lease.expires, false)),
  );
}

function replicaConfig(config) {
  if (!config) return dash();
  const refused = (config.reloads || []).filter((reload) => !reload.ok);
  const count = config.reloads ? refused.length : config.refused || 0;
  return h(
    'div',
    null,
    'generation ',
    h('strong', null, config.generation ?? '–'),
    count
      ? h('div', { class: 'small error-text', title: refused.length ? refused[0].message || '' : null }, `${count} reload${count === 1 ? '' : 's'} refused`)
      : null,
  );
}

// ---------------------------------------------------------------------------------------------- Pins

async function pagePins(view, ctx) {
  if (!me.admin) {
    view.append(pageHead('Pins'), section(null, h('p', { class: 'empty' }, 'Pins are shown to admins only.')));
    return;
  }
  const body = h('div', null, h('p', { class: 'loading' }, 'Loading the pins…'));
  view.append(pageHead('Pins', h('span', { class: 'muted' }, 'Recorded tool definitions: a changed one waits for a decision')), body);
  const data = await api('/pins');
  if (!ctx.live()) return;
  const pins = (data.pins || []).map((raw) => normalizePin(raw)).sort(
    (a, b) => (a.state === 'pending' ? 0 : 1) - (b.state === 'pending' ? 0 : 1) || String(a.pin).localeCompare(String(b.pin)),
  );
  const detail = h('div', { class: 'pin-detail' });
  const open = async (pin) => {
    fill(detail, h('p', { class: 'loading' }, 'Loading ' + pin.pin + '…'));
    try {
      const full = await api('/pins/' + encodeURIComponent(pin.pin));
      if (!ctx.live()) return;
      fill(detail, pinBlock(full, () => route()), full.diff ? section('Unified diff', unifiedDiff(full.diff)) : null);
      detail.scrollIntoView({ block: 'nearest' });
    } catch (err) {
      if (err.status !== 401) fill(detail, errorBox(err));
    }
  };
  fill(body,
    section(
      null,
      table(
        [{ label: 'Pin' }, { label: 'State' }, { label: 'Changed' }, { label: 'Approved hash' }, { label: 'Current hash' }, { label: '' }],
        pins.map((pin) => ({
          cls: 'pin-row pin-' + pin.state,
          cells: [
            pinToolLink(pin.pin),
            [badge(pin.state, PIN_TONES[pin.state] || 'neutral'), pin.quarantined ? badge('quarantined', 'error') : null],
            pin.changed.length ? pin.changed.join(', ') : dash(),
            pin.approvedHash ? code(shortHash(pin.approvedHash), 'hash') : dash(),
            pin.currentHash ? code(shortHash(pin.currentHash), 'hash') : dash(),
            h('button', { type: 'button', class: 'ghost small', onclick: () => open(pin) }, 'Details'),
          ],
        })),
        { empty: 'No pin recorded: no upstream tool is pinned.' },
      ),
    ),
    detail,
  );
}

function pinToolLink(pinId) {
  // <backend>/<flat name>@<version>: the tool's id is <flat name>@<version>
  const slash = pinId.indexOf('/');
  const toolId = slash < 0 ? pinId : pinId.slice(slash + 1);
  return h('span', null, slash < 0 ? null : muted(pinId.slice(0, slash + 1)), toolLink(toolId));
}

function shortHash(hash) {
  const [algo, hex] = hash.includes(':') ? hash.split(':', 2) : ['', hash];
  return (algo ? algo + ':' : '') + hex.slice(0, 12) + (hex.length > 12 ? '…' : '');
}

function unifiedDiff(textValue) {
  return h(
    'pre',
    { class: 'udiff' },
    textValue.split('\n').map((line) =>
      h('span', { class: line.startsWith('+') && !line.startsWith('+++') ? 'ins' : line.startsWith('-') && !line.startsWith('---') ? 'del' : line.startsWith('@@') ? 'hunk' : null }, line + '\n'),
    ),
  );
}

// ---------------------------------------------------------------------------------------------- start

window.addEventListener('hashchange', route);
boot();
