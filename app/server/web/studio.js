// The gen3d studio: uploads files, runs a job through the job API (/v1/jobs), colours the job's
// graph from its server-sent events and shows the result in a three.js viewer. The last texture
// job's config can be edited (checked as it is typed) and run again on the same files.
// body[data-state] (idle, running, done, failed, cancelled) and each graph node's data-state
// (pending, running, done, cached, failed, unused, skipped) say where things stand, for people and tests;
// #config-state[data-valid] ('true', 'false', '' while checking) and #problems li[data-path] the editor's.

const $ = (id) => document.getElementById(id);
const form = $('job');
const VIEWS = ['front', 'right', 'back', 'left', 'top', 'bottom'];
let job = null;  // the running job's id

// --- the API, with the token when the server asks for one ---------------------------------

const token = () => $('token').value || localStorage.getItem('gen3d-token') || '';
$('token').addEventListener('change', () => { localStorage.setItem('gen3d-token', $('token').value); health(); });

function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (token()) headers.Authorization = 'Bearer ' + token();
  return fetch(path, { ...options, headers });
}

async function json(path, options) {
  const res = await api(path, options);
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

async function health() {
  const res = await api('/health').catch(() => null);
  if (res && res.status === 401) {
    $('token-box').hidden = false;
    $('health').textContent = 'this server needs its token';
    return;
  }
  const h = res && res.ok ? await res.json() : null;
  $('health').textContent = h
    ? `gen3d ${h.version} · ${h.running}/${h.workers} running · ${h.queue_length} queued`
    : 'server unreachable';
}

// --- the form ---------------------------------------------------------------------------------

const pipeline = () => form.elements.pipeline.value;

function showFields() {
  for (const f of form.querySelectorAll('fieldset[data-for]')) f.hidden = f.dataset.for !== pipeline();
  const source = $('source').value;
  $('images').hidden = source === 'source_mesh';
  $('image-views').hidden = source !== 'image';
  $('source-mesh').hidden = source !== 'source_mesh';
}
form.addEventListener('change', showFields);

// One view choice per reference image: the first on the front, the others in view order.
$('images').addEventListener('change', () => {
  $('image-views').replaceChildren(...[...$('images').files].map((file, i) => {
    const li = document.createElement('li');
    const select = document.createElement('select');
    select.append(...VIEWS.map((v) => new Option(v, v, false, v === VIEWS[i % VIEWS.length])));
    li.append(select, ' ', file.name);
    return li;
  }));
});

const base64 = (file) => new Promise((resolve, reject) => {
  const reader = new FileReader();
  reader.onload = () => resolve(reader.result.slice(reader.result.indexOf(',') + 1));
  reader.onerror = () => reject(reader.error);
  reader.readAsDataURL(file);
});

// The POST /v1/jobs body for the form: files under names the job's variables refer to.
async function jobBody() {
  const files = {};
  const add = async (file, prefix) => {
    if (!file) throw new Error(`choose a file for "${prefix}"`);
    const name = `${prefix}_${file.name.replace(/[^\w.-]/g, '_')}`;
    files[name] = await base64(file);
    return name;
  };
  const vars = {};
  for (const input of form.querySelectorAll(`fieldset[data-for="${pipeline()}"] [name]`)) {
    if (input.type === 'checkbox') { if (input.checked) vars[input.name] = true; }
    else if (input.value === '') continue;
    else if (input.type === 'number') vars[input.name] = input.dataset.kind === 'number' ? parseFloat(input.value) : parseInt(input.value, 10);
    else vars[input.name] = input.value;
  }
  if (pipeline() === 'shape') {
    vars.image = await add($('shape-image').files[0], 'image');
    return { pipeline: 'shape', files, vars };
  }
  vars.mesh = await add($('mesh').files[0], 'mesh');
  const images = [...$('images').files];
  const source = $('source').value;
  if (source === 'source_mesh') {
    vars.source_mesh = await add($('source-mesh').files[0], 'source');
  } else if (!images.length) {
    throw new Error('choose one or more images');
  } else if (source === 'views') {
    images.sort((a, b) => a.name.localeCompare(b.name));
    vars.views = await Promise.all(images.map((f, i) => add(f, `view${i}`)));
  } else {
    const views = [...$('image-views').querySelectorAll('select')].map((s) => s.value);
    vars.image = await Promise.all(images.map(async (f, i) => {
      const name = await add(f, `image${i}`);
      return views[i] === 'front' ? name : `${views[i]}=${name}`;
    }));
  }
  return { pipeline: 'texture', files, vars };
}

// The shipped example (compiled into the server): its mesh and reference image are put into the
// form's file choosers, as if chosen, on the texture pipeline.
$('example').addEventListener('click', async () => {
  try {
    const file = async (url, name, type) => new File([await (await fetch(url)).blob()], name, { type });
    const choose = (input, files) => {
      const dt = new DataTransfer();
      for (const f of files) dt.items.add(f);
      input.files = dt.files;
      input.dispatchEvent(new Event('change', { bubbles: true }));
    };
    form.elements.pipeline.value = 'texture';
    $('source').value = 'image';
    choose($('mesh'), [await file('/studio/examples/BoxTextured.glb', 'BoxTextured.glb', 'model/gltf-binary')]);
    choose($('images'), [await file('/studio/examples/spider_front.png', 'spider_front.png', 'image/png')]);
    showFields();
    $('message').className = 'info';
    $('message').textContent = 'example chosen: BoxTextured.glb with spider_front.png on the front view; press Run';
  } catch (err) {
    $('message').textContent = `the example did not load: ${err.message}`;
  }
});

const post = (path, body) => json(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  $('message').textContent = '';
  $('message').className = '';
  try {
    const body = await jobBody();
    const j = await post('/v1/jobs', body);
    if (body.pipeline === 'texture') {
      lastJob = body;
      showConfig(body).catch((err) => { $('config-state').textContent = err.message; });
    }
    watch(j.id);
  } catch (err) {
    $('message').textContent = err.message;
  }
});

