// The Runlet dashboard: a client of the management API (/v2) and nothing else. Pages are chosen by the URL's
// hash (#/apps, #/apps/NAME, #/apps/NAME/runs/ID, #/keys), so that every page has an address, the back button
// works, and no server route is needed. Every value from the API is put in the page as text (textContent),
// never as markup: an app's error or a run's result is shown as it is, whatever it holds.

const TOKEN_KEY = 'runlet.token';
const PROJECT_KEY = 'runlet.project';
/** How often the first page of runs is read again while it is shown, so new runs appear. */
const RUNS_REFRESH_MS = 2000;
const PAGE_SIZE = 20;
const STATUSES = ['pending', 'running', 'success', 'failure', 'cancelled'];
const DEFAULT_KEY_DAYS = 30;

const main = document.getElementById('main');
const sessionLine = document.getElementById('session');
let config;
/** The timer of the page being shown, stopped when another page is shown. */
let pageTimer = null;
/** Bumped on each navigation: a page's late answers are dropped once another page is shown. */
let pageGeneration = 0;

// ---- the management API ----

class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? `the management API answered ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

function project() {
  return config.projectId ?? sessionStorage.getItem(PROJECT_KEY);
}

async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (config.tokenRequired && token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`/v2/projects/${encodeURIComponent(project())}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    if (response.status === 401 && config.tokenRequired) {
      sessionStorage.removeItem(TOKEN_KEY);
    }
    throw new ApiError(response.status, parsed);
  }
  return parsed;
}

// ---- building the page (text only) ----

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else if (value === true) node.setAttribute(name, '');
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(title, ...content) {
  document.title = `${title} · Runlet`;
  const heading = el('h1', { tabindex: '-1' }, title);
  main.replaceChildren(heading, ...content);
  return heading;
}

function alertBox(message) {
  return el('p', { role: 'alert', class: 'error' }, message);
}

function errorMessage(error) {
  if (error instanceof ApiError) {
    const type = error.problem?.type?.split('#')[1];
    return `${error.status}${type ? ` ${type}` : ''}: ${error.message}`;
  }
  return `The management API could not be reached: ${error.message}`;
}

