// The conch code-context driver for Node. The engine starts it (with
// --expose-internals, for the REPL's own top-level-await rewrite) with the
// path of a Unix socket, sends one JSON line per cell on it (and one naming
// a cell it interrupts before the cell started, see interruptEarly), and reads each
// cell's output from FIFOs whose end markers carry the exit status and the
// directory. Cells run in one vm context; nothing of this file shows in
// their stacks. Standard library only; Node 18 or later.
'use strict';
// What the driver calls of what cells share with it (the modules below,
// Buffer; a vm context has its own JSON, Object, Array…), taken before any
// cell runs: copies of the modules' functions, so that a cell that replaces
// fs.writeSync, vm.Script or Buffer.from changes its own calls, not the
// driver's.
const sharedFs = require('fs'); // the module cells require, whose raw writes guardRaw guards
const fs = { ...sharedFs };
const B = {
  from: Buffer.from.bind(Buffer), concat: Buffer.concat.bind(Buffer),
  byteLength: Buffer.byteLength.bind(Buffer), isEncoding: Buffer.isEncoding.bind(Buffer),
};
const net = { ...require('net') };
const path = { ...require('path') };
const url = { ...require('url') };
const util = { ...require('util') };
const vm = { ...require('vm') };
const Module = require('module');
// Module's own, which a cell can replace on it: the driver's cells keep
// theirs.
const moduleRequire = Module.prototype.require;
const resolveFilename = Module._resolveFilename;
const resolveLookupPaths = Module._resolveLookupPaths;
const nodeModulePaths = Module._nodeModulePaths;
const pathCache = Module._pathCache;
const extensions = Module._extensions;
const globalPaths = [...Module.globalPaths];
let validateString = () => {};
try {
  ({ validateString } = require('internal/validators'));
} catch {}
const { Writable } = require('stream');
const { setImmediate, clearImmediate, setInterval, clearInterval, setTimeout, clearTimeout } = require('timers'); // not the globals a cell can replace
const { AsyncLocalStorage } = require('async_hooks');
// Of Node's own context's builtins, which a cell reaches through
// vm.runInThisContext, the driver keeps Reflect.apply and
// Promise.prototype.then, through which it waits for its own promises
// (onSettled, race): Promise.race, a promise's catch and a promise resolved
// with another call its then, and a cell's then that never calls back
// (Promise.prototype.then = function () { return this }) left every later
// cell that awaited hanging.
const apply = Reflect.apply;
const promiseThen = Promise.prototype.then;
function onSettled(p, fulfilled, rejected) {
  apply(promiseThen, p, [fulfilled, rejected]);
}
function race(a, b) {
  return new Promise((resolve, reject) => { onSettled(a, resolve, reject); onSettled(b, resolve, reject); });
}

const DRIVER = __filename;
// The flags the engine starts node with are the driver's: a cell sees
// process.execArgv as a plain node program does, and what it forks
// (child_process.fork, cluster) does not inherit them.
process.execArgv = [];
// The control socket's path is the driver's argument, taken once here; a
// cell sees process.argv as at Node's REPL, node's path alone (it showed
// the driver's file and the socket, which util.parseArgs then refused as
// an unexpected positional).
const sockPath = process.argv[2];
process.argv = process.argv.slice(0, 1);
// As at Node's REPL, no module is the main one, and the driver is no
// module a cell can reach: a cell's require.cache listed the driver's file,
// and process.mainModule, and require.main in a module a cell required,
// were the driver's module, its path in /dev/shm among them.
delete Module._cache[DRIVER];
delete process.mainModule;
const als = new AsyncLocalStorage(); // the cell a callback was scheduled by
// Its methods, bound now: a cell that replaces AsyncLocalStorage.prototype's
// would otherwise have every later cell's output dropped as no cell's.
const alsGetStore = als.getStore.bind(als);
const alsRun = als.run.bind(als);
// The store is a token of the cell, not the cell: Node keeps it on every
// promise and resource made under it, where util.inspect (a displayed
// Promise) and a cell can see it, and the cell's record holds its code and
// its end marker's nonce.
class ConchCell {}
const tokens = new WeakMap();
const cellOfToken = WeakMap.prototype.get.bind(tokens);
const tokenSet = WeakMap.prototype.set.bind(tokens);
const freeze = Object.freeze;
const tokenOf = (cell) => {
  const token = freeze(new ConchCell());
  tokenSet(token, cell);
  return token;
};
// storeCell returns the cell a callback was scheduled by, if any.
function storeCell() {
  const token = alsGetStore();
  return token === undefined ? undefined : cellOfToken(token);
}
let current = null; // the running cell
const diag = fs.openSync('/proc/self/fd/1', fs.constants.O_WRONLY);

let processTopLevelAwait = null;
try {
  ({ processTopLevelAwait } = require('internal/repl/await'));
} catch {}

// An error's stack is cut where a cell's code was called from the driver
// (its script's run through node:vm, the driver's frames under it), so that
// no stack a cell sees or shows (error.stack, a displayed Error or rejected
// Promise) has a frame of the driver: Node's own formatting gets the frames
// above that. The driver's own look at the stack (othersCode) sees it whole.
let wholeStacks = false;
try {
  const errors = require('internal/errors');
  const format = errors.prepareStackTraceCallback || errors.prepareStackTrace;
  const { setPrepareStackTraceCallback } = require('internal/test/binding').internalBinding('errors');
  if (typeof format === 'function' && typeof setPrepareStackTraceCallback === 'function') {
    const isCell = (f) => typeof f === 'string' && f.startsWith('<cell ');
    const isDriver = (f) => f === DRIVER || (typeof f === 'string' && f.startsWith('node:vm'));
    const isMicrotask = (cs) => cs.getFileName() === DRIVER && cs.getFunctionName() === 'conchMicrotask';
    setPrepareStackTraceCallback((globalThis, error, trace) => {
      let cut = -1;
      if (!wholeStacks) try {
        const first = trace.findIndex((cs) => isCell(cs.getFileName()));
        if (first >= 0) cut = trace.findIndex((cs, i) => i > first && isDriver(cs.getFileName()));
        else cut = trace.findIndex(isMicrotask); // a module's callback, which the cells' queueMicrotask runs
      } catch {}
      return format(globalThis, error, cut < 0 ? trace : trace.slice(0, cut));
    });
  }
} catch {}

// emit writes a cell's output, unless it comes from a callback of a cell
// that has ended: that goes nowhere.
function emit(which, chunk, encoding) {
  const cell = storeCell();
  if (!current || cell !== current) return;
  writeTo(cell, which, chunk, encoding);
}

// writeTo writes output of cell's.
function writeTo(cell, which, chunk, encoding) {
  let b = typeof chunk === 'string' ? B.from(chunk, encoding || 'utf8') : chunk;
  const fd = which === 1 ? cell.out : cell.err;
  try {
    while (b.length > 0) b = b.subarray(fs.writeSync(fd, b));
  } catch {}
}

function output(which) {
  const s = new Writable({ write(c, e, cb) { emit(which, c, e); cb(); } });
  s.write = (chunk, encoding, cb) => {
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    emit(which, chunk, encoding);
    if (cb) process.nextTick(cb);
    return true;
  };
  s.fd = which;
  s.isTTY = false;
  return s;
}

const stdout = output(1);
const stderr = output(2);
Object.defineProperty(process, 'stdout', { configurable: true, enumerable: true, get: () => stdout });
Object.defineProperty(process, 'stderr', { configurable: true, enumerable: true, get: () => stderr });
Object.defineProperty(process, 'stdin', {
  configurable: true, enumerable: true,
  get() {
    const cell = storeCell() || current;
    if (!cell) return fs.createReadStream('/dev/null');
    if (!cell.stdin) cell.stdin = fs.createReadStream(null, { fd: cell.in });
    return cell.stdin;
  },
});