// --- the config editor: the last texture job's config, checked as it is edited ------------------

let lastJob = null;  // the last texture job's body (files, variables): a config runs on its files
let checks = 0;      // the latest check; older answers are dropped

// The config the job runs (POST /v1/config), with its files named as in the job's folder.
async function showConfig(body) {
  const { config } = await post('/v1/config', { pipeline: 'texture', vars: body.vars, files: Object.keys(body.files) });
  $('config').value = JSON.stringify(config, null, 2);
  $('config-box').open = true;
  await checkConfig();
}

function showProblems(valid, problems, text) {
  $('config-state').dataset.valid = valid;
  $('config-state').textContent = text;
  $('problems').replaceChildren(...problems.map((p) => {
    const li = document.createElement('li');
    li.dataset.path = p.path;
    const code = document.createElement('code');
    code.textContent = p.path || '/';
    li.append(code, ': ' + (p.node ? `node "${p.node}": ` : '') + p.message);
    return li;
  }));
  $('run-config').disabled = !(valid === 'true' && lastJob && !job);
}

// Checks the editor's text: JSON syntax here, the rest by the server (POST /v1/validate), which
// checks it as a job's config, against the stages' contracts and the job's files.
async function checkConfig() {
  const n = ++checks;
  let config;
  try {
    config = JSON.parse($('config').value);
  } catch (err) {
    showProblems('false', [{ path: '', node: '', message: `not JSON: ${err.message}` }], 'not valid JSON');
    return;
  }
  showProblems('', [], 'checking…');
  try {
    const files = lastJob ? Object.keys(lastJob.files) : [];
    const r = await post('/v1/validate', { config, vars: lastJob ? lastJob.vars : {}, files });
    if (n !== checks) return;
    showProblems(String(r.valid), r.problems, r.valid ? `valid: ${r.nodes} nodes` : `${r.problems.length} problem${r.problems.length === 1 ? '' : 's'}`);
  } catch (err) {
    if (n === checks) showProblems('false', [], err.message);
  }
}

let typing = null;
$('config').addEventListener('input', () => {
  $('config-state').dataset.valid = '';
  $('run-config').disabled = true;
  clearTimeout(typing);
  typing = setTimeout(checkConfig, 300);
});

$('run-config').addEventListener('click', async () => {
  $('message').textContent = '';
  try {
    const config = JSON.parse($('config').value);
    const j = await post('/v1/jobs', { ...lastJob, config });
    watch(j.id);
  } catch (err) {
    $('message').textContent = err.message;
  }
});