function formatTime(value) {
  if (!value) return '—';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

function formatMs(value) {
  return typeof value === 'number' ? `${value.toFixed(value < 10 ? 1 : 0)} ms` : '—';
}

function statusBadge(status) {
  return el('span', { class: `badge status-${status}` }, status);
}

function runError(run) {
  if (run.error) return `${run.error.type}: ${run.error.message}`;
  return run.reason ?? '';
}

function definitionList(rows) {
  return el('dl', {}, rows.filter(([, value]) => value !== undefined).map(([term, value]) => [el('dt', {}, term), el('dd', {}, value ?? '—')]));
}

// ---- pages ----

async function appsPage(generation) {
  const heading = show('Apps');
  const items = (await api('GET', '/apps')).items;
  if (generation !== pageGeneration) return heading;
  if (items.length === 0) {
    main.append(el('p', {}, `Project ${project()} has no apps.`));
    return heading;
  }
  main.append(
    el(
      'table',
      {},
      el('caption', {}, `The apps of project ${project()}`),
      el('thead', {}, el('tr', {}, ['App', 'Status', 'Replicas', 'Scaling', 'Last error'].map((name) => el('th', { scope: 'col' }, name)))),
      el(
        'tbody',
        {},
        items.map((app) =>
          el(
            'tr',
            {},
            el('th', { scope: 'row' }, el('a', { href: `#/apps/${encodeURIComponent(app.name)}` }, app.name)),
            el('td', {}, statusBadge(app.ready ? 'ready' : 'not-ready')),
            el('td', {}, `${app.replicas.ready} ready of ${app.replicas.desired}`),
            el('td', {}, `${app.scaling.minReplicas}–${app.scaling.maxReplicas} replicas, ${app.scaling.replicaConcurrency} calls each`),
            el('td', { class: 'error-text' }, app.error ?? ''),
          ),
        ),
      ),
    ),
  );
  return heading;
}

function runsQuery(filters, nextToken) {
  const query = new URLSearchParams({ pageSize: String(PAGE_SIZE) });
  if (filters.status) query.set('status', filters.status);
  if (filters.asyncOnly) query.set('asyncOnly', 'true');
  if (nextToken) query.set('nextToken', nextToken);
  return query;
}

async function runsPage(generation, appName) {
  const heading = show(`Runs of ${appName}`);
  const filters = { status: '', asyncOnly: false };
  /** The nextToken of each page shown before this one, to go back; the current page's own token. */
  const previous = [];
  let current = null;
  let lastIds = null;

  const statusSelect = el('select', { id: 'filter-status', name: 'status' }, el('option', { value: '' }, 'any'), STATUSES.map((status) => el('option', { value: status }, status)));
  const asyncBox = el('input', { id: 'filter-async', type: 'checkbox', name: 'asyncOnly' });
  const form = el(
    'form',
    { class: 'filters', 'aria-label': 'Filter runs' },
    el('label', { for: 'filter-status' }, 'Status '),
    statusSelect,
    el('label', { for: 'filter-async' }, asyncBox, ' Async calls only'),
    el('button', { type: 'submit' }, 'Apply filters'),
  );
  const live = el('p', { class: 'live', role: 'status', 'aria-live': 'polite' });
  const tableHolder = el('div');
  const newer = el('button', { type: 'button', disabled: true }, 'Newer runs');
  const older = el('button', { type: 'button', disabled: true }, 'Older runs');
  main.append(el('p', {}, el('a', { href: '#/apps' }, '← All apps')), form, live, tableHolder, el('nav', { 'aria-label': 'Pages of runs', class: 'pager' }, newer, older));

  // Loads overlap (the refresh timer, a filter change, a page button): only the newest one's answer is shown,
  // and the table is marked busy until it is.
  let latestLoad = 0;
  async function load(token, { announce } = { announce: false }) {
    const loadNumber = ++latestLoad;
    tableHolder.setAttribute('aria-busy', 'true');
    const page = await api('GET', `/apps/${encodeURIComponent(appName)}/runs?${runsQuery(filters, token)}`);
    if (generation !== pageGeneration || loadNumber !== latestLoad) return;
    tableHolder.setAttribute('aria-busy', 'false');
    current = token;
    const ids = page.items.map((run) => run.id);
    if (announce && lastIds !== null) {
      const arrived = ids.filter((id) => !lastIds.includes(id)).length;
      if (arrived > 0) live.textContent = `${arrived} new run${arrived === 1 ? '' : 's'}`;
    }
    lastIds = ids;
    tableHolder.replaceChildren(runsTable(appName, page.items));
    older.disabled = page.nextToken === null;
    older.dataset.token = page.nextToken ?? '';
    newer.disabled = previous.length === 0;
  }

  function showLoadError(error) {
    tableHolder.setAttribute('aria-busy', 'false');
    tableHolder.replaceChildren(alertBox(errorMessage(error)));
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    filters.status = statusSelect.value;
    filters.asyncOnly = asyncBox.checked;
    previous.length = 0;
    lastIds = null;
    live.textContent = '';
    void load(null).catch(showLoadError);
  });
  older.addEventListener('click', () => {
    previous.push(current);
    void load(older.dataset.token).catch(showLoadError);
  });
  newer.addEventListener('click', () => {
    void load(previous.pop() ?? null).catch(showLoadError);
  });

  await load(null);
  // Runs arrive while the newest page is shown: it is read again every few seconds. Older pages stay still.
  pageTimer = setInterval(() => {
    if (previous.length === 0 && generation === pageGeneration) {
      void load(null, { announce: true }).catch(showLoadError);
    }
  }, RUNS_REFRESH_MS);
  return heading;
}

function runsTable(appName, runs) {
  if (runs.length === 0) return el('p', {}, 'No runs match.');
  return el(
    'table',
    {},
    el('caption', {}, `Runs of ${appName}, newest first`),
    el('thead', {}, el('tr', {}, ['Run', 'Function', 'Call', 'Status', 'Created', 'Response time', 'Error or reason'].map((name) => el('th', { scope: 'col' }, name)))),
    el(
      'tbody',
      {},
      runs.map((run) =>
        el(
          'tr',
          {},
          el('th', { scope: 'row' }, el('a', { href: `#/apps/${encodeURIComponent(appName)}/runs/${encodeURIComponent(run.id)}`, class: 'mono' }, run.id)),
          el('td', {}, run.functionName ?? run.method ?? ''),
          // Interface section 3: an async call is marked async, with the status of its run.
          el('td', {}, run.async ? el('span', { class: 'badge async' }, 'async') : run.mode),
          el('td', {}, statusBadge(run.status)),
          el('td', {}, formatTime(run.createdAt)),
          el('td', {}, formatMs(run.responseTimeMs)),
          el('td', { class: 'error-text' }, runError(run)),
        ),
      ),
    ),
  );
}