// Raw writes to fds 1 and 2 through fs (writeSync, write, writev, a write
// stream on the fd, writeFile and appendFile of the fd) are kept, as emit
// keeps the console's, only when they come from the running cell: fd 1 is
// the running cell's stdout, so a timer of an ended cell would write into
// whichever cell runs then, or between cells into the interpreter's own
// output. Dropped writes report every byte written.
function rawDropped(fd) {
  return (fd === 1 || fd === 2) && (!current || storeCell() !== current);
}
function rawSize(data, a, b) {
  if (typeof data === 'string') {
    const enc = typeof b === 'string' ? b : typeof a === 'string' ? a : 'utf8';
    return B.byteLength(data, B.isEncoding(enc) ? enc : 'utf8');
  }
  if (Array.isArray(data)) return data.reduce((n, v) => n + v.byteLength, 0);
  if (!data || typeof data.byteLength !== 'number') return 0;
  let offset = 0, length;
  if (a && typeof a === 'object') ({ offset = 0, length } = a);
  else [offset, length] = [a || 0, b];
  return typeof length === 'number' ? length : data.byteLength - offset;
}
function guardRaw(name, wrap) {
  const orig = sharedFs[name];
  if (typeof orig === 'function') sharedFs[name] = wrap(orig);
}
for (const name of ['writeSync', 'writevSync']) {
  guardRaw(name, (orig) => function (fd, data, a, b) {
    if (rawDropped(fd)) return rawSize(data, a, b);
    return apply(orig, this, arguments);
  });
}
for (const name of ['write', 'writev']) {
  guardRaw(name, (orig) => function (fd, data, a, b) {
    const cb = arguments[arguments.length - 1];
    if (!rawDropped(fd) || typeof cb !== 'function') return apply(orig, this, arguments);
    const n = rawSize(data, typeof a === 'function' ? undefined : a, typeof b === 'function' ? undefined : b);
    process.nextTick(cb, null, n, data);
  });
}
for (const name of ['writeFileSync', 'appendFileSync']) {
  guardRaw(name, (orig) => function (file) {
    if (rawDropped(file)) return undefined;
    return apply(orig, this, arguments);
  });
}
for (const name of ['writeFile', 'appendFile']) {
  guardRaw(name, (orig) => function (file) {
    const cb = arguments[arguments.length - 1];
    if (!rawDropped(file) || typeof cb !== 'function') return apply(orig, this, arguments);
    process.nextTick(cb, null);
  });
}
// A worker thread makes its event loop's files (an epoll, an eventfd) on
// its own thread as it comes up: one a cell started could take fd 0, 1 or 2
// between place's close and open, and keep it for good, so that the driver
// gave up on its streams or Node aborted the process as the worker's loop
// closed it (libuv closes no fd below 3). The cells' Worker is Node's
// behind a proxy that notes each worker until it is online or gone, and
// the driver waits for those before it places a cell's streams (workersUp).
// It is told by the worker's own emit of 'online' or 'exit' (Node's Worker
// emits them through this.emit), not by listeners: a cell that removed the
// worker's listeners (w.removeAllListeners()) or whose subclass's on
// ignored them left the worker noted for good, and every later cell waited
// out workersUp's bound twice. A worker is noted 5 s at most, whatever its
// emit became.
const workerThreads = require('worker_threads');
const NodeWorker = workerThreads.Worker;
const startingWorkers = new Set();
workerThreads.Worker = new Proxy(NodeWorker, {
  construct(target, args, newTarget) {
    const w = Reflect.construct(target, args, newTarget);
    let done;
    const up = new Promise((resolve) => { done = resolve; });
    startingWorkers.add(up);
    const late = setTimeout(() => gone(), 5000);
    late.unref();
    const gone = () => { clearTimeout(late); startingWorkers.delete(up); done(); };
    const emit = w.emit;
    defineProperty(w, 'emit', {
      value: function emit_(event) {
        if (event === 'online' || event === 'exit') gone();
        return apply(emit, this, arguments);
      },
      writable: true, configurable: true, enumerable: false,
    });
    defineProperty(w.emit, 'name', { value: 'emit' });
    return w;
  },
});
Module.syncBuiltinESMExports();

// workersUp waits for the workers that are starting to be up, 5 s at most
// (a worker that never comes online is the cell's own trouble; place then
// waits for the number as for any other open), or until the engine
// interrupts a cell it sent that the driver has not started
// (interruptedEarly).
let interruptedEarly = 0; // the last such cell the engine named
let wakeWait = null; // ends the wait in flight
async function workersUp() {
  let timer, wake;
  const late = new Promise((resolve) => { timer = setTimeout(resolve, 5000); });
  const woken = new Promise((resolve) => { wake = resolve; });
  wakeWait = wake;
  await race(race(Promise.all([...startingWorkers]), late), woken);
  if (wakeWait === wake) wakeWait = null;
  clearTimeout(timer);
}

// The engine holds the interrupt of a cell back until the driver says the
// cell runs ("S"), and meanwhile tells the driver which cell it interrupts
// on the control socket: a cell that the driver would otherwise start only
// once the workers are up (see runOpened) ends interrupted at once, without
// running, as a cell sent to the REPL while it is busy is dropped by
// Ctrl-C.
function interruptEarly(id) {
  interruptedEarly = id;
  if (wakeWait) wakeWait();
}

// endUnrun ends cell, opened, as interrupted before it ran.
function endUnrun(cell) {
  Atomics.store(awaiting, 1, cell.id);
  send(`O ${cell.id}\n`);
  send(`I ${cell.id}\n`);
  writeTo(cell, 2, describe(interruptError()));
  finish(cell, 130);
}

// place points fds 0, 1 and 2 at the given files, so that child processes
// inherit them: Node has no dup2, but open returns the lowest free number.
function place(files) {
  for (let fd = 0; fd < 3; fd++) {
    try { fs.closeSync(fd); } catch {}
  }
  files.forEach(([file, flags], want) => {
    // A worker thread's open may take the number meanwhile (Node has no
    // dup2 to put a file on it whatever holds it): its file is its own,
    // so the driver waits for it to close it, a millisecond at a time,
    // for a second at most.
    for (let tries = 0; ; tries++) {
      const fd = fs.openSync(file, flags);
      if (fd === want) return;
      fs.closeSync(fd);
      if (tries >= 1000) {
        let holder = '';
        try { holder = ` (by ${fs.readlinkSync(`/proc/self/fd/${want}`)})`; } catch {}
        throw new Error(`fd ${want} was taken${holder} while the cell's streams were set up`);
      }
      Atomics.wait(placeNap, 0, 0, 1);
    }
  });
}
const placeNap = new Int32Array(new SharedArrayBuffer(4));

// The directory the engine reports, read through Node's own process.cwd,
// taken at start: a cell may replace process.cwd, and the session's cwd
// was then whatever it returned.
const processCwd = process.cwd.bind(process);
function cwd() {
  try { return processCwd(); } catch { return ''; }
}

function makeContext() {
  const sandbox = {};
  const ctx = vm.createContext(sandbox);
  const own = new Set(vm.runInContext('Object.getOwnPropertyNames(globalThis)', ctx));
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    if (own.has(name)) continue;
    const d = Object.getOwnPropertyDescriptor(globalThis, name);
    if (d.set) {
      // Node's globals with a setter (process, Buffer, the web classes
      // loaded lazily) keep what is set in a variable of their own or
      // define it on the driver's global: a cell's process = 1 replaced
      // the driver's process too. The cell's assignment makes a variable
      // of its context's instead, as a let would.
      d.set = (v) => { defineProperty(sandbox, name, { value: v, writable: true, enumerable: d.enumerable, configurable: true }); };
    }
    if (d.get) {
      // A getter is called with the context's global as this, which
      // Node 20's crypto refuses (ERR_INVALID_THIS): every read of crypto
      // in a cell threw. It is called as on Node's own global, under its
      // own name.
      const get = d.get;
      d.get = function () { return apply(get, globalThis, []); };
      defineProperty(d.get, 'name', { value: get.name });
    }
    Object.defineProperty(sandbox, name, d);
  }
  // Node's global is its own globalThis, which the loop above copied as the
  // driver's: global.foo = 1 did not make foo, and global.process = … or
  // global.JSON = undefined replaced the driver's own and lost the context.
  // As at Node's REPL, it is the context's globalThis.
  defineProperty(sandbox, 'global', { value: vm.runInContext('globalThis', ctx), writable: true, enumerable: true, configurable: true });
  const { mod, req } = cellsModule();
  // V8 gives a context a console of its own that writes nowhere. As at
  // Node's REPL, module and require are globals, and exports is not.
  Object.assign(sandbox, { console, require: req, module: mod });
  if (typeof sandbox.queueMicrotask === 'function') sandbox.queueMicrotask = cellQueueMicrotask;
  quietPromises(vm.runInContext('Promise.prototype', ctx));
  thenOf.set(ctx, vm.runInContext('Promise.prototype.then', ctx));
  for (const name of Object.keys(last)) {
    Object.defineProperty(sandbox, name, {
      configurable: true,
      get: () => last[name],
      set: (v) => { defineProperty(sandbox, name, { value: v, writable: true, enumerable: true, configurable: true }); },
    });
  }
  return ctx;
}