$('cancel').addEventListener('click', () => job && api(`/v1/jobs/${job}`, { method: 'DELETE' }));

// --- the job: events, graph, progress --------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Reads /v1/jobs/{id}/events (server-sent events, through fetch so that the token goes along),
// reconnecting with Last-Event-ID; calls onEvent(name, data) and returns the "end" event's job.
async function events(id, onEvent) {
  let last = null;
  for (;;) {
    try {
      const res = await api(`/v1/jobs/${id}/events`, { headers: last === null ? {} : { 'Last-Event-ID': last } });
      if (!res.ok) throw new Error((await res.json()).error);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let text = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
        for (let end; (end = text.indexOf('\n\n')) >= 0; text = text.slice(end + 2)) {
          const ev = {};
          for (const line of text.slice(0, end).split('\n')) {
            const m = line.match(/^(\w+): ?(.*)$/);
            if (m) ev[m[1]] = m[2];
          }
          if (ev.id !== undefined) last = ev.id;
          if (ev.data === undefined) continue;
          if (ev.event === 'end') return JSON.parse(ev.data);
          onEvent(ev.event, JSON.parse(ev.data));
        }
      }
    } catch (err) {
      $('step').textContent = `(reconnecting: ${err.message})`;
    }
    await sleep(1000);
  }
}

function setState(state, text) {
  document.body.dataset.state = state;
  $('state').textContent = text || state;
}

async function watch(id) {
  job = id;
  document.body.dataset.job = id;
  setState('running', 'queued');
  $('run').disabled = true;
  $('run-config').disabled = true;
  $('cancel').disabled = false;
  for (const a of $('links').children) a.hidden = true;
  $('viewer').replaceChildren(Object.assign(document.createElement('p'), { textContent: 'running…' }));
  $('viewer-modes').hidden = true;
  delete $('viewer').dataset.loaded;
  $('graph').replaceChildren();
  $('timing').textContent = '';
  const nodes = new Map();  // node id -> {status, seconds}, from the events
  let total = 0, finished = 0;
  const end = await events(id, async (name, e) => {
    if (name === 'run_started') {
      total = e.nodes;
      setState('running', 'running');
      drawGraph((await json(`/v1/jobs/${id}`)).graph, nodes);
    } else if (name === 'node_started' || name === 'node_finished') {
      nodes.set(e.node, { status: e.status || 'running', seconds: e.seconds });
      if (name === 'node_finished') finished = e.finished;
      paintNode(e.node, nodes.get(e.node));
      $('bar').value = total ? finished / total : 0;
      $('step').textContent = `${finished}/${total} nodes`;
    } else if (name === 'step') {
      $('step').textContent = `${e.node}: ${e.label} ${e.i}/${e.n}` + (e.eta_s ? ` (${e.eta_s.toFixed(0)} s left)` : '');
    } else if (name === 'warning' || name === 'error') {
      $('message').textContent = e.message;
      $('message').className = name;
    }
  });
  // The final state: nodes that never started were not needed for this result (or were skipped
  // when the job failed or was cancelled).
  if (end.graph && !$('graph').childElementCount) drawGraph(end.graph, nodes);
  for (const n of end.nodes) nodes.set(n.id, { status: n.status, seconds: n.seconds });
  const never = end.state === 'done' ? 'unused' : 'skipped';
  for (const g of $('graph').querySelectorAll('.node'))
    paintNode(g.dataset.id, nodes.get(g.dataset.id) || { status: never });
  const seconds = end.finished && end.started ? ` in ${(end.finished - end.started).toFixed(1)} s` : '';
  showTiming(end.timing);
  const cached = end.cache && end.cache.nodes.length ? ` · ${end.cache.nodes.length} nodes from the cache` : '';
  setState(end.state, end.state + seconds + cached + (end.error ? `: ${end.error.error}` : ''));
  $('run').disabled = false;
  $('cancel').disabled = true;
  job = null;
  $('run-config').disabled = !($('config-state').dataset.valid === 'true' && lastJob);
  health();
  if (end.state === 'done') await showResult(id, end.files);
}