async function runPage(generation, appName, runId) {
  const heading = show(`Run ${runId}`);
  const body = el('div');
  const notice = el('div', { role: 'status', 'aria-live': 'polite' });
  main.append(el('p', {}, el('a', { href: `#/apps/${encodeURIComponent(appName)}` }, `← Runs of ${appName}`)), notice, body);
  const path = `/apps/${encodeURIComponent(appName)}/runs/${encodeURIComponent(runId)}`;

  function render(run) {
    const webhook = run.webhook;
    const parts = [
      el('h2', {}, 'Outcome'),
      definitionList([
        ['Status', statusBadge(run.status)],
        ['Reason', run.reason ?? '—'],
        ['Status code', run.statusCode ?? '—'],
        ['Error', run.error ? `${run.error.type}: ${run.error.message}` : '—'],
        ['Function', run.functionName ?? '—'],
        ['Call', run.async ? 'async' : run.mode],
        ['Replica', run.replica ?? '—'],
      ]),
      el('h2', {}, 'Timings'),
      definitionList([
        ['Created', formatTime(run.createdAt)],
        ['Started', formatTime(run.startedAt)],
        ['Completed', formatTime(run.completedAt)],
        ['Queue time', formatMs(run.queueTimeMs)],
        ['Cold start', run.coldStartMs === undefined || run.coldStartMs === null ? 'none (a replica was ready)' : formatMs(run.coldStartMs)],
        ['Run time', formatMs(run.runtimeMs)],
        ['Response time', formatMs(run.responseTimeMs)],
      ]),
      el('h2', {}, 'Webhook'),
      webhook
        ? definitionList([
            ['Endpoint', webhook.endpoint],
            ['Outcome', webhook.state],
            ['Attempts', webhook.attempts],
            ['Last status code', webhook.lastStatusCode ?? '—'],
            ['Last error', webhook.lastError ?? '—'],
          ])
        : el('p', {}, 'No webhook was asked for.'),
    ];
    if ('result' in run) {
      parts.push(
        el('h2', {}, 'Result'),
        el('p', {}, `Kept until ${formatTime(run.resultExpiresAt)}.`),
        el('pre', { class: 'result', tabindex: '0', 'aria-label': 'Result' }, JSON.stringify(run.result, null, 2)),
      );
    } else if (run.resultKept === false) {
      parts.push(el('h2', {}, 'Result'), el('p', {}, 'Not kept: it was larger than the app keeps (result_keep_bytes).'));
    } else if (run.resultKept === true) {
      parts.push(el('h2', {}, 'Result'), el('p', {}, `Expired at ${formatTime(run.resultExpiresAt)} (result_ttl).`));
    }
    if (run.status === 'pending' || run.status === 'running') {
      parts.push(el('p', {}, el('button', { type: 'button', class: 'danger', onclick: () => void cancel() }, 'Cancel run')));
    }
    body.replaceChildren(...parts);
  }

  async function refresh() {
    const { item } = await api('GET', path);
    if (generation === pageGeneration) render(item);
    return item;
  }

  async function cancel() {
    try {
      const { item } = await api('POST', `${path}/cancel`);
      notice.replaceChildren(el('p', { class: 'ok' }, `Cancel requested; the run is ${item.status}.`));
      render(item);
      await refresh();
    } catch (error) {
      notice.replaceChildren(alertBox(errorMessage(error)));
    }
  }

  const run = await refresh();
  // A run still under way is read again until it ends, so its outcome appears without a reload.
  if (run.status === 'pending' || run.status === 'running') {
    pageTimer = setInterval(() => {
      void refresh()
        .then((latest) => {
          if (latest.status !== 'pending' && latest.status !== 'running') clearInterval(pageTimer);
        })
        .catch((error) => notice.replaceChildren(alertBox(errorMessage(error))));
    }, RUNS_REFRESH_MS);
  }
  return heading;
}