// cellsModule makes the cells' module and require, as Node's REPL makes
// its own: the module is "<repl>", with no file, which a module a cell
// requires has as its module.parent and a require that fails names in its
// "Require stack"; the require has resolve, resolve.paths, main (none, see
// process.mainModule), extensions and cache. Unlike the REPL's, which looks
// for packages from the directory it started in, and which after a chdir
// still loads what a relative name found in the directory before (Node
// caches it by the name and the module's ".", its path), both look from
// the current directory, as the cells' files do: module.paths follows it,
// the paths a cell added to it kept (an array of the cell's own is left as
// it is), and what was found from another directory is looked for again.
function cellsModule() {
  const mod = new Module('<repl>');
  let dir = cwd() || '/';
  let made = [...nodeModulePaths(dir), ...globalPaths];
  mod.paths = made;
  const follow = () => {
    const here = cwd() || '/';
    if (here === dir) return here;
    if (mod.paths === made) {
      const stale = new Set(nodeModulePaths(dir));
      const kept = made.filter((p) => !stale.has(p));
      made.length = 0;
      made.push(...nodeModulePaths(here), ...kept);
    }
    // The relative names Node looked for from a module with no file, in
    // ".": the cells' own.
    for (const key of Object.keys(pathCache)) {
      if (key.endsWith('\x00.')) delete pathCache[key];
    }
    dir = here;
    return here;
  };
  const req = function require(id) {
    const here = follow();
    // What Node found for id from mod is kept by mod.path, "." as at the
    // REPL but for the time of the call: by the directory it was found from.
    mod.path = here;
    try {
      return apply(moduleRequire, mod, [id]);
    } finally {
      mod.path = '.';
    }
  };
  const resolve = function resolve(request, options) {
    validateString(request, 'request');
    follow();
    return apply(resolveFilename, Module, [request, mod, false, options]);
  };
  resolve.paths = function paths(request) {
    validateString(request, 'request');
    follow();
    return apply(resolveLookupPaths, Module, [request, mod]);
  };
  Object.assign(req, { resolve, main: undefined, extensions, cache: Module._cache });
  return { mod, req };
}

// As at Node's REPL, _ is the value of the last cell that ended without an
// error (undefined too) and _error the last error a cell threw, until a
// cell assigns or declares either: from then on it is the cell's variable.
const last = { _: undefined, _error: undefined };
function remember(ctx, name, v) {
  let d;
  try { d = ownDescriptor(ctx, name); } catch { return; }
  if (d && d.get) last[name] = v;
}

// Node keeps its async hooks' ids and the cell's token on every promise, as
// enumerable symbol keys, which util.inspect showed: a cell's value, or what
// it logged, read "Promise { 1, [Symbol(async_id_symbol)]: 10, ...
// [Symbol(kResourceStore)]: ConchCell {} }". A promise's display now hides
// them first (they stay, not enumerable); the inspect function returns the
// promise itself, which util.inspect then shows as it would have.
const hookKeys = new Set(['async_id_symbol', 'trigger_async_id_symbol', 'kResourceStore']);
const ownSymbols = Object.getOwnPropertySymbols;
const ownDescriptor = Object.getOwnPropertyDescriptor;
const defineProperty = Object.defineProperty;
function hideHookKeys() {
  try {
    for (const key of ownSymbols(this)) {
      if (!hookKeys.has(key.description)) continue;
      const d = ownDescriptor(this, key);
      if (d && d.enumerable && d.configurable) defineProperty(this, key, { enumerable: false });
    }
  } catch {} // not a promise (a cell's object whose prototype is one's), or a Proxy that throws
  return this;
}
// thenOf holds each context's Promise.prototype.then as it was made: the
// driver waits for a cell's promise through it (settledOf), not through the
// promise's then, which a cell may replace (Promise.prototype.then =
// function () { return this }): then every later cell that awaited hung.
const thenOf = new WeakMap();

// settledOf returns a promise of the driver's own that settles as p, a
// promise of ctx's, does.
function settledOf(ctx, p) {
  const then = thenOf.get(ctx);
  return new Promise((resolve, reject) => { apply(then, p, [resolve, reject]); });
}

function quietPromises(proto) {
  defineProperty(proto, util.inspect.custom, { value: hideHookKeys, writable: true, configurable: true });
}
quietPromises(Promise.prototype);

// describe formats an error without the driver's frames and what called it;
// an error whose formatting throws (a cell's Error.prepareStackTrace, say)
// is named as well as it can be. An error thrown while the driver displayed
// a value (display) loses the frames of util.inspect as well.
function describe(e, display) {
  try {
    return describeError(e, display);
  } catch {
    try { return 'Uncaught ' + String(e) + '\n'; } catch {}
    return 'Uncaught exception (it could not be formatted)\n';
  }
}

// isInterrupt reports whether e, thrown by a cell or by vm, is the
// interrupt's error. What a cell throws may throw in turn when read (a
// Proxy whose get trap throws): that is no interrupt, and must not reach
// the driver.
function isInterrupt(e) {
  try {
    return e !== null && typeof e === 'object' && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
  } catch {
    return false;
  }
}