// The graph as columns of nodes (a node's column: one past its deepest producer's), producers
// linked to consumers by curves.
function drawGraph(graph, nodes) {
  const svg = $('graph');
  if (!graph || svg.childElementCount) return;
  const W = 170, H = 38, GX = 30, GY = 12;
  const column = new Map(), rows = [];
  for (const n of graph.nodes) {  // topological order
    const c = Math.max(-1, ...n.after.map((p) => column.get(p))) + 1;
    column.set(n.id, c);
    rows[c] = (rows[c] || 0) + 1;
  }
  const place = new Map(), used = [];
  for (const n of graph.nodes) {
    const c = column.get(n.id);
    const r = used[c] = (used[c] || 0) + 1;
    place.set(n.id, { x: c * (W + GX) + 4, y: (r - 1) * (H + GY) + 4 });
  }
  const el = (tag, attrs, parent) => {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return parent ? parent.appendChild(e) : e;
  };
  svg.setAttribute('width', rows.length * (W + GX));
  svg.setAttribute('height', Math.max(...rows) * (H + GY) + 8);
  for (const n of graph.nodes)
    for (const p of n.after) {
      const a = place.get(p), b = place.get(n.id);
      el('path', { class: 'edge', d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}` }, svg);
    }
  for (const n of graph.nodes) {
    const { x, y } = place.get(n.id);
    const g = el('g', { class: 'node', 'data-id': n.id, 'data-state': 'pending', transform: `translate(${x},${y})` }, svg);
    el('title', {}, g).textContent = `${n.id} (${n.stage})`;
    el('rect', { width: W, height: H, rx: 5 }, g);
    el('text', { x: 6, y: 15, class: 'id' }, g).textContent = n.id;
    el('text', { x: 6, y: 30, class: 'info' }, g).textContent = n.stage;
  }
  for (const [id, n] of nodes) paintNode(id, n);
}

function paintNode(id, n) {
  const g = $('graph').querySelector(`.node[data-id="${CSS.escape(id)}"]`);
  if (!g) return;
  g.dataset.state = n.status;
  if (n.seconds !== undefined && (n.status === 'done' || n.status === 'cached' || n.status === 'failed'))
    g.querySelector('.info').textContent = `${g.querySelector('title').textContent.match(/\((.*)\)/)[1]} · ${n.seconds < 1 ? (n.seconds * 1000).toFixed(0) + ' ms' : n.seconds.toFixed(2) + ' s'}`;
}

// The run's critical path (outlined in the graph) and the concurrency it achieved.
function showTiming(t) {
  if (!t) return;
  const s = (x) => (x < 1 ? `${(x * 1000).toFixed(0)} ms` : `${x.toFixed(2)} s`);
  for (const id of t.critical_path) {
    const g = $('graph').querySelector(`.node[data-id="${CSS.escape(id)}"]`);
    if (g) g.classList.add('critical');
  }
  $('timing').textContent = `critical path ${s(t.critical_seconds)} of ${s(t.wall_seconds)}: ` +
    `${t.critical_path.join(' → ') || 'none'} · concurrency ${t.concurrency.toFixed(2)}× ` +
    `(${s(t.busy_seconds)} of node time)`;
}

// --- the result ------------------------------------------------------------------------------

// A link to a file of the job: direct without a token, else fetched with it and opened as a blob.
function link(a, url, name) {
  a.hidden = false;
  a.href = url;
  a.onclick = token() ? async (e) => {
    e.preventDefault();
    const blob = await (await api(url)).blob();
    window.open(URL.createObjectURL(blob), '_blank');
  } : null;
  if (name) a.download = name;
}

async function showResult(id, files) {
  const res = await api(files.result);
  const bytes = await res.arrayBuffer();
  const a = $('download');
  a.hidden = false;
  a.href = URL.createObjectURL(new Blob([bytes], { type: res.headers.get('Content-Type') }));
  a.download = `${id}.${files.result && res.headers.get('Content-Type') === 'model/gltf-binary' ? 'glb' : 'bin'}`;
  if (files.report) link($('report'), files.report);
  if (files.trace) link($('trace'), files.trace, `${id}.trace.json`);
  await view(bytes);
}

// three.js and its glTF loader and orbit controls, compiled into the server when its build had
// them (Debian's libjs-three); null otherwise.
const three = Promise.all([
  import('/studio/three/build/three.module.js'),
  import('/studio/three/examples/jsm/loaders/GLTFLoader.js'),
  import('/studio/three/examples/jsm/controls/OrbitControls.js'),
]).then(([THREE, { GLTFLoader }, { OrbitControls }]) => ({ THREE, GLTFLoader, OrbitControls }))
  .catch(() => null);

async function view(bytes) {
  const box = $('viewer');
  const t = await three;
  if (!t) {
    box.replaceChildren(Object.assign(document.createElement('p'), {
      id: 'viewer-note', textContent: 'The 3D viewer is unavailable: this server was built without three.js (Debian\'s libjs-three). Download the GLB to view it.' }));
    return;
  }
  const { THREE, GLTFLoader, OrbitControls } = t;
  const gltf = await new Promise((resolve, reject) => new GLTFLoader().parse(bytes, '', resolve, reject));
  const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
  renderer.outputEncoding = THREE.sRGBEncoding;
  renderer.setPixelRatio(window.devicePixelRatio);
  renderer.setSize(box.clientWidth, box.clientHeight);
  renderer.setClearColor(0x1d2026);
  const scene = new THREE.Scene();
  scene.add(gltf.scene, new THREE.HemisphereLight(0xffffff, 0x444444, 1.0));
  const sun = new THREE.DirectionalLight(0xffffff, 0.8);
  sun.position.set(1, 2, 3);
  scene.add(sun);
  // Frame the model: the camera looks at its centre from a distance that fits its size.
  const bounds = new THREE.Box3().setFromObject(gltf.scene);
  const center = bounds.getCenter(new THREE.Vector3());
  const size = bounds.getSize(new THREE.Vector3()).length() || 1;
  const camera = new THREE.PerspectiveCamera(40, box.clientWidth / box.clientHeight, size / 100, size * 100);
  camera.position.copy(center).add(new THREE.Vector3(0.6, 0.4, 1).normalize().multiplyScalar(size * 1.5));
  const controls = new OrbitControls(camera, renderer.domElement);
  controls.target.copy(center);
  const render = () => renderer.render(scene, camera);
  controls.addEventListener('change', render);
  controls.update();
  box.replaceChildren(renderer.domElement);
  viewModes(THREE, gltf.scene, render);
  render();
  box.dataset.loaded = 'true';
}

// The viewer's modes: lit (the file's materials), its base colour alone (unlit), the surface
// normals, and where each point reads the texture from (u in red, v in green, a checker of 16 × 16
// cells in blue, so that seams and stretched charts show).
const UV_SHADER = {
  vertexShader: 'varying vec2 vUv; void main() { vUv = uv; gl_Position = projectionMatrix * modelViewMatrix * vec4(position, 1.0); }',
  fragmentShader: 'varying vec2 vUv; void main() { vec2 c = floor(fract(vUv) * 16.0); float k = mod(c.x + c.y, 2.0); gl_FragColor = vec4(fract(vUv), 0.2 + 0.6 * k, 1.0); }',
};

function viewModes(THREE, root, render) {
  const meshes = [];
  root.traverse((o) => { if (o.isMesh) meshes.push({ mesh: o, original: o.material, made: {} }); });
  const make = (mode, m) => {
    if (mode === 'base') return new THREE.MeshBasicMaterial({ map: m.map || null, color: m.map ? 0xffffff : m.color });
    if (mode === 'normal') return new THREE.MeshNormalMaterial();
    return new THREE.ShaderMaterial(UV_SHADER);
  };
  const set = (mode) => {
    for (const e of meshes) {
      e.mesh.material = mode === 'lit' ? e.original
        : (e.made[mode] ||= Array.isArray(e.original) ? e.original.map((m) => make(mode, m)) : make(mode, e.original));
    }
    $('viewer').dataset.mode = mode;
    for (const b of $('viewer-modes').querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.mode === mode));
    render();
  };
  for (const b of $('viewer-modes').querySelectorAll('button')) b.onclick = () => set(b.dataset.mode);
  $('viewer-modes').hidden = false;
  set('lit');
}

showFields();
health();
three.then((t) => { if (!t) $('viewer-note').textContent = 'The 3D viewer is unavailable (built without three.js); results can be downloaded.'; });