function defaultExpiry() {
  const date = new Date(Date.now() + DEFAULT_KEY_DAYS * 86_400_000);
  return date.toISOString().slice(0, 10);
}

async function keysPage(generation) {
  const heading = show('API keys');
  if (config.keysUnavailable !== null) {
    main.append(el('p', { role: 'note' }, config.keysUnavailable));
    return heading;
  }
  const notice = el('div', { role: 'status', 'aria-live': 'polite' });
  const listHolder = el('div');
  const today = new Date().toISOString().slice(0, 10);
  const nameInput = el('input', { id: 'key-name', name: 'name', required: true, pattern: '[a-z0-9]([\\-a-z0-9]*[a-z0-9])?', maxlength: '52', autocomplete: 'off', 'aria-describedby': 'key-name-hint' });
  const expiryInput = el('input', { id: 'key-expiry', name: 'expiresAt', type: 'date', required: true, min: today, value: defaultExpiry(), 'aria-describedby': 'key-expiry-hint' });
  const form = el(
    'form',
    { class: 'key-form', 'aria-labelledby': 'create-key-heading' },
    el('h2', { id: 'create-key-heading' }, 'Create a key'),
    el('p', {}, el('label', { for: 'key-name' }, 'Name'), nameInput, el('span', { id: 'key-name-hint', class: 'hint' }, 'Lowercase letters, digits and -, e.g. staging. One key per environment.')),
    el('p', {}, el('label', { for: 'key-expiry' }, 'Expires on'), expiryInput, el('span', { id: 'key-expiry-hint', class: 'hint' }, 'The key stops working at the end of this day (UTC).')),
    el('p', {}, el('button', { type: 'submit' }, 'Create key')),
  );
  main.append(
    el('p', {}, `Keys of project ${project()}: bearer tokens for the run interface and the management API.`),
    form,
    notice,
    el('h2', {}, 'Keys'),
    listHolder,
  );

  async function refreshList() {
    const { items } = await api('GET', '/keys');
    if (generation !== pageGeneration) return;
    if (items.length === 0) {
      listHolder.replaceChildren(el('p', {}, 'No keys yet.'));
      return;
    }
    listHolder.replaceChildren(
      el(
        'table',
        {},
        el('caption', {}, `API keys of project ${project()}`),
        el('thead', {}, el('tr', {}, ['Name', 'Created', 'Expires', 'Action'].map((name) => el('th', { scope: 'col' }, name)))),
        el(
          'tbody',
          {},
          items.map((key) =>
            el(
              'tr',
              {},
              el('th', { scope: 'row' }, key.name),
              el('td', {}, formatTime(key.createdAt)),
              el('td', {}, formatTime(key.expiresAt), Date.parse(key.expiresAt) <= Date.now() ? [' ', el('span', { class: 'badge status-failure' }, 'expired')] : null),
              el('td', {}, el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke key ${key.name}`, onclick: () => void revoke(key.name) }, 'Revoke')),
            ),
          ),
        ),
      ),
    );
  }

  async function revoke(name) {
    if (!window.confirm(`Revoke key ${name}? Whatever uses its token is refused from now on.`)) return;
    try {
      await api('DELETE', `/keys/${encodeURIComponent(name)}`);
    } catch (error) {
      notice.replaceChildren(alertBox(errorMessage(error)));
      return;
    }
    // The list first: when the page says the key is revoked, it no longer lists it.
    try {
      await refreshList();
      notice.replaceChildren(el('p', { class: 'ok' }, `Key ${name} revoked.`));
    } catch (error) {
      notice.replaceChildren(alertBox(`Key ${name} revoked; the list could not be read again: ${errorMessage(error)}`));
    }
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const created = await api('POST', '/keys', { name: nameInput.value, expiresAt: `${expiryInput.value}T23:59:59Z` });
      const tokenField = el('textarea', { id: 'new-token', readonly: true, rows: '4', spellcheck: 'false' }, created.token);
      const copy = el('button', { type: 'button', onclick: () => void navigator.clipboard?.writeText(created.token).then(() => (copy.textContent = 'Copied')) }, 'Copy token');
      notice.replaceChildren(
        el(
          'section',
          { class: 'new-key', 'aria-labelledby': 'new-key-heading' },
          el('h2', { id: 'new-key-heading' }, `Key ${created.item.name} created`),
          el('p', {}, `Copy its token now: it is not shown again. It expires ${formatTime(created.item.expiresAt)}.`),
          el('label', { for: 'new-token' }, 'Token'),
          tokenField,
          el('p', {}, copy),
        ),
      );
      form.reset();
      expiryInput.value = defaultExpiry();
      tokenField.focus();
      tokenField.select();
      await refreshList();
    } catch (error) {
      notice.replaceChildren(alertBox(errorMessage(error)));
    }
  });

  await refreshList();
  return heading;
}

function signInPage(reason) {
  const heading = show('Sign in');
  const projectInput = el('input', { id: 'signin-project', name: 'project', required: true, autocomplete: 'off', value: sessionStorage.getItem(PROJECT_KEY) ?? '' });
  const tokenInput = el('input', { id: 'signin-token', name: 'token', type: 'password', required: true, autocomplete: 'off' });
  const form = el(
    'form',
    { class: 'signin', 'aria-label': 'Sign in' },
    reason ? alertBox(reason) : null,
    el('p', {}, 'The dashboard calls the management API with your token. It is kept in this tab only (sessionStorage) and sent as a bearer; the server keeps no session.'),
    el('p', {}, el('label', { for: 'signin-project' }, 'Project (namespace)'), projectInput),
    el('p', {}, el('label', { for: 'signin-token' }, 'Service-account token'), tokenInput, el('span', { class: 'hint' }, 'e.g. kubectl create token NAME -n PROJECT, or an API key')),
    el('p', {}, el('button', { type: 'submit' }, 'Sign in')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    sessionStorage.setItem(PROJECT_KEY, projectInput.value.trim());
    sessionStorage.setItem(TOKEN_KEY, tokenInput.value.trim());
    if (location.hash === '' || location.hash === '#/signin') location.hash = '#/apps';
    else void route();
  });
  main.append(form);
  return heading;
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  void route();
}

function renderSession() {
  const signedIn = !config.tokenRequired || sessionStorage.getItem(TOKEN_KEY);
  sessionLine.replaceChildren(
    project() && signedIn ? `Project ${project()}` : '',
    config.tokenRequired && signedIn ? el('button', { type: 'button', class: 'link', onclick: signOut }, 'Sign out') : '',
  );
}

// ---- routing ----

async function route() {
  pageGeneration++;
  const generation = pageGeneration;
  clearInterval(pageTimer);
  pageTimer = null;
  renderSession();
  const path = location.hash.replace(/^#/, '') || '/apps';
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  for (const link of document.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === parts[0]) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  let heading;
  try {
    if (config.tokenRequired && (!sessionStorage.getItem(TOKEN_KEY) || !project())) heading = signInPage(null);
    else if (parts[0] === 'keys') heading = await keysPage(generation);
    else if (parts[0] === 'apps' && parts.length === 1) heading = await appsPage(generation);
    else if (parts[0] === 'apps' && parts.length === 2) heading = await runsPage(generation, parts[1]);
    else if (parts[0] === 'apps' && parts[2] === 'runs' && parts.length === 4) heading = await runPage(generation, parts[1], parts[3]);
    else heading = show('Not found', el('p', {}, 'No such page. '), el('a', { href: '#/apps' }, 'All apps'));
  } catch (error) {
    if (generation !== pageGeneration) return;
    if (error instanceof ApiError && error.status === 401 && config.tokenRequired) {
      heading = signInPage(`The token was refused: ${error.message}`);
      renderSession();
    } else {
      main.append(alertBox(errorMessage(error)));
    }
  }
  // Keyboard and screen-reader users land on the new page's heading, as after a page load.
  if (generation === pageGeneration) (heading ?? main).focus();
}

async function start() {
  const response = await fetch('/dashboard/config.json');
  config = await response.json();
  window.addEventListener('hashchange', () => void route());
  await route();
}

void start();