function describeError(e, display) {
  if (!(e instanceof Error) && !(e && typeof e.stack === 'string')) return 'Uncaught ' + util.inspect(e) + '\n';
  if (e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') return 'Error: Script execution was interrupted by `SIGINT`\n';
  const lines = util.inspect(e).split('\n');
  const cut = lines.findIndex((l) => /^\s+at /.test(l) && (l.includes(DRIVER) || l.includes('node:vm:') ||
    (display && l.includes('node:internal/util/inspect'))));
  if (cut < 0) return lines.join('\n') + '\n';
  let end = cut;
  while (end < lines.length && /^\s+at /.test(lines[end])) end++;
  const kept = lines.slice(0, cut);
  if (lines[end - 1].endsWith(' {')) kept[cut - 1] += ' {'; // inspect opens the error's own properties there
  return [...kept, ...lines.slice(end)].join('\n').replace(/\n+$/, '') + '\n';
}

// importModule is the import() of a cell's code: the specifier is resolved
// as an ES module of the context's current directory would resolve it
// (relative and absolute paths, file: URLs, node: builtins, packages in
// node_modules with their "import" exports), and the module is loaded by
// the driver's own loader, whose namespace the cell gets. As at Node's
// REPL, the referrer is "repl" in the directory, which an error of the
// resolution names ("imported from <dir>/repl"); unlike the REPL's, the
// directory is the current one, not the one it started in.
let esmResolve = null;
try {
  ({ defaultResolve: esmResolve } = require('internal/modules/esm/resolve'));
} catch {}
async function importModule(specifier, script, attributes) {
  const parentURL = url.pathToFileURL(path.join(cwd() || '/', 'repl')).href;
  let target = specifier;
  if (esmResolve) {
    target = (await esmResolve(specifier, { parentURL })).url;
  } else if (/^\.{0,2}\//.test(specifier)) {
    target = new URL(specifier, parentURL).href;
  }
  const attrs = attributes && Object.keys(attributes).length > 0 ? { with: attributes } : undefined;
  return await (attrs ? import(target, attrs) : import(target)); // awaited: returned, its then would be called
}

// compile compiles a cell's text. As at Node's REPL, text that begins with
// "{" and does not end with ";" is read as an expression when it is one, so
// that { a: 1, b: 2 } is an object (it was a SyntaxError as a block) and
// { a: 1 } one too (not a block whose label is a); other text so begun
// ({ let x = 1; f(x) }) is read as it is. Unlike the REPL, which wraps such
// text in parentheses and sees whether that compiles, the driver first asks
// Node's own parser whether the whole text is one expression: text that
// closes the parenthesis itself, "{}); f(); ({", does not compile, and so
// must not run.
let acorn = null;
try {
  acorn = require('internal/deps/acorn/acorn/dist/acorn');
} catch {}
function compile(code, filename) {
  if (/^\s*{/.test(code) && !/;\s*$/.test(code) && wholeExpression(code)) {
    const c = compileText(`(${code}\n)`, filename);
    if (!c.error) return c;
  }
  return compileText(code, filename);
}

// wholeExpression reports whether code is one expression, with nothing but
// blanks and comments after it.
function wholeExpression(code) {
  if (!acorn) return false;
  try {
    const options = { ecmaVersion: 'latest', allowAwaitOutsideFunction: true };
    const end = acorn.parseExpressionAt(code, 0, options).end;
    return acorn.parse(code.slice(end), options).body.length === 0;
  } catch {
    return false;
  }
}

function compileText(code, filename) {
  const options = { filename, importModuleDynamically: importModule };
  // Text with a top-level await is rewritten first, as the REPL does:
  // await (f)() and await [p][0] are also a script calling, or indexing, a
  // variable named await, which ran and threw "await is not defined". The
  // rewrite gives null for text with no top-level await, which runs as a
  // script. With a line end, as the REPL passes its lines: the rewrite
  // closes its function after the text, which a last line's // comment
  // would otherwise swallow (await 1; 42 // c was a SyntaxError).
  if (processTopLevelAwait && code.includes('await')) {
    let wrapped = null;
    try {
      wrapped = processTopLevelAwait(code + '\n');
    } catch (e) {
      // Text that does not parse after its first await: the error is
      // that text's, where the unrewritten text would only have said that
      // await is not valid there.
      const error = awaitSyntaxError(code, filename);
      if (error) return { error };
      // A rewrite that failed otherwise (a cell replaced what it calls in
      // Node's own context, Function.prototype.call) says so when the
      // text does not compile unrewritten: it failed with V8's "await is
      // only valid in async functions", a SyntaxError the cell's text does
      // not have. Text that compiles runs as it is: "await" may be only a
      // word in it (a string, a name such as awaiting), and the rewrite's
      // parser, which V8's outlasts, fails on text nested a thousand deep.
      if (!isSyntaxError(e)) {
        try { return { script: new vm.Script(code, options) }; } catch {}
        return { error: "Node's REPL rewrite of the cell's top-level await failed: " + describe(e).replace(/^Uncaught /, '') };
      }
    }
    if (wrapped !== null) {
      try { return { script: new vm.Script(wrapped, options), wrapped: true }; } catch {}
    }
  }
  try {
    return { script: new vm.Script(code, options) };
  } catch (e) {
    let stack = 'SyntaxError (it could not be formatted)';
    try { stack = String(e && e.stack || e); } catch {}
    const i = stack.search(/\n\s+at /);
    return { error: (i < 0 ? stack : stack.slice(0, i)) + '\n' };
  }
}

function isSyntaxError(e) {
  try { return e instanceof SyntaxError; } catch { return false; }
}

// awaitSyntaxError formats the syntax error of text that awaits at its top
// level as V8's compile errors are (file and line, the line, carets under
// the place, the message), with the message of the parser of the REPL's
// rewrite, as the REPL shows it; null when that parser finds no error. An
// error right after an await, which that parser then read as a name, is
// V8's for an await in a function that is not async, under that await.
function awaitSyntaxError(code, filename) {
  if (!acorn) return null;
  try {
    acorn.parse(code, { ecmaVersion: 'latest', allowAwaitOutsideFunction: true, allowReturnOutsideFunction: true });
    return null;
  } catch (e) {
    try {
      if (!(e instanceof SyntaxError) || typeof e.pos !== 'number') return null;
      let at = e.pos, carets = '^';
      let message = String(e.message).replace(/ \(\d+:\d+\)$/, '');
      const name = /\bawait\s*$/.exec(code.slice(0, e.pos));
      if (name) {
        at = name.index;
        carets = '^^^^^';
        message = 'await is only valid in async functions and the top level bodies of modules';
      } else if (message === 'Unexpected token') {
        message = e.pos < code.length ? `Unexpected token '${code[e.pos]}'` : 'Unexpected end of input';
      }
      const { line, column } = acorn.getLineInfo(code, at);
      const text = code.split(acorn.lineBreak)[line - 1] || '';
      return `${filename}:${line}\n${text}\n${' '.repeat(column)}${carets}\n\nSyntaxError: ${message}\n`;
    } catch { return null; }
  }
}

async function execute(ctx, cell, script, wrapped) {
  cell.executing = true;
  try {
    cell.status = await executeCell(ctx, cell, script, wrapped);
  } finally {
    cell.executing = false;
  }
  return cell.status;
}

async function executeCell(ctx, cell, script, wrapped) {
  let value;
  let interrupted = null; // rejects with the interrupt of a cell that awaits
  try {
    try {
      drainINT(cell.id);
      const listeners = sigintOwn();
      if (watchdog) pendingINT(); // a signal from before the cell is not for it
      send(`S ${cell.id}\n`);
      try {
        value = script.runInContext(ctx, { breakOnSigint: true, displayErrors: false });
      } finally {
        withOwnEmit(() => { for (const l of listeners) process.addListener('SIGINT', l); });
      }
      if (wrapped) {
        interrupted = new Promise((_, reject) => { cell.abort = reject; });
        startInterruptor();
        Atomics.store(awaiting, 0, cell.id);
        // Until the interruptor is there to be told, a signal the watchdog
        // noted is looked for every 25 ms.
        if (watchdog && !interruptorReady) cell.poll = setInterval(() => { if (pendingINT()) onINT(); }, 25);
        send(`A ${cell.id}\n`);
        const pending = value;
        onSettled(interrupted, undefined, () => { if (!cell.settled) orphaned(cell, settledOf(ctx, pending)); });
        const r = await race(settledOf(ctx, value), interrupted);
        cell.settled = true;
        value = r ? r.value : undefined; // { value } when the last statement is an expression
      }
    } catch (e) {
      return failed(ctx, cell, e);
    }
    remember(ctx, '_', value);
    if (value !== undefined) {
      // The value's display runs the cell's code (a custom inspect, a
      // getter): what it throws fails the cell, as at the REPL.
      let shown;
      try {
        shown = util.inspect(value);
      } catch (e) {
        emit(2, describe(e, true));
        return 1;
      }
      emit(1, shown + '\n');
    }
    // Let a promise the cell left rejected be reported as the cell's. The
    // callbacks the cell queued last (a process.nextTick, a microtask, an
    // immediate) run meanwhile: the cell's code still, which its interrupt
    // ends as it ends its code after an await, so a cell that awaited stays
    // awaited until here. The termination of such a callback (see
    // takeInterrupt) can come before this wait's immediate: the cell ends
    // interrupted all the same.
    const tick = new Promise((resolve) => setImmediate(resolve));
    try {
      await (interrupted ? race(tick, interrupted) : tick);
      if (terminating === cell.id) throw interruptError();
    } catch (e) {
      return failed(ctx, cell, e);
    }
    return cell.failed ? 1 : 0;
  } finally {
    unawait(cell);
  }
}

// failed ends a cell whose code threw e, or was interrupted.
function failed(ctx, cell, e) {
  const interrupt = isInterrupt(e);
  if (interrupt || interruptTaken(cell)) {
    if (interrupt && !cell.abort) noted(true); // the watchdog ended the script: the signal is taken
    send(`I ${cell.id}\n`);
    emit(2, describe(interrupt ? e : interruptError()));
    exitGoesOn(130);
    return 130;
  }
  remember(ctx, '_error', e);
  emit(2, describe(e));
  exitGoesOn(1);
  return 1;
}

// run runs the cell of msg. Its streams are opened first, while the
// engine's ends are; until it is the current cell it is the starting one,
// which recover takes over should the wait for the interruptor lose its
// continuation.
async function run(ctx, msg, gen) {
  const cell = {
    id: msg.id, msg, failed: false, abort: null, stdin: null,
    out: fs.openSync(msg.stdout, 'w'), err: fs.openSync(msg.stderr, 'w'),
    in: fs.openSync(msg.stdin || '/dev/null', 'r'), // process.stdin's, opened while the engine's end is
  };
  intFile = path.join(path.dirname(msg.stdout), 'int');
  intDir = dirOf(path.dirname(msg.stdout));
  starting = cell;
  if (interruptorUp) await interruptorUp; // see interruptor
  if (starting !== cell) return; // recover took it over
  starting = null;
  await runOpened(ctx, cell, gen);
}

async function runOpened(ctx, cell, gen) {
  const msg = cell.msg;
  if (startingWorkers.size) {
    if (interruptedEarly !== cell.id) await workersUp();
    if (interruptedEarly === cell.id) return endUnrun(cell);
  }
  place([[msg.stdin || '/dev/null', 'r'], [msg.stdout, 'w'], [msg.stderr, 'w']]);
  keepListeners();
  current = cell;
  Atomics.store(awaiting, 1, cell.id);
  send(`O ${cell.id}\n`);
  const c = compile(msg.code, `<cell ${msg.id}>`);
  const status = await alsRun(tokenOf(cell), () => {
    if (!c.error) return execute(ctx, cell, c.script, c.wrapped);
    emit(2, c.error);
    return 1;
  });
  finish(cell, status);
  keepListeners();
  // A callback the cell left could hold the thread when the next cell
  // comes: the worker is there to end it (see probeOrphan).
  if (!started && leftovers()) startInterruptor();
  if (interruptorUp) await interruptorUp;
  if (startingWorkers.size) await workersUp();
  if (gen === drainGen) placeIdle();
}

// leftovers reports whether something a cell started can still run a
// callback: a timer, an immediate, a request, a server, a child.
const driversOwn = new Set(['PipeWrap', 'MessagePort']); // its socket, the worker's port
function leftovers() {
  try {
    return process.getActiveResourcesInfo().some((kind) => !driversOwn.has(kind));
  } catch { return true; }
}

// finish ends a cell: its end markers, with its status and the directory,
// and its streams closed. Once: recover may finish a cell whose run lost
// its continuation.
function finish(cell, status) {
  if (cell.finished) return;
  cell.finished = true;
  const marker = '\x1eCONCH' + cell.msg.nonce;
  if (current === cell) current = null;
  fs.writeSync(cell.err, marker);
  fs.writeSync(cell.out, B.concat([B.from(`${marker}_${status}_  `), B.from(cwd()), B.from([0])]));
  fs.closeSync(cell.out);
  fs.closeSync(cell.err);
  if (cell.stdin) cell.stdin.destroy();
  else fs.closeSync(cell.in);
}

// placeIdle points fds 0 to 2 where they are between cells.
function placeIdle() {
  place([['/dev/null', 'r'], [`/proc/self/fd/${diag}`, 'w'], [`/proc/self/fd/${diag}`, 'w']]);
}

// Node reports an exception no cell caught through process.emit (Node's
// handler, process._fatalException, emits it to the listeners), as it
// tells of a new worker, and process.on of a new listener: a cell that
// replaced process.emit with a function that drops events or throws had
// every such exception end the interpreter, and the driver's first worker
// too, between cells, with no reason given. The driver keeps Node's own
// emit and puts it in place while Node's handler runs and while it changes
// its own listeners (withOwnEmit); every other event goes through the
// cell's, which stays process.emit. An emit a cell made read-only and not
// configurable is out of reach.
const ownEmit = process.emit;
function withOwnEmit(f) {
  const d = ownDescriptor(process, 'emit');
  if (!d || d.value === ownEmit || !Reflect.defineProperty(process, 'emit', { value: ownEmit })) return f();
  try {
    return f();
  } finally {
    const now = ownDescriptor(process, 'emit');
    if (now && now.value === ownEmit) Reflect.defineProperty(process, 'emit', d); // unless the listeners set another
  }
}
// The driver's listeners go back first (see keepListeners): a cell that
// removed them (process.removeAllListeners()) and then failed in a
// callback, before its end put them back, had Node find no listener and
// end the interpreter, its report on the cell's stderr. The throw of a
// queueMicrotask callback is reported in the name of the cell that queued
// it (thrownBy).
const fatalException = process._fatalException;
if (typeof fatalException === 'function') {
  process._fatalException = (e, fromPromise) => withOwnEmit(() => {
    try { keepListeners(); } catch {}
    const by = thrownBy;
    thrownBy = null;
    if (by) return alsRun(tokenOf(by), () => fatalException(e, fromPromise));
    return fatalException(e, fromPromise);
  });
}

// Node reports the throw of a queueMicrotask callback outside any callback,
// where no cell is named: the driver took it for the running cell's, so
// that a timer of an ended cell whose microtask threw failed whichever cell
// ran then, and what a cell's 'uncaughtException' listener printed of its
// own microtask's throw went nowhere. The cells' queueMicrotask notes the
// cell that queued the callback as its throw goes to Node's report, which
// then runs in that cell's name. It is also the queueMicrotask of Node's
// own context, where the modules a cell requires or imports run, put there
// before any of them loads: a module's call of Node's, or of one it kept
// from when it loaded, was reported as the running cell's.
const nodeQueueMicrotask = queueMicrotask;
let thrownBy = null; // the cell whose microtask's throw Node is about to report
function cellQueueMicrotask(callback) {
  const cell = storeCell();
  if (typeof callback !== 'function' || !cell) {
    try {
      return nodeQueueMicrotask(callback);
    } catch (e) {
      try { Error.captureStackTrace(e, cellQueueMicrotask); } catch {} // the cell's frames, not the driver's
      throw e;
    }
  }
  nodeQueueMicrotask(function conchMicrotask() {
    try {
      callback();
    } catch (e) {
      thrownBy = cell;
      throw e;
    }
  });
}
defineProperty(cellQueueMicrotask, 'name', { value: 'queueMicrotask' });
{
  const d = ownDescriptor(globalThis, 'queueMicrotask');
  if (d && d.value === nodeQueueMicrotask) defineProperty(globalThis, 'queueMicrotask', { ...d, value: cellQueueMicrotask });
}
// Node writes "Waiting for the debugger to disconnect..." to fd 2 as the
// process exits while an inspector session to the main thread is
// connected: the interruptor's, while one of its looks is in flight (see
// interruptor), as when a cell that exits was sent while the main thread
// was held. fd 2 is then the running cell's stderr, which got that line.
// What the cell wrote there is written by the time Node's process.exit
// gets here (stderr is synchronous on pipes and files), so fd 2 is pointed
// at /dev/null first, for Node's process.exit (which calls
// process.reallyExit) and the driver's own ends alike, while the worker
// has a session connected (sessionUp, which it sets before it connects
// and clears after it disconnects; it opens no file then). Only then: a
// worker that starts (the interruptor, started by the cell's first await,
// or a cell's) makes its event loop's files meanwhile, and one took fd 2
// between its close and the open, and Node aborted the process as it ended
// that loop on the way out (libuv asserts that it closes no fd below 3):
// a cell that awaited and then exited was lost to SIGABRT.
const nodeReallyExit = process.reallyExit;
const sessionUp = new Int32Array(new SharedArrayBuffer(4));
function reallyExit(code) {
  if (Atomics.load(sessionUp, 0) !== 0) try {
    fs.closeSync(2);
    fs.openSync('/dev/null', 'w'); // fd 2, the lowest free
  } catch {}
  return nodeReallyExit.call(process, code);
}
process.reallyExit = reallyExit;
// exit ends the interpreter as process.exit does, also when the cell's
// process.exit or its emit throws.
function exit(status) {
  try { withOwnEmit(() => process.exit(status)); } finally { reallyExit(status); }
}

// exitGoesOn ends the interpreter when what ended the cell came out of a
// process.exit the cell called, whose 'exit' listener threw, or was
// interrupted: Node's process.exit has begun to exit (process._exiting)
// but never got to end the process, and the throw reached the cell as its
// own. Plain node takes such a throw for a fatal exception, prints it and
// exits, with process.exitCode (the code asked for, or one the listener
// set) or else 1; an interrupt of a listener that never ends ends it as
// Ctrl-C would, and the cell's end is the interrupt's.
function exitGoesOn(status) {
  if (process._exiting !== true) return;
  let code = status;
  if (status !== 130) {
    try {
      const c = process.exitCode;
      if (c !== undefined && c !== null) code = Number(c) | 0;
    } catch {}
  }
  reallyExit(code);
}

// As process.abort() ends the interpreter, Node writes its native stack and
// the JavaScript one on fd 2, the running cell's stderr: frames of Node's
// C++ and of the driver, with the driver's path, which say nothing of the
// cell. The cell's stderr gets its own frames of the JavaScript stack, as
// Node numbers them; Node's report goes where only the engine reads.
const nodeAbort = process.abort;
process.abort = function abort() {
  try {
    const cell = storeCell();
    if (current && cell === current) {
      const at = {};
      Error.captureStackTrace(at, abort);
      const frames = String(at.stack).split('\n').filter((l) => /^\s+at /.test(l));
      const numbered = frames.map((l, i) => `${i + 1}: ${l.replace(/^\s+at /, '')}\n`).join('');
      writeTo(cell, 2, `----- JavaScript stack trace -----\n\n${numbered}\n`);
    }
  } catch {}
  try {
    fs.closeSync(2);
    const fd = fs.openSync(`/proc/self/fd/${diag}`, 'w');
    if (fd !== 2) fs.closeSync(fd);
  } catch {}
  return apply(nodeAbort, process, []);
};

// failCell reports an error no cell caught: the running cell's when it
// comes from it, else nobody's.
function failCell(e) {
  const cell = storeCell() || current;
  if (cell && cell === current) {
    cell.failed = true;
    // Not through emit: a callback that names no cell (one that Node's own
    // queueMicrotask queued, whose throw is reported outside it, see
    // cellQueueMicrotask) fails the running cell, and its message is that
    // cell's too.
    writeTo(cell, 2, describe(e));
    exitGoesOn(1);
  }
}

// As in plain node, an exception or a rejection that a listener of a
// cell's handles ('uncaughtException', 'unhandledRejection'; one an earlier
// cell added too) is handled: it fails no cell. A rejection that no
// 'unhandledRejection' listener of a cell's handles goes, as in plain node,
// to the cells' 'uncaughtException' listeners, if any (a reason that is no
// error wrapped as Node wraps it). Node's domain module, which its REPL's
// rewrite loads, keeps a listener of its own first, which handles nothing.
function othersListen(event) {
  try {
    return process.rawListeners(event).some((l) =>
      l !== onUncaught && l !== onRejection && l.name !== 'domainUncaughtExceptionClear');
  } catch { return false; }
}
function onUncaught(e) {
  if (!othersListen('uncaughtException')) failCell(e);
}
function onRejection(reason) {
  if (othersListen('unhandledRejection')) return;
  if (!othersListen('uncaughtException')) return failCell(reason);
  let e = reason;
  if (!isErrorLike(reason)) {
    let shown = '';
    try { shown = util.inspect(reason); } catch {}
    e = Object.assign(new Error('This error originated either by throwing inside of an async function without a catch ' +
      'block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason ' +
      `"${shown}".`), { code: 'ERR_UNHANDLED_REJECTION', name: 'UnhandledPromiseRejection' });
  }
  withOwnEmit(() => process.emit('uncaughtException', e, 'unhandledRejection'));
}
function isErrorLike(v) {
  try {
    return v !== null && typeof v === 'object' && typeof v.stack === 'string';
  } catch { return false; }
}

// The driver's listeners, which a cell may remove (process.removeAllListeners()):
// without them an exception no cell caught would end the interpreter, with
// Node's report of the driver's source. They are put back before and after
// each cell, before any other (a cell's process.once listener is still
// there when the driver's looks).
const ownListeners = [['uncaughtException', onUncaught], ['unhandledRejection', onRejection]];
function keepListeners() {
  for (const [event, listener] of ownListeners) {
    if (process.rawListeners(event).includes(listener)) continue;
    withOwnEmit(() => process.prependListener(event, listener));
    if (listener === onNewListener) sigintTouched = true; // it saw nothing meanwhile
  }
}
keepListeners();
// The engine names the cell it interrupts in the file "int": a signal
// handled late, when another cell runs, is not for that one. The file is
// beside the cell's streams (see run): the engine's directory may have
// moved, made anew under a new name.
// It is read only from a directory as the engine makes its own. A cell that
// removed the directory, or put another at its name, took the file: the
// engine then makes its directory anew, maybe under a new name this cell
// does not know, and sends the signal all the same; it is for the running
// cell.
let intFile = path.join(path.dirname(sockPath), 'int');
let intDir = dirOf(path.dirname(sockPath)); // the directory of intFile as the running cell found it
function interrupted() {
  const now = intDir && dirOf(intDir.path);
  if (now && now.own) {
    try { return Number(fs.readFileSync(intFile, 'utf8')); } catch {}
  }
  if (intDir && (!now || now.dev !== intDir.dev || now.ino !== intDir.ino)) {
    return current ? current.id : NaN;
  }
  return NaN;
}
// dirOf returns what identifies the directory at p, not followed if a link,
// and whether it is as the engine makes its own: the user's, with no access
// for others (see resident.Dir); null when there is nothing there.
function dirOf(p) {
  let st;
  try { st = fs.lstatSync(p, { bigint: true }); } catch { return null; }
  const own = st.isDirectory() && st.uid === BigInt(process.geteuid()) && (st.mode & 0o077n) === 0n;
  return { path: p, dev: st.dev, ino: st.ino, own };
}
// Node's SIGINT watchdog stays started for the driver's life, so that SIGINT
// is always its handler's: with a process.on('SIGINT') listener, Node
// removes the listener around each breakOnSigint run and leaves SIGINT at
// its default action for a moment, when a signal would end the interpreter.
// A signal outside a script run is then only noted; pendingINT takes it.
let watchdog = null;
try {
  watchdog = require('internal/test/binding').internalBinding('contextify');
  if (!watchdog.startSigintWatchdog()) watchdog = null;
} catch { watchdog = null; }
function pendingINT() {
  watchdog.startSigintWatchdog();
  return noted(watchdog.stopSigintWatchdog()); // true when a signal came since the last call
}
// The watchdog takes a signal on a thread of its own, which a busy machine
// may run late: a SIGINT sent to a cell that then ended by itself (it had
// stopped its interpreter, say, and was continued to take the interrupt)
// can reach the watchdog after the next cell's script has begun, and Node
// would end that script. So the driver notes which cell's interrupt it last
// saw taken (seenINT: the cell "int" named then), and before a cell runs,
// when "int" names an earlier cell whose interrupt it has not seen, it
// waits for the watchdog to note it, for at most a second. Not when the
// interpreter has SIGINT listeners: the signal then went to them. Two
// signals in flight at once (an interrupt sent twice) are seen as one.
let seenINT = NaN;
function noted(had) {
  if (had) seenINT = interrupted();
  return had;
}
const nap = new Int32Array(new SharedArrayBuffer(4));
function drainINT(id) {
  if (!watchdog) return;
  const n = interrupted();
  if (!(n > 0) || n >= id || n === seenINT) return;
  if (process.listenerCount('SIGINT') === 0) awaitINT();
  seenINT = n;
}
// awaitINT waits for the watchdog to note a signal, for at most a second,
// and reports whether it did.
function awaitINT() {
  for (let i = 0; i < 1000; i++) {
    if (pendingINT()) return true;
    Atomics.wait(nap, 0, 0, 1);
  }
  return false;
}
// A process.on('SIGINT') listener of a cell takes SIGINT from the watchdog
// (libuv installs its own handler), and removing the last one leaves SIGINT
// at its default action, as vm does around a breakOnSigint run while there
// are listeners: a signal during the run would then end the interpreter.
// So before each script run the driver takes the cell's listeners away
// itself (vm then has none to take) and, when a listener has come or gone
// since it last did so, puts the watchdog's handler back by stopping and
// starting it; the listeners come back after the run. It does so before the
// cell is said to run, so that none of the engine's interrupts for the
// cell comes in the moment between. sigintOwn returns the listeners taken.
let sigintTouched = false; // a SIGINT listener was added since the watchdog's handler was put back
function onNewListener(type) { if (type === 'SIGINT') sigintTouched = true; }
process.on('newListener', onNewListener);
ownListeners.push(['newListener', onNewListener]);
function sigintOwn() {
  if (!watchdog) return [];
  const listeners = process.rawListeners('SIGINT');
  if (listeners.length > 0) withOwnEmit(() => process.removeAllListeners('SIGINT'));
  // Without its newListener listener (a cell removed it) the driver cannot
  // tell, and puts the handler back each time.
  if (sigintTouched || listeners.length > 0 || !process.rawListeners('newListener').includes(onNewListener)) {
    sigintTouched = false;
    noted(watchdog.stopSigintWatchdog());
    watchdog.startSigintWatchdog();
  }
  return listeners;
}
// interruptError is the error of an interrupted script run, as vm throws it.
function interruptError() {
  return Object.assign(new Error('interrupted'), { code: 'ERR_SCRIPT_EXECUTION_INTERRUPTED' });
}
// interruptTaken reports whether the interrupt of cell, which the engine
// names in "int", reached the interpreter as the cell failed: a program the
// cell runs (execSync) dies of the same SIGINT, and its error may end the
// cell before Node's watchdog thread, run late on a busy machine, has taken
// the signal. The error is then the interrupt's, and the cell ends as the
// watchdog would have ended it. It waits for the watchdog to note the
// signal for at most a second, as drainINT does; not while the cell awaits
// with SIGINT listeners of its own, which take the signal then.
function interruptTaken(cell) {
  if (!watchdog || interrupted() !== cell.id) return false;
  if (seenINT === cell.id) return true;
  if (cell.abort && process.listenerCount('SIGINT') > 0) return false;
  return awaitINT();
}
function onINT() {
  if (current && current.abort && interrupted() === current.id) current.abort(interruptError());
}
if (!watchdog) process.on('SIGINT', onINT);

// A cell's code that runs after its first await (a continuation, a timer's
// callback) runs outside the script run that breakOnSigint covers, and a
// busy loop there keeps the handlers above from ever running. A worker
// thread watches for that: when the cell the driver awaits is named in
// "int" and the main thread has not taken the interrupt 200 ms later, it
// asks the main thread, through an inspector session (whose messages reach
// a thread busy in JavaScript), whether it runs the cell's code and nothing
// of the driver; if so it ends that execution (Runtime.terminateExecution)
// and the driver ends the cell as interrupted.
//
// Termination unwinds to the event loop without running Node's
// bookkeeping of async contexts, which Node checks on the way out and aborts
// the process over: takeInterrupt turns those checks off just before, and
// terminated, which the worker's message or an immediate runs (see
// takeInterrupt), cleans the bookkeeping (as Node does after an uncaught
// exception) and turns them back on.
// Termination also drops the microtasks queued at that moment, the cell's
// and any other's. The main thread asks for the termination itself, in
// takeInterrupt, while the cell's code is still on its stack below the
// inspector's expression: asked for by the worker a round trip later, it
// ended what ran then, the driver's own code finishing a cell that had
// stopped by itself meanwhile, and that cell never ended.
// [0]: the cell whose promise the driver awaits, or 0; [1]: the last cell
// the driver opened.
const awaiting = new Int32Array(new SharedArrayBuffer(8));
let hooks = null; // Node's async hook counters, for takeInterrupt
let terminating = 0; // the cell takeInterrupt agreed to have ended
try {
  const { async_hook_fields: fields, constants } = require('internal/test/binding').internalBinding('async_wrap');
  const { clearAsyncIdStack } = require('internal/async_hooks');
  if (typeof clearAsyncIdStack === 'function' && constants.kCheck !== undefined && constants.kTotals !== undefined) hooks = { fields, constants, clearAsyncIdStack };
} catch {}

// takeInterrupt is the worker's look: it agrees to end the cell id when the
// main thread runs that cell's code, and asks for the termination. The
// worker's answer that the main thread agreed can fail to come: V8 may
// take the termination inside the worker's expression itself (an
// interpreted function's return is one of its looks), which then ends with
// the termination, and the cell's code below it runs on; or the answer may
// be lost. So the main thread does not wait for the answer alone: the worker
// asks again for the same cell only when its answer was not the agreement,
// and a termination in flight for that cell then ended the look, not the
// cell's code (tookLook); and an immediate queued with the termination runs
// terminated once the code it ended has (the termination ends at the latest
// with the callback it was asked in): endCode, which probeOrphan's end of
// an orphan goes through too.
let terminatingAfter = null; // the immediate that follows the termination in flight
function takeInterrupt(id) {
  if (terminating === id) tookLook();
  if (!current || current.id !== id || !current.abort || terminating || interrupted() !== id) return false;
  if (!othersCode()) return false;
  return endCode(id, terminated);
}

// endCode asks for the termination of what the main thread runs, marked in
// flight as tag (a cell's id, or -1 for an orphan's, see probeOrphan), with
// then queued to end it on the main thread; it reports whether it asked.
function endCode(tag, then) {
  stopHooks();
  terminating = tag;
  terminatingAfter = setImmediate(then, tag);
  if (endThis()) return true;
  clearImmediate(terminatingAfter);
  terminating = 0;
  restoreHooks();
  return false;
}

// tookLook: the termination in flight ended the worker's look at the cell,
// not the cell's code, which runs on: the checks come back on (the look
// changed no async bookkeeping) and the cell can be ended again.
function tookLook() {
  clearImmediate(terminatingAfter);
  terminating = 0;
  resumeHooks();
}

// endThis asks V8 to end what the main thread runs, through an inspector
// session of the main thread's own: called from an expression the worker's
// session evaluates in the middle of others' code, it ends that code where
// V8 next looks (a call, a loop's turn) after the expression returns.
let ownSession = null;
let ownPost = null;
function endThis() {
  try {
    apply(ownPost, ownSession, ['Runtime.terminateExecution']);
    return true;
  } catch { return false; }
}

function terminated(id) {
  if (terminating !== id) return;
  terminating = 0;
  restoreHooks();
  watchOrphans();
  if (!current || current.id !== id) return;
  const cell = current;
  if (cell.abort) {
    cell.abort(interruptError());
    // The abort resumes the cell's await at once, unless the cell's code
    // ended by itself first and settled that await, and the termination
    // then dropped the continuation it had queued: nothing resumes it, and
    // the cell is ended here, as below.
    setImmediate(() => {
      if (current !== cell || !cell.abort || cell.finished) return;
      unawait(cell);
      endInterrupted(cell);
    });
  } else endInterrupted(cell);
}

// unawait ends the driver's await of a cell's promise: the worker is told
// no cell is awaited, and the cell can no longer be aborted or polled.
function unawait(cell) {
  Atomics.store(awaiting, 0, 0);
  cell.abort = null;
  if (cell.poll) clearInterval(cell.poll);
}

// endInterrupted ends a cell whose code stopped by itself before V8 next
// looked for the termination, which then ended the driver's code finishing
// the cell: the cell ends interrupted, and the loop of cells starts anew.
function endInterrupted(cell) {
  if (cell.status === undefined) cell.status = 130;
  recover();
}

// stopHooks turns Node's checks of its async bookkeeping off before a
// termination, restoreHooks cleans the bookkeeping and turns them on after
// (resumeHooks).
function stopHooks() {
  const { fields, constants: k } = hooks;
  hooks.saved = fields[k.kCheck];
  fields[k.kCheck] = 0;
  fields[k.kTotals] = 0;
}
function restoreHooks() {
  hooks.clearAsyncIdStack();
  resumeHooks();
}
function resumeHooks() {
  const { fields, constants: k } = hooks;
  fields[k.kCheck] += hooks.saved;
  fields[k.kTotals] = fields[k.kInit] + fields[k.kBefore] + fields[k.kAfter] + fields[k.kDestroy] + fields[k.kPromiseResolve];
}

// An interrupt that comes while a cell awaits ends the cell at once (its
// awaited promise loses the race), but the cell's code after the await is
// still pending and runs when what it awaited settles, as do its timers:
// code of an ended cell, an orphan. Should an orphan loop, it would hold
// the thread for good, and no later cell would start. So while such a
// cell's promise is pending, a hook counts the callbacks that begin and
// tells the worker when the cell's code is about to run again (at most
// every 100 ms). The worker then looks (probeOrphan), 200 ms later and
// again 200 ms after that while the main thread runs code that is not the
// driver's: when no callback began in between and no cell executes, one
// callback has held the thread all along, and it is ended as an
// interrupted cell's code is (Runtime.terminateExecution). A short callback
// of an ended cell is left alone. A callback left by a cell that ended by
// itself is looked at the same way once the engine has sent the next cell
// and the driver has not opened it 200 ms later (the engine then tells the
// worker): the first look turns the hook on. The termination drops the microtasks
// queued at that moment, the driver's among them: recover then finishes
// the cell that was ending, and starts the loop of cells anew.
let orphans = 0; // interrupted cells whose promise is still pending
let looking = false; // the worker looks at a callback that holds the thread while a cell waits
let callbacks = 0; // callbacks begun while orphans are watched
let lastNotice = 0;
const orphanHook = (() => {
  try {
    return require('async_hooks').createHook({
      before() {
        callbacks++;
        const cell = storeCell();
        if (!cell || !cell.orphan || !interruptorWorker) return;
        const now = Date.now();
        if (now - lastNotice < 100) return;
        lastNotice = now;
        interruptorWorker.postMessage('orphan');
      },
    });
  } catch { return null; }
})();

// orphaned notes that cell ended by an interrupt while pending, its
// promise, had not settled.
function orphaned(cell, pending) {
  if (cell.orphan || !orphanHook || !hooks) return;
  cell.orphan = true;
  orphans++;
  watchOrphans();
  const settled = () => { orphans--; watchOrphans(); };
  onSettled(pending, settled, settled);
}

// watchOrphans enables the hook while there are orphans, and disables it
// when there are none, once no termination is in flight: Node's async
// bookkeeping is out of order from a termination until restoreHooks, and a
// hook enabled or disabled then finds it so and ends the process.
function watchOrphans() {
  if (terminating) return; // restoreHooks' callers come back here
  if (orphans > 0 || looking) orphanHook.enable();
  else orphanHook.disable();
}

// othersCode reports whether the thread, below the caller and the
// inspector's expression, runs code that is not the driver's.
function othersCode() {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = Infinity;
  wholeStacks = true;
  let stack;
  try { stack = new Error().stack; } finally { wholeStacks = false; }
  // Frames of the stack, not the "at async" callers that wait for them.
  const frames = (stack || '').split('\n').filter((l) => /^\s+at (?!async )/.test(l));
  Error.stackTraceLimit = limit;
  const below = frames.slice(3);
  return below.length > 0 && !below.some((l) => l.includes(DRIVER));
}

// probeOrphan is the worker's look at the main thread: -1 when it is idle,
// runs the driver, or a cell executes; -2 when it has run one callback of
// others' code since the look that counted seen callbacks, which it is then
// agreed to end; else the count of callbacks, for the next look.
function probeOrphan(seen) {
  if (terminating || (current && current.executing) || !othersCode()) {
    if (looking) { looking = false; watchOrphans(); }
    return -1;
  }
  if (seen === -1 && orphanHook && !looking) { looking = true; watchOrphans(); } // count from now on
  if (seen !== callbacks) return callbacks;
  looking = false;
  if (endCode(-1, orphanEnded)) return -2;
  watchOrphans();
  return -1;
}

function orphanEnded() {
  if (terminating !== -1) return;
  terminating = 0;
  restoreHooks();
  watchOrphans();
  recover();
}

// recover puts the driver back in order after an orphan's termination
// dropped what it had queued: the cell that was ending is finished, the
// one that was starting starts, and a new loop runs the cells queued.
function recover() {
  if (current && !current.finished && current.status !== undefined) finish(current, current.status);
  const first = starting;
  starting = null;
  try { placeIdle(); } catch {}
  drainGen++; // an older loop that was not dropped stops at its next turn
  draining = false;
  if (first || cells.length > 0) startDrain(first);
}

//
// The engine tells the worker of each interrupt on a connection of its own
// to the engine's socket (a line with the cell's number; "+" and the number
// tell of a cell sent, see probeOrphan), and the worker
// tells the main thread at once: a main thread idle in the cell's await
// takes it then, and nothing polls while a cell awaits, so a cell blocked
// reading its stdin leaves every thread of the driver blocked where only the
// engine or the tree can wake it, and is seen waiting for input.
//
// Once it is up the worker opens no file: the main thread's place closes
// fds 0 to 2 and counts on reopening them with the same numbers, so it
// waits for the worker to be up (interruptorUp) and the worker knows which
// cell is being interrupted from the engine's lines, not from "int".
const interruptor = `
const net = require('net');
const { Session } = require('inspector');
const { parentPort, workerData: { awaiting, sock, sessionUp } } = require('worker_threads');
// The session to the main thread is connected only while a look is in
// flight: with a worker's session connected, Node writes "Waiting for the
// debugger to disconnect..." to stderr (the cell's) as the process exits.
let session = null;
let looks = 0;
const post = (method, params) => new Promise((resolve) => {
  if (!session) {
    Atomics.store(sessionUp, 0, 1); // see reallyExit
    session = new Session();
    session.connectToMainThread();
  }
  looks++;
  session.post(method, params, (err, r) => {
    if (--looks === 0) {
      session.disconnect();
      session = null;
      Atomics.store(sessionUp, 0, 0);
    }
    resolve(err ? null : r);
  });
});
let told = 0; // the cell the engine last said it interrupts
// schedule ends the cell's execution, ms from now, when it is still awaited
// and the one the engine last named, and the main thread has not taken the
// interrupt by itself; it looks again while that holds and the main thread
// runs driver code.
let scheduled = 0;
function schedule(id, ms) {
  if (scheduled === id) return;
  scheduled = id;
  setTimeout(async () => {
    scheduled = 0;
    if (Atomics.load(awaiting, 0) !== id || told !== id) return;
    const r = await post('Runtime.evaluate', { expression: 'globalThis[Symbol.for("conch.takeInterrupt")](' + id + ')', returnByValue: true });
    if (r && r.result && r.result.value === true) {
      parentPort.postMessage(id); // the main thread ended the cell's code as it answered
    } else {
      schedule(id, 100);
    }
  }, ms);
}
// An orphan (see orphaned) is about to run: look 200 ms later whether it
// holds the main thread.
let orphanCheck = null;
async function checkOrphan(seen) {
  const r = await post('Runtime.evaluate', { expression: 'globalThis[Symbol.for("conch.probeOrphan")](' + seen + ')', returnByValue: true });
  const v = r && r.result ? r.result.value : -1;
  if (v === -2) parentPort.postMessage('orphan'); // the main thread ended it as it answered
  orphanCheck = typeof v === 'number' && v >= 0 ? setTimeout(checkOrphan, 200, v) : null;
}
parentPort.on('message', () => {
  if (!orphanCheck) orphanCheck = setTimeout(checkOrphan, 200, -1);
});
// The engine sent cell id 200 ms ago, and the main thread has not opened
// it: it may be held by a callback a cell left; look.
function sent(id) {
  if (Atomics.load(awaiting, 1) >= id || orphanCheck) return;
  orphanCheck = true; // one look at a time
  checkOrphan(-1);
}
function interrupt(id) {
  told = id;
  if (!id || Atomics.load(awaiting, 0) !== id) return;
  parentPort.postMessage({ int: id });
  schedule(id, 200);
}
const conn = net.connect(sock, () => parentPort.postMessage('ready'));
conn.setEncoding('utf8');
let pending = '';
conn.on('data', (d) => {
  pending += d;
  let i;
  while ((i = pending.indexOf('\\n')) >= 0) {
    const line = pending.slice(0, i);
    if (line[0] === '+') sent(Number(line.slice(1)));
    else interrupt(Number(line));
    pending = pending.slice(i + 1);
  }
});
// Without its connection (a cell removed the context's directory, and the
// socket in it, before the first await) the worker ends: the driver does
// without it, as before it is up.
conn.on('error', () => process.exit(0));
`;

// startInterruptor starts the worker the first time a cell awaits (it
// costs some 10 MB): it starts and reaches the main thread also while that
// thread is busy.
let started = false;
let interruptorReady = false;
let interruptorWorker = null; // the worker, once started
let interruptorUp = null; // resolves once the worker is up, or gone
function startInterruptor() {
  if (started || !hooks) return;
  started = true;
  try {
    const Worker = NodeWorker;
    const { Session } = require('inspector');
    if (typeof Session.prototype.connectToMainThread !== 'function') return;
    ownSession = new Session();
    ownSession.connect();
    ownPost = Session.prototype.post;
    globalThis[Symbol.for('conch.takeInterrupt')] = takeInterrupt;
    globalThis[Symbol.for('conch.probeOrphan')] = probeOrphan;
    const w = new Worker(interruptor, { eval: true, workerData: { awaiting, sock: sockPath, sessionUp }, stdout: true, stderr: true });
    w.unref();
    interruptorWorker = w; // told of orphans from now on: it reads them once it is up
    let up;
    interruptorUp = new Promise((resolve) => { up = resolve; });
    w.on('exit', () => { interruptorWorker = null; up(); });
    w.on('message', (m) => {
      if (m === 'ready') { up(); interruptorStarted(); }
      else if (m === 'orphan') orphanEnded();
      else if (typeof m === 'number') terminated(m);
      else onINT();
    });
    w.on('error', (e) => { up(); try { fs.writeSync(diag, 'interruptor: ' + String(e && e.stack || e) + '\n'); } catch {} });
  } catch {}
}

// interruptorStarted: the worker is there to be told of interrupts; the
// running cell's poll stops, after one last look.
function interruptorStarted() {
  interruptorReady = true;
  if (current && current.poll) {
    clearInterval(current.poll);
    current.poll = null;
    if (pendingINT()) onINT();
  }
}

const sock = net.connect(sockPath);
sock.setEncoding('utf8');
function send(s) { sock.write(s); }
const ctx = makeContext();
// Cells run one after the other from a loop that awaits each, rather than a
// chain of then(): a promise that resolves with another promise takes a
// microtask to follow it, and an interrupt that ends a cell running in a
// microtask drops every microtask queued then (see takeInterrupt).
const cells = [];
let draining = false;
let drainGen = 0; // a loop of an older generation stops: recover started another
let starting = null; // the cell run has opened and not yet started
async function drain(first) {
  const gen = ++drainGen;
  draining = true;
  if (first) await runOpened(ctx, first, gen);
  while (cells.length > 0 && gen === drainGen) await run(ctx, cells.shift(), gen);
  if (gen === drainGen) draining = false;
}
// driverFailed ends the interpreter when the driver itself failed: it says
// why where the engine keeps it, rather than leave a cell without its end
// markers, or the next one never run.
function driverFailed(e) {
  let why = 'an exception that could not be formatted';
  try { why = String(e && e.stack || e); } catch {}
  try { fs.writeSync(diag, 'conch: the driver failed:\n' + why + '\n'); } catch {}
  exit(70);
}
function startDrain(first) {
  onSettled(drain(first), undefined, driverFailed);
}
let pending = '';
sock.on('data', (d) => {
  // A failure here is the driver's (a cell broke a built-in of Node's own
  // context, Array.prototype.push say, through require or
  // vm.runInThisContext): it went to the uncaughtException listener, which
  // gives an error while no cell runs to nobody, and the cell sent was
  // never run, the context waiting for ever.
  try {
    pending += d;
    let i;
    while ((i = pending.indexOf('\n')) >= 0) {
      const m = JSON.parse(pending.slice(0, i));
      if (m.interrupt !== undefined) interruptEarly(m.interrupt);
      else cells.push(m);
      pending = pending.slice(i + 1);
    }
    if (!draining) startDrain();
  } catch (e) {
    driverFailed(e);
  }
});
sock.on('close', () => exit(0));
